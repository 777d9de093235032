// Microscopy segmentation with a UNet, as the project trained it data-parallel: a directory of
// images and one of binary 0/255 masks matched by file name, per-pixel cross-entropy over
// {background, foreground}, flips and quarter turns moving image and mask together, and each
// rank keeping its own batch, so N ranks train on N times the batch at N times the learning rate
// (the linear scaling rule), reached by a linear warm-up. After every epoch: loss and pixel
// accuracy, and IoU and Dice on a held-out validation split, counted over all ranks.
//
// unet_segmentation_cuda is this file compiled by nvcc: with --device cuda (its default) each rank
// trains on its GPU of the node, gradients averaged by NCCL (DataParallel<NcclAllreduce, --compression>).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <ptrain/data/image_mask.hpp>
#include <ptrain/mpi.hpp>
#include <ptrain/tasks/segmentation.hpp>

#include "common/cli.hpp"
#include "common/run.hpp"
#include "common/validation.hpp"

namespace {

// Trains a UNet<float, D>: on the CPU, or on this rank's GPU (D = Cuda). Returns the last
// validation IoU of the foreground.
template <class D, class... Policies>
double train(const examples::Cli& cli, ptrain::MpiComm& world, examples::DataShard shard, Policies... policies) {
  using Model = ptrain::UNet<float, D>;
  const auto seed = static_cast<std::uint64_t>(cli.integer("--seed"));
  const long size = cli.integer("--image-size"), batch = cli.integer("--batch"), channels = cli.integer("--channels");
  const ptrain::UNetOptions options{.in_channels = channels,
                                    .classes = 2,
                                    .levels = static_cast<int>(cli.integer("--levels")),
                                    .base_width = cli.integer("--base-width")};
  const long multiple = 1L << (options.levels - 1);
  ptrain::check(size % multiple == 0, "--image-size ", size, ": a UNet of ", options.levels,
                " levels needs a multiple of 2^(levels - 1) = ", multiple);
  ptrain::check(channels == 1 || channels == 3, "--channels ", channels, ": expected 1 (gray) or 3 (RGB)");
  const bool main = world.rank() == 0;

  auto pairs = std::make_shared<const ptrain::ImageMaskFolder>(
      cli.str("--images"), cli.str("--masks"),
      ptrain::ImageMaskOptions{.values = ptrain::MaskValues::binary_255,
                               .mode = channels == 1 ? ptrain::io::ColorMode::gray : ptrain::io::ColorMode::rgb});
  const examples::TrainVal parts = examples::split_train_val(pairs, cli.real("--val-fraction"), seed);
  // Masks follow every geometric step (nearest-neighbour when resized).
  const ptrain::Resize resize(size, size);
  ptrain::DataLoader train_loader(parts.train,
                                  ptrain::DistributedSampler(parts.train.size(), shard.count, shard.index, true, seed),
                                  {.batch_size = batch, .seed = seed},
                                  ptrain::Compose{resize, ptrain::RandomHorizontalFlip(), ptrain::RandomVerticalFlip(),
                                                  ptrain::RandomRotation90()});
  ptrain::DataLoader val_loader(parts.val, examples::EvalShard(parts.val.size(), shard.count, shard.index),
                                {.batch_size = batch}, resize);

  ptrain::manual_seed(seed);
  auto model = std::make_shared<Model>(options);
  const double base_lr = cli.real("--lr");
  auto adam = std::make_shared<ptrain::Adam<float, D>>(model->parameters(), ptrain::AdamOptions{.lr = base_lr});
  // Per-pixel cross entropy; pixel accuracy, IoU and Dice from the confusion matrix summed over the ranks.
  ptrain::TrainerOptions trainer_options = examples::trainer_options(cli);
  trainer_options.print_epochs = false;
  ptrain::Trainer<Model, Policies..., ptrain::Segmentation> trainer(model, adam, trainer_options, policies...,
                                                                    ptrain::Segmentation{.classes = 2});
  ptrain::Scheduler schedule(*adam, ptrain::linear_scaling(base_lr, shard.count, cli.integer("--warmup-steps")));
  trainer.on_step_end([&](std::int64_t) { schedule.step(); });

  if (main)
    std::printf(
        "unet_segmentation: %lld training and %lld validation pairs at %ldx%ld, UNet of %d levels from %lld "
        "channels (%lld parameters), %ld images per rank per step, %d rank(s) x %d thread(s) on %s\n",
        static_cast<long long>(parts.train.size()), static_cast<long long>(parts.val.size()), size, size,
        options.levels, static_cast<long long>(options.base_width), static_cast<long long>(model->parameter_count()),
        batch, world.size(), ptrain::num_threads(), D::name);
  if (main && shard.count > 1)
    std::printf("data-parallel: learning rate %g x %d ranks = %g after %ld warm-up steps, gradients as %s\n", base_lr,
                shard.count, base_lr * shard.count, cli.integer("--warmup-steps"), cli.str("--compression").c_str());

  const int epochs = static_cast<int>(cli.integer("--epochs"));
  double last_iou = std::nan("");  // of the foreground class
  trainer.on_epoch_end([&](const ptrain::EpochResult& r) {
    std::string line = "epoch " + std::to_string(r.epoch) + "/" + std::to_string(epochs);
    char text[256];
    std::snprintf(text, sizeof text, " loss %.4f pixel_acc %.2f%%", r.train_loss, 100 * r.train.at("pixel_accuracy"));
    line += text;
    if (!r.val.empty()) {
      last_iou = r.val.at("iou_1");
      std::snprintf(text, sizeof text, " val_loss %.4f IoU %.4f Dice %.4f (mean of both classes %.4f, %.4f)",
                    r.val_loss, last_iou, r.val.at("dice_1"), r.val.at("mean_iou"), r.val.at("mean_dice"));
      line += text;
    }
    std::snprintf(text, sizeof text, " %.1f img/s %.1fs lr %.3g", r.images_per_second, r.seconds, r.lr);
    if (main) ptrain::log_line(line + text);
  });
  trainer.checkpoint_scheduler(schedule);
  examples::fit_with_checkpoints(cli, trainer, train_loader, [&] {
    return trainer.fit(train_loader, parts.val.size() > 0 ? &val_loader : nullptr, epochs);
  });
  const double min_iou = cli.real("--min-iou");
  if (main && min_iou > 0) std::printf("final validation IoU %.4f (required: %.4f)\n", last_iou, min_iou);
  return last_iou;
}

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("unet_segmentation",
                    "Trains a UNet on microscopy images and binary 0/255 masks (matched by file name), reporting "
                    "IoU and Dice on a validation split; data-parallel under mpiexec or srun with linear "
                    "learning-rate scaling and warm-up.");
  cli.option("--images", "images", "directory of the images (PNG or JPEG)")
      .option("--masks", "masks", "directory of the masks, one per image with the same stem, 0 or 255 per pixel")
      .integer_option("--channels", 1, "1: read the images as gray; 3: as RGB", 1, 3)
      .integer_option("--image-size", 256, "images and masks are resized to this square (a multiple of 2^(levels - 1))")
      .integer_option("--levels", 5, "UNet resolutions (levels - 1 poolings)", 1, 16)
      .integer_option("--base-width", 64, "channels of the first level, doubled at each level below")
      .real_option("--val-fraction", "0.2", "part of the pairs held out for validation", 0, 1)
      .integer_option("--epochs", 10, "training epochs")
      .integer_option("--batch", 4, "images per rank per step: N ranks train on N times this")
      .real_option("--lr", "0.001", "Adam learning rate of one process; N ranks use N times it after the warm-up")
      .integer_option("--warmup-steps", 100, "steps over which the rate climbs linearly from --lr to N x --lr", 0)
      .integer_option("--seed", 0, "seed for the weights, the split, shuffling and augmentation", 0, LONG_MAX)
      .output_option("--csv", "", "per-epoch CSV log written by rank 0 (empty: none)");
  return examples::run_example(cli, {"--min-iou", "validation IoU of the foreground", "", false, {.name = "val_mean_iou", .mode = ptrain::BestIs::higher}}, argc, argv,
                               [&]<class D>(D, ptrain::MpiComm& world, examples::DataShard shard, auto... policies) {
                                 return train<D>(cli, world, shard, policies...);
                               });
}
