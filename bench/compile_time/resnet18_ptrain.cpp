// The smallest ptrain user program of the job, compiled by bench/compile_time.sh to measure what a
// user's program costs to compile: ResNet-18 with the CIFAR stem, SGD with momentum, one Trainer,
// fit on random CIFAR-shaped data, the weights saved as safetensors. resnet18_libtorch.cpp is the
// same program against libtorch's C++ frontend.
// Usage: resnet18_ptrain [IMAGES [EPOCHS [OUT.safetensors]]] (default 64 images, 1 epoch,
// resnet18_ptrain.safetensors).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ptrain/ptrain.hpp>

int main(int argc, char** argv) {
  const std::int64_t images = argc > 1 ? std::atol(argv[1]) : 64;
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 1;
  const std::string out = argc > 3 ? argv[3] : "resnet18_ptrain.safetensors";

  ptrain::manual_seed(0);
  ptrain::Rng rng(1);
  std::vector<float> pixels(static_cast<std::size_t>(images * 3 * 32 * 32));
  for (auto& p : pixels) p = static_cast<float>(rng.normal());
  std::vector<std::int64_t> labels(static_cast<std::size_t>(images));
  for (auto& l : labels) l = static_cast<std::int64_t>(rng.below(10));
  const ptrain::TensorDataset data(ptrain::Tensor<float>::from({images, 3, 32, 32}, pixels), labels);
  ptrain::DataLoader loader(data, {.batch_size = 32, .shuffle = true});

  auto model = ptrain::resnet18<float>({.num_classes = 10, .cifar_stem = true});
  auto sgd = std::make_shared<ptrain::Sgd<float>>(
      model->parameters(), ptrain::SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4});
  ptrain::Trainer<ptrain::ResNet<float, ptrain::BasicBlock>> trainer(model, sgd);
  const auto results = trainer.fit(loader, epochs);

  ptrain::save_state_dict(*model, out);
  std::printf("resnet18_ptrain: %lld images, %d epoch(s), final loss %.4f, weights in %s\n",
              static_cast<long long>(images), epochs, results.empty() ? 0.0 : results.back().train_loss, out.c_str());
  return 0;
}
