// The demo: a small CNN trained on the real Fashion-MNIST (Debian's dataset-fashion-mnist),
// evaluated on its test set after each epoch; prints the final test accuracy and the time taken.
// Under `mpiexec -n N` (or `srun --mpi=pmi2 -n N`) it trains data-parallel: each rank takes 1/N
// of every batch and gradients are averaged over MPI, on the wire as --compression says. With
// --stages S it runs as an S-stage pipeline (and data-parallel over the N/S pipelines).
#include <chrono>
#include <cstdio>

#include <ptrain/mpi.hpp>

#include "common/cli.hpp"
#include "common/strategy.hpp"

namespace {

template <class... Policies>
int train(const examples::Cli& cli, ptrain::MpiComm& world, examples::DataShard shard, Policies... policies) {
  const auto start = std::chrono::steady_clock::now();
  const auto seed = static_cast<std::uint64_t>(cli.integer("--seed"));
  ptrain::manual_seed(seed);
  const ptrain::FashionMnist train_set(ptrain::Split::train, cli.str("--data"));
  const ptrain::FashionMnist test_set(ptrain::Split::test, cli.str("--data"));
  ptrain::TensorDataset train_data = train_set;
  if (const long limit = cli.integer("--limit"); limit > 0 && limit < train_set.size())
    train_data = ptrain::TensorDataset(train_set.inputs().slice(0, limit).clone(),
                                       {train_set.targets().begin(), train_set.targets().begin() + limit});

  const int ranks = shard.count, rank = shard.index;
  const long batch = cli.integer("--batch");
  ptrain::check(batch % ranks == 0, "--batch ", batch, " (the global batch) must divide by the ", ranks,
                " data-parallel replicas");
  const ptrain::Normalize normalize({0.2860f}, {0.3530f});
  ptrain::DataLoader train_loader(train_data, ptrain::DistributedSampler(train_data.size(), ranks, rank, true, seed),
                                  {.batch_size = batch / ranks}, normalize);
  ptrain::DataLoader test_loader(test_set, ptrain::DistributedSampler(test_set.size(), ranks, rank, false),
                                 {.batch_size = 1000}, normalize);

  auto model = std::make_shared<ptrain::SmallCnn<float>>();
  auto adam = std::make_shared<ptrain::Adam<float>>(model->parameters(), ptrain::AdamOptions{.lr = cli.real("--lr")});
  ptrain::Trainer<ptrain::SmallCnn<float>, Policies...> trainer(model, adam, {.csv_log = cli.str("--csv")},
                                                                std::move(policies)...);
  if (trainer.is_main())
    std::printf("fashion_mnist: %lld training and %lld test images, %lld parameters, %d rank(s) x %d thread(s)%s%s\n",
                static_cast<long long>(train_data.size()), static_cast<long long>(test_set.size()),
                static_cast<long long>(model->parameter_count()), world.size(), ptrain::num_threads(),
                ranks > 1 ? ", gradients on the wire as " : "", ranks > 1 ? cli.str("--compression").c_str() : "");
  const auto results = trainer.fit(train_loader, &test_loader, static_cast<int>(cli.integer("--epochs")));

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double accuracy = results.empty() ? 0.0 : 100 * results.back().val_accuracy;
  if (trainer.is_main()) std::printf("test accuracy %.2f%% after %zu epochs in %.1f s\n", accuracy, results.size(), seconds);
  return accuracy < cli.real("--min-accuracy") ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("fashion_mnist",
                    "Trains a small CNN on Fashion-MNIST and reports test accuracy; data-parallel under mpiexec.");
  cli.option("--data", ptrain::FashionMnist::default_root, "directory holding the *-ubyte.gz files")
      .option("--epochs", "5", "training epochs")
      .option("--batch", "128", "global batch size (split over the ranks)")
      .option("--lr", "0.001", "Adam learning rate")
      .option("--seed", "0", "seed for initialisation, shuffling and dropout")
      .option("--limit", "0", "train on the first N training images only (0: all)")
      .option("--csv", "fashion_mnist.csv", "per-epoch CSV log written by rank 0 (empty: none)")
      .option("--min-accuracy", "0", "exit with code 1 when the final test accuracy (percent) is below this");
  examples::add_strategy_options(cli, examples::Pipelines::with);
  int code = 0;
  if (!cli.parse(argc, argv, code)) return code;

  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
    return examples::with_strategy<examples::Pipelines::with>(cli, world, [&](examples::DataShard shard, auto... policies) {
      return train(cli, world, shard, policies...);
    });
  });
}
