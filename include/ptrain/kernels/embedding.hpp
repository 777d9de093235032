#pragma once
// The dispatch point of embedding (autograd/ops/embedding.hpp): no tuned CPU kernel, the gathers
// of kernels/indexed/embedding.hpp run on every executor.
#include "ptrain/kernels/indexed/embedding.hpp"

namespace ptrain::kernels {

using indexed::embedding_backward;
using indexed::embedding_forward;

}  // namespace ptrain::kernels
