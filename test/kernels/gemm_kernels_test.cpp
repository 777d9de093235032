// kernels/cpu/gemm.hpp's bfloat16 products on their paths: vdpbf16ps (gemm_bf16.hpp, where the
// CPU has AVX512_BF16; AMX tiles where it has those too, PTRAIN_CPU_AMX=off declining them) and
// the float GEMM on widened copies (PTRAIN_CPU_BF16=off, and every CPU
// without it), against a double reference; which path runs follows PTRAIN_CPU_BF16; and the
// bfloat16 convolutions of kernels/cpu/conv.hpp, whose GEMMs and sums the first path takes over
// (with im2col_bf16.hpp packing their columns straight from the image).
//
// The bound: the operands are bfloat16, so every product is exact in float and the only error is
// float summation, at most (k + 4) * 2^-24 * (|alpha| sum_k |a_ik b_kj| + |beta c_ij|) for k terms
// (the 4 covers alpha, beta and the pairs vdpbf16ps adds); a bfloat16 result adds its rounding,
// 2^-8 |c| (half an ulp is 2^-9).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <ptrain/device/threads.hpp>
#include <ptrain/kernels/cpu/conv.hpp>
#include <ptrain/kernels/cpu/gemm.hpp>
#include <ptrain/kernels/cpu/im2col_bf16.hpp>

#include "bf16_setting.hpp"
#include "spatial_compare.hpp"

using namespace ptrain;
using namespace ptrain::test;
namespace ut = boost::unit_test;
BOOST_AUTO_TEST_SUITE(gemm_kernels_test)

using bf16 = ptrain::bfloat16;  // OpenBLAS's header declares a global bfloat16 too

namespace {

boost::test_tools::assertion_result has_bf16_dot(ut::test_unit_id) {
  boost::test_tools::assertion_result has(kernels::cpu_has_bf16_dot());
  has.message() << "skipped: this CPU has no AVX512_BF16 (vdpbf16ps); its bfloat16 GEMMs take the float path, "
                   "tested by the other cases";
  return has;
}

boost::test_tools::assertion_result has_amx(ut::test_unit_id) {
  boost::test_tools::assertion_result has(kernels::cpu_has_amx_bf16());
  has.message() << "skipped: this CPU (or its kernel) offers no AMX bfloat16 tiles; its bfloat16 GEMMs run on "
                   "vdpbf16ps, tested by the other cases";
  return has;
}

// The paths this CPU can take: "off" always, "on" where it has vdpbf16ps (said when it has not).
std::vector<const char*> paths() {
  if (kernels::cpu_has_bf16_dot()) return {"on", "off"};
  BOOST_TEST_MESSAGE("PTRAIN_CPU_BF16=on skipped: this CPU has no AVX512_BF16; only the float path runs");
  return {"off"};
}

// A rows x cols bfloat16 matrix, rows ld apart; the padding between rows is NaN, so reading it
// poisons the result.
std::vector<bf16> matrix(std::int64_t rows, std::int64_t cols, std::int64_t ld, std::uint64_t seed) {
  std::vector<bf16> m(static_cast<std::size_t>(std::max<std::int64_t>(1, rows * ld)),
                          bf16(std::numeric_limits<float>::quiet_NaN()));
  const Tensor<double> values = random_tensor({rows, cols}, seed);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) m[static_cast<std::size_t>(r * ld + c)] = bf16(float(values[r * cols + c]));
  return m;
}

struct Product {
  std::int64_t m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
  std::string name() const {
    return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (trans_a ? " A^T" : "") +
           (trans_b ? " B^T" : "") + " alpha " + std::to_string(alpha) + " beta " + std::to_string(beta);
  }
};

// Odd sizes around the kernels' tiles (8 x 32; AMX's 16 or 32 x 32), pair (K odd) and blocks (256
// of K, 128 rows, 1024 columns), in every transpose (Linear: A B^T, A B, A^T B; bmm: all four);
// beta 0 and not.
std::vector<Product> products() {
  std::vector<Product> all;
  const std::int64_t sizes[][3] = {{1, 1, 1},    {7, 33, 5},     {8, 32, 2},      {9, 31, 257},
                                   {37, 65, 513}, {130, 1030, 40}, {70, 40, 64}, {16, 64, 40}, {3, 5, 0}};
  for (const auto& s : sizes)
    for (int t = 0; t < 4; ++t) {
      all.push_back({s[0], s[1], s[2], (t & 1) != 0, (t & 2) != 0, 1.0f, 0.0f});
      all.push_back({s[0], s[1], s[2], (t & 1) != 0, (t & 2) != 0, 0.5f, 0.75f});
    }
  return all;
}

