#pragma once
// torch.nn.functional.embedding on any device: the rows of a weight [rows, dim] named by integer
// indices, the result of shape index_shape + [dim]. Indices are int64 on the host (as cross_entropy's
// targets), checked there and copied to the device once per call. The row padding_idx gets no
// gradient. Backward is a gather over the weight's rows (kernels/embedding.hpp): the positions of
// each row are listed on the host at forward time (a counting sort) and kept on the device.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/autograd/detail/indices.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/device/device.hpp"
#include "ptrain/kernels/embedding.hpp"
#include "ptrain/kernels/executor_for.hpp"

namespace ptrain {

namespace detail {
// padding_idx in [-rows, rows) made non-negative, as torch does; none stays none.
inline std::optional<std::int64_t> embedding_padding_row(std::optional<std::int64_t> padding_idx, std::int64_t rows) {
  if (!padding_idx) return padding_idx;
  check(*padding_idx >= -rows && *padding_idx < rows, "embedding: padding_idx ", *padding_idx,
        " is outside the weight's ", rows, " rows");
  return *padding_idx < 0 ? *padding_idx + rows : *padding_idx;
}

inline void check_embedding_indices(std::span<const std::int64_t> indices, const Shape& index_shape,
                                    const Shape& weight) {
  check(weight.rank() == 2, "embedding: weight of shape ", weight, " (expected [rows, dim])");
  check(static_cast<std::int64_t>(indices.size()) == index_shape.numel(), "embedding: ", indices.size(),
        " indices for index shape ", index_shape);
  for (std::size_t p = 0; p < indices.size(); ++p)
    check(indices[p] >= 0 && indices[p] < weight[0], "embedding: index ", indices[p], " at position ", p,
          " is outside the weight's ", weight[0], " rows");
}

// The positions of each weight row, in order: row r's are positions[first[r] .. first[r + 1]);
// the padding row lists none.
struct RowPositions {
  std::vector<std::int64_t> first, positions;
};
inline RowPositions row_positions(std::span<const std::int64_t> indices, std::int64_t rows,
                                  std::optional<std::int64_t> padding_row) {
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  RowPositions out{std::vector<std::int64_t>(at(rows + 1), 0), {}};
  for (auto index : indices)
    if (index != padding_row) ++out.first[at(index + 1)];
  for (std::int64_t r = 0; r < rows; ++r) out.first[at(r + 1)] += out.first[at(r)];
  out.positions.resize(at(out.first.back()));
  std::vector<std::int64_t> next(out.first.begin(), out.first.end() - 1);
  for (std::size_t p = 0; p < indices.size(); ++p)
    if (indices[p] != padding_row) out.positions[at(next[at(indices[p])]++)] = static_cast<std::int64_t>(p);
  return out;
}

// The integers a tensor of token ids holds (a model's input kept as T, the form a Module and a
// pipeline stage pass on); anything but a whole number is an error.
template <class T, Device D>
std::vector<std::int64_t> whole_numbers(const Tensor<T, D>& ids, const char* op) {
  const Tensor<T> host = on_host(ids);
  std::vector<std::int64_t> out(static_cast<std::size_t>(host.numel()));
  for (std::int64_t i = 0; i < host.numel(); ++i) {
    const double v = static_cast<double>(host[i]);
    check(std::isfinite(v) && v == std::floor(v), op, ": index ", v, " at position ", i, " is not a whole number");
    out[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(v);
  }
  return out;
}
}  // namespace detail

// The largest n up to which every whole number is exact in T (2^its significand bits): the token
// ids a model of T can take as its input, 256 in bfloat16, 2048 in half.
template <class T>
constexpr double max_exact_whole_number() {
  if constexpr (std::is_same_v<T, half>) return 2048.0;
  else if constexpr (std::is_same_v<T, bfloat16>) return 256.0;
  else return static_cast<double>(std::uint64_t{1} << std::numeric_limits<T>::digits);
}

// weight's rows at indices (row-major over index_shape): shape index_shape + [dim]. padding_idx
// (negative counts from the back) names a row that receives no gradient, as in torch.
template <class T, Device D>
Var<T, D> embedding(std::span<const std::int64_t> indices, const Shape& index_shape, const Var<T, D>& weight,
                    std::optional<std::int64_t> padding_idx = std::nullopt) {
  detail::check_embedding_indices(indices, index_shape, weight.shape());
  const std::int64_t rows = weight.size(0), dim = weight.size(1), positions = index_shape.numel();
  const auto padding_row = detail::embedding_padding_row(padding_idx, rows);
  Shape out_shape = index_shape;
  out_shape.push_back(dim);
  Tensor<T, D> y(out_shape);
  const auto index = detail::indices_on<D>(indices);
  kernels::embedding_forward(kernels::executor_for<D>{}, weight.value().data(), index.data(), positions, dim, y.data());
  if (!weight.requires_grad() || !GradMode::enabled()) return Var<T, D>(std::move(y), false);
  const auto lists = detail::row_positions(indices, rows, padding_row);
  const auto first = detail::indices_on<D>(lists.first), at = detail::indices_on<D>(lists.positions);
  return make_var<T, D>(std::move(y), {weight}, "embedding", [first, at, rows, dim](Node<T, D>& self) {
    Tensor<T, D> gw({rows, dim});
    kernels::embedding_backward(kernels::executor_for<D>{}, self.grad.data(), first.data(), at.data(), rows, dim,
                                gw.data());
    self.inputs[0]->accumulate(std::move(gw));
  });
}

// As above, the indices the whole numbers held by ids (of any shape): the form nn::Embedding's
// forward takes.
template <class T, Device D>
Var<T, D> embedding(const Var<T, D>& ids, const Var<T, D>& weight,
                    std::optional<std::int64_t> padding_idx = std::nullopt) {
  const auto indices = detail::whole_numbers(ids.value(), "embedding");
  return embedding(std::span<const std::int64_t>(indices), ids.shape(), weight, padding_idx);
}

}  // namespace ptrain
