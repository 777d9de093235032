#pragma once
// Elementwise bodies written once: the CPU loops and the CUDA kernels both call these.
#include <cmath>

#include "ptrain/core/host_device.hpp"

namespace ptrain::kernels {

struct Relu {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T x) const { return x > T(0) ? x : T(0); }
};
// Gradient of relu, given the forward output y and the incoming gradient g.
struct ReluBackward {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T y, T g) const { return y > T(0) ? g : T(0); }
};
struct Sigmoid {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T x) const { return T(1) / (T(1) + exp(-x)); }
};
struct Add {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};
// y = alpha * x + y
template <class T>
struct Axpy {
  T alpha;
  PTRAIN_HOST_DEVICE T operator()(T x, T y) const { return alpha * x + y; }
};
struct Scale {
  double factor;
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T x) const { return static_cast<T>(factor * x); }
};

}  // namespace ptrain::kernels
