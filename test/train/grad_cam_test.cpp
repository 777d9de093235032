// Grad-CAM against PyTorch on fixed weights: a small CNN's state_dict as PyTorch wrote it
// (test/train/data/grad_cam_weights.safetensors) and the maps its autograd hooks give
// (grad_cam_reference.safetensors), both from test/train/data/make_grad_cam_reference.py: layers at
// the top level, a nested Sequential and a layer inside it, one head and two heads; within 1e-4.
// And what grad_cam leaves behind (no gradients, no hook, requires_grad as it was) and the errors of
// a bad request.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ptrain/io/safetensors.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/state_dict.hpp>
#include <ptrain/train/grad_cam.hpp>

#include "../common/files.hpp"
#include "../common/source_dir.hpp"

using namespace ptrain;
using test::contains;
using test::error_of;

BOOST_AUTO_TEST_SUITE(grad_cam_test)

namespace {

std::filesystem::path data(const std::string& file) {
  return test::test_source("train/data") / file;
}

using Layers = std::initializer_list<std::pair<std::string, std::shared_ptr<Module<float>>>>;

// make_grad_cam_reference.py's small_cnn(), loaded with its weights, in eval mode.
std::shared_ptr<Sequential<float>> small_cnn() {
  const Conv2dOptions same{.pad_h = 1, .pad_w = 1};
  auto block = make<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Conv2d<float>>(6, 8, 3, same), make<BatchNorm2d<float>>(8), make<ReLU<float>>()});
  auto model = make<Sequential<float>>(Layers{{"conv1", make<Conv2d<float>>(3, 6, 3, same)},
                                              {"relu1", make<ReLU<float>>()},
                                              {"block", block},
                                              {"pool", make<MaxPool2d<float>>(2)},
                                              {"conv2", make<Conv2d<float>>(8, 10, 3, same)},
                                              {"relu2", make<ReLU<float>>()},
                                              {"avgpool", make<AdaptiveAvgPool2d<float>>(1)},
                                              {"flatten", make<Flatten<float>>(1)},
                                              {"fc", make<Linear<float>>(10, 7)}});
  BOOST_REQUIRE(load_state_dict(*model, data("grad_cam_weights.safetensors")).all_matched());
  model->eval();
  return model;
}

void expect_map(const Tensor<float>& got, const io::SafetensorsFile& reference, const std::string& name) {
  const Tensor<float> want = reference.read<float>(name);
  BOOST_REQUIRE_MESSAGE(got.shape() == want.shape(), name << ": shape " << got.shape() << ", PyTorch " << want.shape());
  double largest = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i)
    largest = std::max(largest, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
  BOOST_TEST(largest <= 1e-4, name << ": largest difference from PyTorch " << largest);
}

}  // namespace

BOOST_AUTO_TEST_CASE(maps_of_one_head_match_pytorch) {
  auto model = small_cnn();
  const io::SafetensorsFile reference(data("grad_cam_reference.safetensors"));
  const Tensor<float> input = reference.read<float>("input");
  // relu2 is upsampled from 8x6, block and block.0 (inside it) are at the input's 16x12.
  const std::vector<std::pair<std::string, int>> requests{{"relu2", 3}, {"block", 5}, {"block.0", 0}};
  for (const auto& [layer, column] : requests)
    expect_map(grad_cam(*model, input, layer, column), reference, "cam." + layer + "." + std::to_string(column));
}

BOOST_AUTO_TEST_CASE(maps_per_head_match_pytorch) {
  auto model = small_cnn();
  const io::SafetensorsFile reference(data("grad_cam_reference.safetensors"));
  // Heads of 3 and 4 classes; class 2 of the first is column 2, class 1 of the second column 4.
  const auto maps = grad_cam_per_head(*model, reference.read<float>("input"), "conv2", {3, 4}, {2, 1});
  BOOST_REQUIRE(maps.size() == 2u);
  expect_map(maps[0], reference, "cam.conv2.2");
  expect_map(maps[1], reference, "cam.conv2.4");
}

BOOST_AUTO_TEST_CASE(the_model_is_left_as_it_was) {
  auto model = small_cnn();
  const Tensor<float> input = io::SafetensorsFile(data("grad_cam_reference.safetensors")).read<float>("input");
  Var<float> frozen = model->named_parameters().front().second;
  frozen.set_requires_grad(false);
  Tensor<float> map;
  {
    NoGradGuard no_grad;  // a caller that records nothing still gets its map
    map = grad_cam(*model, input, "relu2", 3);
  }
  BOOST_TEST(GradMode::enabled());
  BOOST_TEST(*std::max_element(map.data(), map.data() + map.numel()) == 1.0f);
  for (const auto& [name, p] : model->named_parameters()) {
    BOOST_TEST(!p.grad().defined(), name << " got a gradient");
    BOOST_TEST(p.requires_grad() == (p.node() != frozen.node()), name);
  }
  for (const auto& [name, layer] : grad_cam_layers(*model)) BOOST_TEST(!layer->has_forward_hook(), name);
}

BOOST_AUTO_TEST_CASE(a_bad_request_is_refused_with_what_is_expected) {
  auto model = small_cnn();
  const Tensor<float> input = io::SafetensorsFile(data("grad_cam_reference.safetensors")).read<float>("input");
  const std::string unknown = error_of([&] { grad_cam(*model, input, "layer4", 0); });
  BOOST_TEST(contains(unknown, "the model has no layer 'layer4'"), unknown);
  BOOST_TEST(contains(unknown, "block.0, block.1, block.2, pool, conv2, relu2"), unknown);
  BOOST_TEST(contains(error_of([&] { grad_cam(*model, input, "fc", 0); }),
                      "layer 'fc' gives [2, 7]; expected convolutional activations [N, C, H, W]"));
  BOOST_TEST(contains(error_of([&] { grad_cam(*model, input, "conv2", 7); }),
                      "class 7 is outside the model's 7 output columns"));
  BOOST_TEST(contains(error_of([&] { grad_cam_per_head(*model, input, "conv2", {3, 4}, {3, 0}); }),
                      "class 3 of head 0 is out of range: the head has 3 classes"));
  BOOST_TEST(contains(error_of([&] { grad_cam_per_head(*model, input, "conv2", {3, 3}, {0, 0}); }),
                      "the heads' widths add up to 6 but the model gives 7 output columns"));
  BOOST_TEST(contains(error_of([&] { grad_cam_per_head(*model, input, "conv2", {3, 4}, {0}); }),
                      "2 heads and 1 classes; expected one class per head"));
  // A block's own layers run through its members, where no hook reaches.
  Sequential<float> resnet_like(Layers{{"block", make<BasicBlock<float>>(3, 4, 1)},
                                       {"avgpool", make<AdaptiveAvgPool2d<float>>(1)},
                                       {"flatten", make<Flatten<float>>(1)},
                                       {"fc", make<Linear<float>>(4, 2)}});
  const std::string member = error_of([&] { grad_cam(resnet_like, input, "block.conv2", 0); });
  BOOST_TEST(contains(member, "'block.conv2' is run by its parent through a member, not by a Sequential"), member);
  BOOST_TEST(grad_cam(resnet_like, input, "block", 1).shape() == Shape({2, 16, 12}));
}

BOOST_AUTO_TEST_SUITE_END()
