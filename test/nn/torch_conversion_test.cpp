// A torch state dict (.pth) turned into safetensors by tools/torch_to_safetensors.py loads into
// ptrain's ResNet-18 and VGG-16 and computes PyTorch's logits, within 1e-4 of the largest. The
// files are written at test time (test/nn/data/make_torchvision_conversions.py, the ctest fixture
// nn/make_torchvision_conversions) into PTRAIN_TEST_DATA/torchvision_conversions.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <ptrain/io/safetensors.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/models/vgg.hpp>
#include <ptrain/nn/state_dict.hpp>

#include "../common/reference_files.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(torch_conversion_test)

namespace {

std::filesystem::path converted(const std::string& file) {
  const char* data = std::getenv("PTRAIN_TEST_DATA");
  BOOST_REQUIRE_MESSAGE(data, "PTRAIN_TEST_DATA is not set: run through ctest, after nn/make_torchvision_conversions");
  const auto path = std::filesystem::path(data) / "torchvision_conversions" / file;
  BOOST_REQUIRE_MESSAGE(std::filesystem::exists(path),
                        path.string() << " is missing: ctest's fixture nn/make_torchvision_conversions writes it");
  return path;
}

// The converted weights, loaded strictly (every name and shape, batch-norm counters included),
// and the model's logits on the reference input.
void expect_pytorch_logits(Module<float>& net, const std::string& name) {
  const LoadStateDictResult loaded = load_state_dict(net, converted(name + ".safetensors"));
  BOOST_TEST(loaded.all_matched());
  net.eval();
  const io::SafetensorsFile reference(converted(name + "_reference.safetensors"));
  const Var<float> logits = net.forward(Var<float>(reference.read<float>("input")));
  test::expect_close(logits.value(), reference.read<float>("logits"), name + " logits");
}

}  // namespace

BOOST_AUTO_TEST_CASE(resnet18_from_a_torch_state_dict_computes_pytorchs_logits) {
  auto net = resnet18<float>();
  expect_pytorch_logits(*net, "resnet18");
}

BOOST_AUTO_TEST_CASE(vgg16_from_a_torch_state_dict_computes_pytorchs_logits) {
  auto net = vgg16<float>();
  expect_pytorch_logits(*net, "vgg16");
}

BOOST_AUTO_TEST_SUITE_END()
