#pragma once
// Device checks: the rest of the device-generic ops (sigmoid, softmax, log_softmax, scale, concat,
// avg_pool2d, conv_transpose2d, upsample, sum, mean, nll_loss, mse_loss,
// binary_cross_entropy_with_logits, dropout) on
// Var<float, Cuda> against the same ops on Var<float, HostEmulated>: values and input gradients.
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/autograd/ops/conv.hpp>
#include <ptrain/autograd/ops/dropout.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/autograd/ops/pool.hpp>
#include <ptrain/autograd/ops/reduce.hpp>
#include <ptrain/autograd/ops/upsample.hpp>
#include <ptrain/autograd/ops/shape.hpp>
#include <ptrain/kernels/cuda/executor_for.cuh>

#include "../../common/device_mlp.hpp"
#include "checks/common.cuh"

namespace ptrain::device_checks {

namespace autograd_more_detail {
// op's output and then each input's gradient, on the host, for op run on device D with backward
// seeded by fixed weights.
template <class D, class Op>
std::vector<Tensor<float>> run_op(const Op& op, const std::vector<Tensor<float>>& inputs) {
  std::vector<Var<float, D>> vars;
  for (const auto& t : inputs) vars.emplace_back(t.template to<D>(), true);
  const Var<float, D> y = op(vars);
  backward(y, signed_values<float>(y.shape(), 99).template to<D>());
  std::vector<Tensor<float>> out{y.value().template to<Cpu>()};
  for (const auto& v : vars) out.push_back(v.grad().defined() ? v.grad().template to<Cpu>() : Tensor<float>());
  return out;
}

template <class Op>
void expect_same_op(const std::string& what, const Op& op, const std::vector<Tensor<float>>& inputs,
                    double tol = 1e-5) {
  const auto gpu = run_op<Cuda>(op, inputs);
  const auto emulated = run_op<HostEmulated>(op, inputs);
  for (std::size_t i = 0; i < gpu.size(); ++i)
    expect(test::relative_difference(gpu[i], emulated[i]) <= tol,
           what + " on Var<float, Cuda>: " + (i == 0 ? std::string("value") : "gradient of input " +
                                              std::to_string(i - 1)) + " matches HostEmulated");
}

// pos_weight as a constant on the device of the variables.
template <class V>
auto on_device_of(const Tensor<float>& t) {
  return t.to<typename std::decay_t<decltype(std::declval<V>().value())>::device_type>();
}
}  // namespace autograd_more_detail

inline void check_autograd_more() {
  using namespace autograd_more_detail;
  // Odd sizes past a warp and a block.
  const Tensor<float> rows = signed_values<float>(Shape{37, 301}, 60);
  const Tensor<float> images = signed_values<float>(Shape{3, 5, 19, 23}, 61);
  expect_same_op("sigmoid", [](const auto& v) { return sigmoid(v[0]); }, {rows});
  for (int dim : {0, 1}) {
    expect_same_op("softmax dim " + std::to_string(dim), [dim](const auto& v) { return softmax(v[0], dim); }, {rows});
    expect_same_op("log_softmax dim " + std::to_string(dim), [dim](const auto& v) { return log_softmax(v[0], dim); },
                   {rows});
  }
  expect_same_op("log_softmax over channels", [](const auto& v) { return log_softmax(v[0], 1); }, {images});
  expect_same_op("scale", [](const auto& v) { return scale(v[0], 0.75f) + 2.0f * v[0]; }, {rows});
  expect_same_op("concat along channels", [](const auto& v) { return concat({v[0], v[1], v[0]}, 1); },
                 {images, signed_values<float>(Shape{3, 2, 19, 23}, 62)});
  expect_same_op("concat along the batch", [](const auto& v) { return concat({v[0], v[1]}, 0); },
                 {images, signed_values<float>(Shape{1, 5, 19, 23}, 63)});
  expect_same_op("avg_pool2d 3x3 stride 2 pad 1", [](const auto& v) { return avg_pool2d(v[0], 3, 2, 1); }, {images});
  const Pool2dOptions odd{.kernel_h = 3, .kernel_w = 2, .stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 1,
                          .ceil_mode = true, .count_include_pad = false};
  expect_same_op("avg_pool2d ceil mode, padding excluded", [&](const auto& v) { return avg_pool2d(v[0], odd); },
                 {images});
  expect_same_op("conv_transpose2d stride 2 with bias",
                 [](const auto& v) { return conv_transpose2d(v[0], v[1], v[2], ConvTranspose2dOptions::square(2)); },
                 {images, signed_values<float>(Shape{5, 4, 2, 2}, 64), signed_values<float>(Shape{4}, 65)}, 1e-4);
  const ConvTranspose2dOptions grouped{.stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 0, .output_pad_h = 1,
                                       .output_pad_w = 0, .dilation_h = 1, .dilation_w = 2, .groups = 5};
  expect_same_op("conv_transpose2d grouped, dilated, output padding",
                 [&](const auto& v) { return conv_transpose2d(v[0], v[1], {}, grouped); },
                 {images, signed_values<float>(Shape{5, 2, 3, 3}, 66)}, 1e-4);
  for (const auto& [name, options] :
       {std::pair{"upsample nearest x2", UpsampleOptions::by_scale(2)},
        std::pair{"upsample nearest to 31x17", UpsampleOptions::to_size(31, 17)},
        std::pair{"upsample bilinear x1.5", UpsampleOptions::by_scale(1.5, UpsampleMode::bilinear)},
        std::pair{"upsample bilinear aligned to 40x45", UpsampleOptions::to_size(40, 45, UpsampleMode::bilinear, true)}})
    expect_same_op(name, [&](const auto& v) { return upsample(v[0], options); }, {images});
  expect_same_op("sum", [](const auto& v) { return sum(v[0]); }, {images});
  expect_same_op("mean", [](const auto& v) { return mean(v[0]); }, {rows});
  std::vector<std::int64_t> pixel_targets(3 * 19 * 23);
  for (std::size_t i = 0; i < pixel_targets.size(); ++i) pixel_targets[i] = static_cast<std::int64_t>((i * 7) % 5);
  expect_same_op("nll_loss per pixel", [&](const auto& v) { return nll_loss(log_softmax(v[0], 1), pixel_targets); },
                 {images});
  expect_same_op("mse_loss", [](const auto& v) { return mse_loss(v[0], v[1]); },
                 {rows, signed_values<float>(Shape{37, 301}, 67)});
  const Tensor<float> probabilities = signed_values<float>(Shape{37, 301}, 68, 0.0, 1.0);
  expect_same_op("binary_cross_entropy_with_logits",
                 [](const auto& v) { return binary_cross_entropy_with_logits(v[0], v[1]); }, {rows, probabilities});
  const Tensor<float> pos_weight = signed_values<float>(Shape{301}, 69, 0.5, 3.0);
  expect_same_op("binary_cross_entropy_with_logits with pos_weight",
                 [&](const auto& v) {
                   return binary_cross_entropy_with_logits(v[0], v[1],
                                                           on_device_of<std::decay_t<decltype(v[0])>>(pos_weight));
                 },
                 {rows, probabilities});
  expect_same_op("dropout p 0.3 from the same Rng",
                 [](const auto& v) {
                   Rng rng(70);
                   return dropout(v[0], 0.3, true, rng);
                 },
                 {rows}, 0.0);
}

}  // namespace ptrain::device_checks
