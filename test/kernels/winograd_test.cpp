// kernels/cpu/winograd.hpp against im2col + GEMM (kernels/cpu/conv.hpp) for forward, grad input
// and grad weight, F(2x2, 3x3) and F(4x4, 3x3): in double they agree to rounding; in float the
// error against the double result is measured and bounded. And conv_algorithm.hpp's choice:
// measured once per shape and pass, then cached; forced by set_conv_algorithm. bfloat16 on
// vdpbf16ps: F(2x2, 3x3) with bfloat16 products against double, its error bounded by im2col's.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <ptrain/device/threads.hpp>
#include <ptrain/kernels/cpu/conv.hpp>

#include "bf16_setting.hpp"
#include "spatial_compare.hpp"

using namespace ptrain;
using namespace ptrain::test;
namespace k = ptrain::kernels;
namespace ut = boost::unit_test;

BOOST_AUTO_TEST_SUITE(winograd_test)

namespace {

struct Case {
  const char* name;
  std::int64_t batch, in_channels, h, w, out_channels, pad;
};

// Odd sizes (partial tiles in both directions), padding 0, 1 and 2, channel counts that are not
// multiples of the 8 lanes, batch > 1, one with several chunks of tiles per thread, ones whose
// threads split the positions, and channel counts in multiples of 16 (gemm_avx512.hpp's products).
const std::vector<Case>& cases() {
  static const std::vector<Case> all{
      {"3->4 7x5 pad 1", 2, 3, 7, 5, 4, 1},       {"5->7 9x11 pad 0", 3, 5, 9, 11, 7, 0},
      {"17->13 16x16 pad 1", 2, 17, 16, 16, 13, 1}, {"8->9 4x4 pad 1", 1, 8, 4, 4, 9, 1},
      {"6->5 10x3 pad 2", 2, 6, 10, 3, 5, 2},     {"33->19 13x12 pad 1", 4, 33, 13, 12, 19, 1},
      {"8->8 40x40 pad 1, three chunks", 3, 8, 40, 40, 8, 1},
      // few tiles, many channels: the threads split positions, not tiles
      {"40->36 3x3 pad 1, positions split", 2, 40, 3, 3, 36, 1},
      // channels in multiples of 16: products on AVX-512 register tiles where the build has them
      // (widths of 1, 3, 4 and 4 + 1 vectors; tile counts not multiples of the tiles' rows)
      {"16->48 10x10 pad 1", 2, 16, 10, 10, 48, 1},
      {"80->64 9x7 pad 1", 3, 80, 9, 7, 64, 1},
      {"64->32 3x3 pad 1, positions split", 2, 64, 3, 3, 32, 1},
  };
  return all;
}

k::Conv2dGeometry geometry(const Case& c) {
  return k::make_conv2d_geometry({c.batch, c.in_channels, c.h, c.w}, {c.out_channels, c.in_channels, 3, 3}, 1, 1,
                                 c.pad, c.pad, 1, 1, 1);
}

// max |got - want| / max |want|: the error relative to the result's magnitude.
template <class T>
double relative_error(const Tensor<T>& got, const Tensor<double>& want) {
  double worst = 0, scale = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return std::isnan(worst) ? INFINITY : worst / scale;
}

// The three passes of one case in T, by Winograd F(M) or (M = 0) by im2col + GEMM.
template <class T>
struct Passes {
  Tensor<T> y, gx, gw;
};
template <int M, class T>
Passes<T> run(const Case& c) {
  const k::Conv2dGeometry g = geometry(c);
  const Tensor<T> x = seeded<T>({c.batch, c.in_channels, c.h, c.w}, 1), w = seeded<T>({c.out_channels, c.in_channels, 3, 3}, 2),
                  b = seeded<T>({c.out_channels}, 3), gy = seeded<T>({c.batch, c.out_channels, g.out_h, g.out_w}, 4);
  Passes<T> p{poisoned<T>({c.batch, c.out_channels, g.out_h, g.out_w}), poisoned<T>(x.shape()),
                 poisoned<T>(w.shape())};
  if constexpr (M == 0) {
    k::detail::conv2d_forward_gemm<T, T>(g, x.data(), w.data(), b.data(), p.y.data());
    k::detail::conv2d_backward_gemm<T, T>(g, nullptr, w.data(), gy.data(), p.gx.data(), nullptr, nullptr);
    k::detail::conv2d_backward_gemm<T, T>(g, x.data(), nullptr, gy.data(), nullptr, p.gw.data(), nullptr);
  } else {
    k::winograd_forward<M, T>(g, x.data(), w.data(), b.data(), p.y.data());
    k::winograd_grad_input<M, T>(g, w.data(), gy.data(), p.gx.data());
    k::winograd_grad_weight<M, T>(g, x.data(), gy.data(), p.gw.data());
  }
  return p;
}

struct Errors {
  double y = 0, gx = 0, gw = 0;
};
template <int M, class T>
Errors errors_against_double(const Case& c) {
  const Passes<double> want = run<0, double>(c);
  const Passes<T> got = run<M, T>(c);
  return {relative_error(got.y, want.y), relative_error(got.gx, want.gx), relative_error(got.gw, want.gw)};
}

template <int M>
void check_float(double bound) {
  Errors worst, worst_gemm;
  for (const Case& c : cases()) {
    const Errors e = errors_against_double<M, float>(c), e_gemm = errors_against_double<0, float>(c);
    BOOST_TEST(e.y <= bound, c.name << ": forward error " << e.y);
    BOOST_TEST(e.gx <= bound, c.name << ": grad input error " << e.gx);
    BOOST_TEST(e.gw <= bound, c.name << ": grad weight error " << e.gw);
    worst = {std::max(worst.y, e.y), std::max(worst.gx, e.gx), std::max(worst.gw, e.gw)};
    worst_gemm = {std::max(worst_gemm.y, e_gemm.y), std::max(worst_gemm.gx, e_gemm.gx),
                  std::max(worst_gemm.gw, e_gemm.gw)};
  }
  BOOST_TEST_MESSAGE("F(" << M << "x" << M << ", 3x3) float, worst error relative to the result: forward " << worst.y
                          << ", grad input " << worst.gx << ", grad weight " << worst.gw
                          << " (im2col + GEMM in float: " << worst_gemm.y << ", " << worst_gemm.gx << ", "
                          << worst_gemm.gw << ")");
}

template <class T>
bool bitwise_equal(const Tensor<T>& a, const Tensor<T>& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), sizeof(T) * static_cast<std::size_t>(a.numel())) == 0;
}

