// Grad-CAM of a trained network on one image, as the tripnet study drew its class activation maps
// per head (train/grad_cam.hpp): the model's weights from safetensors (torchvision's names), the
// image (PNG or JPEG) resized to --size and normalised with ImageNet's statistics, and for each
// head the map of its --class at --layer, drawn in jet over the resized image and written as a PNG:
// --out itself for one head, cam.png -> cam_head0.png, cam_head1.png, ... for several. A
// multi-head network's output is its heads' scores side by side (tasks/multi_head.hpp): --heads
// gives their widths. Every map is computed before any file is written, and each file is written
// atomically, so a failed run leaves no picture.
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <ptrain/data/geometric_transforms.hpp>
#include <ptrain/data/transforms.hpp>
#include <ptrain/io/heatmap_overlay.hpp>
#include <ptrain/io/image.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/models/squeezenet.hpp>
#include <ptrain/nn/state_dict.hpp>
#include <ptrain/train/grad_cam.hpp>

#include "common/cli.hpp"
#include "common/triplet_net.hpp"

namespace {

struct Network {
  std::shared_ptr<ptrain::Module<float>> model;
  std::string last_conv_stage;  // the default --layer: the last block before the pooling
};

// The networks --model names, with `classes` outputs (all the heads' together); a triplet_* network
// (examples/triplet_transfer's) takes its three heads' widths.
Network make_network(const std::string& name, std::int64_t classes, const std::vector<std::int64_t>& widths) {
  if (name == "resnet18") return {ptrain::resnet18<float>({.num_classes = classes}), "layer4"};
  if (name == "resnet34") return {ptrain::resnet34<float>({.num_classes = classes}), "layer4"};
  if (name == "resnet50") return {ptrain::resnet50<float>({.num_classes = classes}), "layer4"};
  if (name == "squeezenet1_0") return {ptrain::squeezenet1_0<float>({.num_classes = classes}), "features.12"};
  if (name == "squeezenet1_1") return {ptrain::squeezenet1_1<float>({.num_classes = classes}), "features.12"};
  if (name.starts_with("triplet_")) {
    ptrain::check(widths.size() == 3, "--model ", name, ": give --heads with the widths of its three heads "
                  "(instrument, verb, target)");
    const std::string trunk = name.substr(8);
    return {examples::make_triplet_net<float, ptrain::Cpu>(trunk, {widths[0], widths[1], widths[2]}),
            trunk.starts_with("squeezenet") ? "features.12" : "layer4"};
  }
  ptrain::fail("--model '", name, "': no such network");
}
const std::vector<std::string> network_names{"resnet18",         "resnet34",         "resnet50",
                                             "squeezenet1_0",    "squeezenet1_1",    "triplet_resnet18",
                                             "triplet_resnet50", "triplet_squeezenet1_1"};

// "6,10,15" as numbers of at least `min`.
std::vector<std::int64_t> number_list(const std::string& flag, const std::string& text, std::int64_t min) {
  std::vector<std::int64_t> out;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    std::size_t end = 0;
    long long value = 0;
    try {
      value = std::stoll(item, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    ptrain::check(!item.empty() && end == item.size() && value >= min, flag, " '", text,
                  "': expected whole numbers of at least ", min, " separated by commas");
    out.push_back(value);
  }
  ptrain::check(!out.empty() && text.back() != ',', flag, " '", text, "': expected whole numbers separated by commas");
  return out;
}

// cam.png for one head; cam_head0.png, cam_head1.png, ... for several.
std::filesystem::path head_output(const std::filesystem::path& out, std::size_t head, std::size_t heads) {
  if (heads == 1) return out;
  return out.parent_path() / (out.stem().string() + "_head" + std::to_string(head) + out.extension().string());
}

int run(const examples::Cli& cli) {
  const auto start = std::chrono::steady_clock::now();
  ptrain::check(!cli.str("--weights").empty(), "--weights: give the model's safetensors file");
  ptrain::check(!cli.str("--image").empty(), "--image: give a PNG or JPEG image");
  ptrain::check(!cli.str("--out").empty(), "--out: give the PNG to write");
  const auto classes = number_list("--class", cli.str("--class"), 0);
  const auto widths =
      cli.str("--heads").empty() ? std::vector<std::int64_t>{} : number_list("--heads", cli.str("--heads"), 1);
  ptrain::check(widths.empty() || widths.size() == classes.size(), "--class '", cli.str("--class"), "' names ",
                classes.size(), " classes for ", widths.size(), " heads (--heads '", cli.str("--heads"),
                "'); expected one class per head");
  ptrain::check(!widths.empty() || classes.size() == 1, "--class '", cli.str("--class"),
                "': several classes need --heads, the width of each head");
  std::int64_t outputs = 0;
  for (const auto w : widths) outputs += w;

  Network network =
      make_network(cli.str("--model"), widths.empty() ? cli.integer("--num-classes") : outputs, widths);
  ptrain::load_state_dict(*network.model, cli.str("--weights"));
  network.model->eval();
  const std::string layer = cli.str("--layer").empty() ? network.last_conv_stage : cli.str("--layer");

  const long size = cli.integer("--size");
  const ptrain::Tensor<float> rgb =
      ptrain::resize_bilinear(ptrain::io::read_image_tensor(cli.str("--image")), size, size);
  ptrain::Tensor<float> input = rgb.clone();
  ptrain::Rng unused;
  ptrain::Normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f})(input, unused);
  const ptrain::Tensor<float> images = input.reshape(ptrain::Shape{1, 3, size, size});

  const std::vector<ptrain::Tensor<float>> maps =
      widths.empty() ? std::vector{ptrain::grad_cam(*network.model, images, layer, classes[0])}
                     : ptrain::grad_cam_per_head(*network.model, images, layer, widths, classes);
  for (std::size_t h = 0; h < maps.size(); ++h) {
    const std::filesystem::path path = head_output(cli.str("--out"), h, maps.size());
    const ptrain::Tensor<float> map = maps[h].reshape(ptrain::Shape{size, size});
    ptrain::io::write_png(path, ptrain::io::to_image(ptrain::io::heatmap_overlay(rgb, map)));
    std::printf("wrote %s: Grad-CAM of %s, class %lld%s\n", path.c_str(), layer.c_str(),
                static_cast<long long>(classes[h]), maps.size() > 1 ? (", head " + std::to_string(h)).c_str() : "");
  }
  std::printf("total run time %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("grad_cam",
                    "Draws the Grad-CAM class activation map of a network's layer for a class, one PNG per head, "
                    "over the input image.");
  cli.choice_option("--model", "resnet18", network_names, "the network the weights are for")
      .option("--weights", "", "the model's weights (safetensors, torchvision's names)")
      .option("--image", "", "the input image (PNG or JPEG)")
      .option("--layer", "",
              "module path of the layer, as in the state dict (layer4.1, features.12); empty: the last "
              "convolutional stage (layer4, features.12)")
      .option("--class", "0", "the class, or one class per head separated by commas (2,3,4)")
      .option("--heads", "", "widths of the heads the output is split into (6,10,15); empty: one head")
      .integer_option("--num-classes", 1000, "outputs of a one-head network")
      .integer_option("--size", 224, "the image is resized to this height and width")
      .option("--out", "cam.png", "the PNG written (cam_head0.png, cam_head1.png, ... for several heads)");
  int exit_code = 0;
  if (!cli.parse(argc, argv, exit_code)) return exit_code;
  try {
    return run(cli);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grad_cam: %s\n", e.what());
    return 1;
  }
}
