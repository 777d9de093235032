#pragma once
// nn.Embedding: a table of num_embeddings rows of embedding_dim, drawn N(0, 1) with the padding
// row zeroed, as torch. forward takes the indices as the whole numbers of a tensor of T (the one
// input a Module and a pipeline stage pass on) and returns their rows: [..] -> [.., embedding_dim].
#include <cstdint>
#include <optional>

#include "ptrain/autograd/ops/embedding.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/init.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

template <class T = float, class D = Cpu>
class Embedding : public Module<T, D> {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim,
            std::optional<std::int64_t> padding_idx = std::nullopt)
      : padding_idx_(padding_idx) {
    check(num_embeddings > 0 && embedding_dim > 0, "Embedding(", num_embeddings, ", ", embedding_dim,
          "): sizes must be positive");
    const auto padding_row = detail::embedding_padding_row(padding_idx, num_embeddings);
    Tensor<T> w({num_embeddings, embedding_dim});
    init::normal(w, 0.0, 1.0);
    if (padding_row)
      for (std::int64_t c = 0; c < embedding_dim; ++c) w[*padding_row * embedding_dim + c] = T(0);
    weight = this->register_parameter("weight", w);
  }
  Var<T, D> forward(const Var<T, D>& ids) override { return embedding(ids, weight, padding_idx_); }

  Var<T, D> weight;

 private:
  std::optional<std::int64_t> padding_idx_;
};

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::Embedding)
