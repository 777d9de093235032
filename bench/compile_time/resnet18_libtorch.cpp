// resnet18_ptrain.cpp's program against libtorch's C++ frontend, for bench/compile_time.sh:
// ResNet-18 (BasicBlock, CIFAR stem: 3x3 stride-1 first conv, no max-pool) written with torch::nn,
// torch::optim::SGD with momentum, one training loop over random CIFAR-shaped data, the weights
// saved with torch::save. The bench only compiles it (-c); it also links and runs against pip's
// torch (bench/compile_time.sh links it when it can).
// Usage: resnet18_libtorch [IMAGES [EPOCHS [OUT.pt]]] (default 64 images, 1 epoch, resnet18_libtorch.pt).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <torch/torch.h>

namespace {

struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(std::int64_t in, std::int64_t planes, std::int64_t stride)
      : conv1(torch::nn::Conv2dOptions(in, planes, 3).stride(stride).padding(1).bias(false)),
        bn1(planes),
        conv2(torch::nn::Conv2dOptions(planes, planes, 3).stride(1).padding(1).bias(false)),
        bn2(planes) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    if (stride != 1 || in != planes) {
      downsample = torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, planes, 1).stride(stride).bias(false)),
                                         torch::nn::BatchNorm2d(planes));
      register_module("downsample", downsample);
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto out = torch::relu(bn1(conv1(x)));
    out = bn2(conv2(out));
    return torch::relu(out + (downsample.is_empty() ? x : downsample->forward(x)));
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

struct ResNet18Impl : torch::nn::Module {
  explicit ResNet18Impl(std::int64_t num_classes)
      : conv1(torch::nn::Conv2dOptions(3, 64, 3).stride(1).padding(1).bias(false)), bn1(64), fc(512, num_classes) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    std::int64_t in = 64;
    const std::int64_t planes[] = {64, 128, 256, 512};
    for (int stage = 0; stage < 4; ++stage) {
      torch::nn::Sequential layer;
      for (int b = 0; b < 2; ++b) {
        const std::int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        layer->push_back(BasicBlock(in, planes[stage], stride));
        in = planes[stage];
      }
      layers[stage] = register_module("layer" + std::to_string(stage + 1), layer);
    }
    register_module("fc", fc);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(bn1(conv1(x)));
    for (auto& layer : layers) x = layer->forward(x);
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc(x);
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Sequential layers[4] = {nullptr, nullptr, nullptr, nullptr};
  torch::nn::Linear fc;
};
TORCH_MODULE(ResNet18);

// Images and labels in memory (libtorch's TensorDataset holds one tensor, no targets).
struct RandomCifar : torch::data::datasets::Dataset<RandomCifar> {
  RandomCifar(torch::Tensor images, torch::Tensor labels) : images(std::move(images)), labels(std::move(labels)) {}
  torch::data::Example<> get(std::size_t i) override {
    return {images[static_cast<std::int64_t>(i)], labels[static_cast<std::int64_t>(i)]};
  }
  std::optional<std::size_t> size() const override { return static_cast<std::size_t>(images.size(0)); }
  torch::Tensor images, labels;
};

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t images = argc > 1 ? std::atol(argv[1]) : 64;
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 1;
  const std::string out = argc > 3 ? argv[3] : "resnet18_libtorch.pt";

  torch::manual_seed(0);
  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      RandomCifar(torch::randn({images, 3, 32, 32}), torch::randint(10, {images}, torch::kLong))
          .map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(32));

  ResNet18 model(10);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(5e-4));
  model->train();
  double loss_sum = 0;
  std::int64_t seen = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    loss_sum = 0;
    seen = 0;
    for (auto& batch : *loader) {
      sgd.zero_grad();
      const auto loss = torch::nn::functional::cross_entropy(model->forward(batch.data), batch.target);
      loss.backward();
      sgd.step();
      loss_sum += loss.item<double>() * batch.data.size(0);
      seen += batch.data.size(0);
    }
  }

  torch::save(model, out);
  std::printf("resnet18_libtorch: %lld images, %d epoch(s), final loss %.4f, weights in %s\n",
              static_cast<long long>(images), epochs, seen ? loss_sum / seen : 0.0, out.c_str());
  return 0;
}
