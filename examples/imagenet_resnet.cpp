// ResNet-18/34/50 on ImageNet's ImageFolder layout (train/<wnid>/*.JPEG, val/<wnid>/*.JPEG), as
// the ImageNet projects train it: SGD with momentum and weight decay, a one-cycle learning rate
// over the whole run that cycles the momentum between 0.95 and 0.85 against it (PyTorch's
// OneCycleLR defaults), torchvision's resize-and-crop (at 8/7 of the
// crop size, 256 for 224) and ImageNet normalisation, and the validation top-1 and top-5 accuracy
// after each epoch. One process, or data-parallel under mpiexec (see common/strategy.hpp).
//
// imagenet_resnet_cuda is this file compiled by nvcc. With --device cuda (its default) each rank
// trains on its GPU of the node as the ImageNet project did with Apex AMP O2 and DDP: the network
// in half with fp32 master weights and dynamic loss scaling (MixedPrecision<Fp16, Cuda>; --loss-scale
// and --loss-scale-window are Apex's initial scale and window), the gradients averaged by NCCL in
// fp16 (DataParallel<NcclAllreduce, Fp16>).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <array>
#include <utility>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <ptrain/mpi.hpp>

#include "common/cli.hpp"
#include "common/image_folders.hpp"
#include "common/init_weights.hpp"
#include "common/run.hpp"

namespace {

// The SGD of the run, stepping `parameters` (the model's, or mixed precision's fp32 masters) on D.
template <class D>
auto make_sgd(const examples::Cli& cli, std::vector<ptrain::Var<float, D>> parameters) {
  return std::make_shared<ptrain::Sgd<float, D>>(
      std::move(parameters),
      ptrain::SgdOptions{.lr = cli.real("--lr"), .momentum = 0.9, .weight_decay = cli.real("--wd")});
}

// `Epoch: [E][I/N] Loss L (avg) Acc@1 A (avg) Acc@5 B (avg)` every --print-freq steps (and at an
// epoch's last) on rank 0, as PyTorch's ImageNet example prints them: the step's batches summed over
// the ranks, and in brackets the average over the epoch's printed steps. A callback: it adds up
// each training batch's sums (the task's [correct at 1, correct at 5, samples]); the ranks meet only
// on the printed steps.
class IterationLines {
 public:
  IterationLines(long every, std::int64_t steps_per_epoch, ptrain::MpiComm& world)
      : every_(every), steps_per_epoch_(steps_per_epoch), world_(&world) {}

  void on_train_epoch_start(ptrain::TrainerView&, int epoch) {
    epoch_ = epoch;
    printed_ = {};
    step_ = {};
  }
  void on_train_batch_end(ptrain::TrainerView&, std::int64_t, const ptrain::EpochTotals& batch) {
    step_[0] += batch.loss_sum;
    step_[1] += batch.loss_weight;
    for (std::size_t i = 0; i < 3 && i < batch.metric_state.size(); ++i) step_[i + 2] += batch.metric_state[i];
  }
  void on_step_end(ptrain::TrainerView&, std::int64_t step) {
    std::array<double, 5> sums = std::exchange(step_, {});
    const std::int64_t index = (step - 1) % steps_per_epoch_;
    if (every_ <= 0 || (index % every_ != 0 && index + 1 != steps_per_epoch_)) return;
    if (world_->size() > 1) world_->allreduce_sum(std::span<double>(sums));
    for (std::size_t i = 0; i < sums.size(); ++i) printed_[i] += sums[i];
    if (world_->rank() != 0) return;
    const auto ratio = [](double sum, double count, double scale) { return count > 0 ? scale * sum / count : 0.0; };
    std::printf("Epoch: [%d][%lld/%lld] Loss %.4f (%.4f) Acc@1 %.3f (%.3f) Acc@5 %.3f (%.3f)\n", epoch_,
                static_cast<long long>(index), static_cast<long long>(steps_per_epoch_), ratio(sums[0], sums[1], 1),
                ratio(printed_[0], printed_[1], 1), ratio(sums[2], sums[4], 100), ratio(printed_[2], printed_[4], 100),
                ratio(sums[3], sums[4], 100), ratio(printed_[3], printed_[4], 100));
    std::fflush(stdout);
  }

