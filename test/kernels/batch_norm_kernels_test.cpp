// The executor-generic batch norm (kernels/indexed/batch_norm.hpp) run by the HostExecutor against
// the CPU kernels (kernels/cpu/batch_norm.hpp) and the autograd op, in double, float, half and
// bfloat16, over [N, C] and [N, C, H, W] layouts and both ways of running a channel's reduction.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/batch_norm.hpp>
#include <ptrain/kernels/cpu/batch_norm.hpp>
#include <ptrain/kernels/cpu/widen.hpp>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/kernels/indexed/batch_norm.hpp>

#include "../common/compare.hpp"
#include "reduction_checks.hpp"

using namespace ptrain;
using kernels::ChannelLayout;
using kernels::HostExecutor;
using test::channel_conditioning;
using test::Conditioning;
using test::expect_close;
using test::normalisation_error;
using test::reduction_tolerance;
using test::uniform_values;

BOOST_AUTO_TEST_SUITE(batch_norm_kernels_test)

namespace {

std::string describe(const ChannelLayout& l, const char* type, double offset, bool affine) {
  return std::string(type) + " [" + std::to_string(l.outer) + ", " + std::to_string(l.channels) + ", " +
         std::to_string(l.inner) + "] offset " + std::to_string(offset) + (affine ? " affine" : " plain");
}

template <class T>
void check_layout(const ChannelLayout& l, const char* type, double offset, bool affine) {
  namespace ix = kernels::indexed;
  const std::string what = describe(l, type, offset, affine);
  BOOST_TEST_CONTEXT(what) {
    // Statistics are double on both sides, but the CPU kernel takes x - mean in T with the mean
    // rounded to T: an error growing with the offset of the data.
    const double stat_tol = (std::is_same_v<T, double> ? 1e-12 : 1e-5) * (1.0 + offset);
    const std::int64_t n = l.numel(), C = l.channels;
    const auto x = uniform_values<T>(n, 1, offset - 2, offset + 2);
    const auto gy = uniform_values<T>(n, 2);
    const auto wv = uniform_values<T>(C, 3, 0.5, 1.5), bv = uniform_values<T>(C, 4);
    // y = x * a + b and gx = gy * a + x * b' + d cancel terms as large as the data's condition
    // times |w| (times |gy| / std for gx): see channel_conditioning.
    const Conditioning k = channel_conditioning(x, l.outer, l.channels, l.inner);
    const double largest_w = affine ? 1.5 : 1.0, largest_gy = 2.0;
    const double tol = reduction_tolerance<T> + normalisation_error<T>(k.condition, largest_w);
    const double gx_tol =
        reduction_tolerance<T> + normalisation_error<T>(k.condition, largest_w * largest_gy / k.smallest_std);
    const T* w = affine ? wv.data() : nullptr;
    const T* b = affine ? bv.data() : nullptr;
    const double eps = 1e-5;
    const HostExecutor ex;

    std::vector<T> want(n), got(n);
    std::vector<double> mean(C), var(C), got_mean(C), got_var(C);
    kernels::batch_norm_forward_training(x.data(), l, w, b, eps, want.data(), mean.data(), var.data());
    ix::batch_norm_forward_training(ex, x.data(), l, w, b, eps, got.data(), got_mean.data(), got_var.data());
    expect_close(got, want, tol, "training forward y");
    expect_close(got_mean, mean, stat_tol, "training forward mean");
    expect_close(got_var, var, stat_tol, "training forward var");

    ix::batch_norm_moments(ex, x.data(), l, got_mean.data(), got_var.data());
    kernels::batch_norm_moments(x.data(), l, mean.data(), var.data());
    expect_close(got_mean, mean, stat_tol, "moments mean");
    expect_close(got_var, var, stat_tol, "moments var");

    std::vector<double> invstd(C), got_invstd(C);
    for (std::int64_t c = 0; c < C; ++c) invstd[c] = 1.0 / std::sqrt(var[c] + eps);
    ix::batch_norm_invstd(ex, var.data(), C, eps, got_invstd.data());
    expect_close(got_invstd, invstd, 1e-15, "invstd");

    kernels::batch_norm_forward_inference(x.data(), l, w, b, mean.data(), invstd.data(), want.data());
    ix::batch_norm_forward_inference(ex, x.data(), l, w, b, mean.data(), invstd.data(), got.data());
    expect_close(got, want, tol, "inference forward y");

    std::vector<double> s1(C), s2(C), got_s1(C), got_s2(C);
    for (bool training : {true, false}) {
      kernels::batch_norm_backward(x.data(), gy.data(), l, w, mean.data(), invstd.data(), training, want.data(),
                                   s1.data(), s2.data());
      ix::batch_norm_backward(ex, x.data(), gy.data(), l, w, mean.data(), invstd.data(), training, got.data(),
                              got_s1.data(), got_s2.data());
      const std::string mode = training ? "training" : "evaluation";
      expect_close(got, want, gx_tol, mode + " backward gx");
      expect_close(got_s1, s1, stat_tol, mode + " backward sum(gy)");
      expect_close(got_s2, s2, stat_tol, mode + " backward sum(gy * xhat)");
    }
    std::fill(got_s1.begin(), got_s1.end(), 0.0);
    ix::batch_norm_backward(ex, x.data(), gy.data(), l, w, mean.data(), invstd.data(), true, static_cast<T*>(nullptr),
                            got_s1.data(), got_s2.data());
    expect_close(got_s1, s1, stat_tol, "backward without gx, sum(gy)");

    kernels::batch_norm_backward_sums(x.data(), gy.data(), l, mean.data(), s1.data(), s2.data());
    ix::batch_norm_backward_sums(ex, x.data(), gy.data(), l, mean.data(), got_s1.data(), got_s2.data());
    expect_close(got_s1, s1, stat_tol, "backward_sums sum(gy)");
    expect_close(got_s2, s2, stat_tol, "backward_sums sum(gy * (x - mean))");
    // As SyncBatchNorm: sums over a global batch three times this one.
    for (auto& s : s1) s *= 3;
    for (auto& s : s2) s *= 3;
    const double count = 3.0 * static_cast<double>(l.count());
    kernels::batch_norm_backward_input(x.data(), gy.data(), l, w, mean.data(), invstd.data(), s1.data(), s2.data(),
                                       count, want.data());
    ix::batch_norm_backward_input(ex, x.data(), gy.data(), l, w, mean.data(), invstd.data(), s1.data(), s2.data(),
                                  count, got.data());
    expect_close(got, want, gx_tol, "backward_input gx");
  }
}

template <class T>
void check_type(const char* type) {
  const std::vector<ChannelLayout> layouts{
      {5, 3, 7},     // 4D, each channel folded by one thread (short runs)
      {6, 4, 1},     // 2D [N, C]
      {3, 2, 45},    // 4D with long runs: a block per channel
      {8, 4100, 1},  // many channels: folded per thread
      {2, 1, 3},     // one channel
  };
  for (const auto& l : layouts)
    for (bool affine : {true, false}) check_layout<T>(l, type, 0.0, affine);
  if constexpr (!is_reduced_float_v<T>) check_layout<T>({4, 3, 9}, type, 300.0, true);  // mean >> spread
}

// The executor's chain for autograd/ops/batch_norm.hpp against the op itself: forward, running
// statistics, weight, bias and input gradients.
template <class T>
void check_against_op(const Shape& shape, bool training) {
  namespace ix = kernels::indexed;
  BOOST_TEST_CONTEXT("op " << shape << (training ? " training" : " evaluation")) {
    const ChannelLayout l{shape[0], shape[1], shape.rank() == 4 ? shape[2] * shape[3] : 1};
    const std::int64_t C = l.channels, n = l.numel();
    const double momentum = 0.1, eps = 1e-5, tol = reduction_tolerance<T>;
    const auto xv = uniform_values<T>(n, 5), gyv = uniform_values<T>(n, 6);
    const auto wv = uniform_values<T>(C, 7, 0.5, 1.5), bv = uniform_values<T>(C, 8);
    Tensor<T> rm = Tensor<T>::from(Shape{C}, uniform_values<T>(C, 9));
    Tensor<T> rv = Tensor<T>::from(Shape{C}, uniform_values<T>(C, 10, 0.5, 2.0));
    std::vector<T> got_rm = rm.to_vector(), got_rv = rv.to_vector();

    Var<T> x(Tensor<T>::from(shape, xv), true), w(Tensor<T>::from(Shape{C}, wv), true),
        b(Tensor<T>::from(Shape{C}, bv), true);
    Var<T> y = batch_norm(x, w, b, rm, rv, training, momentum, eps);
    backward(y, Tensor<T>::from(shape, gyv));

    const HostExecutor ex;
    std::vector<T> got_y(n), got_gx(n), got_gw(C), got_gb(C);
    std::vector<double> mean(C), var(C), invstd(C), s1(C), s2(C);
    if (training) {
      ix::batch_norm_forward_training(ex, xv.data(), l, wv.data(), bv.data(), eps, got_y.data(), mean.data(),
                                      var.data());
      ix::batch_norm_invstd(ex, var.data(), C, eps, invstd.data());
      ix::batch_norm_update_running(ex, mean.data(), var.data(), C, momentum, static_cast<double>(l.count()),
                                    got_rm.data(), got_rv.data());
      expect_close(got_rm, rm.to_vector(), tol, "running mean");
      expect_close(got_rv, rv.to_vector(), tol, "running var");
    } else {
      ix::batch_norm_running_statistics(ex, got_rm.data(), got_rv.data(), C, eps, mean.data(), invstd.data());
      ix::batch_norm_forward_inference(ex, xv.data(), l, wv.data(), bv.data(), mean.data(), invstd.data(),
                                       got_y.data());
    }
    ix::batch_norm_backward(ex, xv.data(), gyv.data(), l, wv.data(), mean.data(), invstd.data(), training,
                            got_gx.data(), s1.data(), s2.data());
    ix::batch_norm_affine_grads(ex, s1.data(), s2.data(), static_cast<const double*>(nullptr), C, got_gw.data(),
                                got_gb.data());
    expect_close(got_y, y.value().to_vector(), tol, "y");
    expect_close(got_gx, x.grad().to_vector(), tol, "x gradient");
    expect_close(got_gw, w.grad().to_vector(), tol, "weight gradient");
    expect_close(got_gb, b.grad().to_vector(), tol, "bias gradient");

    // SyncBatchNorm's weight gradient: from sum(gy * (x - mean)) times invstd.
    ix::batch_norm_backward_sums(ex, xv.data(), gyv.data(), l, mean.data(), s1.data(), s2.data());
    ix::batch_norm_affine_grads(ex, s1.data(), s2.data(), invstd.data(), C, got_gw.data(), static_cast<T*>(nullptr));
    expect_close(got_gw, w.grad().to_vector(), tol, "weight gradient from backward_sums");
  }
}

// The 16-bit kernels on [N, C, H, W] against the float kernels on whole widened copies
// (kernels/cpu/widen.hpp), each output rounded once: forward with residual and relu, inference,
// backward and relu's backward, with and without each output. half runs channel by channel on float
// copies: where a plane is a multiple of 16 floats Eigen's sums start their vectors at the same
// element in both, so the bits are the same; elsewhere sum(gy) adds in another order, within T's
// rounding. bfloat16 runs on its own planes (widened in registers), its sums in another order than
// Eigen's: within its rounding everywhere.
template <class T>
void check_channel_copies(const ChannelLayout& l, bool same_bits) {
  namespace k = kernels;
  BOOST_TEST_CONTEXT(describe(l, std::is_same_v<T, ptrain::half> ? "half" : "bfloat16", 0, true)) {
    const std::int64_t n = l.numel(), C = l.channels;
    const auto x = uniform_values<T>(n, 1), gy = uniform_values<T>(n, 2), residual = uniform_values<T>(n, 3);
    const auto w = uniform_values<T>(C, 4, 0.5, 1.5), b = uniform_values<T>(C, 5);
    const Tensor<float> xf = k::widen(x.data(), n), gyf = k::widen(gy.data(), n),
                        rf = k::widen(residual.data(), n), wf = k::widen(w.data(), C), bf = k::widen(b.data(), C);
    const auto rounded = [&](const Tensor<float>& f) {
      std::vector<T> out(static_cast<std::size_t>(f.numel()));
      k::narrow(f, out.data());
      return out;
    };
    const auto compare = [&](const auto& got, const auto& want, const std::string& what) {
      if (same_bits) {
        BOOST_TEST((std::memcmp(got.data(), want.data(), got.size() * sizeof(got[0])) == 0), what << ": not the same bits");
      } else {
        std::vector<double> g, e;
        for (const auto& v : got) g.push_back(static_cast<double>(v));
        for (const auto& v : want) e.push_back(static_cast<double>(v));
        // The statistics (double) differ only by the order of float sums.
        using Element = std::decay_t<decltype(got[0])>;
        expect_close(g, e, std::is_same_v<Element, double> ? reduction_tolerance<float> : reduction_tolerance<T>, what);
      }
    };
    std::vector<double> mean(C), var(C), want_mean(C), want_var(C), invstd(C);
    std::vector<T> y(n), gx(n), gr(n);
    Tensor<float> yf = k::float_buffer(n), gxf = k::float_buffer(n), grf = k::float_buffer(n);
    k::batch_norm_forward_training(x.data(), l, w.data(), b.data(), 1e-5, y.data(), mean.data(), var.data(),
                                   residual.data(), true);
    k::batch_norm_forward_training(xf.data(), l, wf.data(), bf.data(), 1e-5, yf.data(), want_mean.data(),
                                   want_var.data(), rf.data(), true);
    compare(y, rounded(yf), "training forward y");
    compare(mean, want_mean, "training forward mean");
    compare(var, want_var, "training forward var");
    for (std::int64_t c = 0; c < C; ++c) invstd[c] = 1.0 / std::sqrt(var[c] + 1e-5);
    k::batch_norm_forward_inference(x.data(), l, static_cast<const T*>(nullptr), b.data(), mean.data(),
                                    invstd.data(), y.data());
    k::batch_norm_forward_inference(xf.data(), l, static_cast<const float*>(nullptr), bf.data(), mean.data(),
                                    invstd.data(), yf.data());
    compare(y, rounded(yf), "inference forward y");
    std::vector<double> s1(C), s2(C), want_s1(C), want_s2(C);
    for (bool training : {true, false}) {
      const std::string mode = training ? "training" : "evaluation";
      k::batch_norm_backward(x.data(), gy.data(), l, w.data(), mean.data(), invstd.data(), training, gx.data(),
                             s1.data(), s2.data());
      k::batch_norm_backward(xf.data(), gyf.data(), l, wf.data(), mean.data(), invstd.data(), training, gxf.data(),
                             want_s1.data(), want_s2.data());
      compare(gx, rounded(gxf), mode + " backward gx");
      compare(s1, want_s1, mode + " backward sum(gy)");
      compare(s2, want_s2, mode + " backward sum(gy * xhat)");
      for (const bool with_gx : {true, false})
        for (const bool with_residual : {true, false}) {
          const std::string what = mode + " relu backward" + (with_gx ? " gx" : "") + (with_residual ? " residual" : "");
          k::batch_norm_relu_backward(x.data(), y.data(), gy.data(), l, w.data(), mean.data(), invstd.data(), training,
                                      with_gx ? gx.data() : nullptr, with_residual ? gr.data() : nullptr, s1.data(),
                                      s2.data());
          const Tensor<float> yw = k::widen(y.data(), n);
          k::batch_norm_relu_backward(xf.data(), yw.data(), gyf.data(), l, wf.data(), mean.data(), invstd.data(),
                                      training, with_gx ? gxf.data() : nullptr, with_residual ? grf.data() : nullptr,
                                      want_s1.data(), want_s2.data());
          if (with_gx) compare(gx, rounded(gxf), what + ": gx");
          if (with_residual) compare(gr, rounded(grf), what + ": residual's gradient");
          compare(s1, want_s1, what + ": sum(gy)");
          compare(s2, want_s2, what + ": sum(gy * xhat)");
        }
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(double_matches_cpu) { check_type<double>("double"); }
BOOST_AUTO_TEST_CASE(float_matches_cpu) { check_type<float>("float"); }
BOOST_AUTO_TEST_CASE(half_matches_cpu) { check_type<ptrain::half>("half"); }
BOOST_AUTO_TEST_CASE(bfloat16_matches_cpu) { check_type<ptrain::bfloat16>("bfloat16"); }

BOOST_AUTO_TEST_CASE(sixteen_bit_kernels_match_the_float_kernels_on_widened_copies) {
  for (const ChannelLayout& l : {ChannelLayout{4, 3, 16}, ChannelLayout{3, 40, 64}, ChannelLayout{8, 64, 64}}) {
    check_channel_copies<ptrain::half>(l, true);
    check_channel_copies<ptrain::bfloat16>(l, false);
  }
  // bfloat16 runs blocks of channels: 37 channels of 9 in blocks of 4 end with a block of one.
  for (const ChannelLayout& l :
       {ChannelLayout{5, 3, 7}, ChannelLayout{3, 2, 45}, ChannelLayout{16, 48, 49}, ChannelLayout{6, 37, 9}}) {
    check_channel_copies<ptrain::half>(l, false);
    check_channel_copies<ptrain::bfloat16>(l, false);
  }
}

BOOST_AUTO_TEST_CASE(chain_matches_the_autograd_op) {
  for (bool training : {true, false}) {
    check_against_op<double>(Shape{4, 3, 5, 2}, training);
    check_against_op<double>(Shape{7, 6}, training);
    check_against_op<float>(Shape{3, 4, 6, 7}, training);
  }
}

// SyncBatchNorm's merge (ReplicaSums, ReplicaDeviations, GlobalVariance) with the sums over the
// replicas taken here: replicas of 2, 0 (mean and var NaN: it must add zeros) and 5 rows of a
// batch with a large mean give the moments of the whole batch.
BOOST_AUTO_TEST_CASE(merged_replica_moments_are_the_whole_batch_moments) {
  namespace ix = kernels::indexed;
  const HostExecutor ex;
  const std::int64_t C = 3, inner = 4;
  const std::vector<std::int64_t> rows{2, 0, 5};
  const auto x = uniform_values<double>(7 * C * inner, 5, 98, 102);
  const auto per_channel = [&](double v) { return std::vector<double>(C, v); };
  std::vector<std::vector<double>> means, vars;
  std::vector<double> sums(C + 1, 0.0), deviations(C, 0.0), replica(C + 1);
  std::int64_t first = 0;
  for (std::int64_t n : rows) {
    means.push_back(per_channel(std::nan("")));
    vars.push_back(per_channel(std::nan("")));
    if (n > 0) ix::batch_norm_moments(ex, x.data() + first * C * inner, ChannelLayout{n, C, inner}, means.back().data(),
                                      vars.back().data());
    ex.indexed(C + 1, ix::ReplicaSums{static_cast<double>(n * inner), means.back().data(), replica.data()});
    for (std::int64_t i = 0; i <= C; ++i) sums[i] += replica[i];
    first += n;
  }
  for (std::size_t r = 0; r < rows.size(); ++r) {
    ex.indexed(C, ix::ReplicaDeviations{static_cast<double>(rows[r] * inner), sums.data(), vars[r].data(),
                                        means[r].data(), replica.data()});
    for (std::int64_t c = 0; c < C; ++c) deviations[c] += replica[c];
  }
  std::vector<double> var(C), want_mean(C), want_var(C);
  ex.indexed(C, ix::GlobalVariance{deviations.data(), sums[0], var.data()});
  kernels::batch_norm_moments(x.data(), ChannelLayout{7, C, inner}, want_mean.data(), want_var.data());
  BOOST_TEST(sums[0] == 7.0 * inner);
  for (const auto& mean : means) expect_close(mean, want_mean, 1e-12, "merged mean on every replica");
  expect_close(var, want_var, 1e-10, "merged variance");
}

BOOST_AUTO_TEST_CASE(bad_layouts_are_rejected) {
  const HostExecutor ex;
  double mean[1], var[1];
  const float x[1] = {};
  BOOST_CHECK_THROW(kernels::indexed::batch_norm_moments(ex, x, ChannelLayout{0, 1, 1}, mean, var), Error);
  BOOST_CHECK_THROW(kernels::indexed::batch_norm_update_running(ex, mean, var, 1, 0.1, 1.0, mean, var), Error);
}

BOOST_AUTO_TEST_SUITE_END()
