// VGG-F (VGG-16 whose classifier narrows to a few classes) on an ImageFolder tree, as the
// distributed VGG-F project trained it on COIL-100's objects: root/TrainData/<class>/*.png and
// root/ValidationData/<class>/*.png, its flags -rd -ep -lr -mb, Adam, ImageNet normalisation, and
// -mb images per process. One process, or data-parallel under mpiexec (see common/strategy.hpp).
//
// vggf_coil100_cuda is this file compiled by nvcc: with --device cuda (its default) each rank
// trains on its GPU of the node (Adam on the device), gradients averaged by NCCL.
#include <cmath>
#include <cstdio>

#include <ptrain/mpi.hpp>

#include "common/cli.hpp"
#include "common/image_folders.hpp"
#include "common/init_weights.hpp"
#include "common/run.hpp"

namespace {

using examples::SplitFolders;

// Returns the final validation accuracy in percent.
template <class D, class... Policies>
double train(const examples::Cli& cli, ptrain::MpiComm& world, examples::DataShard shard, Policies... policies) {
  using Net = ptrain::Vgg<float, D>;
  const SplitFolders data = examples::open_split_folders("-rd", cli.str("-rd"), "TrainData", "ValidationData");
  const auto seed = static_cast<std::uint64_t>(cli.integer("--seed"));
  ptrain::manual_seed(seed);
  auto model = ptrain::vgg_f<float, D>({.num_classes = data.train.num_classes()});
  if (const std::string init = cli.str("--init"); !init.empty()) {
    // VGG-16's features and its first two classifier layers; the funnel (classifier.6, .9, .12) is VGG-F's own.
    const auto loaded = examples::load_init_weights(*model, init, {"classifier.6.", "classifier.9.", "classifier.12."});
    if (world.rank() == 0) examples::print_init_weights(loaded, "vggf_coil100");
  }
  const long size = cli.integer("--image-size"), mini_batch = cli.integer("-mb");
  const auto workers = static_cast<int>(cli.integer("--workers"));
  const ptrain::Normalize normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});
  const ptrain::Resize resize(size, size);
  ptrain::DataLoader train_loader(
      data.train, ptrain::DistributedSampler(data.train.size(), shard.count, shard.index, true, seed),
      {.batch_size = mini_batch, .seed = seed, .num_workers = workers},
      ptrain::Compose(resize, ptrain::RandomHorizontalFlip(), normalize));
  ptrain::DataLoader val_loader(data.validation,
                                ptrain::DistributedSampler(data.validation.size(), shard.count, shard.index, false),
                                {.batch_size = mini_batch, .num_workers = workers}, ptrain::Compose(resize, normalize));

  auto adam = std::make_shared<ptrain::Adam<float, typename Net::device_type>>(
      model->parameters(), ptrain::AdamOptions{.lr = cli.real("-lr")});
  ptrain::Trainer<Net, Policies...> trainer(model, adam, examples::trainer_options(cli), policies...);
  if (trainer.is_main()) {
    std::printf("[Info] number of classes: %lld\n[Info] class labels:", static_cast<long long>(data.train.num_classes()));
    for (const auto& name : data.train.class_names()) std::printf(" %s", name.c_str());
    std::printf("\nvggf_coil100: %lld parameters, %lld training and %lld validation images at %ldx%ld, %ld per rank "
                "per step, %d rank(s) x %d thread(s) on %s%s%s\n",
                static_cast<long long>(model->parameter_count()), static_cast<long long>(data.train.size()),
                static_cast<long long>(data.validation.size()), size, size, mini_batch, world.size(),
                ptrain::num_threads(), Net::device_type::name, shard.count > 1 ? ", gradients on the wire as " : "",
                shard.count > 1 ? cli.str("--compression").c_str() : "");
  }
  const auto results = examples::fit_with_checkpoints(
      cli, trainer, train_loader, [&] { return trainer.fit(train_loader, &val_loader, static_cast<int>(cli.integer("-ep"))); });
  return results.empty() ? std::nan("") : 100 * results.back().val.at("accuracy");
}

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("vggf_coil100",
                    "Trains VGG-F (VGG-16 with a funnel classifier) on root/TrainData and root/ValidationData, "
                    "one folder of .png images per class (COIL-100's objects); data-parallel under mpiexec, or "
                    "started by hand with -iu/-rn/-ws.");
  cli.option("-rd", "coil-100", "root directory holding TrainData/ and ValidationData/")
      .integer_option("-ep", 10, "number of epochs")
      .real_option("-lr", "0.0001", "Adam learning rate")
      .integer_option("-mb", 16, "mini-batch size of each process (the global batch is -mb x ranks)")
      .integer_option("--image-size", 128, "images are resized to this height and width (COIL-100's are 128)")
      .integer_option("--workers", 2, "threads decoding images for each loader (0: in the training thread)", 0)
      .integer_option("--seed", 0, "seed for initialisation, shuffling, augmentation and dropout", 0, LONG_MAX)
      .option("--init", "",
              "VGG-16 weights in torchvision's names to start from (safetensors; tools/torch_to_safetensors.py "
              "converts a .pth); the funnel layers classifier.6/.9/.12 start fresh (empty: all fresh)")
      .output_option("--csv", "", "per-epoch CSV log written by rank 0 (empty: none)");
  // The VGG-F project's launch flags: distributedVggf.py -iu tcp://10.128.0.8 -rn <rank> -ws <world size>
  cli.alias("-iu", "--init-url").alias("-rn", "--rank").alias("-ws", "--world-size");
  return examples::run_example(cli, examples::accuracy_percent("validation accuracy"), argc, argv,
                               [&]<class D>(D, ptrain::MpiComm& world, examples::DataShard shard, auto... policies) {
                                 return train<D>(cli, world, shard, policies...);
                               });
}
