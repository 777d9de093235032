#pragma once
// Elementwise bodies written once: the CPU loops and the CUDA kernels both call these.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"

namespace ptrain::kernels {

namespace detail {
// x > 0 or NaN for half and bfloat16 from the bits: the positive numbers are the patterns 1 to +inf
// as unsigned integers, the NaNs those above +inf once the sign is dropped. Integer compares that
// vectorise, where Eigen's comparison widens each element to float (3x slower for a bfloat16 ReLU).
template <class T>
PTRAIN_HOST_DEVICE bool positive_or_nan_16bit(T x) {
  constexpr std::uint16_t infinity = std::is_same_v<T, half> ? 0x7c00 : 0x7f80;
  std::uint16_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<std::uint16_t>(bits - 1u) < infinity || static_cast<std::uint16_t>(bits & 0x7fffu) > infinity;
}
// x > 0, or x is NaN: where relu and its gradient pass x (or the gradient) through.
template <class T>
PTRAIN_HOST_DEVICE bool passes_relu(T x) {
  if constexpr (is_reduced_float_v<T>) return positive_or_nan_16bit(x);
  else return !(x <= T(0));
}
}  // namespace detail

// max(x, 0) with NaN kept, as torch.relu: a NaN weight or pixel must not vanish into a finite loss.
struct Relu {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T x) const { return detail::passes_relu(x) ? x : T(0); }
};
// Gradient of relu, given the forward output y and the incoming gradient g (torch's
// threshold_backward: g where y is not <= 0, so a NaN output passes g on).
struct ReluBackward {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T y, T g) const { return detail::passes_relu(y) ? g : T(0); }
};
// a comes before b in torch.argmax and torch.topk's order: NaN above every number (equal to another
// NaN), then the larger value.
template <class T>
PTRAIN_HOST_DEVICE bool ranks_above(T a, T b) {
  return a != a ? b == b : a > b;
}
// 1 / (1 + e^-x): for x -> -inf, e^-x overflows to inf and the result is 0, never NaN.
struct Sigmoid {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T x) const {
    using std::exp;  // float stays float (the unqualified C exp would widen to double)
    return T(1) / (T(1) + exp(-x));
  }
};
// Gradient of sigmoid from its output y: g * y * (1 - y).
struct SigmoidBackward {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T y, T g) const { return g * y * (T(1) - y); }
};
// tanh in the accumulate type (a 16-bit value widened); its gradient from the output y: g (1 - y^2).
struct Tanh {
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T x) const {
    using std::tanh;
    return static_cast<T>(tanh(static_cast<accumulate_t<T>>(x)));
  }
};
struct TanhBackward {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T y, T g) const {
    using A = accumulate_t<T>;
    const A a = static_cast<A>(y);
    return static_cast<T>(static_cast<A>(g) * (A(1) - a * a));
  }
};
// GELU as torch.nn.functional.gelu, computed in the accumulate type: x * Phi(x) with the normal
// CDF through erf (approximate='none'), or 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
// (approximate='tanh').
struct Gelu {
  bool tanh_form;
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T x) const {
    using A = accumulate_t<T>;
    using std::erf, std::tanh;
    const A a = static_cast<A>(x);
    if (tanh_form)
      return static_cast<T>(A(0.5) * a * (A(1) + tanh(A(0.7978845608028654) * (a + A(0.044715) * a * a * a))));
    return static_cast<T>(A(0.5) * a * (A(1) + erf(a * A(0.7071067811865476))));
  }
};
// Gradient of gelu from its input x and the incoming gradient g.
struct GeluBackward {
  bool tanh_form;
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T x, T g) const {
    using A = accumulate_t<T>;
    using std::erf, std::exp, std::tanh;
    const A a = static_cast<A>(x);
    if (tanh_form) {
      const A k = A(0.7978845608028654), c = A(0.044715);
      const A t = tanh(k * (a + c * a * a * a));
      return static_cast<T>(static_cast<A>(g) *
                            (A(0.5) * (A(1) + t) + A(0.5) * a * (A(1) - t * t) * k * (A(1) + A(3) * c * a * a)));
    }
    const A cdf = A(0.5) * (A(1) + erf(a * A(0.7071067811865476)));
    const A pdf = exp(A(-0.5) * a * a) * A(0.3989422804014327);
    return static_cast<T>(static_cast<A>(g) * (cdf + a * pdf));
  }
};
// Binary cross-entropy of a logit x against a target t with positive-class weight pw:
// (1 - t) x + (1 + (pw - 1) t) softplus(-x), and its derivatives in x and in t. softplus(-x) =
// log(1 + e^-x) is computed as log1p(e^-|x|) + max(-x, 0): no overflow, no loss of small values.
struct BceWithLogits {
  template <class T>
  PTRAIN_HOST_DEVICE static T softplus_neg(T x) {
    using std::abs, std::exp, std::log1p;
    return log1p(exp(-abs(x))) + (x < T(0) ? -x : T(0));
  }
  template <class T>
  PTRAIN_HOST_DEVICE T loss(T x, T t, T pw) const {
    return (T(1) - t) * x + (T(1) + (pw - T(1)) * t) * softplus_neg(x);
  }
  // d/dx: (1 - t) - (1 + (pw - 1) t) sigmoid(-x), with sigmoid(-x) = 1 - sigmoid(x).
  template <class T>
  PTRAIN_HOST_DEVICE T grad_logit(T x, T t, T pw) const {
    return (T(1) - t) - (T(1) + (pw - T(1)) * t) * Sigmoid{}(-x);
  }
  template <class T>
  PTRAIN_HOST_DEVICE T grad_target(T x, T, T pw) const {
    return -x + (pw - T(1)) * softplus_neg(x);
  }
};
struct Add {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T a, T b) const { return a * b; }
};
struct Div {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T a, T b) const { return a / b; }
};
// The gradients of the binary ops in each operand, from the incoming gradient g and the operands
// a and b: (g, a, b) -> d(op)/d(operand) * g.
struct GradPassThrough {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T g, T, T) const { return g; }
};
struct GradNegated {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T g, T, T) const { return -g; }
};
struct MulGradA {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T g, T, T b) const { return g * b; }
};
struct MulGradB {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T g, T a, T) const { return g * a; }
};
struct DivGradA {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T g, T, T b) const { return g / b; }
};
// d(a / b)/db = -a / b^2.
struct DivGradB {
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T g, T a, T b) const { return -g * a / (b * b); }
};
struct AddConstant {
  double value;
  template <class T>
  PTRAIN_HOST_DEVICE T operator()(T x) const { return x + static_cast<T>(value); }
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
// factor * (a - b): the gradient of a mean squared error.
template <class T>
struct ScaledDifference {
  T factor;
  PTRAIN_HOST_DEVICE T operator()(T a, T b) const { return factor * (a - b); }
};

// Dropout's keep/drop decision for element i, a counter-based hash (splitmix64) of a per-call
// seed and the index: any thread, or a GPU, recomputes the same mask from (seed, i) alone,
// so backward needs no stored mask and the mask does not depend on the thread count.
struct DropoutMask {
  std::uint64_t seed;
  std::uint64_t threshold;  // drop when the hash's top 32 bits are below p * 2^32

  PTRAIN_HOST_DEVICE bool keep(std::uint64_t i) const {
    std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (z >> 32) >= threshold;
  }
};
// x * scale where the mask keeps element i, else 0 (forward and backward alike). The scale may
// be wider than T (float for the 16-bit types: 1 / 0.75 has no exact bfloat16).
template <class T, class Scale = T>
struct DropoutApply {
  DropoutMask mask;
  Scale scale;
#if defined(__CUDACC__)
// The CPU op instantiates this with Eigen's half and bfloat16, whose arithmetic is host code under
// EIGEN_NO_CUDA; the device ops compute in float. Host-only instantiations need no device check.
#pragma nv_exec_check_disable
#endif
  PTRAIN_HOST_DEVICE T operator()(std::uint64_t i, T x) const {
    return mask.keep(i) ? static_cast<T>(x * scale) : T(0);
  }
};

}  // namespace ptrain::kernels