// Restores auto after a test that forces an algorithm.
struct AutoAfterwards {
  ~AutoAfterwards() { k::set_conv_algorithm(k::ConvAlgorithm::automatic); }
};

using bf16 = ptrain::bfloat16;

boost::test_tools::assertion_result has_bf16_dot(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result has(k::cpu_has_bf16_dot());
  has.message() << "skipped: this CPU has no AVX512_BF16 (vdpbf16ps); bfloat16 convolutions take the float path";
  return has;
}

// Restores the thread count after a test that sets it.
struct ThreadsAfterwards {
  int threads = num_threads();
  ~ThreadsAfterwards() { set_num_threads(threads); }
};

// Forward and grad input of a case in bfloat16 through conv2d_forward / conv2d_backward (so as
// conv_algorithm() routes them), and the double result on the same bfloat16 values.
struct Bf16Passes {
  Tensor<bf16> y, gx, gw;
};
struct Bf16Operands {
  k::Conv2dGeometry g;
  Tensor<bf16> x, w, b, gy;
  explicit Bf16Operands(const Case& c)
      : g(geometry(c)),
        x(seeded<bf16>({c.batch, c.in_channels, c.h, c.w}, 1)),
        w(seeded<bf16>({c.out_channels, c.in_channels, 3, 3}, 2)),
        b(seeded<bf16>({c.out_channels}, 3)),
        gy(seeded<bf16>({c.batch, c.out_channels, g.out_h, g.out_w}, 4)) {}
  Bf16Passes run() const {
    Bf16Passes p{poisoned<bf16>({g.batch, g.out_channels, g.out_h, g.out_w}), poisoned<bf16>(x.shape()),
                 poisoned<bf16>(w.shape())};
    k::conv2d_forward<bf16>(g, x.data(), w.data(), b.data(), p.y.data());
    k::conv2d_backward<bf16>(g, x.data(), w.data(), gy.data(), p.gx.data(), p.gw.data(), nullptr);
    return p;
  }
  Passes<double> in_double() const {
    const Tensor<double> xd = tensor_cast<double>(x), wd = tensor_cast<double>(w), bd = tensor_cast<double>(b),
                         gyd = tensor_cast<double>(gy);
    Passes<double> p{Tensor<double>({g.batch, g.out_channels, g.out_h, g.out_w}), Tensor<double>(x.shape()),
                     Tensor<double>(w.shape())};
    k::detail::conv2d_forward_gemm<double, double>(g, xd.data(), wd.data(), bd.data(), p.y.data());
    k::detail::conv2d_backward_gemm<double, double>(g, xd.data(), wd.data(), gyd.data(), p.gx.data(), p.gw.data(),
                                                    nullptr);
    return p;
  }
};

}  // namespace

