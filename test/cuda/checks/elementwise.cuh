#pragma once
// Device checks: the elementwise kernels, copies, fill, clone and slices.
#include "checks/common.cuh"

namespace ptrain::device_checks {

template <class T>
void check_elementwise(const char* type, double tol) {
  // Odd size, several grid-stride rounds: 4096 blocks x 256 threads cover 1M elements.
  const Shape shape{3, 700001};
  const Tensor<T> x = signed_values<T>(shape, 1);
  const Tensor<T> g = signed_values<T>(shape, 2);
  const auto xd = x.template to<Cuda>();
  const auto gd = g.template to<Cuda>();
  const std::string t = std::string(" (") + type + ")";

  expect(first_mismatch(xd.to_vector(), x, 0) < 0, "host -> device -> host round trip" + t);
  const auto y = kernels::map(x, kernels::Relu{});
  const auto yd = kernels::map(xd, kernels::Relu{});
  expect(first_mismatch(yd.to_vector(), y, 0) < 0, "relu via kernels::map matches the CPU" + t);
  expect(first_mismatch(kernels::map2(yd, gd, kernels::ReluBackward{}).to_vector(),
                        kernels::map2(y, g, kernels::ReluBackward{}), 0) < 0,
         "relu backward via kernels::map2 matches the CPU" + t);
  expect(first_mismatch(kernels::map(xd, kernels::Sigmoid{}).to_vector(), kernels::map(x, kernels::Sigmoid{}), tol) < 0,
         "sigmoid via kernels::map matches the CPU within " + std::to_string(tol) + t);
  expect(first_mismatch(kernels::map2(xd, gd, kernels::Axpy<T>{T(0.5)}).to_vector(),
                        kernels::map2(x, g, kernels::Axpy<T>{T(0.5)}), tol) < 0,
         "axpy via kernels::map2 matches the CPU" + t);

  auto filled = Tensor<T, Cuda>::full(shape, T(3));
  expect(first_mismatch(filled.to_vector(), Tensor<T>::full(shape, T(3)), 0) < 0, "fill" + t);
  auto copy = xd.clone();
  expect(!copy.shares_storage_with(xd) && first_mismatch(copy.to_vector(), x, 0) < 0,
         "clone copies device to device" + t);
  const auto row = xd.slice(1, 2).template to<Cpu>();
  expect(first_mismatch(row.to_vector(), x.slice(1, 2), 0) < 0, "slice view offsets the device pointer" + t);
}

inline void check_elementwise() {
  check_elementwise<float>("float", 1e-6);
  check_elementwise<double>("double", 1e-14);
}

}  // namespace ptrain::device_checks
