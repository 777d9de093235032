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

#include "../common/typed_devices.hpp"

using namespace ptrain;

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

BOOST_AUTO_TEST_SUITE(attention_test)

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
