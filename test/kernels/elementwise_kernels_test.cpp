// kernels/indexed/elementwise.hpp under the HostExecutor against the CPU kernels
// (kernels/cpu/elementwise.hpp) and the autograd ops (relu, sigmoid, dropout, add, linear,
// conv2d, concat), in double, float, half and bfloat16.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/conv.hpp>
#include <ptrain/autograd/ops/dropout.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/shape.hpp>
#include <ptrain/kernels/cast.hpp>
#include <ptrain/kernels/cpu/elementwise.hpp>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/kernels/functors.hpp>
#include <ptrain/kernels/indexed/elementwise.hpp>

using namespace ptrain;
namespace ki = ptrain::kernels::indexed;

BOOST_AUTO_TEST_SUITE(elementwise_kernels_test)

namespace {

const kernels::HostExecutor ex;

template <class T>
Tensor<T> values(const Shape& shape, std::uint64_t seed, double lo = -2, double hi = 2) {
  return tensor_cast<T>(random_tensor(shape, seed, lo, hi));
}

// Relative to max(1, |expected|): a few roundings of T.
template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-13;
  else if constexpr (std::is_same_v<T, float>) return 1e-6;
  else if constexpr (std::is_same_v<T, half>) return 2e-3;
  else return 1.6e-2;
}

template <class T>
void check_close(const Tensor<T>& got, const Tensor<T>& want, double tol, const std::string& what) {
  BOOST_REQUIRE_EQUAL(got.numel(), want.numel());
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    BOOST_TEST(std::abs(g - w) <= tol * std::max(1.0, std::abs(w)),
               what << " element " << i << ": got " << g << ", expected " << w);
  }
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T, class F>
Tensor<T> gpu_map(const Tensor<T>& x, F f) {
  Tensor<T> y(x.shape());
  ki::map(ex, x.data(), y.data(), x.numel(), f);
  return y;
}
template <class T, class F>
Tensor<T> gpu_map2(const Tensor<T>& a, const Tensor<T>& b, F f) {
  Tensor<T> y(a.shape());
  ki::map2(ex, a.data(), b.data(), y.data(), a.numel(), f);
  return y;
}

template <class T>
void check_maps() {
  using A = accumulate_t<T>;
  const double tol = tolerance<T>();
  const Shape shape{3, 7, 5};
  Tensor<T> x = values<T>(shape, 1), g = values<T>(shape, 2);
  x[4] = T(0);  // relu's edge
  const Var<T> xv(x, true);

  // The ops of autograd/ops/activation.hpp, forward and backward.
  const Var<T> r = relu(xv);
  const Tensor<T> relu_y = gpu_map(x, kernels::Relu{});
  check_close(relu_y, r.value(), 0, "relu");
  backward(r, g.clone());
  check_close(gpu_map2(relu_y, g, kernels::ReluBackward{}), xv.grad(), 0, "relu backward");

  const Var<T> xs(x, true);
  const Var<T> s = sigmoid(xs);
  const Tensor<T> sigmoid_y = gpu_map(x, kernels::Sigmoid{});
  check_close(sigmoid_y, s.value(), tol, "sigmoid");
  backward(s, g.clone());
  check_close(gpu_map2(sigmoid_y, g, kernels::SigmoidBackward{}), xs.grad(), 2 * tol, "sigmoid backward");

  check_close(gpu_map2(x, g, kernels::Add{}), kernels::map2(x, g, kernels::Add{}), tol, "add");
  check_close(gpu_map2(x, g, kernels::Axpy<A>{A(0.375)}), kernels::map2(x, g, kernels::Axpy<T>{T(0.375)}), 2 * tol,
              "axpy");
  // Scale on the widened value, rounded once: what the CPU does for float and double.
  Tensor<T> scaled(shape);
  for (std::int64_t i = 0; i < x.numel(); ++i) scaled[i] = static_cast<T>(static_cast<A>(0.3 * static_cast<A>(x[i])));
  check_close(gpu_map(x, kernels::Scale{0.3}), scaled, 0, "scale");

  // In place (in == out), as the CPU loops allow.
  Tensor<T> inplace = x.clone();
  ki::map(ex, inplace.data(), inplace.data(), inplace.numel(), kernels::Relu{});
  check_close(inplace, r.value(), 0, "relu in place");

  // Dropout: the op's mask and scale, forward and backward.
  Rng rng(11), same(11);
  const Var<T> xd(x, true);
  const Var<T> d = dropout(xd, 0.3, true, rng);
  const kernels::DropoutMask mask{same.engine()(), static_cast<std::uint64_t>(std::ldexp(0.3, 32))};
  const kernels::DropoutApply<A, A> apply{mask, static_cast<A>(1.0 / 0.7)};
  Tensor<T> dropped(shape);
  ki::map_indexed(ex, x.data(), dropped.data(), x.numel(), apply);
  check_close(dropped, d.value(), 0, "dropout");
  backward(d, g.clone());
  Tensor<T> gd(shape);
  ki::map_indexed(ex, g.data(), gd.data(), g.numel(), apply);
  check_close(gd, xd.grad(), 0, "dropout backward");
}

}  // namespace