 private:
  long every_;
  std::int64_t steps_per_epoch_;
  ptrain::MpiComm* world_;
  int epoch_ = 0;
  // loss x weight, weight, correct at 1, correct at 5, samples: the step's and the epoch's printed steps'
  std::array<double, 5> step_{}, printed_{};
};

// Returns the final validation top-1 accuracy in percent.
template <class Net, class Optimizer, class... Policies>
double train(const examples::Cli& cli, ptrain::MpiComm& world, const examples::SplitFolders& data,
             std::shared_ptr<Net> model, std::shared_ptr<Optimizer> sgd, examples::DataShard shard,
             Policies... policies) {
  const ptrain::ImageFolder &train_set = data.train, &val_set = data.validation;
  const auto seed = static_cast<std::uint64_t>(cli.integer("--seed"));
  const long batch = cli.integer("--batch"), size = cli.integer("--image-size");
  ptrain::check(batch % shard.count == 0, "--batch ", batch, " (the global batch) must divide by the ", shard.count,
                " data-parallel replicas");
  const auto workers = static_cast<int>(cli.integer("--workers"));
  const auto resize = static_cast<std::int64_t>(std::lround(size * 8.0 / 7.0));
  const ptrain::Normalize normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});
  ptrain::DataLoader train_loader(
      train_set, ptrain::DistributedSampler(train_set.size(), shard.count, shard.index, true, seed),
      {.batch_size = batch / shard.count, .seed = seed, .num_workers = workers},
      ptrain::Compose(ptrain::Resize(resize), ptrain::RandomCrop(size), ptrain::RandomHorizontalFlip(), normalize));
  ptrain::DataLoader val_loader(val_set, ptrain::DistributedSampler(val_set.size(), shard.count, shard.index, false),
                                {.batch_size = batch / shard.count, .num_workers = workers},
                                ptrain::Compose(ptrain::Resize(resize), ptrain::CenterCrop(size), normalize));

  const double max_lr = cli.real("--lr");
  // Top-1 and top-5 accuracy (torchvision's Acc@1 and Acc@5), counted over every rank's shard.
  ptrain::Trainer<Net, Policies..., ptrain::Classification> trainer(model, sgd, examples::trainer_options(cli),
                                                                   policies..., ptrain::Classification{.top_k = {1, 5}});
  const int epochs = static_cast<int>(cli.integer("--epochs"));
  // Optimizer steps: --accumulate batches make one.
  const std::int64_t steps_per_epoch =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(train_loader.size()) / cli.integer("--accumulate"));
  const std::int64_t total_steps = epochs * steps_per_epoch;
  ptrain::Scheduler schedule(*sgd, ptrain::OneCycleLR{.max_lr = max_lr, .total_steps = total_steps});
  // No step after the last one: the rate reported for the final epoch is the one it ended with.
  trainer.on_step_end([&](std::int64_t step) {
    if (step < total_steps) schedule.step();
  });
  trainer.add_callback(IterationLines(cli.integer("--print-freq"), steps_per_epoch, world));
  // Validated through fit, so the validation loss, Acc@1 and Acc@5 go to --csv and TensorBoard too.
  double top1 = 0;
  trainer.on_epoch_end([&](const ptrain::EpochResult& r) {
    top1 = 100 * r.val.at("accuracy");
    if (trainer.is_main())
      std::printf("Epoch %d: validation loss %.4f Acc@1 %.2f%% Acc@5 %.2f%% over %lld images\n", r.epoch, r.val_loss,
                  top1, 100 * r.val.at("top5_accuracy"), static_cast<long long>(val_set.size()));
  });
  if (trainer.is_main())
    std::printf("imagenet_resnet: %s, %lld parameters, %lld classes, %lld training and %lld validation images at "
                "%ldx%ld, batch %ld, %d rank(s) x %d thread(s) on %s%s%s\n",
                cli.str("--arch").c_str(), static_cast<long long>(model->parameter_count()),
                static_cast<long long>(train_set.num_classes()), static_cast<long long>(train_set.size()),
                static_cast<long long>(val_set.size()), size, size, batch, world.size(), ptrain::num_threads(),
                Net::device_type::name, shard.count > 1 ? ", gradients on the wire as " : "",
                shard.count > 1 ? cli.str("--compression").c_str() : "");
  trainer.checkpoint_scheduler(schedule);
  examples::fit_with_checkpoints(cli, trainer, train_loader, [&] { return trainer.fit(train_loader, &val_loader, epochs); });
  return top1;
}

template <class T, class D>
std::shared_ptr<ptrain::Sequential<T, D>> make_resnet(const std::string& arch, std::int64_t num_classes) {
  const ptrain::ResNetOptions options{.num_classes = num_classes};
  if (arch == "resnet18") return ptrain::resnet18<T, D>(options);
  if (arch == "resnet34") return ptrain::resnet34<T, D>(options);
  if (arch == "resnet50") return ptrain::resnet50<T, D>(options);
  ptrain::fail("--arch '", arch, "': expected resnet18, resnet34 or resnet50");
}

// --arch's network with the --init weights (if any) loaded, before anything copies them.
template <class T, class D>
std::shared_ptr<ptrain::Sequential<T, D>> make_model(const examples::Cli& cli, const ptrain::MpiComm& world,
                                                     std::int64_t num_classes) {
  auto model = make_resnet<T, D>(cli.str("--arch"), num_classes);
  if (const std::string init = cli.str("--init"); !init.empty()) {
    const auto loaded = examples::load_init_weights(*model, init);
    if (world.rank() == 0) examples::print_init_weights(loaded, "imagenet_resnet");
  }
  return model;
}