// bfloat16 on vdpbf16ps, F(2x2, 3x3) forced (V and U rounded to bfloat16, the products summed in
// float, each result rounded once): on 1 and 2 threads, its error against double stays within 3x
// the error of im2col + GEMM on vdpbf16ps, on every case's forward pass, grad input and grad
// weight. im2col's products are exact, its error is the result's rounding to bfloat16 (and the
// float sums); Winograd's adds the rounding of V and U (or of V and dM), each of about the same
// size: measured up to 2.7x im2col's. And it is what winograd_forward / winograd_grad_input /
// winograd_grad_weight with bfloat16 operands compute, bit for bit, whatever the thread count.
BOOST_AUTO_TEST_CASE(f2_in_bfloat16_on_vdpbf16ps_stays_within_3x_the_im2col_error, *ut::precondition(has_bf16_dot)) {
  const Bf16Setting on("on");
  AutoAfterwards restore;
  ThreadsAfterwards threads;
  constexpr double ratio_bound = 3.0;
  double worst_ratio = 0, worst_y = 0, worst_gx = 0, worst_gw = 0, worst_gemm_y = 0, worst_gemm_gx = 0,
         worst_gemm_gw = 0;
  for (const int t : {1, 2}) {
    set_num_threads(t);
    for (const Case& c : cases()) {
      const std::string what = std::string(c.name) + ", " + std::to_string(t) + " threads";
      const Bf16Operands o(c);
      k::set_conv_algorithm(k::ConvAlgorithm::winograd2);
      const Bf16Passes f2 = o.run();
      k::set_conv_algorithm(k::ConvAlgorithm::gemm);
      const Bf16Passes gemm = o.run();
      const Passes<double> want = o.in_double();
      const double e_y = relative_error(f2.y, want.y), e_gx = relative_error(f2.gx, want.gx),
                   e_gw = relative_error(f2.gw, want.gw);
      const double g_y = relative_error(gemm.y, want.y), g_gx = relative_error(gemm.gx, want.gx),
                   g_gw = relative_error(gemm.gw, want.gw);
      BOOST_TEST(e_y <= ratio_bound * g_y, what << ": forward error " << e_y << ", im2col's " << g_y);
      BOOST_TEST(e_gx <= ratio_bound * g_gx, what << ": grad input error " << e_gx << ", im2col's " << g_gx);
      BOOST_TEST(e_gw <= ratio_bound * g_gw, what << ": grad weight error " << e_gw << ", im2col's " << g_gw);
      worst_ratio = std::max({worst_ratio, e_y / g_y, e_gx / g_gx, e_gw / g_gw});
      worst_y = std::max(worst_y, e_y);
      worst_gx = std::max(worst_gx, e_gx);
      worst_gw = std::max(worst_gw, e_gw);
      worst_gemm_y = std::max(worst_gemm_y, g_y);
      worst_gemm_gx = std::max(worst_gemm_gx, g_gx);
      worst_gemm_gw = std::max(worst_gemm_gw, g_gw);

      Tensor<bf16> y = poisoned<bf16>(f2.y.shape()), gx = poisoned<bf16>(f2.gx.shape());
      const Tensor<float> xf = tensor_cast<float>(o.x), wf = tensor_cast<float>(o.w), bf = tensor_cast<float>(o.b),
                          gyf = tensor_cast<float>(o.gy);
      k::winograd_forward<2, float, bf16>(o.g, xf.data(), wf.data(), bf.data(), y.data());
      k::winograd_grad_input<2, float, bf16>(o.g, wf.data(), gyf.data(), gx.data());
      Tensor<float> gw(o.w.shape());
      k::winograd_grad_weight<2, float, bf16>(o.g, xf.data(), gyf.data(), gw.data());
      BOOST_TEST(bitwise_equal(y, f2.y), what << ": forward through conv2d_forward");
      BOOST_TEST(bitwise_equal(gx, f2.gx), what << ": grad input through conv2d_backward");
      BOOST_TEST(bitwise_equal(tensor_cast<bf16>(gw), f2.gw), what << ": grad weight through conv2d_backward");
    }
  }
  BOOST_TEST_MESSAGE("F(2x2, 3x3) bfloat16 on vdpbf16ps, worst error relative to the result: forward "
                     << worst_y << ", grad input " << worst_gx << ", grad weight " << worst_gw
                     << " (im2col + GEMM on vdpbf16ps: " << worst_gemm_y << ", " << worst_gemm_gx << ", "
                     << worst_gemm_gw << "); worst ratio " << worst_ratio);
}

