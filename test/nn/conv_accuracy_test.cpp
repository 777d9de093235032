// Float32 accuracy of a real network's convolutions with the default algorithm choice
// (kernels/cpu/conv_algorithm.hpp): a torchvision ResNet-18 with seeded weights and batch-norm
// statistics (test::fill_seeded), input [2, 3, 64, 64], its logits, input gradient and every
// parameter's gradient against PyTorch's float64 run, each within 4x the error PyTorch's own float32
// run makes on that tensor. The reference is test/nn/data/resnet18_accuracy_reference.safetensors,
// written by make_conv_accuracy_reference.py (see there for what it holds).
// PTRAIN_CONV_ALGO=winograd4 ./test_nn --run_test=conv_accuracy_test --log_level=message shows
// where F(4x4, 3x3) falls outside.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/io/safetensors.hpp>
#include <ptrain/models/resnet.hpp>

#include "../common/torchvision_models.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(conv_accuracy_test)

namespace {

const io::SafetensorsFile& reference() {
  static const io::SafetensorsFile file(test::zoo_data("resnet18_accuracy_reference.safetensors"));
  return file;
}

// The logits, the input's gradient and every parameter's gradient, by the reference's names.
template <class T>
std::map<std::string, Tensor<T>> resnet18_gradients() {
  auto net = resnet18<T>();
  test::fill_seeded(*net);
  net->eval();
  Tensor<T> input(Shape{2, 3, 64, 64});
  const Tensor<float> x = test::deterministic_input(input.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) input[i] = static_cast<T>(x[i]);
  Var<T> in(input, true);
  const Var<T> logits = net->forward(in);
  Tensor<T> seed(logits.value().shape());  // make_conv_accuracy_reference.py's logits_seed
  for (std::int64_t i = 0; i < seed.numel(); ++i)
    seed[i] = static_cast<T>(std::sin(0.13 * static_cast<double>(i)) / static_cast<double>(seed.size(0)));
  backward(logits, seed);
  std::map<std::string, Tensor<T>> out{{"logits", logits.value()}, {"input.grad", in.grad()}};
  for (auto& [name, p] : net->named_parameters()) out.emplace(name + ".grad", p.grad());
  return out;
}

// max |got - reference| over the reference's indices, relative to the tensor's largest |value|.
template <class T>
double relative_error(const std::string& name, const Tensor<T>& got) {
  const Tensor<double> index = reference().read<double>(name + ".index");
  const Tensor<double> want = reference().read<double>(name + ".reference");
  const double largest = reference().read<double>(name + ".largest")[0];
  double worst = 0;
  for (std::int64_t i = 0; i < index.numel(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(got[static_cast<std::int64_t>(index[i])]) - want[i]));
  return worst / largest;
}

}  // namespace

// The same network in double equals PyTorch's: the comparison below measures rounding, not a
// different network.
BOOST_AUTO_TEST_CASE(resnet18_in_double_equals_pytorchs) {
  const auto got = resnet18_gradients<double>();
  BOOST_TEST(got.size() == 64u);
  for (const auto& [name, tensor] : got) {
    const double error = relative_error(name, tensor);
    BOOST_TEST(error <= 1e-10, name << ": relative error " << error << " against PyTorch's float64 run");
  }
}

BOOST_AUTO_TEST_CASE(float_is_within_4x_pytorchs_float32_error) {
  const auto got = resnet18_gradients<float>();
  BOOST_TEST(got.size() == 64u);
  // PyTorch's float32 error on a tensor can be 0 at the sampled indices (a layer whose sums
  // happened to round alike): no tensor is held below 4x the median of PyTorch's errors.
  std::vector<double> torch_errors;
  for (const auto& [name, tensor] : got) torch_errors.push_back(reference().read<double>(name + ".torch_float32_error")[0]);
  std::nth_element(torch_errors.begin(), torch_errors.begin() + torch_errors.size() / 2, torch_errors.end());
  const double median = torch_errors[torch_errors.size() / 2];
  double worst_ratio = 0;
  for (const auto& [name, tensor] : got) {
    const double torch_error = reference().read<double>(name + ".torch_float32_error")[0];
    const double error = relative_error(name, tensor);
    const double ratio = error / std::max(torch_error, median);
    worst_ratio = std::max(worst_ratio, ratio);
    BOOST_TEST_MESSAGE(name << ": float32 error " << error << ", PyTorch's " << torch_error << ", ratio " << ratio);
    BOOST_TEST(error <= 4 * std::max(torch_error, median),
               name << ": float32 error " << error << " relative to the largest value; PyTorch's own float32 run: "
                    << torch_error << " (median over the tensors " << median << ")");
  }
  BOOST_TEST_MESSAGE("worst ratio to PyTorch's float32 error: " << worst_ratio);
}

BOOST_AUTO_TEST_SUITE_END()