BOOST_AUTO_TEST_CASE(maps_match_the_cpu_kernels_and_ops) {
  check_maps<double>();
  check_maps<float>();
  check_maps<half>();
  check_maps<ptrain::bfloat16>();
}

BOOST_AUTO_TEST_CASE(empty_maps_do_nothing) {
  ki::map(ex, static_cast<const float*>(nullptr), static_cast<float*>(nullptr), 0, kernels::Relu{});
  BOOST_CHECK_THROW(ki::map(ex, static_cast<const float*>(nullptr), static_cast<float*>(nullptr), -1, kernels::Relu{}),
                    Error);
}

template <class T>
void check_linear_bias(double tol) {
  // y = x w^T by the executor's GEMM, then the broadcast bias: linear(x, w, b).
  const std::int64_t batch = 5, in = 7, out = 3;
  const Var<T> x(values<T>({batch, in}, 1)), w(values<T>({out, in}, 2)), b(values<T>({out}, 3));
  Tensor<T> y({batch, out});
  ex.gemm<T>(false, true, batch, out, in, 1, x.value().data(), in, w.value().data(), in, 0, y.data(), out);
  ki::add_bias(ex, y.data(), b.value().data(), batch, out, 1);
  check_close(y, linear(x, w, b).value(), tol, "linear bias");
}

template <class T>
void check_conv_bias(double tol) {
  const Var<T> x(values<T>({2, 3, 6, 5}, 4)), w(values<T>({4, 3, 3, 3}, 5)), b(values<T>({4}, 6));
  const Conv2dOptions options = Conv2dOptions::square(1, 1);
  Tensor<T> y = conv2d(x, w, Var<T>(), options).value().clone();
  ki::add_bias(ex, y.data(), b.value().data(), 2, 4, 6 * 5);
  check_close(y, conv2d(x, w, b, options).value(), tol, "conv2d bias");
}

BOOST_AUTO_TEST_CASE(bias_adds_match_linear_and_conv2d) {
  check_linear_bias<double>(1e-13);
  check_linear_bias<float>(1e-5);
  check_conv_bias<double>(1e-13);
  check_conv_bias<float>(1e-5);
}

template <class T>
void check_bias_16bit() {
  // Rounded once from the float sum, one bias per channel whatever the batch and plane.
  const Tensor<T> y0 = values<T>({3, 4, 5}, 7), b = values<T>({4}, 8);
  Tensor<T> y = y0.clone();
  ki::add_bias(ex, y.data(), b.data(), 3, 4, 5);
  for (std::int64_t i = 0; i < y.numel(); ++i)
    BOOST_TEST(same_bits(y[i], static_cast<T>(static_cast<float>(y0[i]) + static_cast<float>(b[(i / 5) % 4]))));
  ki::add_bias(ex, y.data(), b.data(), 0, 4, 5);  // an empty batch
}

BOOST_AUTO_TEST_CASE(bias_adds_in_16_bits) {
  check_bias_16bit<half>();
  check_bias_16bit<ptrain::bfloat16>();
}