// `auto` routes a bfloat16 3x3 stride-1 layer that default_conv_algorithm (bf16_products) gives
// winograd2 through the bfloat16 F(2x2, 3x3) in every pass (the same bits as forcing it), not
// im2col + GEMM (other bits, both near the double result); and a layer it gives gemm (32 channels:
// winograd2 in float, gemm on vdpbf16ps) through im2col + GEMM.
BOOST_AUTO_TEST_CASE(auto_routes_bfloat16_3x3_layers_by_shape, *ut::precondition(has_bf16_dot)) {
  const Bf16Setting on("on");
  AutoAfterwards restore;
  const Case winograd_case{"128->128 8x8 pad 1", 4, 128, 8, 8, 128, 1},
      gemm_case{"32->32 20x20 pad 1", 4, 32, 20, 20, 32, 1};
  for (const k::ConvPass pass : {k::ConvPass::forward, k::ConvPass::grad_input, k::ConvPass::grad_weight}) {
    for (const k::ConvProducts products : {k::ConvProducts::bf16_dot, k::ConvProducts::bf16_amx}) {
      BOOST_TEST((k::default_conv_algorithm(geometry(winograd_case), pass, products) == k::ConvAlgorithm::winograd2));
      BOOST_TEST((k::default_conv_algorithm(geometry(gemm_case), pass, products) == k::ConvAlgorithm::gemm));
    }
    BOOST_TEST((k::default_conv_algorithm(geometry(gemm_case), pass) == k::ConvAlgorithm::winograd2));
    // On AMX's tiles an output plane of 16x16 or more goes to the GEMM, at any channel count.
    const Case wide_plane{"128->128 16x16 pad 1", 4, 128, 16, 16, 128, 1};
    BOOST_TEST((k::default_conv_algorithm(geometry(wide_plane), pass, k::ConvProducts::bf16_amx) ==
                k::ConvAlgorithm::gemm));
    BOOST_TEST((k::default_conv_algorithm(geometry(wide_plane), pass, k::ConvProducts::bf16_dot) ==
                k::ConvAlgorithm::winograd2));
  }
  for (const Case& c : {winograd_case, gemm_case}) {
    const Bf16Operands o(c);
    k::set_conv_algorithm(k::ConvAlgorithm::automatic);
    const Bf16Passes automatic = o.run();
    k::set_conv_algorithm(k::ConvAlgorithm::winograd2);
    const Bf16Passes f2 = o.run();
    k::set_conv_algorithm(k::ConvAlgorithm::gemm);
    const Bf16Passes gemm = o.run();
    const Passes<double> want = o.in_double();
    const bool winograd = c.in_channels >= 128;
    BOOST_TEST(bitwise_equal(automatic.y, winograd ? f2.y : gemm.y), c.name);
    BOOST_TEST(bitwise_equal(automatic.gx, winograd ? f2.gx : gemm.gx), c.name);
    BOOST_TEST(bitwise_equal(automatic.gw, winograd ? f2.gw : gemm.gw), c.name);
    BOOST_TEST(!bitwise_equal(f2.y, gemm.y), c.name << ": so the comparisons above can tell them apart");
    BOOST_TEST(!bitwise_equal(f2.gx, gemm.gx), c.name);
    BOOST_TEST(!bitwise_equal(f2.gw, gemm.gw), c.name);
    for (const Bf16Passes* p : {&f2, &gemm}) {
      BOOST_TEST(relative_error(p->y, want.y) <= 1e-2, c.name << ": forward " << relative_error(p->y, want.y));
      BOOST_TEST(relative_error(p->gx, want.gx) <= 1e-2, c.name << ": grad input " << relative_error(p->gx, want.gx));
      BOOST_TEST(relative_error(p->gw, want.gw) <= 1e-2, c.name << ": grad weight " << relative_error(p->gw, want.gw));
    }
  }
}

