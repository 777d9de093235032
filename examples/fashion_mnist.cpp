// The demo: a small CNN trained on the real Fashion-MNIST (Debian's dataset-fashion-mnist),
// evaluated on its test set after each epoch; prints the final test accuracy and the time taken.
// Under `mpiexec -n N` (or `srun --mpi=pmi2 -n N`) it trains data-parallel: each rank takes 1/N
// of every batch and gradients are averaged over MPI, on the wire as --compression says. With
// --stages S it runs as an S-stage pipeline (and data-parallel over the N/S pipelines).
// --precision bf16 or fp16 builds the model in that type and trains fp32 master weights
// (MixedPrecision, Apex O2's scheme; fp16 with dynamic loss scaling).
//
// fashion_mnist_cuda is this file compiled by nvcc: with --device cuda (its default) each rank
// trains on its GPU of the node (mixed precision and Adam on the device), gradients averaged and
// pipeline messages carried by NCCL.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <type_traits>

#include <ptrain/mpi.hpp>

#include "common/cli.hpp"
#include "common/precision.hpp"
#include "common/run.hpp"

namespace {

using Precisions = examples::PrecisionChoices<ptrain::Fp32, ptrain::Bf16, ptrain::Fp16>;

// Precision: Fp32, or Bf16 / Fp16 for mixed precision; the model's scalar type is its wire type.
// D: the device the model, its masters and Adam's moments live on. Returns the final test accuracy
// in percent.
template <class Precision, class D, class... Policies>
double train(const examples::Cli& cli, ptrain::MpiComm& world, examples::DataShard shard, Policies&&... policies) {
  using T = typename Precision::template wire<float>;
  using Net = ptrain::SmallCnn<T, D>;
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
  // Of a TensorDataset, as the training loader: fit on two of them is the prebuilt library's.
  ptrain::DataLoader<ptrain::TensorDataset> test_loader(
      test_set, ptrain::DistributedSampler(test_set.size(), ranks, rank, false), {.batch_size = 1000}, normalize);

  auto model = std::make_shared<Net>();
  const ptrain::AdamOptions adam_options{.lr = cli.real("--lr")};
  const ptrain::TrainerOptions trainer_options = examples::trainer_options(cli);
  const int epochs = static_cast<int>(cli.integer("--epochs"));
  if (world.rank() == 0)
    std::printf("fashion_mnist: %lld training and %lld test images, %lld parameters in %s, %d rank(s) x %d thread(s) "
                "on %s%s%s\n",
                static_cast<long long>(train_data.size()), static_cast<long long>(test_set.size()),
                static_cast<long long>(model->parameter_count()), Precision::name, world.size(), ptrain::num_threads(),
                D::name, ranks > 1 ? ", gradients on the wire as " : "", ranks > 1 ? cli.str("--compression").c_str() : "");
  if (world.rank() == 0 && !trainer_options.csv_log.empty())
    std::printf("per-epoch log in %s\n", trainer_options.csv_log.c_str());
  const auto results = examples::with_master_weights<Precision, D>(*model, [&](const auto& parameters, auto... amp) {
    auto adam = std::make_shared<ptrain::Adam<float, D>>(parameters, adam_options);
    ptrain::Trainer<Net, std::decay_t<Policies>..., decltype(amp)...> trainer(model, adam, trainer_options,
                                                                           std::move(policies)..., std::move(amp)...);
    return examples::fit_with_checkpoints(cli, trainer, train_loader,
                                          [&] { return trainer.fit(train_loader, &test_loader, epochs); });
  });

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double accuracy = results.empty() ? std::nan("") : 100 * results.back().val.at("accuracy");
  if (world.rank() == 0) std::printf("test accuracy %.2f%% after %zu epochs in %.1f s\n", accuracy, results.size(), seconds);
  return accuracy;
}

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("fashion_mnist",
                    "Trains a small CNN on Fashion-MNIST and reports test accuracy; data-parallel under mpiexec.");
  cli.option("--data", ptrain::FashionMnist::default_root, "directory holding the *-ubyte.gz files")
      .integer_option("--epochs", 5, "training epochs")
      .integer_option("--batch", 128, "global batch size (split over the ranks)")
      .real_option("--lr", "0.001", "Adam learning rate")
      .integer_option("--seed", 0, "seed for initialisation, shuffling and dropout", 0, LONG_MAX)
      .integer_option("--limit", 0, "train on the first N training images only (0: all)", 0)
      .output_option("--csv", "fashion_mnist.csv",
                     "per-epoch CSV log written by rank 0 (empty: none); the default is never overwritten: "
                     "fashion_mnist_2.csv, _3, ... when it exists");
  Precisions::add_option(cli);
  return examples::run_example<examples::Pipelines::with>(
      cli, examples::accuracy_percent("test accuracy"), argc, argv,
      [&]<class D>(D, ptrain::MpiComm& world, examples::DataShard shard, auto... policies) {
        constexpr bool pipelined = (requires { decltype(policies)::micro_batches; } || ...);
        return Precisions::run<pipelined>(cli, [&]<class Precision>(Precision) {
          return train<Precision, D>(cli, world, shard, policies...);
        });
      });
}