template <class T>
void check_concat() {
  // Channels of [2, c, 3, 4] for c = 3, 1, 2, as concat(xs, 1), and the gradients back.
  const std::vector<std::int64_t> channels{3, 1, 2};
  std::vector<Var<T>> xs;
  std::vector<const T*> pointers;
  std::vector<std::int64_t> blocks;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    xs.emplace_back(values<T>({2, channels[i], 3, 4}, 20 + i), true);
    pointers.push_back(xs.back().value().data());
    blocks.push_back(channels[i] * 12);
  }
  const Var<T> y = concat(xs, 1);
  Tensor<T> got(y.shape());
  ki::concat(ex, pointers, blocks, got.data(), 2);
  check_close(got, y.value(), 0, "concat");

  const Tensor<T> gy = values<T>(y.shape(), 30);
  backward(y, gy.clone());
  std::vector<Tensor<T>> gxs;
  std::vector<T*> grads;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    gxs.emplace_back(xs[i].shape());
    grads.push_back(i == 1 ? nullptr : gxs.back().data());  // input 1 needs no gradient
  }
  ki::concat_backward(ex, gy.data(), blocks, grads, 2);
  check_close(gxs[0], xs[0].grad(), 0, "concat backward, input 0");
  check_close(gxs[2], xs[2].grad(), 0, "concat backward, input 2");
}

BOOST_AUTO_TEST_CASE(concat_and_its_backward_match_the_op) {
  check_concat<double>();
  check_concat<float>();
  check_concat<half>();
  check_concat<ptrain::bfloat16>();
}

BOOST_AUTO_TEST_CASE(copy_rows_matches_the_cpu_kernel) {
  const Tensor<float> src = values<float>({7 * 9}, 40);
  Tensor<float> want = Tensor<float>::zeros({7 * 11}), got = want.clone();
  kernels::copy_rows(src.data() + 2, 9, want.data() + 3, 11, 7, 5);
  ki::copy_rows(ex, src.data() + 2, 9, got.data() + 3, 11, 7, 5);
  check_close(got, want, 0, "copy_rows");
  BOOST_CHECK_THROW(ki::copy_rows(ex, src.data(), 4, got.data(), 11, 7, 5), Error);
}

BOOST_AUTO_TEST_CASE(fill_writes_every_element) {
  Tensor<ptrain::bfloat16> t = Tensor<ptrain::bfloat16>::zeros({9});
  ki::fill(ex, t.data(), 8, 1.5f);
  for (std::int64_t i = 0; i < 8; ++i) BOOST_TEST(static_cast<float>(t[i]) == 1.5f);
  BOOST_TEST(static_cast<float>(t[8]) == 0.0f);
  Tensor<double> d({5});
  ki::fill(ex, d.data(), 5, -0.25);
  for (std::int64_t i = 0; i < 5; ++i) BOOST_TEST(d[i] == -0.25);
}

// Values that stress rounding: ties, subnormals, overflow of the 16-bit types, infinities, NaN.
Tensor<double> awkward_values() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v{0.0, -0.0, 1.0, -1.5, 1.0 + std::ldexp(1.0, -11), 1.0 + 3 * std::ldexp(1.0, -11),
                        1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8), 65504.0, 65520.0, 1e6, 3e38,
                        1e-8, 6e-8, 1e-40, 1.0 / 3, inf, -inf, std::numeric_limits<double>::quiet_NaN()};
  const Tensor<double> r = random_tensor({25}, 50, -100, 100);
  for (std::int64_t i = 0; i < r.numel(); ++i) v.push_back(r[i]);
  return Tensor<double>::from({static_cast<std::int64_t>(v.size())}, v);
}