BOOST_AUTO_TEST_CASE(in_double_every_pass_matches_im2col_gemm) {
  for (const Case& c : cases()) {
    const Errors e2 = errors_against_double<2, double>(c), e4 = errors_against_double<4, double>(c);
    for (const auto& [tile, e] : {std::pair{2, e2}, std::pair{4, e4}}) {
      BOOST_TEST(e.y <= 1e-12, c.name << ", F(" << tile << "): forward error " << e.y);
      BOOST_TEST(e.gx <= 1e-12, c.name << ", F(" << tile << "): grad input error " << e.gx);
      BOOST_TEST(e.gw <= 1e-12, c.name << ", F(" << tile << "): grad weight error " << e.gw);
    }
  }
}

// Errors are against the double result, relative to its largest magnitude; im2col + GEMM in float
// shows ~5e-7 on these cases (sums of up to 9 * 33 products).
// F(2x2): the transforms hold only 0, +-1 and +-1/2 (exact in binary), so a result is the GEMM's
// sum plus a few additions of terms of the same size: measured 2e-7 to 5e-7, bounded at 2e-6.
BOOST_AUTO_TEST_CASE(f2_in_float_stays_within_2e_6_of_the_result) { check_float<2>(2e-6); }

// F(4x4): the input transform multiplies by up to 5 and adds 6 terms each way, the output
// transform by up to 8 each way, and G's 1/6 and 1/24 are not exact in binary, so the
// transformed values carry larger rounding than the result they cancel down to: measured 3e-6 to
// 6e-6 (about 10x F(2x2)'s), bounded at 3e-5.
BOOST_AUTO_TEST_CASE(f4_in_float_stays_within_3e_5_of_the_result) { check_float<4>(3e-5); }

// auto: each pass runs default_conv_algorithm's choice for the shape, bit for bit, and nothing is
// measured; RGB input layers and small convolutions run im2col + GEMM.
BOOST_AUTO_TEST_CASE(auto_runs_the_choice_of_the_shape_and_measures_nothing) {
  AutoAfterwards restore;
  k::conv_algorithm_cache().clear();
  const Case c{"32->32 20x20", 4, 32, 20, 20, 32, 1};
  const k::Conv2dGeometry g = geometry(c);
  BOOST_TEST_REQUIRE(g.flops() >= k::winograd_flops);
  for (const auto pass : {k::ConvPass::forward, k::ConvPass::grad_input, k::ConvPass::grad_weight})
    BOOST_TEST((k::default_conv_algorithm(g, pass) == k::ConvAlgorithm::winograd2));
  const Tensor<float> x = seeded<float>({4, 32, 20, 20}, 1), w = seeded<float>({32, 32, 3, 3}, 2),
                      gy = seeded<float>({4, 32, 20, 20}, 3);
  const auto passes = [&](k::ConvAlgorithm a) {
    k::set_conv_algorithm(a);
    Passes<float> p{Tensor<float>({4, 32, 20, 20}), Tensor<float>(x.shape()), Tensor<float>(w.shape())};
    k::conv2d_forward<float>(g, x.data(), w.data(), nullptr, p.y.data());
    k::conv2d_backward<float>(g, x.data(), w.data(), gy.data(), p.gx.data(), p.gw.data(), nullptr);
    return p;
  };
  const Passes<float> automatic = passes(k::ConvAlgorithm::automatic), f2 = passes(k::ConvAlgorithm::winograd2),
                      gemm = passes(k::ConvAlgorithm::gemm);
  BOOST_TEST(bitwise_equal(automatic.y, f2.y));
  BOOST_TEST(bitwise_equal(automatic.gx, f2.gx));
  BOOST_TEST(bitwise_equal(automatic.gw, f2.gw));
  BOOST_TEST(!bitwise_equal(f2.y, gemm.y));  // so the comparisons above can tell them apart
  BOOST_TEST(k::conv_algorithm_cache().measurements() == 0);

  const k::Conv2dGeometry rgb = k::make_conv2d_geometry({4, 3, 64, 64}, {32, 3, 3, 3}, 1, 1, 1, 1, 1, 1, 1);
  BOOST_TEST_REQUIRE(rgb.flops() >= k::winograd_flops);
  BOOST_TEST((k::default_conv_algorithm(rgb, k::ConvPass::forward) == k::ConvAlgorithm::gemm));
  const k::Conv2dGeometry small = geometry(Case{"16->16 6x6", 1, 16, 6, 6, 16, 1});
  BOOST_TEST_REQUIRE(small.flops() < k::winograd_flops);
  BOOST_TEST((k::default_conv_algorithm(small, k::ConvPass::forward) == k::ConvAlgorithm::gemm));
}

