// examples/grad_cam end to end: on ResNet-18 weights and an image this test writes, the example's
// PNGs (one head, and two heads) decode to the image's size and to the overlay of the map this
// process computes with the library, which is the image tinted where the map is high; a missing
// layer, a class out of range and weights of another shape end it with a message, a non-zero exit
// and no PNG.
#include <boost/test/unit_test.hpp>

#ifdef PTRAIN_HAS_GRAD_CAM_EXAMPLE

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ptrain/data/geometric_transforms.hpp>
#include <ptrain/data/transforms.hpp>
#include <ptrain/io/heatmap_overlay.hpp>
#include <ptrain/io/image.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/nn/state_dict.hpp>
#include <ptrain/train/grad_cam.hpp>

#include "../../examples/common/triplet_net.hpp"
#include "../common/files.hpp"

namespace ptrain::test {
const char* grad_cam_example();  // its path: grad_cam_example_path.cpp
}

using namespace ptrain;
using test::contains;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(grad_cam_example_test)

namespace {

constexpr long size = 64;  // layer3 of ResNet-18 is 4x4 there

const fs::path& dir() { return test::temp_dir("grad_cam_example"); }

// ResNet-18 with 7 outputs (heads of 3 and 4) in eval mode, its weights saved once; and a 40x30
// image of colour ramps.
std::shared_ptr<ResNet<float, BasicBlock>> network() {
  static const auto model = [] {
    manual_seed(18);
    auto m = resnet18<float>({.num_classes = 7});
    save_state_dict(*m, dir() / "resnet18.safetensors");
    m->eval();
    io::Image image(30, 40, 3);
    for (std::int64_t y = 0; y < 30; ++y)
      for (std::int64_t x = 0; x < 40; ++x) {
        image.at(y, x, 0) = static_cast<std::uint8_t>(6 * x);
        image.at(y, x, 1) = static_cast<std::uint8_t>(8 * y);
        image.at(y, x, 2) = static_cast<std::uint8_t>(255 - 3 * (x + y));
      }
    io::write_png(dir() / "image.png", image);
    return m;
  }();
  return model;
}

// The example's input: the image resized to size x size, in [0, 1] and normalised.
Tensor<float> resized_image() { return resize_bilinear(io::read_image_tensor(dir() / "image.png"), size, size); }
Tensor<float> model_input() {
  Tensor<float> x = resized_image().clone();
  Rng unused;
  Normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f})(x, unused);
  return x.reshape(Shape{1, 3, size, size});
}

struct Run {
  int exit_code;
  std::string output;
};
Run run_example(const std::string& args, const fs::path& weights = dir() / "resnet18.safetensors") {
  network();
  const fs::path log = dir() / "log.txt";
  const std::string command = std::string(ptrain::test::grad_cam_example()) + " --weights " + weights.string() + " --image " + (dir() / "image.png").string() +
                              " --size " + std::to_string(size) + " " + args + " > " + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, std::string(std::istreambuf_iterator<char>(in), {})};
}

// The PNG the example wrote is the overlay of the library's map, and where the map is high it is
// not the plain image (jet's red end is far from every colour of this image).
void expect_overlay(const fs::path& png, const Tensor<float>& map) {
  const io::Image written = io::read_image(png);
  BOOST_TEST(written.width == size);
  BOOST_TEST(written.height == size);
  BOOST_REQUIRE(written.channels == 3);
  const Tensor<float> rgb = resized_image();
  const io::Image expected = io::to_image(io::heatmap_overlay(rgb, map.reshape(Shape{size, size})));
  // Another process's map may land on the other side of one of the 256 colour levels here and there.
  int largest = 0;
  for (std::size_t i = 0; i < expected.pixels.size(); ++i)
    largest = std::max(largest, std::abs(int{written.pixels[i]} - int{expected.pixels[i]}));
  BOOST_TEST(largest <= 3, png.filename() << ": a pixel differs from the library's overlay by " << largest);
  const io::Image plain = io::to_image(rgb);
  int high = 0, tinted = 0;
  for (std::int64_t y = 0; y < size; ++y)
    for (std::int64_t x = 0; x < size; ++x) {
      if (map[y * size + x] < 0.9f) continue;
      ++high;
      int change = 0;
      for (std::int64_t c = 0; c < 3; ++c) change = std::max(change, std::abs(written.at(y, x, c) - plain.at(y, x, c)));
      tinted += change >= 16;
    }
  BOOST_TEST(high > 0, png.filename() << ": the map is nowhere high");
  BOOST_TEST(tinted == high, png.filename() << ": " << tinted << " of the " << high
                                            << " pixels where the map is high differ from the plain image");
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_head_writes_the_overlay_of_its_map) {
  const Run run = run_example("--num-classes 7 --layer layer3 --class 5 --out " + (dir() / "cam.png").string());
  BOOST_REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  BOOST_TEST(contains(run.output, "total run time"), run.output);
  expect_overlay(dir() / "cam.png", grad_cam(*network(), model_input(), "layer3", 5));
}

