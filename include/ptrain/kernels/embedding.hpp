#pragma once
// The dispatch point of embedding (autograd/ops/embedding.hpp): forward is the gather of
// kernels/indexed/embedding.hpp on every executor; backward has a tuned CPU kernel
// (kernels/cpu/embedding.hpp: whole rows, vectorised) next to the indexed gather.
#include "ptrain/core/op_profile.hpp"
#include "ptrain/kernels/cpu/embedding.hpp"
#include "ptrain/kernels/executor.hpp"
#include "ptrain/kernels/indexed/embedding.hpp"

namespace ptrain::kernels {

using indexed::embedding_forward;

template <class T>
void embedding_backward(const CpuExecutor&, const T* g, const std::int64_t* first, const std::int64_t* positions,
                        std::int64_t rows, std::int64_t dim, T* gw) {
  check(rows >= 0 && dim >= 0, "embedding_backward: negative extent [", rows, ", ", dim, "]");
  ProfiledOp profiled("other_kernels");
  embedding_backward(g, first, positions, rows, dim, gw);
}
template <class Ex, class T>
void embedding_backward(const Ex& ex, const T* g, const std::int64_t* first, const std::int64_t* positions,
                        std::int64_t rows, std::int64_t dim, T* gw) {
  indexed::embedding_backward(ex, g, first, positions, rows, dim, gw);
}

}  // namespace ptrain::kernels