// benchmark (opt-in): the first call of a pass per shape times the candidates and keeps one.
BOOST_AUTO_TEST_CASE(benchmark_measures_a_pass_once_per_shape_then_runs_its_choice) {
  AutoAfterwards restore;
  k::set_conv_algorithm(k::ConvAlgorithm::benchmark);
  k::ConvAlgorithmCache& cache = k::conv_algorithm_cache();
  cache.clear();
  const Case c{"32->32 20x20", 4, 32, 20, 20, 32, 1};
  const k::Conv2dGeometry g = geometry(c);
  BOOST_TEST_REQUIRE(g.flops() >= k::winograd_flops);
  const Tensor<float> x = seeded<float>({4, 32, 20, 20}, 1), w = seeded<float>({32, 32, 3, 3}, 2),
                      gy = seeded<float>({4, 32, 20, 20}, 3);
  Tensor<float> y({4, 32, 20, 20}), gx(x.shape()), gw(w.shape());
  k::conv2d_forward<float>(g, x.data(), w.data(), nullptr, y.data());
  BOOST_TEST(cache.measurements() == 1);
  const auto key = k::ConvAlgorithmCache::key(g, k::ConvPass::forward, sizeof(float), num_threads());
  const auto chosen = cache.find(key);
  BOOST_TEST_REQUIRE(chosen.has_value());
  k::conv2d_forward<float>(g, x.data(), w.data(), nullptr, y.data());
  BOOST_TEST(cache.measurements() == 1);
  // The second call ran the cached choice: its result is that algorithm's, bit for bit.
  k::set_conv_algorithm(*chosen);
  Tensor<float> y_chosen({4, 32, 20, 20});
  k::conv2d_forward<float>(g, x.data(), w.data(), nullptr, y_chosen.data());
  BOOST_TEST(bitwise_equal(y, y_chosen));
  k::set_conv_algorithm(k::ConvAlgorithm::benchmark);
  // Backward: grad input and grad weight are measured once each.
  k::conv2d_backward<float>(g, x.data(), w.data(), gy.data(), gx.data(), gw.data(), nullptr);
  BOOST_TEST(cache.measurements() == 3);
  k::conv2d_backward<float>(g, x.data(), w.data(), gy.data(), gx.data(), gw.data(), nullptr);
  BOOST_TEST(cache.measurements() == 3);
  // Another shape is measured on its own.
  const k::Conv2dGeometry other = k::make_conv2d_geometry({4, 32, 20, 20}, {32, 32, 3, 3}, 1, 1, 0, 0, 1, 1, 1);
  Tensor<float> y_other({4, 32, 18, 18});
  k::conv2d_forward<float>(other, x.data(), w.data(), nullptr, y_other.data());
  BOOST_TEST(cache.measurements() == 4);
  // A small convolution is not worth measuring: im2col + GEMM, nothing measured.
  const Case small{"4->4 6x6", 1, 4, 6, 6, 4, 1};
  const Passes<float> gemm = run<0, float>(small);
  const k::Conv2dGeometry gs = geometry(small);
  const Tensor<float> xs = seeded<float>({1, 4, 6, 6}, 1), ws = seeded<float>({4, 4, 3, 3}, 2), bs = seeded<float>({4}, 3);
  Tensor<float> ys({1, 4, 6, 6});
  k::conv2d_forward<float>(gs, xs.data(), ws.data(), bs.data(), ys.data());
  BOOST_TEST(bitwise_equal(ys, gemm.y));
  BOOST_TEST(cache.measurements() == 4);
}

