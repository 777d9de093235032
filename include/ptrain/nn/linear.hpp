#pragma once
// nn.Linear: x [..., in] -> [..., out], the leading extents seen as rows.
#include <memory>

#include "ptrain/autograd/ops/linear.hpp"
#include "ptrain/autograd/ops/shape.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/init.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

template <class T = float, class D = Cpu>
class Linear : public Module<T, D> {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true) {
    check(in_features > 0 && out_features > 0, "Linear(", in_features, ", ", out_features, "): sizes must be positive");
    Tensor<T> w({out_features, in_features});
    Tensor<T> b = bias ? Tensor<T>({out_features}) : Tensor<T>();
    init::default_layer_init(w, &b);
    weight = this->register_parameter("weight", w);
    if (bias) this->bias = this->register_parameter("bias", b);
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    const Shape& s = x.shape();
    if (s.rank() <= 2) return linear(x, weight, bias);
    Shape out = s;
    out[s.rank() - 1] = weight.size(0);
    return reshape(linear(reshape(x, {-1, s[s.rank() - 1]}), weight, bias), out);
  }

  Var<T, D> weight, bias;
};

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::Linear)
