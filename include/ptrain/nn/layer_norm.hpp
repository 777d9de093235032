#pragma once
// nn.LayerNorm: normalises over the trailing normalized_shape, eps 1e-5 unless given; with
// elementwise_affine a weight (ones) and, unless bias is false, a bias (zeros) of that shape.
#include "ptrain/autograd/ops/layer_norm.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

template <class T = float, class D = Cpu>
class LayerNorm : public Module<T, D> {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true)
      : normalized_shape_(std::move(normalized_shape)), eps_(eps) {
    check(normalized_shape_.rank() >= 1 && normalized_shape_.numel() > 0, "LayerNorm: normalized_shape ",
          normalized_shape_, " is empty");
    if (elementwise_affine) {
      weight = this->register_parameter("weight", Tensor<T>::ones(normalized_shape_));
      if (bias) this->bias = this->register_parameter("bias", Tensor<T>::zeros(normalized_shape_));
    }
  }
  Var<T, D> forward(const Var<T, D>& x) override { return layer_norm(x, normalized_shape_, weight, bias, eps_); }

  Var<T, D> weight, bias;

 private:
  Shape normalized_shape_;
  double eps_;
};

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::LayerNorm)
