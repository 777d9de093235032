#pragma once
// Device checks: the transformer's ops (gelu, bmm, permute, layer_norm, embedding, masked_softmax,
// scaled_dot_product_attention with causal and padding masks and dropout) and a whole
// TransformerEncoderLayer on Var<float, Cuda> against the same on Var<float, HostEmulated>.
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/attention.hpp>
#include <ptrain/autograd/ops/embedding.hpp>
#include <ptrain/autograd/ops/layer_norm.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/shape.hpp>
#include <ptrain/nn/transformer.hpp>

#include "checks/autograd_more.cuh"
#include "checks/common.cuh"

namespace ptrain::device_checks {

inline void check_transformer() {
  using autograd_more_detail::expect_same_op;
  using autograd_more_detail::on_device_of;
  // Rows past a warp and a block.
  const Tensor<float> rows = signed_values<float>(Shape{37, 301}, 80);
  for (bool tanh_form : {false, true})
    expect_same_op(tanh_form ? "gelu tanh" : "gelu", [tanh_form](const auto& v) { return gelu(v[0], tanh_form); },
                   {rows});
  // [3, 17, 33] @ [3, 33, 19], each operand stored transposed where its flag says so.
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      expect_same_op("bmm", [ta, tb](const auto& v) { return bmm(v[0], v[1], ta, tb); },
                     {signed_values<float>(ta ? Shape{3, 33, 17} : Shape{3, 17, 33}, 81),
                      signed_values<float>(tb ? Shape{3, 19, 33} : Shape{3, 33, 19}, 82)},
                     1e-4);
  expect_same_op("permute", [](const auto& v) { return permute(v[0], {2, 0, 3, 1}); },
                 {signed_values<float>(Shape{3, 5, 7, 11}, 83)});
  expect_same_op("layer_norm", [](const auto& v) { return layer_norm(v[0], Shape{301}, v[1], v[2]); },
                 {rows, signed_values<float>(Shape{301}, 84), signed_values<float>(Shape{301}, 85)}, 1e-4);
  std::vector<std::int64_t> ids(200);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 7) % 37);
  expect_same_op("embedding with padding_idx",
                 [&](const auto& v) { return embedding(std::span<const std::int64_t>(ids), Shape{20, 10}, v[0], 3); },
                 {rows});
  Tensor<float> mask = signed_values<float>(Shape{37, 1, 301}, 86);
  for (std::int64_t i = 0; i < mask.numel(); ++i)
    if (mask[i] < -1.0f || i < 301) mask[i] = -std::numeric_limits<float>::infinity();  // row 0 fully masked
  expect_same_op("masked_softmax",
                 [&](const auto& v) { return masked_softmax(v[0], on_device_of<decltype(v[0])>(mask)); },
                 {signed_values<float>(Shape{37, 2, 301}, 87)});
  const std::vector<Tensor<float>> qkv{signed_values<float>(Shape{2, 3, 40, 16}, 88),
                                       signed_values<float>(Shape{2, 3, 40, 16}, 89),
                                       signed_values<float>(Shape{2, 3, 40, 16}, 90)};
  expect_same_op(
      "scaled_dot_product_attention causal, dropout",
      [](const auto& v) {
        using Values = std::decay_t<decltype(v[0].value())>;
        Rng rng(91);
        AttentionOptions<float, typename Values::device_type> o;
        o.is_causal = true;
        o.dropout_p = 0.2;
        o.rng = &rng;
        return scaled_dot_product_attention(v[0], v[1], v[2], o);
      },
      qkv, 1e-4);
  std::vector<bool> padded(2 * 40, false);
  for (std::size_t i = 35; i < padded.size(); i += 9) padded[i] = true;
  expect_same_op(
      "scaled_dot_product_attention key padding",
      [&](const auto& v) {
        using Values = std::decay_t<decltype(v[0].value())>;
        AttentionOptions<float, typename Values::device_type> o;
        o.attn_mask = key_padding_mask<float, typename Values::device_type>(padded, 2, 40);
        return scaled_dot_product_attention(v[0], v[1], v[2], o);
      },
      qkv, 1e-4);
  TransformerEncoderLayerOptions options;
  options.d_model = 32;
  options.nhead = 4;
  options.dim_feedforward = 48;
  options.dropout = 0.0;
  options.activation = Activation::gelu;
  global_rng().seed(92);
  TransformerEncoderLayer<float, Cuda> gpu_layer(options);
  global_rng().seed(92);
  TransformerEncoderLayer<float, HostEmulated> emulated_layer(options);
  expect_same_op(
      "TransformerEncoderLayer, causal",
      [&](const auto& v) {
        using Values = std::decay_t<decltype(v[0].value())>;
        AttentionMasks<float, typename Values::device_type> masks;
        masks.is_causal = true;
        if constexpr (std::is_same_v<typename Values::device_type, Cuda>) return gpu_layer.forward(v[0], masks);
        else return emulated_layer.forward(v[0], masks);
      },
      {signed_values<float>(Shape{40, 3, 32}, 93)}, 1e-4);
}

}  // namespace ptrain::device_checks
