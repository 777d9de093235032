#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/attention.hpp>
#include <ptrain/autograd/ops/narrow.hpp>
#include <ptrain/autograd/ops/shape.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(attention_test)

namespace {
constexpr double inf = std::numeric_limits<double>::infinity();

// host (double) as a mask of the scalar type and device of the variables v an op is given.
template <class Vars>
auto mask_like(const Vars& v, const Tensor<double>& host) {
  using Values = std::decay_t<decltype(v[0].value())>;
  using T = typename Values::value_type;
  Tensor<T> m(host.shape());
  for (std::int64_t i = 0; i < m.numel(); ++i) m[i] = static_cast<T>(host[i]);
  return on_device<typename Values::device_type>(m);
}
// AttentionOptions of the scalar type and device of v.
template <class Vars>
auto options_for(const Vars& v) {
  using Values = std::decay_t<decltype(v[0].value())>;
  return AttentionOptions<typename Values::value_type, typename Values::device_type>{};
}
}  // namespace

BOOST_AUTO_TEST_CASE(masked_softmax_leaves_out_masked_positions_and_zeroes_fully_masked_rows) {
  const Tensor<double> x = random_tensor({3, 4}, 1);
  const Tensor<double> mask = Tensor<double>::from({3, 4}, {0, -inf, 0, 0.5, -inf, -inf, -inf, -inf, 0, 0, 0, 0});
  const Tensor<double> y = masked_softmax(Var<double>(x), mask).value();
  // row 0: softmax of x + mask over positions 0, 2, 3
  const double z0 = std::exp(x[0]) + std::exp(x[2]) + std::exp(x[3] + 0.5);
  BOOST_TEST(std::abs(y[0] - std::exp(x[0]) / z0) <= 1e-15);
  BOOST_TEST(y[1] == 0.0);
  BOOST_TEST(std::abs(y[3] - std::exp(x[3] + 0.5) / z0) <= 1e-15);
  for (int j = 4; j < 8; ++j) BOOST_TEST(y[j] == 0.0);  // no NaN: zeros, as torch's SDPA
  const Tensor<double> plain = softmax(Var<double>(x), -1).value();
  for (int j = 8; j < 12; ++j) BOOST_TEST(std::abs(y[j] - plain[j]) <= 1e-15);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(masked_softmax_matches_finite_differences_and_the_cpu, D, test::Devices) {
  // [3, 1, 5] broadcast over x [3, 2, 5]; the second row is masked everywhere.
  const Tensor<double> mask =
      Tensor<double>::from({3, 1, 5}, {0, -inf, 0.3, 0, -1, -inf, -inf, -inf, -inf, -inf, 0, 0, 0, -inf, 0});
  test::check_op<D>([&](const auto& v) { return masked_softmax(v[0], mask_like(v, mask)); },
                    {random_tensor({3, 2, 5}, 2)});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(attention_matches_finite_differences_and_the_cpu, D, test::Devices) {
  const std::vector<Tensor<double>> qkv{random_tensor({2, 3, 4}, 3), random_tensor({2, 5, 4}, 4),
                                        random_tensor({2, 5, 3}, 5)};
  test::check_op<D>([](const auto& v) { return scaled_dot_product_attention(v[0], v[1], v[2]); }, qkv);
  test::check_op<D>(
      [](const auto& v) {
        auto causal = options_for(v);
        causal.is_causal = true;
        return scaled_dot_product_attention(v[0], v[1], v[2], causal);
      },
      qkv);
  // key padding: keys 3 and 4 of the first sequence, key 0 of the second; a custom scale
  const Tensor<double> padding = Tensor<double>::from({2, 1, 5}, {0, 0, 0, -inf, -inf, -inf, 0, 0, 0, 0});
  test::check_op<D>(
      [&](const auto& v) {
        auto o = options_for(v);
        o.attn_mask = mask_like(v, padding);
        o.scale = 0.7;
        return scaled_dot_product_attention(v[0], v[1], v[2], o);
      },
      qkv);
  // dropout on the weights: the same draw on every evaluation
  test::check_op<D>(
      [](const auto& v) {
        Rng rng(6);
        auto o = options_for(v);
        o.dropout_p = 0.3;
        o.rng = &rng;
        return scaled_dot_product_attention(v[0], v[1], v[2], o);
      },
      qkv);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(packed_heads_attention_matches_finite_differences_and_the_cpu, D, test::Devices) {
  // 2 heads of 3 features: q [L 3, N 2, E 6], k and v [S 4, N 2, E 6] (batch_first: N first)
  for (const bool batch_first : {false, true}) {
    const Shape q_shape = batch_first ? Shape{2, 3, 6} : Shape{3, 2, 6}, kv_shape = batch_first ? Shape{2, 4, 6} : Shape{4, 2, 6};
    const std::vector<Tensor<double>> qkv{random_tensor(q_shape, 11), random_tensor(kv_shape, 12),
                                          random_tensor(kv_shape, 13)};
    test::check_op<D>([&](const auto& v) { return packed_heads_attention(v[0], v[1], v[2], 2, batch_first); }, qkv);
    // a padding mask against the scores [N, heads, L, S], a custom scale, dropout on the weights
    const Tensor<double> padding = Tensor<double>::from({2, 1, 1, 4}, {0, 0, 0, -inf, -inf, 0, 0, 0});
    test::check_op<D>(
        [&](const auto& v) {
          Rng rng(14);
          auto o = options_for(v);
          o.attn_mask = mask_like(v, padding);
          o.is_causal = true;
          o.scale = 0.6;
          o.dropout_p = 0.3;
          o.rng = &rng;
          return packed_heads_attention(v[0], v[1], v[2], 2, batch_first, o);
        },
        qkv);
  }
}

BOOST_AUTO_TEST_CASE(packed_heads_attention_is_attention_over_the_permuted_heads) {
  // [L 5, N 3, E 8] as 4 heads of 2: against scaled_dot_product_attention on [N, heads, L, 2],
  // dropout included (the weights, and so their dropout mask, have the same shape in both)
  const std::int64_t l = 5, s = 4, n = 3, heads = 4, hd = 2;
  Var<double> q(random_tensor({l, n, heads * hd}, 15)), k(random_tensor({s, n, heads * hd}, 16)),
      v(random_tensor({s, n, heads * hd}, 17));
  const auto heads_of = [&](const Var<double>& x, std::int64_t length) {
    return permute(reshape(x, Shape{length, n, heads, hd}), {1, 2, 0, 3});
  };
  for (const double dropout_p : {0.0, 0.4}) {
    Rng packed_rng(18), permuted_rng(18);
    AttentionOptions<double, Cpu> packed, permuted;
    packed.is_causal = permuted.is_causal = true;
    packed.dropout_p = permuted.dropout_p = dropout_p;
    packed.rng = &packed_rng;
    permuted.rng = &permuted_rng;
    const Tensor<double> want = reshape(permute(scaled_dot_product_attention(heads_of(q, l), heads_of(k, s),
                                                                             heads_of(v, s), permuted),
                                                {2, 0, 1, 3}),
                                        {l, n, heads * hd})
                                    .value();
    const Tensor<double> got = packed_heads_attention(q, k, v, heads, false, packed).value();
    BOOST_TEST(test::relative_difference(got, want) <= 1e-14);
  }
  // the batch-first form of the same numbers
  const auto batch_first = [](const Var<double>& x) { return permute(x, {1, 0, 2}); };
  const Tensor<double> seq_first = packed_heads_attention(q, k, v, heads, false).value();
  const Tensor<double> got = packed_heads_attention(batch_first(q), batch_first(k), batch_first(v), heads, true).value();
  BOOST_TEST(test::relative_difference(permute(Var<double>(got), {1, 0, 2}).value(), seq_first) <= 1e-14);
}

BOOST_AUTO_TEST_CASE(packed_heads_attention_refuses_shapes_that_do_not_split_into_heads) {
  Var<double> q(random_tensor({3, 2, 6}, 19)), k(random_tensor({4, 2, 6}, 20));
  const std::string heads = test::error_message([&] { packed_heads_attention(q, k, k, 4, false); });
  BOOST_TEST(heads.find("query of shape [3, 2, 6] (expected [length, N, E] with E a multiple of 4 heads)") !=
                 std::string::npos,
             heads);
  Var<double> other_batch(random_tensor({4, 3, 6}, 21));
  const std::string batch = test::error_message([&] { packed_heads_attention(q, other_batch, other_batch, 2, false); });
  BOOST_TEST(batch.find("expected the same batch and E") != std::string::npos, batch);
}

BOOST_AUTO_TEST_CASE(attention_masks_mean_what_they_say) {
  Var<double> q(random_tensor({1, 4, 3}, 7)), k(random_tensor({1, 4, 3}, 8)), v(random_tensor({1, 4, 2}, 9));
  AttentionOptions<double, Cpu> causal;
  causal.is_causal = true;
  const Tensor<double> y = scaled_dot_product_attention(q, k, v, causal).value();
  // the first query sees only the first key, so its output is the first value
  BOOST_TEST(std::abs(y[0] - v.value()[0]) <= 1e-15);
  BOOST_TEST(std::abs(y[1] - v.value()[1]) <= 1e-15);
  // padding the last key out equals attending over the first three only
  AttentionOptions<double, Cpu> padded;
  padded.attn_mask = key_padding_mask<double>({false, false, false, true}, 1, 4).reshape(Shape{1, 1, 4});
  const Tensor<double> with_padding = scaled_dot_product_attention(q, k, v, padded).value();
  const Tensor<double> shorter = scaled_dot_product_attention(q, narrow(k, 1, 0, 3), narrow(v, 1, 0, 3)).value();
  BOOST_TEST(test::relative_difference(with_padding, shorter) <= 1e-14);
  // causal_mask is generate_square_subsequent_mask
  const Tensor<double> m = causal_mask<double>(2, 3);
  BOOST_TEST(m[0] == 0.0);
  BOOST_TEST(m[1] == -inf);
  BOOST_TEST(m[4] == 0.0);
  BOOST_TEST(m[5] == -inf);
  // a boolean mask (true: attend) as torch's SDPA reads it: the same as the padding above
  AttentionOptions<double, Cpu> boolean;
  boolean.attn_mask = additive_mask<double>({true, true, true, false}, Shape{4});
  BOOST_TEST(test::relative_difference(scaled_dot_product_attention(q, k, v, boolean).value(), shorter) <= 1e-14);
  // dropout_p = 1 drops every weight
  AttentionOptions<double, Cpu> all_dropped;
  all_dropped.dropout_p = 1.0;
  BOOST_TEST((scaled_dot_product_attention(q, k, v, all_dropped).value().array() == 0.0).all());
}

BOOST_AUTO_TEST_SUITE_END()
