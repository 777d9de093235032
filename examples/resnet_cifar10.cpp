// ResNet-18 or ResNet-50 (CIFAR stem) on CIFAR-10's binary files, as the Horovod CIFAR-10
// projects trained it: SGD with momentum, random crop + flip, fp16 gradients on the wire when
// data-parallel, and images/s per epoch in the style of Horovod's benchmark table. One process,
// data-parallel under mpiexec (with --shard 1, 2 or 3, the optimizer state, the gradients too, and
// the parameters too sharded over the ranks: Sharded<Zero1 | Zero2 | Zero3>), or pipelined with --stages (see common/strategy.hpp).
//
// resnet_cifar10_cuda is this file compiled by nvcc: with --device cuda (its default) each rank
// trains on its GPU of the node, gradients averaged by NCCL (DataParallel<NcclAllreduce,
// --compression>), as Horovod did on GPUs; with --stages the ResNet is a pipeline over the GPUs
// (Pipeline<4> with NCCL messages), the headline Trainer<Model, DataParallel<NcclAllreduce, Fp16>,
// Pipeline<4>> with --compression fp16 on a grid.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include <ptrain/data/cifar10.hpp>
#include <ptrain/mpi.hpp>

#include "common/cli.hpp"
#include "common/run.hpp"

namespace {

// Both ResNets are Sequentials: one Trainer type serves them.
template <class D>
std::shared_ptr<ptrain::Sequential<float, D>> make_resnet(const std::string& name) {
  const ptrain::ResNetOptions options{.num_classes = 10, .cifar_stem = true};
  if (name == "resnet18") return ptrain::resnet18<float, D>(options);
  if (name == "resnet50") return ptrain::resnet50<float, D>(options);
  ptrain::fail("--model '", name, "': expected resnet18 or resnet50");
}

// Returns the final test accuracy in percent.
template <class D, class... Policies>
double train(const examples::Cli& cli, ptrain::MpiComm& world, examples::DataShard shard, Policies... policies) {
  using Net = ptrain::Sequential<float, D>;
  const auto seed = static_cast<std::uint64_t>(cli.integer("--seed"));
  ptrain::manual_seed(seed);
  auto model = make_resnet<D>(cli.str("--model"));
  const ptrain::Cifar10 train_set(cli.str("--data"), ptrain::Split::train);
  const ptrain::Cifar10 test_set(cli.str("--data"), ptrain::Split::test);
  ptrain::TensorDataset train_data = train_set;
  if (const long limit = cli.integer("--limit"); limit > 0 && limit < train_set.size())
    train_data = ptrain::TensorDataset(train_set.inputs().slice(0, limit).clone(),
                                       {train_set.targets().begin(), train_set.targets().begin() + limit});
  const long batch = cli.integer("--batch");
  ptrain::check(batch % shard.count == 0, "--batch ", batch, " (the global batch) must divide by the ", shard.count,
                " data-parallel replicas");

  const ptrain::Normalize normalize({0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f});
  const ptrain::Compose augment(ptrain::RandomCrop(32, 4), ptrain::RandomHorizontalFlip(), normalize);
  ptrain::DataLoader train_loader(
      train_data, ptrain::DistributedSampler(train_data.size(), shard.count, shard.index, true, seed),
      {.batch_size = batch / shard.count, .seed = seed}, augment);
  // Of a TensorDataset, as the training loader: fit on two of them is the prebuilt library's.
  ptrain::DataLoader<ptrain::TensorDataset> test_loader(
      test_set, ptrain::DistributedSampler(test_set.size(), shard.count, shard.index, false), {.batch_size = 500},
      normalize);

  auto sgd = std::make_shared<ptrain::Sgd<float, typename Net::device_type>>(
      model->parameters(), ptrain::SgdOptions{.lr = cli.real("--lr"), .momentum = 0.9, .weight_decay = 5e-4});
  const std::int64_t parameters = model->parameter_count();  // before Sharded<Zero3> lets the others' go
  ptrain::Trainer<Net, Policies...> trainer(model, sgd, examples::trainer_options(cli), policies...);
  const int epochs = static_cast<int>(cli.integer("--epochs"));
  ptrain::Scheduler schedule(*sgd, ptrain::CosineAnnealingLR{
                                       .base_lr = cli.real("--lr"),
                                       .t_max = std::max<std::int64_t>(1, epochs * static_cast<std::int64_t>(train_loader.size()))});
  trainer.on_step_end([&](std::int64_t) { schedule.step(); });
  trainer.on_epoch_end([&](const ptrain::EpochResult& r) {
    if (trainer.is_main())
      std::printf("Epoch #%d: %.1f img/sec per rank, total %.1f img/sec on %d rank(s)\n", r.epoch,
                  r.images_per_second / world.size(), r.images_per_second, world.size());
  });
  if (trainer.is_main())
    std::printf("resnet_cifar10: %s, %lld parameters, %lld training and %lld test images, batch %ld, %d rank(s) x %d "
                "thread(s) on %s\n",
                cli.str("--model").c_str(), static_cast<long long>(parameters),
                static_cast<long long>(train_data.size()), static_cast<long long>(test_set.size()), batch, world.size(),
                ptrain::num_threads(), Net::device_type::name);
  trainer.checkpoint_scheduler(schedule);
  const auto results =
      examples::fit_with_checkpoints(cli, trainer, train_loader, [&] { return trainer.fit(train_loader, &test_loader, epochs); });
  return results.empty() ? std::nan("") : 100 * results.back().val.at("accuracy");
}

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("resnet_cifar10", "Trains ResNet-18/50 (CIFAR stem) on CIFAR-10's binary files; data-parallel "
                                      "under mpiexec (--shard 1|2|3: ZeRO stages), pipelined with --stages.");
  cli.option("--data", "cifar-10-batches-bin", "directory holding data_batch_1..5.bin and test_batch.bin")
      .choice_option("--model", "resnet18", {"resnet18", "resnet50"}, "the network")
      .integer_option("--epochs", 1, "training epochs")
      .integer_option("--batch", 128, "global batch size (split over the data-parallel replicas)")
      .real_option("--lr", "0.1", "initial SGD learning rate (cosine annealed)")
      .integer_option("--seed", 0, "seed for initialisation, shuffling and augmentation", 0, LONG_MAX)
      .integer_option("--limit", 0, "train on the first N training images only (0: all)", 0)
      .output_option("--csv", "", "per-epoch CSV log written by rank 0 (empty: none)");
  return examples::run_example<examples::Pipelines::with, examples::Sharding::with>(
      cli, examples::accuracy_percent("test accuracy"), argc, argv,
      [&]<class D>(D, ptrain::MpiComm& world, examples::DataShard shard, auto... policies) {
        return train<D>(cli, world, shard, policies...);
      });
}