// The operands of one product, their leading dimensions padded by 3, and C's starting values;
// with the exact sum_k a_ik b_kj and sum_k |a_ik b_kj| of each element of C, in double, row-major.
struct Operands {
  std::int64_t lda, ldb, ldc;
  std::vector<bf16> a, b;
  std::vector<float> c0;
  std::vector<double> sum, magnitude;
  explicit Operands(const Product& p)
      : lda((p.trans_a ? p.m : p.k) + 3),
        ldb((p.trans_b ? p.k : p.n) + 3),
        ldc(p.n + 3),
        a(matrix(p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, lda, 11)),
        b(matrix(p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, ldb, 12)),
        sum(static_cast<std::size_t>(p.m * p.n)),
        magnitude(sum.size()) {
    const std::vector<bf16> c = matrix(p.m, p.n, ldc, 13);
    for (const bf16 v : c) c0.push_back(static_cast<float>(v));
    // A as m x k and B as n x k, each row contiguous: the reference is most of this file's time
    // where the tests are unoptimised (the sanitizer job).
    std::vector<double> rows_a(static_cast<std::size_t>(p.m * p.k)), rows_b(static_cast<std::size_t>(p.n * p.k));
    for (std::int64_t q = 0; q < p.k; ++q) {
      for (std::int64_t i = 0; i < p.m; ++i)
        rows_a[static_cast<std::size_t>(i * p.k + q)] =
            static_cast<double>(a[static_cast<std::size_t>(p.trans_a ? q * lda + i : i * lda + q)]);
      for (std::int64_t j = 0; j < p.n; ++j)
        rows_b[static_cast<std::size_t>(j * p.k + q)] =
            static_cast<double>(b[static_cast<std::size_t>(p.trans_b ? j * ldb + q : q * ldb + j)]);
    }
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) {
        const double* x = rows_a.data() + i * p.k;
        const double* y = rows_b.data() + j * p.k;
        double exact = 0, size = 0;
        for (std::int64_t q = 0; q < p.k; ++q) {
          exact += x[q] * y[q];
          size += std::abs(x[q] * y[q]);
        }
        sum[static_cast<std::size_t>(i * p.n + j)] = exact;
        magnitude[static_cast<std::size_t>(i * p.n + j)] = size;
      }
  }
};

// The operands of p, made once per shape and transposition (alpha and beta do not change them) for
// all the cases of this file.
const Operands& operands(const Product& p) {
  static std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, bool, bool>, Operands> made;
  const auto key = std::make_tuple(p.m, p.n, p.k, p.trans_a, p.trans_b);
  auto found = made.find(key);
  if (found == made.end()) found = made.emplace(key, Operands(p)).first;
  return found->second;
}

// The worst |got - exact| / bound over C (the bound at the top of the file; rounded: a bf16
// C).
template <class C>
double worst_error(const Product& p, const Operands& o, const std::vector<C>& got, bool rounded) {
  double worst = 0;
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      const double c0 = p.beta == 0.0f ? 0.0 : o.c0[static_cast<std::size_t>(i * o.ldc + j)];
      const double exact = p.alpha * o.sum[static_cast<std::size_t>(i * p.n + j)] + p.beta * c0;
      double bound = double(p.k + 4) * std::ldexp(1.0, -24) *
                     (std::abs(p.alpha) * o.magnitude[static_cast<std::size_t>(i * p.n + j)] + std::abs(p.beta * c0));
      if (rounded) bound += std::ldexp(1.0, -8) * std::abs(exact);
      const double error = std::abs(static_cast<double>(got[static_cast<std::size_t>(i * o.ldc + j)]) - exact);
      worst = std::max(worst, bound == 0 ? (error == 0 ? 0.0 : std::numeric_limits<double>::infinity()) : error / bound);
      if (std::isnan(error)) worst = std::numeric_limits<double>::infinity();
    }
  return worst;
}

// C's starting values in the type of C; its padding NaN, which a beta-0 product must not read.
template <class C>
std::vector<C> start(const Product& p, const Operands& o) {
  std::vector<C> c(o.c0.size());
  for (std::size_t e = 0; e < c.size(); ++e) c[e] = C(o.c0[e]);
  if (p.beta == 0.0f)
    for (auto& v : c) v = C(std::numeric_limits<float>::quiet_NaN());
  return c;
}

}  // namespace

