// The demo: a small CNN trained on the real Fashion-MNIST (Debian's dataset-fashion-mnist),
// evaluated on its test set after each epoch; prints the final test accuracy and the time taken.
#include <chrono>
#include <cstdio>
#include <exception>

#include <ptrain/data/idx.hpp>
#include <ptrain/data/loader.hpp>
#include <ptrain/ptrain.hpp>

#include "common/cli.hpp"

int main(int argc, char** argv) {
  examples::Cli cli("fashion_mnist", "Trains a small CNN on Fashion-MNIST and reports test accuracy.");
  cli.option("--data", ptrain::FashionMnist::default_root, "directory holding the *-ubyte.gz files")
      .option("--epochs", "5", "training epochs")
      .option("--batch", "128", "batch size")
      .option("--lr", "0.001", "Adam learning rate")
      .option("--seed", "0", "seed for initialisation, shuffling and dropout")
      .option("--limit", "0", "train on the first N training images only (0: all)")
      .option("--csv", "fashion_mnist.csv", "per-epoch CSV log (empty: none)")
      .option("--min-accuracy", "0", "exit with code 1 when the final test accuracy (percent) is below this");
  int code = 0;
  if (!cli.parse(argc, argv, code)) return code;

  try {
    const auto start = std::chrono::steady_clock::now();
    ptrain::manual_seed(static_cast<std::uint64_t>(cli.integer("--seed")));
    ptrain::FashionMnist train_set(ptrain::Split::train, cli.str("--data"));
    const ptrain::FashionMnist test_set(ptrain::Split::test, cli.str("--data"));
    ptrain::TensorDataset train_data = train_set;
    if (const long limit = cli.integer("--limit"); limit > 0 && limit < train_set.size())
      train_data = ptrain::TensorDataset(train_set.inputs().slice(0, limit).clone(),
                                         {train_set.targets().begin(), train_set.targets().begin() + limit});

    const ptrain::Normalize normalize({0.2860f}, {0.3530f});
    const auto batch = cli.integer("--batch");
    ptrain::DataLoader train_loader(train_data, {.batch_size = batch, .shuffle = true,
                                                 .seed = static_cast<std::uint64_t>(cli.integer("--seed"))},
                                    normalize);
    ptrain::DataLoader test_loader(test_set, {.batch_size = 1000}, normalize);

    auto model = std::make_shared<ptrain::SmallCnn<float>>();
    auto adam = std::make_shared<ptrain::Adam<float>>(model->parameters(), ptrain::AdamOptions{.lr = cli.real("--lr")});
    ptrain::Trainer<ptrain::SmallCnn<float>> trainer(model, adam, {.csv_log = cli.str("--csv")});
    std::printf("fashion_mnist: %lld training and %lld test images, %lld parameters, %d threads\n",
                static_cast<long long>(train_data.size()), static_cast<long long>(test_set.size()),
                static_cast<long long>(model->parameter_count()), ptrain::num_threads());
    const auto results = trainer.fit(train_loader, &test_loader, static_cast<int>(cli.integer("--epochs")));

    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double accuracy = results.empty() ? 0.0 : 100 * results.back().val_accuracy;
    std::printf("test accuracy %.2f%% after %zu epochs in %.1f s\n", accuracy, results.size(), seconds);
    return accuracy < cli.real("--min-accuracy") ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
}
