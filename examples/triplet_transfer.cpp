// The tripnet study's triplet network (CholecT50: instrument, verb, target in surgical video
// frames): a ResNet-18/50 or SqueezeNet trunk, ImageNet-pretrained from torchvision's safetensors
// (--weights; their classifier is skipped) or from scratch, with three linear heads of their own
// class counts (common/triplet_net.hpp). The loss is the weighted sum of the heads' cross-entropies
// (MultiHead); SGD with momentum, or Adam, steps four parameter groups, the trunk at --lr and each
// head at its own rate, all scaled alike by a step decay. Data: a CSV with a header naming an
// image path (relative to --images) and the three labels. After each epoch it prints each head's
// validation accuracy; --csv and --tensorboard log them with each head's loss. Two runs' --csv
// logs, one pretrained and one from scratch, make the study's comparison plot:
//   python3 examples/plot_loss_curves.py --out curves.png pretrained=a.csv scratch=b.csv
// One process, or data-parallel under mpiexec (common/strategy.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <ptrain/mpi.hpp>
#include <ptrain/tasks/multi_head.hpp>

#include "common/cli.hpp"
#include "common/frame_augmentation.hpp"
#include "common/run.hpp"
#include "common/triplet_net.hpp"
#include "common/validation.hpp"

namespace {

using Task = ptrain::MultiHead<ptrain::Classification, ptrain::Classification, ptrain::Classification>;

examples::TripletClasses classes_of(const examples::Cli& cli) {
  return {cli.integer("--instrument-classes"), cli.integer("--verb-classes"), cli.integer("--target-classes")};
}

// The trunk at --lr, each head at its own rate; --lr 0 freezes the trunk (no group: a schedule
// scales every group's rate by the first group's, which must not be 0).
template <class D>
std::vector<ptrain::ParamGroup<float, D>> parameter_groups(const examples::Cli& cli, ptrain::Sequential<float, D>& net) {
  std::vector<ptrain::ParamGroup<float, D>> groups;
  if (cli.real("--lr") > 0)
    groups.push_back({examples::triplet_parameters(net, "", true), {}, {}});
  else
    for (const auto& [name, child] : net.children())
      if (name != "heads") child->set_requires_grad(false);
  for (const char* head : examples::triplet_head_names)
    groups.push_back({examples::triplet_parameters(net, head, false), cli.real("--lr-" + std::string(head)), {}});
  return groups;
}

// Every row's labels below their head's class count, checked before training.
void check_labels(const examples::Cli& cli, const ptrain::ImageCsv& csv) {
  const auto counts = classes_of(cli).counts();
  for (std::size_t i = 0; i < csv.targets().size(); ++i) {
    const std::size_t head = i % counts.size();
    ptrain::check(csv.targets()[i] < counts[head], cli.str("--labels"), ": row ", i / counts.size() + 1, ": ",
                  examples::triplet_head_names[head], " ", csv.targets()[i], " is not below --",
                  examples::triplet_head_names[head], "-classes ", counts[head]);
  }
}

// Trains on D; returns the lowest of the three heads' final validation accuracies, in percent.
template <class D, class... Policies>
double train(const examples::Cli& cli, ptrain::MpiComm& world, examples::DataShard shard, Policies... policies) {
  const auto seed = static_cast<std::uint64_t>(cli.integer("--seed"));
  const long size = cli.integer("--image-size"), batch = cli.integer("--batch");
  ptrain::check(batch % shard.count == 0, "--batch ", batch, " (the global batch) must divide by the ", shard.count,
                " data-parallel replicas");
  const bool main = world.rank() == 0;

  const auto csv = std::make_shared<const ptrain::ImageCsv>(
      cli.str("--labels"), cli.str("--images"),
      ptrain::ImageCsvOptions{.image_column = cli.str("--image-column"),
                              .label_columns = {examples::triplet_head_names.begin(), examples::triplet_head_names.end()},
                              .extension = ""});
  check_labels(cli, *csv);
  examples::TrainVal parts = examples::split_train_val(csv, cli.real("--val-fraction"), seed);
  // A plain transform (image only): the label vector travels as the example's target map, which a
  // geometric transform's paired form would take for a mask.
  const ptrain::Compose prepare(ptrain::Resize(size, size),
                                ptrain::Normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}));
  const auto image_only = [prepare](ptrain::Tensor<float>& x, ptrain::Rng& rng) { prepare(x, rng); };
  const bool augment = cli.flag("--augment");
  const ptrain::Compose augmented(ptrain::Resize(size, size), examples::frame_augmentation(),
                                  ptrain::Normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}));
  const auto train_transform = [augment, augmented, prepare](ptrain::Tensor<float>& x, ptrain::Rng& rng) {
    augment ? augmented(x, rng) : prepare(x, rng);
  };
  ptrain::DataLoader train_loader(parts.train,
                                  ptrain::DistributedSampler(parts.train.size(), shard.count, shard.index, true, seed),
                                  {.batch_size = batch / shard.count, .seed = seed}, train_transform);
  ptrain::DataLoader val_loader(parts.val, examples::EvalShard(parts.val.size(), shard.count, shard.index),
                                {.batch_size = batch / shard.count}, image_only);

  ptrain::manual_seed(seed);
  auto model = examples::make_triplet_net<float, D>(cli.str("--arch"), classes_of(cli));
  const std::string weights = cli.str("--weights");
  if (!weights.empty()) examples::load_pretrained_trunk(*model, weights);
  auto groups = parameter_groups(cli, *model);
  const double lr = groups[0].lr.value_or(cli.real("--lr")), wd = cli.real("--wd");
  const auto counts = classes_of(cli).counts();
  const Task task(ptrain::Head<ptrain::Classification>{"instrument", counts[0], cli.real("--instrument-weight")},
                  ptrain::Head<ptrain::Classification>{"verb", counts[1], cli.real("--verb-weight")},
                  ptrain::Head<ptrain::Classification>{"target", counts[2], cli.real("--target-weight")});
  const int epochs = static_cast<int>(cli.integer("--epochs"));
  const ptrain::StepLR decay{.base_lr = lr, .step_size = std::max<std::int64_t>(1, cli.integer("--lr-step")),
                             .gamma = cli.real("--lr-gamma")};

  const auto fit = [&](auto optimizer) {
    using Model = ptrain::Sequential<float, D>;
    ptrain::Trainer<Model, Policies..., Task> trainer(model, optimizer, examples::trainer_options(cli), policies...,
                                                      task);
    ptrain::Scheduler schedule(*optimizer, decay);  // per epoch: every group's rate times the same factor
    trainer.on_epoch_end([&](const ptrain::EpochResult& r) {
      schedule.step();
      if (!main || r.val.empty()) return;
      std::printf("Epoch %d: validation accuracy", r.epoch);
      for (const char* head : examples::triplet_head_names)
        std::printf(" %s %.2f%%", head, 100 * r.val.at(std::string(head) + "_accuracy"));
      std::printf(" (loss %.4f, lr %.3g)\n", r.val_loss, r.lr);
    });
    trainer.checkpoint_scheduler(schedule);
    if (main)
      std::printf("triplet_transfer: %s %s%s, heads %lld/%lld/%lld classes, %lld training and %lld validation images "
                  "at %ldx%ld, batch %ld, %d rank(s) x %d thread(s) on %s\n",
                  cli.str("--arch").c_str(), weights.empty() ? "from scratch" : "pretrained",
                  augment ? ", augmented (flips, contrast, quarter turns)" : "",
                  static_cast<long long>(counts[0]), static_cast<long long>(counts[1]),
                  static_cast<long long>(counts[2]), static_cast<long long>(parts.train.size()),
                  static_cast<long long>(parts.val.size()), size, size, batch, world.size(), ptrain::num_threads(),
                  D::name);
    std::vector<ptrain::EpochResult> results;
    examples::fit_with_checkpoints(cli, trainer, train_loader, [&] {
      results = trainer.fit(train_loader, parts.val.size() > 0 ? &val_loader : nullptr, epochs);
      return results;
    });
    if (results.empty() || results.back().val.empty()) return std::nan("");
    double lowest = 100;
    for (const char* head : examples::triplet_head_names)
      lowest = std::min(lowest, 100 * results.back().val.at(std::string(head) + "_accuracy"));
    return lowest;
  };
  if (cli.str("--optimizer") == "adam")
    return fit(std::make_shared<ptrain::Adam<float, D>>(std::move(groups),
                                                        ptrain::AdamOptions{.lr = lr, .weight_decay = wd}));
  return fit(std::make_shared<ptrain::Sgd<float, D>>(std::move(groups),
                                                     ptrain::SgdOptions{.lr = lr, .momentum = 0.9, .weight_decay = wd}));
}

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("triplet_transfer",
                    "Trains a three-head network (instrument, verb, target) on a ResNet or SqueezeNet trunk, "
                    "ImageNet-pretrained or from scratch, with a learning rate per head; data-parallel under mpiexec.");
  cli.option("--labels", "triplets.csv", "CSV with a header naming the image column and instrument,verb,target")
      .option("--images", ".", "directory the CSV's image paths are relative to")
      .option("--image-column", "image", "the CSV's column of image paths (with their extension)")
      .choice_option("--arch", "resnet18", {"resnet18", "resnet50", "squeezenet1_1"}, "the trunk")
      .option("--weights", "",
              "torchvision safetensors of the trunk (its fc / classifier is skipped); empty: from scratch")
      .integer_option("--instrument-classes", 6, "classes of the instrument head")
      .integer_option("--verb-classes", 10, "classes of the verb head")
      .integer_option("--target-classes", 15, "classes of the target head")
      .real_option("--instrument-weight", "1", "weight of the instrument head's loss in the sum", 0)
      .real_option("--verb-weight", "1", "weight of the verb head's loss in the sum", 0)
      .real_option("--target-weight", "1", "weight of the target head's loss in the sum", 0)
      .choice_option("--optimizer", "sgd", {"sgd", "adam"}, "SGD with momentum 0.9, or Adam")
      .real_option("--lr", "0.001", "learning rate of the trunk (0: frozen)", 0)
      .real_option("--lr-instrument", "0.01", "learning rate of the instrument head", 0)
      .real_option("--lr-verb", "0.01", "learning rate of the verb head", 0)
      .real_option("--lr-target", "0.01", "learning rate of the target head", 0)
      .integer_option("--lr-step", 10, "epochs between the rates' decays (every group's alike)")
      .real_option("--lr-gamma", "0.1", "factor of each decay", 0, 1)
      .real_option("--wd", "0.0001", "weight decay (every group)", 0)
      .integer_option("--image-size", 224, "images are resized to this square")
      .real_option("--val-fraction", "0.2", "part of the CSV's rows held out for validation", 0, 1)
      .switch_option("--augment",
                     "augment the training images: horizontal and vertical flips, contrast (0.2), quarter turns")
      .integer_option("--epochs", 10, "training epochs")
      .integer_option("--batch", 32, "global batch size (split over the ranks)")
      .integer_option("--seed", 0, "seed for the heads (and a trunk from scratch), the split and shuffling", 0,
                      LONG_MAX)
      .output_option("--csv", "", "per-epoch CSV log written by rank 0, each head's loss and accuracy (empty: none)");
  return examples::run_example(cli, examples::FinalMetric{"--min-accuracy", "lowest per-head validation accuracy", "%", false, {.name = "val_loss"}}, argc, argv,
                               [&]<class D>(D, ptrain::MpiComm& world, examples::DataShard shard, auto... policies) {
                                 return train<D>(cli, world, shard, policies...);
                               });
}
