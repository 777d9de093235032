#pragma once
// top1_correct on a device other than Cpu (HostEmulated, Cuda): argmax and the count of matches
// run where the scores are; the host targets go over once, the count comes back as one number.
#include <cstdint>
#include <span>

#include "ptrain/autograd/detail/class_layout.hpp"
#include "ptrain/autograd/ops/accuracy.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/indexed/loss.hpp"

namespace ptrain {

template <class T, kernels::ExecutorDevice D>
std::int64_t top1_correct(const Tensor<T, D>& scores, std::span<const std::int64_t> targets) {
  const auto layout = detail::class_layout(scores.shape(), targets, "top1_correct");
  Tensor<std::int64_t, D> device_targets(Shape{static_cast<std::int64_t>(targets.size())});
  D::copy_from_host(device_targets.data(), targets.data(), targets.size());
  Tensor<std::int64_t, D> count(Shape{1});
  kernels::indexed::top1_correct(kernels::executor_for<D>{}, scores.data(), device_targets.data(), layout,
                                 count.data());
  return count.to_vector()[0];
}
template <class T, kernels::ExecutorDevice D>
std::int64_t top1_correct(const Var<T, D>& scores, std::span<const std::int64_t> targets) {
  return top1_correct(scores.value(), targets);
}

}  // namespace ptrain
