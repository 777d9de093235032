#pragma once
// Executor-generic embedding lookup: forward gathers weight rows, one thread per output element;
// backward is a gather too, one thread per weight element summing the gradient rows of the
// positions that looked it up (listed per weight row, in position order, by the caller), so no
// atomics and the same sums in the same order on every device.
#include <cstdint>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/host_device.hpp"
#include "ptrain/kernels/indexed.hpp"

namespace ptrain::kernels::indexed {

// y[p, c] = w[index[p], c].
template <class T>
struct EmbeddingGather {
  const T* w;
  const std::int64_t* index;
  std::int64_t dim;
  T* y;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    const std::int64_t p = i / dim;
    y[i] = w[index[p] * dim + (i - p * dim)];
  }
};
// gw[r, c] = sum of g[p, c] over the positions p listed for row r: positions[first[r] .. first[r + 1]).
template <class T>
struct EmbeddingGradGather {
  const T* g;
  const std::int64_t* first;
  const std::int64_t* positions;
  std::int64_t dim;
  T* gw;
  PTRAIN_HOST_DEVICE void operator()(std::int64_t i) const {
    const std::int64_t r = i / dim, c = i - r * dim;
    accumulate_t<T> total(0);
    for (std::int64_t k = first[r]; k < first[r + 1]; ++k) total += to_accumulate(g[positions[k] * dim + c]);
    gw[i] = from_accumulate<T>(total);
  }
};

// y [positions, dim] = the weight rows named by index (checked in range by the caller).
template <class Ex, class T>
void embedding_forward(const Ex& ex, const T* w, const std::int64_t* index, std::int64_t positions, std::int64_t dim,
                       T* y) {
  check(positions >= 0 && dim >= 0, "embedding: negative extent [", positions, ", ", dim, "]");
  ex.indexed(positions * dim, EmbeddingGather<T>{w, index, dim, y});
}
// gw [rows, dim] from g [positions, dim] and the positions of each row (first has rows + 1 entries).
template <class Ex, class T>
void embedding_backward(const Ex& ex, const T* g, const std::int64_t* first, const std::int64_t* positions,
                        std::int64_t rows, std::int64_t dim, T* gw) {
  check(rows >= 0 && dim >= 0, "embedding_backward: negative extent [", rows, ", ", dim, "]");
  ex.indexed(rows * dim, EmbeddingGradGather<T>{g, first, positions, dim, gw});
}

}  // namespace ptrain::kernels::indexed