// On AMX tiles where the CPU has them (alpha 1), on vdpbf16ps with PTRAIN_CPU_AMX=off and elsewhere.
BOOST_AUTO_TEST_CASE(vdpbf16ps_and_amx_kernels_are_within_the_float_summation_bound, *ut::precondition(has_bf16_dot)) {
#if defined(PTRAIN_HALF_X86)
  for (const char* amx : {"on", "off"}) {
    const Bf16Setting setting(amx, "PTRAIN_CPU_AMX");
    BOOST_TEST(kernels::cpu_amx_enabled() == (std::string(amx) == "on" && kernels::cpu_has_amx_bf16()));
    for (const Product& p : products()) {
      const Operands& o = operands(p);
      std::vector<float> c = start<float>(p, o);
      kernels::detail::gemm_bf16_serial(p.trans_a, p.trans_b, p.m, p.n, p.k, p.alpha, o.a.data(), o.lda, o.b.data(),
                                        o.ldb, p.beta, c.data(), o.ldc);
      BOOST_TEST(worst_error(p, o, c, false) <= 1.0,
                 "PTRAIN_CPU_AMX=" << amx << ", " << p.name() << ": error / bound " << worst_error(p, o, c, false));
    }
  }
#endif
}

// AMX adds each step of 16 pairs onto C's tile; vdpbf16ps sums a k-block in registers and adds
// that to C: 1 + 2^-24 + 2^-24 in two steps is 1 on the tiles (each sum a tie, to even), 1 + 2^-23
// on vdpbf16ps.
BOOST_AUTO_TEST_CASE(the_path_follows_ptrain_cpu_amx, *ut::precondition(has_amx)) {
#if defined(PTRAIN_HALF_X86)
  std::vector<bf16> a(64, bf16(0.0f)), b(64, bf16(0.0f));
  a[0] = a[32] = bf16(1.0f);
  b[0] = b[32] = bf16(std::ldexp(1.0f, -24));
  const auto product = [&] {
    float c = 1.0f;
    kernels::detail::gemm_bf16_serial(false, false, 1, 1, 64, 1.0f, a.data(), 64, b.data(), 1, 1.0f, &c, 1);
    return c;
  };
  {
    const Bf16Setting unset(nullptr, "PTRAIN_CPU_AMX");
    BOOST_TEST(kernels::cpu_amx_enabled());
    BOOST_TEST(product() == 1.0f);
  }
  {
    const Bf16Setting off("off", "PTRAIN_CPU_AMX");
    BOOST_TEST(!kernels::cpu_amx_enabled());
    BOOST_TEST(product() == 1.0f + std::ldexp(1.0f, -23));
  }
  {
    const Bf16Setting float_path("off");  // no bfloat16 kernels, so no AMX either
    BOOST_TEST(!kernels::cpu_amx_enabled());
  }
#endif
}