template <class From, class To>
void check_cast() {
  const Tensor<From> src = tensor_cast<From>(awkward_values());
  const Tensor<To> want = tensor_cast<To>(src);
  Tensor<To> got(src.shape());
  ki::cast(ex, src.data(), got.data(), src.numel());
  for (std::int64_t i = 0; i < src.numel(); ++i) {
    const bool nan = std::isnan(static_cast<double>(want[i]));
    BOOST_TEST((nan ? std::isnan(static_cast<double>(got[i])) : same_bits(got[i], want[i])),
               scalar_name<From> << " -> " << scalar_name<To> << " element " << i << ": got "
                                 << static_cast<double>(got[i]) << ", expected " << static_cast<double>(want[i]));
  }
}

template <class From>
void check_casts_from() {
  check_cast<From, float>();
  check_cast<From, double>();
  check_cast<From, half>();
  check_cast<From, ptrain::bfloat16>();
}

BOOST_AUTO_TEST_CASE(casts_match_tensor_cast) {
  check_casts_from<float>();
  check_casts_from<double>();
  check_casts_from<half>();
  check_casts_from<ptrain::bfloat16>();
}

// The CPU executor's cast spreads a long tensor over the threads, one range each: the same bits as
// the indexed cast, over every range (awkward values repeated past the parallel threshold).
BOOST_AUTO_TEST_CASE(cpu_cast_over_the_threads_matches_the_indexed_cast) {
  const Tensor<double> awkward = awkward_values();
  const std::int64_t n = 3 * kernels::parallel_threshold + 5;
  Tensor<float> src({n});
  for (std::int64_t i = 0; i < n; ++i) src[i] = static_cast<float>(awkward[i % awkward.numel()] * (1 + i / 1000));
  Tensor<ptrain::bfloat16> want({n}), got({n});
  ki::cast(ex, src.data(), want.data(), n);
  kernels::cast(kernels::CpuExecutor{}, src.data(), got.data(), n);
  Tensor<float> back({n});
  kernels::cast(kernels::CpuExecutor{}, got.data(), back.data(), n);
  for (std::int64_t i = 0; i < n; ++i) {
    BOOST_REQUIRE_MESSAGE(same_bits(got[i], want[i]), "element " << i);
    BOOST_REQUIRE_MESSAGE(same_bits(back[i], static_cast<float>(want[i])), "element " << i << " widened");
  }
}

namespace {
// What the CPU's data-parallel average does (parallel/detail/gradient_buckets.hpp): convert, then
// multiply in To. cast_scaled must give the same bits, in place too when From is To.
template <class From, class To>
void check_cast_scaled(To scale) {
  const Tensor<From> src = values<From>(Shape{1027}, 12, -3.0, 3.0);
  Tensor<To> want = tensor_cast<To>(src).clone();  // tensor_cast to the same type shares storage
  for (std::int64_t i = 0; i < want.numel(); ++i) want[i] *= scale;
  Tensor<To> got(src.shape());
  ki::cast_scaled(ex, src.data(), got.data(), src.numel(), scale);
  if constexpr (std::is_same_v<From, To>) {
    Tensor<To> in_place = src.clone();
    ki::cast_scaled(ex, in_place.data(), in_place.data(), in_place.numel(), scale);
    BOOST_TEST(std::equal(in_place.data(), in_place.data() + want.numel(), want.data(), same_bits<To>));
  }
  for (std::int64_t i = 0; i < want.numel(); ++i)
    BOOST_TEST(same_bits(got[i], want[i]), scalar_name<From> << " -> " << scalar_name<To> << " element " << i
                                                              << ": got " << static_cast<double>(got[i])
                                                              << ", expected " << static_cast<double>(want[i]));
}
}  // namespace

BOOST_AUTO_TEST_CASE(cast_scaled_matches_the_cpu_average_bit_for_bit) {
  check_cast_scaled<half, float>(1.0f / 3.0f);
  check_cast_scaled<ptrain::bfloat16, float>(0.5f);
  check_cast_scaled<float, float>(1.0f / 3.0f);
  check_cast_scaled<double, double>(1.0 / 3.0);
  BOOST_CHECK_THROW(ki::cast_scaled(ex, static_cast<const float*>(nullptr), static_cast<float*>(nullptr), -1, 1.0f),
                    Error);
}

BOOST_AUTO_TEST_SUITE_END()
