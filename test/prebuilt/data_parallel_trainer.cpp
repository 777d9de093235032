// A Trainer with DataParallel<MpiAllreduce> on DataLoaders of a TensorDataset, built against the
// prebuilt library: trainer_from_library.sh checks that this program's object leaves the loop (fit,
// the constructor) to the library, and runs it under mpiexec. Each rank trains on its share of two
// Gaussian blobs (DistributedSampler); the program fails unless the run learns (blobs.hpp: learned)
// and every rank ends with rank 0's weights.
#include <cstdio>
#include <span>
#include <vector>

#include <ptrain/mpi.hpp>

#include "blobs.hpp"

int main(int argc, char** argv) {
  return ptrain::run_main(argc, argv, [](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
    ptrain::manual_seed(0);
    const ptrain::TensorDataset train_set = prebuilt_test::blobs(128, 1), val_set = prebuilt_test::blobs(64, 2);
    const int ranks = world.size(), rank = world.rank();
    ptrain::DataLoader train(train_set, ptrain::DistributedSampler(train_set.size(), ranks, rank, true, 3),
                             {.batch_size = 32 / ranks});
    ptrain::DataLoader val(val_set, ptrain::DistributedSampler(val_set.size(), ranks, rank, false), {.batch_size = 64});
    auto model = prebuilt_test::mlp();
    auto sgd =
        std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{.lr = 0.1, .momentum = 0.9});
    using DataParallel = ptrain::DataParallel<ptrain::MpiAllreduce>;
    ptrain::Trainer<ptrain::Sequential<float>, DataParallel> trainer(
        model, sgd, {.progress_bar = false, .print_epochs = false}, DataParallel(world));
    const std::vector<ptrain::EpochResult> results = trainer.fit(train, &val, 5);
    const double val_loss = trainer.evaluate(val).loss();

    // The replicas' weights, summed with their positions as weights: the same on every rank.
    double mine = 0;
    long position = 0;
    for (const auto& [name, p] : trainer.model().named_parameters())
      for (const float v : p.value().to_vector()) mine += static_cast<double>(v) * static_cast<double>(++position);
    std::vector<double> all(static_cast<std::size_t>(ranks));
    world.allgather(std::span<const double>(&mine, 1), std::span<double>(all));
    bool same = true;
    for (const double other : all) same = same && other == all[0];

    const bool learned = prebuilt_test::learned(results, 5, val_loss);
    if (rank == 0)
      std::printf("data_parallel_trainer: %d ranks; train loss %.4f after epoch 1, %.4f after epoch %zu; validation "
                  "loss %.4f; replicas %s\n",
                  ranks, results.front().train_loss, results.back().train_loss, results.size(), val_loss,
                  same ? "equal" : "DIFFER");
    if (!learned) std::fprintf(stderr, "data_parallel_trainer: rank %d: did not learn the two blobs\n", rank);
    return learned && same ? 0 : 1;
  });
}
