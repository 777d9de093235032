// BatchNorm2d::forward_relu and Sequential's fusion of a BatchNorm2d with the ReLU after it: the
// fused op where nothing observes the batch norm's own output, the unfused layers where a hook does.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/sequential.hpp>

#include "../common/device_mlp.hpp"

using namespace ptrain;
using test::relative_difference;

BOOST_AUTO_TEST_SUITE(batch_norm_test)

namespace {

Tensor<float> float_tensor(const Shape& shape, std::uint64_t seed, double lo = -1, double hi = 1) {
  return tensor_cast<float>(random_tensor(shape, seed, lo, hi));
}

double smallest(const Var<float>& v) {
  double m = v.value()[0];
  for (std::int64_t i = 0; i < v.numel(); ++i) m = std::min(m, static_cast<double>(v.value()[i]));
  return m;
}

}  // namespace

// forward_relu is the fused op with the module's statistics and batch count; with a forward hook
// it runs unfused, so the hook sees the batch norm's own output.
BOOST_AUTO_TEST_CASE(forward_relu_fuses_unless_hooked) {
  const Tensor<float> x = float_tensor({4, 3, 5, 5}, 60, -2, 3), r = float_tensor({4, 3, 5, 5}, 61);
  BatchNorm2d<float> fused(3), plain(3);
  const Var<float> y = fused.forward_relu(Var<float>(x), Var<float>(r));
  const Var<float> want = relu(add(plain.forward(Var<float>(x)), Var<float>(r)));
  BOOST_TEST(std::string(y.node()->op) == "batch_norm_add_relu");
  BOOST_TEST(relative_difference(y.value(), want.value()) <= 1e-6);
  BOOST_TEST(relative_difference(fused.running_mean, plain.running_mean) <= 1e-6);
  BOOST_TEST(relative_difference(fused.running_var, plain.running_var) <= 1e-6);
  BOOST_TEST(fused.num_batches_tracked[0] == 1.0f);

  double seen = 0;
  fused.set_forward_hook([&](const Var<float>& out) {
    seen = smallest(out);
    return out;
  });
  const Var<float> hooked = fused.forward_relu(Var<float>(x));
  BOOST_TEST(std::string(hooked.node()->op) == "relu");
  BOOST_TEST(seen < 0);  // the batch norm's output, before relu
  BOOST_TEST(fused.num_batches_tracked[0] == 2.0f);
}

// In a bfloat16 model the layer's float weight and bias go into the fused op as they are: one op,
// the unfused layers' output and float gradients within bfloat16's rounding.
BOOST_AUTO_TEST_CASE(a_bfloat16_layer_fuses_with_its_float_weight) {
  using ptrain::bfloat16;
  const Tensor<float> x = float_tensor({4, 3, 5, 5}, 62, -2, 3), r = float_tensor({4, 3, 5, 5}, 63);
  const Tensor<float> gy = float_tensor({4, 3, 5, 5}, 64);
  BatchNorm2d<bfloat16> fused(3), plain(3);
  const Var<bfloat16> xb(tensor_cast<bfloat16>(x)), rb(tensor_cast<bfloat16>(r));
  const Var<bfloat16> y = fused.forward_relu(xb, rb);
  const Var<bfloat16> want = relu(add(plain.forward(xb), rb));
  BOOST_TEST(std::string(y.node()->op) == "batch_norm_add_relu");
  BOOST_TEST(relative_difference(tensor_cast<float>(y.value()), tensor_cast<float>(want.value())) <= 1e-2);
  backward(y, tensor_cast<bfloat16>(gy));
  backward(want, tensor_cast<bfloat16>(gy));
  BOOST_TEST(relative_difference(fused.weight.grad(), plain.weight.grad()) <= 2e-2);
  BOOST_TEST(relative_difference(fused.bias.grad(), plain.bias.grad()) <= 2e-2);
  BOOST_TEST(relative_difference(fused.running_var, plain.running_var) <= 1e-6);
}

// A Sequential runs BatchNorm2d + ReLU as batch_norm_relu, with the unfused layers' output,
// gradients and running statistics; a hook on either layer keeps them apart.
BOOST_AUTO_TEST_CASE(sequential_fuses_batch_norm_and_relu_unless_hooked) {
  const Tensor<float> x = float_tensor({4, 3, 5, 5}, 70, -2, 3), gy = float_tensor({4, 3, 5, 5}, 71);
  auto bn = make<BatchNorm2d<float>>(3);
  auto after = make<ReLU<float>>();
  Sequential<float> net{bn, after};
  BatchNorm2d<float> plain(3);
  const Var<float> y = net(Var<float>(x));
  const Var<float> want = relu(plain.forward(Var<float>(x)));
  BOOST_TEST(std::string(y.node()->op) == "batch_norm_relu");
  BOOST_TEST(relative_difference(y.value(), want.value()) <= 1e-6);
  backward(y, gy.clone());
  backward(want, gy.clone());
  BOOST_TEST(relative_difference(bn->weight.grad(), plain.weight.grad()) <= 1e-6);
  BOOST_TEST(relative_difference(bn->bias.grad(), plain.bias.grad()) <= 1e-6);
  BOOST_TEST(relative_difference(bn->running_var, plain.running_var) <= 1e-6);

  double seen = 1;
  after.get()->set_forward_hook([&](const Var<float>& out) {
    seen = smallest(out);
    return out;
  });
  BOOST_TEST(std::string(net(Var<float>(x)).node()->op) == "relu");
  BOOST_TEST(seen == 0);  // the ReLU's own output
  after->set_forward_hook({});
  bn->set_forward_hook([&](const Var<float>& out) {
    seen = smallest(out);
    return out;
  });
  BOOST_TEST(std::string(net(Var<float>(x)).node()->op) == "relu");
  BOOST_TEST(seen < 0);  // the batch norm's output
}

BOOST_AUTO_TEST_SUITE_END()
