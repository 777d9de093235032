// Diabetic-retinopathy grading by transfer learning, as the project ran it under Slurm: Kaggle's
// trainLabels.csv (image,level; five grades) over a directory of fundus images, Inception v3
// loaded from an ImageNet checkpoint (safetensors under torchvision's names), its backbone frozen
// and a new head `fc` trained. With --cache the images are decoded, resized and centre-cropped
// once into a tensor cache, which is what made the project's later epochs fast. Prints loss and
// accuracy per epoch, then the validation confusion matrix and Kaggle's quadratic weighted kappa.
//
// inception_retinopathy_cuda is this file compiled by nvcc: with --device cuda (its default) each
// rank trains the head on its GPU of the node, gradients averaged by NCCL
// (DataParallel<NcclAllreduce, --compression>).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/data/image_csv.hpp>
#include <ptrain/data/tensor_cache.hpp>
#include <ptrain/mpi.hpp>
#include <ptrain/tasks/metrics.hpp>

#include "common/cli.hpp"
#include "common/run.hpp"
#include "common/validation.hpp"

namespace {

constexpr long inception_min_size = 75;  // smaller inputs shrink to nothing before Mixed_7a

// Inception v3 without the auxiliary head, the --pretrained backbone loaded and frozen, and a new
// `classes`-way head, on D. Only the old head may be missing or shaped differently in the file.
template <class D>
std::shared_ptr<ptrain::InceptionV3<float, D>> make_model(const examples::Cli& cli, std::int64_t classes, bool main) {
  auto model = ptrain::inception_v3<float, D>({.aux_logits = false});
  const std::string pretrained = cli.str("--pretrained");
  if (!pretrained.empty()) {
    const auto loaded = ptrain::load_state_dict(*model, pretrained, {.strict = false});
    std::string wrong;
    for (const auto* list : {&loaded.missing, &loaded.mismatched})
      for (const auto& entry : *list)
        if (!entry.starts_with("fc.")) wrong += "\n  " + entry;
    ptrain::check(wrong.empty(), pretrained, ": not an Inception v3 backbone under torchvision's names; ",
                  "missing or mismatched entries besides the head fc:", wrong);
    model->set_requires_grad(false);
    // Its batch norms keep their running statistics (torchvision's FrozenBatchNorm2d): batch
    // statistics of a few images would turn the frozen features into noise.
    ptrain::freeze_batch_norm(*model);
    if (main)
      std::printf("backbone from %s (frozen); %zu entries of the file not used (auxiliary head, old fc)\n",
                  pretrained.c_str(), loaded.unexpected.size() + loaded.mismatched.size());
  } else if (main) {
    std::printf("no --pretrained: the whole network trains from its random initialisation\n");
  }
  ptrain::replace_child(*model, "fc", ptrain::make<ptrain::Linear<float, D>>(2048, classes));
  return model;
}

// Rank 0 writes the cache when it does not exist yet; every rank then reads it. The cache must
// hold the CSV's images, in its order, at this --image-size.
template <class Prepare>
std::shared_ptr<const ptrain::TensorCache> open_cache(const std::filesystem::path& path, const ptrain::ImageCsv& csv,
                                                      const Prepare& prepare, long size, ptrain::MpiComm& world) {
  if (world.rank() == 0 && !std::filesystem::exists(path)) {
    const auto start = std::chrono::steady_clock::now();
    ptrain::write_tensor_cache(path, csv, prepare);
    std::printf("wrote the tensor cache %s: %lld images in %.1f s\n", path.string().c_str(),
                static_cast<long long>(csv.size()),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  world.barrier();
  auto cache = std::make_shared<const ptrain::TensorCache>(path, ptrain::Shape{3, size, size});
  ptrain::check(cache->size() == csv.size(), path.string(), ": holds ", cache->size(), " images but the labels list ",
                csv.size(), ": delete it to rebuild the cache");
  for (std::int64_t i = 0; i < cache->size(); ++i)
    ptrain::check(cache->get(i).target == csv.targets()[static_cast<std::size_t>(i)], path.string(), ": image ", i,
                  " has level ", cache->get(i).target, " but row ", i + 1, " of the labels says ",
                  csv.targets()[static_cast<std::size_t>(i)], ": delete it to rebuild the cache");
  return cache;
}

// Kaggle's metric: 1 - sum(w O) / sum(w E), w = (i - j)^2 / (k - 1)^2, E the outer product of
// the true and predicted histograms scaled to the count.
double quadratic_weighted_kappa(const ptrain::ConfusionMatrix& m) {
  const std::int64_t k = m.num_classes();
  std::vector<double> rows(static_cast<std::size_t>(k)), columns(static_cast<std::size_t>(k));
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < k; ++j) rows[i] += m(i, j), columns[j] += m(i, j);
  const double n = static_cast<double>(m.total());
  double observed = 0, expected = 0;
  for (std::int64_t i = 0; i < k; ++i)
    for (std::int64_t j = 0; j < k; ++j) {
      const double w = k > 1 ? static_cast<double>((i - j) * (i - j)) / static_cast<double>((k - 1) * (k - 1)) : 0;
      observed += w * m(i, j);
      expected += w * rows[i] * columns[j] / n;
    }
  return expected > 0 ? 1 - observed / expected : std::nan("");
}

void print_confusion(const ptrain::ConfusionMatrix& m) {
  std::printf("validation confusion matrix, %lld images (rows: true level, columns: predicted):\n      ",
              static_cast<long long>(m.total()));
  for (std::int64_t j = 0; j < m.num_classes(); ++j) std::printf("%6lld", static_cast<long long>(j));
  for (std::int64_t i = 0; i < m.num_classes(); ++i) {
    std::printf("\n%6lld", static_cast<long long>(i));
    for (std::int64_t j = 0; j < m.num_classes(); ++j) std::printf("%6lld", static_cast<long long>(m(i, j)));
  }
  std::printf("\naccuracy %.2f%%, quadratic weighted kappa %.4f\n", 100 * m.accuracy(), quadratic_weighted_kappa(m));
}

// Trains on the CPU, or on this rank's GPU (D = Cuda). Returns the validation accuracy in percent.
template <class D, class... Policies>
double train(const examples::Cli& cli, ptrain::MpiComm& world, examples::DataShard shard, Policies... policies) {
  using Model = ptrain::InceptionV3<float, D>;
  const auto seed = static_cast<std::uint64_t>(cli.integer("--seed"));
  const long size = cli.integer("--image-size"), batch = cli.integer("--batch");
  const std::int64_t classes = cli.integer("--classes");
  ptrain::check(batch % shard.count == 0, "--batch ", batch, " (the global batch) must divide by the ", shard.count,
                " data-parallel replicas");
  const bool main = world.rank() == 0;

  const ptrain::ImageCsv csv(cli.str("--labels"), cli.str("--images"), {.extension = cli.str("--extension")});
  for (std::size_t row = 0; row < csv.targets().size(); ++row)
    ptrain::check(csv.targets()[row] < classes, cli.str("--labels"), ": row ", row + 1, ": level ", csv.targets()[row],
                  " is not below --classes ", classes);
  // Resized once (cached) or at every load; the flip and the [-1, 1] scaling Inception's ImageNet
  // weights expect are applied on the fly.
  const ptrain::Compose prepare{ptrain::Resize(size), ptrain::CenterCrop(size)};
  const ptrain::Normalize to_unit_range({0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f});
  const std::string cache = cli.str("--cache");
  const double val_fraction = cli.real("--val-fraction");
  examples::TrainVal parts =
      cache.empty() ? examples::split_train_val(std::make_shared<const ptrain::ImageCsv>(csv), val_fraction, seed)
                    : examples::split_train_val(open_cache(cache, csv, prepare, size, world), val_fraction, seed);
  parts = {parts.train.first(cli.integer("--train-limit")), parts.val.first(cli.integer("--val-limit"))};
  ptrain::AnyTransform augment = ptrain::Compose(ptrain::RandomHorizontalFlip(), to_unit_range);
  ptrain::AnyTransform plain = to_unit_range;
  if (cache.empty()) {
    augment = ptrain::Compose(prepare, ptrain::RandomHorizontalFlip(), to_unit_range);
    plain = ptrain::Compose(prepare, to_unit_range);
  }
  ptrain::DataLoader train_loader(parts.train,
                                  ptrain::DistributedSampler(parts.train.size(), shard.count, shard.index, true, seed),
                                  {.batch_size = batch / shard.count, .seed = seed}, augment);
  ptrain::DataLoader val_loader(parts.val, examples::EvalShard(parts.val.size(), shard.count, shard.index),
                                {.batch_size = batch / shard.count}, plain);

  ptrain::manual_seed(seed);
  auto model = make_model<D>(cli, classes, main);
  auto adam =
      std::make_shared<ptrain::Adam<float, D>>(model->parameters(), ptrain::AdamOptions{.lr = cli.real("--lr")});
  ptrain::Trainer<Model, Policies...> trainer(model, adam, examples::trainer_options(cli), policies...);
  std::int64_t trained = 0;
  for (const auto& p : model->parameters()) trained += p.requires_grad() ? p.numel() : 0;
  if (main)
    std::printf(
        "inception_retinopathy: %lld training and %lld validation images at %ldx%ld, %lld of %lld parameters "
        "trained, batch %ld, %d rank(s) x %d thread(s) on %s%s%s\n",
        static_cast<long long>(parts.train.size()), static_cast<long long>(parts.val.size()), size, size,
        static_cast<long long>(trained), static_cast<long long>(model->parameter_count()), batch, world.size(),
        ptrain::num_threads(), D::name, world.size() > 1 ? ", gradients as " : "",
        world.size() > 1 ? cli.str("--compression").c_str() : "");
  examples::fit_with_checkpoints(cli, trainer, train_loader, [&] {
    const int epochs = static_cast<int>(cli.integer("--epochs"));
    return trainer.fit(train_loader, parts.val.size() > 0 ? &val_loader : nullptr, epochs);
  });

  if (parts.val.size() == 0) return std::nan("");
  ptrain::ConfusionMatrix confusion(classes);
  model->eval();
  ptrain::NoGradGuard no_grad;
  for (const auto& b : val_loader)
    confusion.update(model->forward(ptrain::Var<float, D>(ptrain::on_device<D>(b.inputs))), b.targets);
  const ptrain::ConfusionMatrix all = confusion.reduced(world);
  if (main) print_confusion(all);
  return 100 * all.accuracy();
}

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("inception_retinopathy",
                    "Transfer learning for diabetic-retinopathy grades: Inception v3 with a frozen pretrained "
                    "backbone and a new head, on a labels CSV and its images; data-parallel under mpiexec or srun.");
  cli.option("--labels", "trainLabels.csv", "CSV with a header and the columns image,level")
      .option("--images", "train", "directory of the images the CSV names")
      .option("--extension", ".jpeg", "appended to the CSV's image names")
      .option("--pretrained", "",
              "Inception v3 safetensors (torchvision's names) for the backbone; empty: train the whole network "
              "from scratch")
      .integer_option("--classes", 5, "levels (the new head's outputs)")
      .integer_option("--image-size", 299,
                      "images are resized and centre-cropped to this (Inception v3 shrinks smaller ones to nothing "
                      "before Mixed_7a; it was trained at 299)",
                      inception_min_size)
      .option("--cache", "", "tensor cache of the resized images: written if missing, read otherwise")
      .real_option("--val-fraction", "0.2", "part of the labelled images held out for validation", 0, 1)
      .integer_option("--train-limit", 0, "train on the first N images of the training part (0: all)", 0, LONG_MAX)
      .integer_option("--val-limit", 0, "validate on the first N images of the validation part (0: all)", 0, LONG_MAX)
      .integer_option("--epochs", 5, "training epochs")
      .integer_option("--batch", 32, "global batch size (split over the ranks)")
      .real_option("--lr", "0.0001", "Adam learning rate of the head")
      .integer_option("--seed", 0, "seed for the head, the split, shuffling and flips", 0, LONG_MAX)
      .output_option("--csv", "", "per-epoch CSV log written by rank 0 (empty: none)");
  return examples::run_example(cli, examples::accuracy_percent("validation accuracy"), argc, argv,
                               [&]<class D>(D, ptrain::MpiComm& world, examples::DataShard shard, auto... policies) {
                                 return train<D>(cli, world, shard, policies...);
                               });
}