BOOST_AUTO_TEST_CASE(a_bad_ptrain_cpu_amx_is_an_error_on_every_cpu) {
  const Bf16Setting bad("yes", "PTRAIN_CPU_AMX");
  BOOST_CHECK_EXCEPTION(kernels::cpu_amx_enabled(), Error, [](const Error& e) {
    return std::string(e.what()).find("PTRAIN_CPU_AMX must be 'on' or 'off', got 'yes'") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(bfloat16_products_into_float_are_within_the_bound_on_each_path) {
  for (const char* path : paths()) {
    const Bf16Setting setting(path);
    BOOST_TEST(kernels::cpu_bf16_gemm_enabled() == (std::string(path) == "on"));
    for (const Product& p : products()) {
      const Operands& o = operands(p);
      std::vector<float> c = start<float>(p, o);
      kernels::gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, p.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, p.beta,
                    c.data(), o.ldc);
      BOOST_TEST(worst_error(p, o, c, false) <= 1.0,
                 "PTRAIN_CPU_BF16=" << path << ", " << p.name() << ": error / bound " << worst_error(p, o, c, false));
    }
  }
}

BOOST_AUTO_TEST_CASE(bfloat16_products_are_rounded_once_on_each_path) {
  for (const char* path : paths()) {
    const Bf16Setting setting(path);
    for (const Product& p : products()) {
      const Operands& o = operands(p);
      std::vector<bf16> c = start<bf16>(p, o);
      kernels::gemm<bf16>(p.trans_a, p.trans_b, p.m, p.n, p.k, bf16(p.alpha), o.a.data(), o.lda, o.b.data(),
                              o.ldb, bf16(p.beta), c.data(), o.ldc);
      BOOST_TEST(worst_error(p, o, c, true) <= 1.0,
                 "PTRAIN_CPU_BF16=" << path << ", " << p.name() << ": error / bound " << worst_error(p, o, c, true));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_bad_ptrain_cpu_bf16_is_an_error_on_every_cpu) {
  const Bf16Setting bad("yes");
  BOOST_CHECK_EXCEPTION(kernels::cpu_bf16_gemm_enabled(), Error, [](const Error& e) {
    return std::string(e.what()).find("PTRAIN_CPU_BF16 must be 'on' or 'off', got 'yes'") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(the_path_follows_ptrain_cpu_bf16, *ut::precondition(has_bf16_dot)) {
  // vdpbf16ps reads a bf16 denormal as zero; the float GEMM multiplies it: 2^-130 * 2^10.
  const bf16 a(std::ldexp(1.0f, -130)), b(1024.0f);
  const auto product = [&] {
    float c = -1;
    kernels::gemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
    return c;
  };
  {
    const Bf16Setting unset(nullptr);
    BOOST_TEST(kernels::cpu_bf16_gemm_enabled());
    BOOST_TEST(product() == 0.0f);
  }
  {
    const Bf16Setting on("on");
    BOOST_TEST(product() == 0.0f);
  }
  {
    const Bf16Setting off("off");
    BOOST_TEST(!kernels::cpu_bf16_gemm_enabled());
    BOOST_TEST(product() == std::ldexp(1.0f, -120));
  }
#if defined(PTRAIN_HALF_X86)
  // A product large enough to be split over the threads: each slice is the serial kernel's.
  const Bf16Setting on("on");
  const int threads = num_threads();
  set_num_threads(2);
  for (const bool trans_a : {false, true}) {
    const Product p{300, 200, 77, trans_a, false, 1.0f, 0.0f};
    const Operands o(p);
    std::vector<float> split = start<float>(p, o), serial = start<float>(p, o);
    kernels::gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, p.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, p.beta,
                  split.data(), o.ldc);
    kernels::detail::gemm_bf16_serial(p.trans_a, p.trans_b, p.m, p.n, p.k, p.alpha, o.a.data(), o.lda, o.b.data(),
                                      o.ldb, p.beta, serial.data(), o.ldc);
    std::int64_t differ = 0;
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) differ += split[std::size_t(i * o.ldc + j)] != serial[std::size_t(i * o.ldc + j)];
    BOOST_TEST(differ == 0, p.name() << ": " << differ << " elements differ from the serial kernel's");
  }
  set_num_threads(threads);
#endif
}

// kernels::gemm's float products run OpenBLAS's, or Eigen's where OpenBLAS's kernel set is older
// than the build targets (kernels::blas_below_build): checked bit for bit against each engine
// called directly. ctest runs this case a second time with OPENBLAS_CORETYPE=Prescott, where a
// build for AVX2 and FMA or more must take Eigen's (kernels/gemm_kernels_test/openblas_prescott).
BOOST_AUTO_TEST_CASE(float_gemm_runs_eigen_where_openblas_runs_older_kernels) {
  const std::int64_t m = 37, n = 65, k = 257;  // under a million multiply-adds: one thread, one call
  const Tensor<float> a = tensor_cast<float>(random_tensor({m, k}, 21)), b = tensor_cast<float>(random_tensor({k, n}, 22));
  std::vector<float> got(static_cast<std::size_t>(m * n)), eigen(got.size());
  kernels::gemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, got.data(), n);
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<Mat>(eigen.data(), m, n).noalias() =
      Eigen::Map<const Mat>(a.data(), m, k) * Eigen::Map<const Mat>(b.data(), k, n);
#if defined(PTRAIN_HAS_CBLAS)
  std::vector<float> blas(got.size());
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, a.data(), int(k), b.data(),
              int(n), 0.0f, blas.data(), int(n));
  BOOST_TEST_REQUIRE((blas != eigen), "OpenBLAS and Eigen agree bit for bit here: the case cannot tell them apart");
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
#if defined(__AVX2__) && defined(__FMA__)
  if (forced && std::string(forced) == "Prescott") BOOST_TEST(kernels::blas_below_build());
#else
  BOOST_TEST(!kernels::blas_below_build());
#endif
  BOOST_TEST(kernels::float_gemm_engine() == (kernels::blas_below_build() ? "eigen" : "openblas"));
  BOOST_TEST((got == (kernels::blas_below_build() ? eigen : blas)),
             "kernels::gemm's bits are not " << kernels::float_gemm_engine() << "'s");
#else
  BOOST_TEST(kernels::float_gemm_engine() == "eigen");
  BOOST_TEST((got == eigen));
#endif
}

namespace {

struct ConvCase {
  const char* name;
  Shape x, w;
  std::int64_t stride, pad, groups;
};

// The routes of conv.hpp: grad-input as a convolution (stride 1, >= 16 channels) or by col2im,
// 1x1 reading the image, small images grouped into one GEMM, groups.
const ConvCase conv_cases[] = {
    {"3x3 pad 1, 16 channels", {3, 16, 9, 7}, {24, 16, 3, 3}, 1, 1, 1},
    {"3x3 stride 2 pad 1, odd sizes", {3, 5, 9, 7}, {7, 5, 3, 3}, 2, 1, 1},
    {"1x1 pointwise, groups 2", {2, 6, 5, 5}, {4, 3, 1, 1}, 1, 0, 2},
    {"small images grouped", {9, 4, 3, 3}, {5, 4, 2, 2}, 1, 0, 1},
};

template <class T>
Tensor<T> cast_abs(const Tensor<double>& t) {
  Tensor<T> out(t.shape());
  for (std::int64_t e = 0; e < t.numel(); ++e) out[e] = T(std::abs(t[e]));
  return out;
}

// The worst |got - exact| / (2^-8 |exact| + (terms + 4) 2^-24 magnitude) over a tensor.
double worst_conv_error(const Tensor<bf16>& got, const Tensor<double>& exact, const Tensor<double>& magnitude,
                        std::int64_t terms) {
  double worst = 0;
  for (std::int64_t e = 0; e < got.numel(); ++e) {
    const double bound = std::ldexp(1.0, -8) * std::abs(exact[e]) + double(terms + 4) * std::ldexp(1.0, -24) * magnitude[e];
    const double error = std::abs(static_cast<double>(got[e]) - exact[e]);
    worst = std::max(worst, std::isnan(error) ? std::numeric_limits<double>::infinity() : error / bound);
  }
  return worst;
}

std::int64_t elements_whose_bits_differ(const Tensor<bf16>& a, const Tensor<bf16>& b) {
  std::int64_t differ = 0;
  for (std::int64_t e = 0; e < a.numel(); ++e)
    differ += std::memcmp(static_cast<const void*>(a.data() + e), static_cast<const void*>(b.data() + e),
                          sizeof(bf16)) != 0;
  return differ;
}

}  // namespace

BOOST_AUTO_TEST_CASE(bfloat16_convolution_is_within_the_bound_on_each_path) {
  for (const char* path : paths()) {
    const Bf16Setting setting(path);
    for (const ConvCase& c : conv_cases) {
      const kernels::Conv2dGeometry g =
          kernels::make_conv2d_geometry(c.x, c.w, c.stride, c.stride, c.pad, c.pad, 1, 1, c.groups);
      const Shape y_shape{g.batch, g.out_channels, g.out_h, g.out_w};
      // bf16 values, and the same values in double for the exact result.
      const Tensor<bf16> x = seeded<bf16>(c.x, 1), w = seeded<bf16>(c.w, 2),
                             b = seeded<bf16>({g.out_channels}, 3), gy = seeded<bf16>(y_shape, 4);
      const Tensor<double> xd = tensor_cast<double>(x), wd = tensor_cast<double>(w), bd = tensor_cast<double>(b),
                           gyd = tensor_cast<double>(gy);
      Tensor<bf16> y(y_shape), gx(c.x), gw(c.w), gb({g.out_channels});
      kernels::conv2d_forward<bf16>(g, x.data(), w.data(), b.data(), y.data());
      kernels::conv2d_backward<bf16>(g, x.data(), w.data(), gy.data(), gx.data(), gw.data(), gb.data());
      Tensor<double> y_exact(y_shape), gx_exact(c.x), gw_exact(c.w), gb_exact({g.out_channels});
      kernels::conv2d_forward<double>(g, xd.data(), wd.data(), bd.data(), y_exact.data());
      kernels::conv2d_backward<double>(g, xd.data(), wd.data(), gyd.data(), gx_exact.data(), gw_exact.data(),
                                       gb_exact.data());
      // The sums of |terms|: the same convolutions of absolute values.
      const Tensor<double> xa = cast_abs<double>(xd), wa = cast_abs<double>(wd), ba = cast_abs<double>(bd),
                           gya = cast_abs<double>(gyd);
      Tensor<double> y_mag(y_shape), gx_mag(c.x), gw_mag(c.w), gb_mag({g.out_channels});
      kernels::conv2d_forward<double>(g, xa.data(), wa.data(), ba.data(), y_mag.data());
      kernels::conv2d_backward<double>(g, xa.data(), wa.data(), gya.data(), gx_mag.data(), gw_mag.data(), gb_mag.data());
      const std::string what = std::string("PTRAIN_CPU_BF16=") + path + ", " + c.name;
      const std::int64_t reduction = g.col_rows() / g.groups, positions = g.batch * g.out_plane();
      BOOST_TEST(worst_conv_error(y, y_exact, y_mag, reduction) <= 1.0, what << ": forward");
      BOOST_TEST(worst_conv_error(gx, gx_exact, gx_mag, g.out_channels / g.groups * g.kernel_area()) <= 1.0,
                 what << ": grad input");
      BOOST_TEST(worst_conv_error(gw, gw_exact, gw_mag, positions) <= 1.0, what << ": grad weight");
      BOOST_TEST(worst_conv_error(gb, gb_exact, gb_mag, positions) <= 1.0, what << ": grad bias");
    }
  }
}

// On vdpbf16ps, y and a stride-1 grad input are rounded to bfloat16 block by block as their GEMMs
// finish: the same bytes as the float result rounded in one pass afterwards, whatever the blocks
// (bands of one row, single images, several images per GEMM).
BOOST_AUTO_TEST_CASE(bfloat16_convolution_rounds_each_block_as_one_pass_would, *ut::precondition(has_bf16_dot)) {
  const Bf16Setting on("on");
  const kernels::ConvBlocking blockings[] = {{}, {.target_columns = 1, .column_budget = 1}, {.target_columns = 64}};
  for (const ConvCase& c : conv_cases) {
    const kernels::Conv2dGeometry g =
        kernels::make_conv2d_geometry(c.x, c.w, c.stride, c.stride, c.pad, c.pad, 1, 1, c.groups);
    const Shape y_shape{g.batch, g.out_channels, g.out_h, g.out_w};
    const Tensor<bf16> x = seeded<bf16>(c.x, 1), w = seeded<bf16>(c.w, 2), b = seeded<bf16>({g.out_channels}, 3),
                       gy = seeded<bf16>(y_shape, 4);
    const Tensor<float> bf = tensor_cast<float>(b);
    for (const kernels::ConvBlocking& blocking : blockings) {
      const std::string what = std::string(c.name) + ", target columns " + std::to_string(blocking.target_columns);
      Tensor<bf16> y = poisoned<bf16>(y_shape), gx = poisoned<bf16>(c.x);
      kernels::conv2d_forward<bf16>(g, x.data(), w.data(), b.data(), y.data(), blocking);
      kernels::conv2d_backward<bf16>(g, x.data(), w.data(), gy.data(), gx.data(), nullptr, nullptr, blocking);
      Tensor<float> yf(y_shape), gxf(c.x);
      kernels::detail::conv2d_forward_gemm<bf16, float>(g, x.data(), w.data(), bf.data(), yf.data(), blocking);
      kernels::detail::conv2d_backward_gemm<bf16, float>(g, nullptr, w.data(), gy.data(), gxf.data(), nullptr, nullptr,
                                                         blocking);
      BOOST_TEST(elements_whose_bits_differ(y, tensor_cast<bf16>(yf)) == 0, what << ": forward");
      BOOST_TEST(elements_whose_bits_differ(gx, tensor_cast<bf16>(gxf)) == 0, what << ": grad input");
    }
  }
}

#if defined(PTRAIN_HALF_X86)
namespace {

// Stride-1 "same"-width convolutions, where im2col_bf16.hpp packs the columns from the image:
// paddings that clip every side, an odd column count (3 channels: 27 rows), a 5x5 and a dilated
// kernel, groups, several k-blocks of 256 (64 channels: 576 rows), image sizes whose panels end
// inside a row or an image, and a taller output than input.
struct SameWidthCase {
  const char* name;
  Shape x, w;
  std::int64_t pad_h, pad_w, dilation, groups;
};
const SameWidthCase same_width_cases[] = {
    {"3x3 pad 1, 8x8 (a panel of 32 is 4 rows)", {5, 16, 8, 8}, {16, 16, 3, 3}, 1, 1, 1, 1},
    {"3x3 pad 1, 3 channels (odd k)", {2, 3, 32, 32}, {16, 3, 3, 3}, 1, 1, 1, 1},
    {"3x3 pad 1, 64 channels (3 k-blocks), 9x7", {3, 64, 9, 7}, {8, 64, 3, 3}, 1, 1, 1, 1},
    {"5x5 pad 2, 12x20", {2, 5, 12, 20}, {7, 5, 5, 5}, 2, 2, 1, 1},
    {"3x3 dilation 2 pad 2, 16x16", {2, 4, 16, 16}, {6, 4, 3, 3}, 2, 2, 2, 1},
    {"3x3 pad 1, groups 2, 4x8", {9, 6, 4, 8}, {4, 3, 3, 3}, 1, 1, 1, 2},
    {"1x3 pad (2, 1): taller output", {2, 4, 6, 32}, {5, 4, 1, 3}, 2, 1, 1, 1},
};

std::int64_t float_bits_differ(const Tensor<float>& a, const Tensor<float>& b) {
  std::int64_t differ = 0;
  for (std::int64_t e = 0; e < a.numel(); ++e) differ += std::memcmp(a.data() + e, b.data() + e, sizeof(float)) != 0;
  return differ;
}

kernels::Conv2dGeometry same_width_geometry(const SameWidthCase& c) {
  return kernels::make_conv2d_geometry(c.x, c.w, 1, 1, c.pad_h, c.pad_w, c.dilation, c.dilation, c.groups);
}

}  // namespace

// The packer writes the words pack_pairs writes from im2col's column matrix, for every panel,
// k-block and block of images or rows.
BOOST_AUTO_TEST_CASE(im2col_packed_from_the_image_is_pack_pairs_of_im2col, *ut::precondition(has_bf16_dot)) {
  for (const SameWidthCase& c : same_width_cases) {
    const kernels::Conv2dGeometry g = same_width_geometry(c);
    const Tensor<bf16> x = seeded<bf16>(c.x, 1);
    const std::int64_t OW = g.out_w, in_image = g.in_channels * g.in_plane(), R = g.col_rows();
    // Blocks: all images at once where panels stay in an image, one image, and bands of rows.
    // (image, images, row0, rows)
    std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> blocks;
    if (kernels::im2col_packs_from_image(g, g.batch, g.out_h)) blocks.emplace_back(0, g.batch, 0, g.out_h);
    blocks.emplace_back(1, 1, 0, g.out_h);
    blocks.emplace_back(g.batch - 1, 1, 1, g.out_h - 1);
    for (const auto& [image, images, row0, rows] : blocks) {
      BOOST_TEST_REQUIRE(kernels::im2col_packs_from_image(g, images, rows));
      const std::int64_t cols = images * rows * OW;
      std::vector<bf16> col(static_cast<std::size_t>(R * cols));
      for (std::int64_t m = 0; m < images; ++m)
        kernels::im2col(g, x.data() + (image + m) * in_image, row0, rows, col.data() + m * rows * OW, cols);
      // k-block [k0, k0 + kc) packed both ways: the words that differ. transposed: the weight
      // gradient's B, whose lines are the matrix's rows and whose pairs run along its columns.
      const bf16* x_block = x.data() + image * in_image;
      const auto words_differ = [&](bool transposed, std::int64_t k0, std::int64_t kc) {
        const std::int64_t lines = transposed ? R : cols;
        std::vector<std::uint32_t> want(static_cast<std::size_t>((kc + 1) / 2 * ((lines + 31) / 32 * 32)), 7u),
            got(want.size(), 9u);
        kernels::detail::pack_pairs(!transposed, col.data(), cols, 0, lines, k0, kc, 32, want.data());
        if (transposed)
          kernels::detail::pack_im2col_rows(g, x_block, in_image, row0, rows, 0, lines, k0, kc, got.data());
        else
          kernels::detail::pack_im2col_columns(g, x_block, in_image, row0, rows, 0, lines, k0, kc, got.data());
        std::int64_t differ = 0;
        for (std::size_t e = 0; e < want.size(); ++e) differ += want[e] != got[e];
        return differ;
      };
      const std::string block = std::string(c.name) + ": image " + std::to_string(image) + " x" +
                                std::to_string(images) + ", rows " + std::to_string(row0) + "+" + std::to_string(rows);
      for (std::int64_t k0 = 0; k0 < R; k0 += 256)
        BOOST_TEST(words_differ(false, k0, std::min<std::int64_t>(256, R - k0)) == 0, block << ", k from " << k0);
      for (std::int64_t k0 = 0; k0 < cols; k0 += 256)
        BOOST_TEST(words_differ(true, k0, std::min<std::int64_t>(256, cols - k0)) == 0,
                   block << ", transposed, columns from " << k0);
    }
  }
}

// A convolution and its weight gradient packed from the image give the bits of im2col +
// gemm_bf16_serial, whatever the blocks (conv2d_forward_gemm_into and conv2d_backward_gemm pack from
// the image wherever im2col_packs_from_image holds).
BOOST_AUTO_TEST_CASE(convolution_packed_from_the_image_equals_im2col_then_gemm, *ut::precondition(has_bf16_dot)) {
  const Bf16Setting on("on");
  const kernels::ConvBlocking blockings[] = {{}, {.target_columns = 1, .column_budget = 1}, {.target_columns = 64}};
  for (const SameWidthCase& c : same_width_cases) {
    const kernels::Conv2dGeometry g = same_width_geometry(c);
    const Tensor<bf16> x = seeded<bf16>(c.x, 1), w = seeded<bf16>(c.w, 2);
    const std::int64_t K = g.out_channels, P = g.out_plane(), G = g.groups, Kg = K / G, Rg = g.group_rows();
    // The reference: each image's whole column matrix, one GEMM per group.
    Tensor<float> want({g.batch, K, g.out_h, g.out_w});
    std::vector<bf16> col(static_cast<std::size_t>(g.col_rows() * P));
    for (std::int64_t n = 0; n < g.batch; ++n) {
      kernels::im2col(g, x.data() + n * g.in_channels * g.in_plane(), 0, g.out_h, col.data(), P);
      for (std::int64_t grp = 0; grp < G; ++grp)
        kernels::detail::gemm_bf16_serial(false, false, Kg, P, Rg, 1.0f, w.data() + grp * Kg * Rg, Rg,
                                          col.data() + grp * Rg * P, P, 0.0f,
                                          want.data() + (n * K + grp * Kg) * P, P);
    }
    for (const kernels::ConvBlocking& blocking : blockings) {
      Tensor<float> got = poisoned<float>(want.shape());
      kernels::detail::conv2d_forward_gemm<bf16, float>(g, x.data(), w.data(), nullptr, got.data(), blocking);
      BOOST_TEST(float_bits_differ(want, got) == 0, c.name << ", target columns " << blocking.target_columns);
    }
    // The weight gradient on one thread (threads' partial sums would add in another order): image by
    // image, each block's GEMM adding onto the sum, as conv2d_backward_gemm's.
    const Tensor<bf16> gy = seeded<bf16>(want.shape(), 3);
    const kernels::ConvBlocking one_image{.target_columns = 1};
    Tensor<float> gw_want({K, Rg});
    std::fill(gw_want.data(), gw_want.data() + gw_want.numel(), 0.0f);
    for (std::int64_t n = 0; n < g.batch; ++n) {
      kernels::im2col(g, x.data() + n * g.in_channels * g.in_plane(), 0, g.out_h, col.data(), P);
      for (std::int64_t grp = 0; grp < G; ++grp)
        kernels::detail::gemm_bf16_serial(false, true, Kg, Rg, P, 1.0f, gy.data() + (n * K + grp * Kg) * P, P,
                                          col.data() + grp * Rg * P, P, 1.0f, gw_want.data() + grp * Kg * Rg, Rg);
    }
    const int threads = num_threads();
    set_num_threads(1);
    Tensor<float> gw = poisoned<float>(gw_want.shape());
    kernels::detail::conv2d_backward_gemm<bf16, float>(g, x.data(), nullptr, gy.data(), nullptr, gw.data(), nullptr,
                                                       one_image);
    set_num_threads(threads);
    BOOST_TEST(float_bits_differ(gw_want, gw) == 0, c.name << ": weight gradient");
  }
}
#endif

BOOST_AUTO_TEST_SUITE_END()