// The folders under --data, opened and checked on every rank before the model is made.
examples::SplitFolders open_data(const examples::Cli& cli) {
  examples::SplitFolders data = examples::open_split_folders("--data", cli.str("--data"), "train", "val");
  ptrain::manual_seed(static_cast<std::uint64_t>(cli.integer("--seed")));
  return data;
}

// The shared main's train on each device, with the policies the strategy flags chose.
template <class... Policies>
double train_on(const examples::Cli& cli, ptrain::Cpu, ptrain::MpiComm& world, examples::DataShard shard,
                Policies... policies) {
  const examples::SplitFolders data = open_data(cli);
  auto model = make_model<float, ptrain::Cpu>(cli, world, data.train.num_classes());
  auto sgd = make_sgd(cli, model->parameters());
  return train(cli, world, data, model, sgd, shard, policies...);
}

#if defined(__CUDACC__)
// Apex AMP O2 on the GPUs: gradients averaged in fp16 (DataParallel<NcclAllreduce, Fp16>) or no
// data parallelism; MixedPrecision comes after it.
template <class... Policies>
double train_on(const examples::Cli& cli, ptrain::Cuda, ptrain::MpiComm& world, examples::DataShard shard,
                Policies... policies) {
  using ptrain::Cuda, ptrain::Fp16;
  using DataParallel = ptrain::DataParallel<ptrain::NcclAllreduce, ptrain::RuntimeCompression>;
  if constexpr (!(std::is_same_v<Policies, DataParallel> && ...)) {
    ptrain::fail("--device cuda averages gradients over NCCL (DataParallel<NcclAllreduce>) or trains on one GPU");
  } else {
    ptrain::check(sizeof...(Policies) == 0 || cli.str("--compression") == "fp16",
                  "--device cuda averages gradients in fp16 over NCCL; --compression ", cli.str("--compression"),
                  " is for --device cpu");
    const examples::SplitFolders data = open_data(cli);
    auto model = make_model<ptrain::half, Cuda>(cli, world, data.train.num_classes());
    ptrain::MixedPrecision<Fp16, Cuda> amp(
        *model, ptrain::LossScalerOptions{.initial_scale = cli.real("--loss-scale"),
                                          .scale_window = static_cast<int>(cli.integer("--loss-scale-window"))});
    auto sgd = make_sgd<Cuda>(cli, amp.master_parameters());
    return train(cli, world, data, model, sgd, shard, policies..., amp);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("imagenet_resnet",
                    "Trains ResNet-18/34/50 on an ImageNet-style tree (DIR/train and DIR/val, one folder of JPEGs "
                    "per class) and reports validation top-1 and top-5 accuracy; data-parallel under mpiexec.");
  cli.option("--data", "imagenet", "directory holding train/ and val/, each with one folder of images per class")
      .choice_option("--arch", "resnet50", {"resnet18", "resnet34", "resnet50"}, "the network")
      .integer_option("--epochs", 16, "training epochs (the one-cycle schedule spans them all)")
      .integer_option("--batch", 256, "global batch size (split over the data-parallel replicas)")
      .real_option("--lr", "0.4", "peak learning rate of the one-cycle schedule")
      .real_option("--wd", "0.0001", "SGD weight decay")
      .integer_option("--image-size", 224, "crop size; images are first resized to 8/7 of it on the shorter side")
      .integer_option("--workers", 4, "threads decoding images for each loader (0: in the training thread)", 0)
      .integer_option("--seed", 0, "seed for initialisation, shuffling and augmentation", 0, LONG_MAX)
      .integer_option("--print-freq", 10,
                      "every N steps rank 0 prints `Epoch: [E][I/N] Loss Acc@1 Acc@5`: the step's batch over every "
                      "rank and the average over the epoch's printed steps (0: none)",
                      0)
      .option("--init", "",
              "weights in torchvision's names to start from (safetensors; tools/torch_to_safetensors.py converts a "
              ".pth): the model's entries the file lacks start fresh; another shape is an error (empty: all fresh)")
      .real_option("--loss-scale", "65536", "fp16 (--device cuda): the first dynamic loss scale", 1.0 / 65536, 16777216)
      .integer_option("--loss-scale-window", 2000, "fp16: steps without overflow before the loss scale doubles")
      .output_option("--csv", "", "per-epoch CSV log written by rank 0 (empty: none)");
  return examples::run_example(cli, examples::accuracy_percent("validation top-1 accuracy"), argc, argv,
                               [&](auto device, ptrain::MpiComm& world, examples::DataShard shard, auto... policies) {
                                 return train_on(cli, device, world, shard, policies...);
                               });
}
