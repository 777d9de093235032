#pragma once
// The dispatch point of layer norm (autograd/ops/layer_norm.hpp): no tuned CPU kernel, the row
// reductions of kernels/indexed/layer_norm.hpp run on every executor (over the OpenMP threads on
// the CPU).
#include "ptrain/kernels/indexed/layer_norm.hpp"

namespace ptrain::kernels {

using indexed::layer_norm_backward;
using indexed::layer_norm_forward;

}  // namespace ptrain::kernels