BOOST_AUTO_TEST_CASE(two_heads_write_one_overlay_each) {
  // Columns 1 and 3: this random network's map is zero everywhere (a negative weighted sum) for
  // some classes, whose overlay is not tinted anywhere.
  const Run run = run_example("--heads 3,4 --layer layer3 --class 1,0 --out " + (dir() / "heads.png").string());
  BOOST_REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  BOOST_TEST(!fs::exists(dir() / "heads.png"));
  const auto maps = grad_cam_per_head(*network(), model_input(), "layer3", {3, 4}, {1, 0});
  expect_overlay(dir() / "heads_head0.png", maps[0]);
  expect_overlay(dir() / "heads_head1.png", maps[1]);
}

// examples/triplet_transfer's network, by name: one map per head, each head's class one whose map
// is not zero everywhere for these random weights.
BOOST_AUTO_TEST_CASE(the_triplet_network_writes_one_overlay_per_head) {
  manual_seed(3);
  auto net = examples::make_triplet_net<float, Cpu>("resnet18", {2, 3, 4});
  const fs::path weights = dir() / "triplet_resnet18.safetensors";
  save_state_dict(*net, weights);
  net->eval();
  const std::vector<std::int64_t> widths{2, 3, 4};
  std::vector<std::int64_t> classes;
  for (std::size_t h = 0; h < widths.size(); ++h) {
    std::int64_t chosen = -1;
    for (std::int64_t c = 0; c < widths[h] && chosen < 0; ++c) {
      std::vector<std::int64_t> probe(widths.size(), 0);
      probe[h] = c;
      const Tensor<float> map = grad_cam_per_head(*net, model_input(), "layer3", widths, probe)[h];
      if (*std::max_element(map.data(), map.data() + map.numel()) > 0.5f) chosen = c;
    }
    BOOST_REQUIRE_MESSAGE(chosen >= 0, "head " << h << ": every class's map is zero for these weights");
    classes.push_back(chosen);
  }
  const std::string class_list = std::to_string(classes[0]) + "," + std::to_string(classes[1]) + "," +
                                 std::to_string(classes[2]);
  const Run run = run_example("--model triplet_resnet18 --heads 2,3,4 --layer layer3 --class " + class_list +
                                  " --out " + (dir() / "triplet.png").string(),
                              weights);
  BOOST_REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  const auto maps = grad_cam_per_head(*net, model_input(), "layer3", widths, classes);
  for (std::size_t h = 0; h < widths.size(); ++h)
    expect_overlay(dir() / ("triplet_head" + std::to_string(h) + ".png"), maps[h]);
}

BOOST_AUTO_TEST_CASE(bad_input_ends_the_run_without_a_picture) {
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--num-classes 7 --layer layer9",
            "the model has no layer 'layer9'; layers (module paths as in the state dict)"},
           {"--num-classes 7 --layer layer3 --class 7", "class 7 is outside the model's 7 output columns"},
           {"--heads 3,4 --layer layer3 --class 2,4", "class 4 of head 1 is out of range: the head has 4 classes"},
           {"--num-classes 10 --layer layer3",
            "shape mismatch: fc.weight: file has [7, 512], model expects [10, 512]"}}) {
    const fs::path out = dir() / "refused.png";
    const Run run = run_example(c.args + " --out " + out.string());
    BOOST_TEST(run.exit_code == 1, c.args << ": exit code " << run.exit_code);
    BOOST_TEST(contains(run.output, c.message), c.args << ": " << run.output);
    BOOST_TEST(!fs::exists(out), c.args);
    BOOST_TEST(!fs::exists(dir() / "refused_head0.png"), c.args);
    BOOST_TEST(test::temporaries_beside(out).empty(), c.args);
  }
}

BOOST_AUTO_TEST_SUITE_END()

#else

BOOST_AUTO_TEST_SUITE(grad_cam_example_test)
BOOST_AUTO_TEST_CASE(the_example_is_built) {
  BOOST_FAIL("examples/grad_cam is not built (it needs MPI and libpng/libjpeg): its end-to-end test cannot run");
}
BOOST_AUTO_TEST_SUITE_END()

#endif
