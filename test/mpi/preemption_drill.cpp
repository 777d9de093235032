// The preemption drill (preemption_drill.sh): `mpi_preemption_drill DIR EPOCHS [resume]` trains a
// small data-parallel model for EPOCHS epochs, checkpointing under DIR; each rank writes its pid
// to DIR/pid-<rank> so that the script can send SIGTERM to one rank. Rank 0 ends with one line,
// "preemption_drill: preempted at step S" or "preemption_drill: finished at step S loss L
// weights H" (the last epoch's loss and a hash of the weights' bytes, to compare runs bit for bit).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <unistd.h>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/data/loader.hpp>
#include <ptrain/launch/mpi_main.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/blobs.hpp"

using namespace ptrain;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: mpi_preemption_drill DIR EPOCHS [resume]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const int epochs = std::atoi(argv[2]);
  const bool resume = argc > 3 && std::strcmp(argv[3], "resume") == 0;
  return run_main(argc, argv, [&](MpiSession& session) {
    MpiComm world(session);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / ("pid-" + std::to_string(world.rank()))) << ::getpid() << '\n';
    const TensorDataset data = test::class_blobs(48, 3);
    DataLoader loader(data, DistributedSampler(data.size(), world.size(), world.rank(), true, 5),
                      LoaderOptions{.batch_size = 24 / world.size()});
    manual_seed(1);
    auto model = std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
        make<Linear<float>>(4, 8), make<ReLU<float>>(), make<Dropout<float>>(0.1), make<Linear<float>>(8, 3)});
    auto sgd = make<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.05, .momentum = 0.9});
    Trainer<Sequential<float>, DataParallel<MpiAllreduce>> trainer(
        model, sgd, {.progress_bar = false, .print_epochs = false}, DataParallel<MpiAllreduce>(world));
    // Slow steps: the signal comes while training, not after it.
    trainer.on_step_end([](std::int64_t) { std::this_thread::sleep_for(std::chrono::milliseconds(5)); });
    trainer.save_checkpoints({.directory = dir / "checkpoints", .every_epochs = 20});
    if (resume) check(trainer.resume_latest(dir / "checkpoints"), "no checkpoint to resume under ", dir.string());
    const auto results = trainer.fit(loader, epochs);
    if (world.rank() != 0) return;
    if (trainer.preempted()) {
      std::printf("preemption_drill: preempted at step %lld\n", static_cast<long long>(trainer.global_step()));
      return;
    }
    std::uint64_t hash = 1469598103934665603ull;  // FNV-1a over the weights' bytes
    for (auto& p : model->parameters()) {
      const auto* bytes = reinterpret_cast<const unsigned char*>(p.value().data());
      for (std::size_t i = 0; i < static_cast<std::size_t>(p.numel()) * sizeof(float); ++i)
        hash = (hash ^ bytes[i]) * 1099511628211ull;
    }
    std::printf("preemption_drill: finished at step %lld loss %s weights %016llx\n",
                static_cast<long long>(trainer.global_step()), checkpoint::exact(results.back().train_loss).c_str(),
                static_cast<unsigned long long>(hash));
  });
}