BOOST_AUTO_TEST_CASE(a_forced_algorithm_runs_where_it_applies_and_measures_nothing) {
  AutoAfterwards restore;
  k::conv_algorithm_cache().clear();
  const Case c = cases()[5];
  const k::Conv2dGeometry g = geometry(c);
  const Tensor<float> x = seeded<float>({c.batch, c.in_channels, c.h, c.w}, 1),
                      w = seeded<float>({c.out_channels, c.in_channels, 3, 3}, 2), b = seeded<float>({c.out_channels}, 3),
                      gy = seeded<float>({c.batch, c.out_channels, g.out_h, g.out_w}, 4);
  const auto through_dispatch = [&](k::ConvAlgorithm a) {
    k::set_conv_algorithm(a);
    Passes<float> p{Tensor<float>({c.batch, c.out_channels, g.out_h, g.out_w}), Tensor<float>(x.shape()),
                       Tensor<float>(w.shape())};
    k::conv2d_forward<float>(g, x.data(), w.data(), b.data(), p.y.data());
    k::conv2d_backward<float>(g, x.data(), w.data(), gy.data(), p.gx.data(), p.gw.data(), nullptr);
    return p;
  };
  const Passes<float> gemm = through_dispatch(k::ConvAlgorithm::gemm), reference = run<0, float>(c);
  const Passes<float> f2_forced = through_dispatch(k::ConvAlgorithm::winograd2), f2 = run<2, float>(c);
  const Passes<float> f4_forced = through_dispatch(k::ConvAlgorithm::winograd4), f4 = run<4, float>(c);
  BOOST_TEST(bitwise_equal(gemm.y, reference.y));
  BOOST_TEST(bitwise_equal(gemm.gx, reference.gx));
  BOOST_TEST(bitwise_equal(gemm.gw, reference.gw));
  BOOST_TEST(bitwise_equal(f2_forced.y, f2.y));
  BOOST_TEST(bitwise_equal(f2_forced.gx, f2.gx));
  BOOST_TEST(bitwise_equal(f2_forced.gw, f2.gw));
  BOOST_TEST(bitwise_equal(f4_forced.y, f4.y));
  BOOST_TEST(bitwise_equal(f4_forced.gx, f4.gx));
  BOOST_TEST(bitwise_equal(f4_forced.gw, f4.gw));
  BOOST_TEST(!bitwise_equal(f4.y, reference.y));  // so the comparisons above can tell them apart
  BOOST_TEST(k::conv_algorithm_cache().measurements() == 0);

  // Where Winograd does not apply (stride 2), a forced Winograd runs im2col + GEMM.
  k::set_conv_algorithm(k::ConvAlgorithm::winograd4);
  const k::Conv2dGeometry strided = k::make_conv2d_geometry(x.shape(), w.shape(), 2, 2, 1, 1, 1, 1, 1);
  Tensor<float> y_forced({c.batch, c.out_channels, strided.out_h, strided.out_w}), y_gemm = y_forced.clone();
  k::conv2d_forward<float>(strided, x.data(), w.data(), b.data(), y_forced.data());
  k::detail::conv2d_forward_gemm<float, float>(strided, x.data(), w.data(), b.data(), y_gemm.data());
  BOOST_TEST(bitwise_equal(y_forced, y_gemm));
}

BOOST_AUTO_TEST_CASE(an_unknown_algorithm_name_is_an_error_naming_the_choices) {
  try {
    k::parse_conv_algorithm("fastest");
    BOOST_FAIL("no error");
  } catch (const Error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("PTRAIN_CONV_ALGO='fastest'") != std::string::npos, what);
    BOOST_TEST(what.find("winograd4") != std::string::npos, what);
  }
  BOOST_TEST((k::parse_conv_algorithm("winograd2") == k::ConvAlgorithm::winograd2));
  BOOST_TEST((k::parse_conv_algorithm("gemm") == k::ConvAlgorithm::gemm));
  BOOST_TEST((k::parse_conv_algorithm("auto") == k::ConvAlgorithm::automatic));
  BOOST_TEST((k::parse_conv_algorithm("benchmark") == k::ConvAlgorithm::benchmark));
}

BOOST_AUTO_TEST_SUITE_END()
