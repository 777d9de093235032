// batch_norm with a sync hook (SyncBatchNorm) in one process: replicas as threads summing through
// shared memory must equal the plain op on the whole batch; gradchecks with the other replicas
// as constants; the hook's calls; a large mean; errors.
#include <barrier>
#include <cmath>
#include <exception>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "../common/compare.hpp"
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/batch_norm.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(batch_norm_sync_test)

namespace {

// An in-process allreduce over `size` threads: each writes its vector to a slot, all sum the
// slots in rank order (so every replica gets the same bits), and nobody writes again before all
// have read.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : slots_(static_cast<std::size_t>(size)), barrier_(size) {}
  BatchNormSync hook(int rank) {
    return [this, rank](std::span<double> values) {
      slots_[static_cast<std::size_t>(rank)].assign(values.begin(), values.end());
      barrier_.arrive_and_wait();
      for (std::size_t i = 0; i < values.size(); ++i) {
        double sum = 0;
        for (const auto& slot : slots_) sum += slot.at(i);
        values[i] = sum;
      }
      barrier_.arrive_and_wait();
    };
  }

 private:
  std::vector<std::vector<double>> slots_;
  std::barrier<> barrier_;
};

template <class T>
Tensor<T> convert(const Tensor<double>& t) {
  Tensor<T> out(t.shape());
  for (std::int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<T>(t[i]);
  return out;
}

using ptrain::test::channel_conditioning;
using ptrain::test::Conditioning;
using ptrain::test::normalisation_error;
using ptrain::test::worst_error;

struct Result {
  std::vector<Tensor<double>> y, gx;  // per replica, as double
  Tensor<double> gw, gb;              // summed over replicas
  std::vector<Tensor<double>> running_mean, running_var;
};

template <class T>
Tensor<double> to_double(const Tensor<T>& t) {
  Tensor<double> out(t.shape());
  for (std::int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<double>(t[i]);
  return out;
}

// One training forward and backward of batch_norm over x split into rows [bounds[r], bounds[r+1])
// per replica, each replica a thread with its own parameters and running statistics (all equal
// at the start); bounds of size 2 is the plain op on the whole batch, without a hook.
template <class T>
Result run_replicas(const Tensor<double>& x, const Tensor<double>& gy, const Tensor<double>& weight,
                    const Tensor<double>& bias, const std::vector<std::int64_t>& bounds, int steps = 1) {
  const int replicas = static_cast<int>(bounds.size()) - 1;
  const std::int64_t C = x.size(1);
  ThreadGroup group(replicas);
  Result result;
  result.y.resize(static_cast<std::size_t>(replicas));
  result.gx.resize(result.y.size());
  result.running_mean.resize(result.y.size());
  result.running_var.resize(result.y.size());
  std::vector<Tensor<double>> gw(result.y.size()), gb(result.y.size());
  std::vector<std::exception_ptr> errors(result.y.size());
  auto replica = [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    try {
      const std::int64_t begin = bounds[i], end = bounds[i + 1];
      Var<T> w(convert<T>(weight), true), b(convert<T>(bias), true);
      Tensor<T> rm = Tensor<T>::full({C}, T(0.25)), rv = Tensor<T>::full({C}, T(1.5));
      for (int step = 0; step < steps; ++step) {
        Var<T> xr(convert<T>(x.slice(begin, end)), true);
        Var<T> y = batch_norm(xr, w, b, rm, rv, true, 0.2, 1e-4, replicas > 1 ? group.hook(r) : BatchNormSync());
        w.zero_grad();
        b.zero_grad();
        backward(y, convert<T>(gy.slice(begin, end)));
        result.y[i] = to_double(y.value());
        result.gx[i] = to_double(xr.grad());
      }
      gw[i] = to_double(w.grad());
      gb[i] = to_double(b.grad());
      result.running_mean[i] = to_double(rm);
      result.running_var[i] = to_double(rv);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < replicas; ++r) threads.emplace_back(replica, r);
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  result.gw = Tensor<double>::zeros({C});
  result.gb = Tensor<double>::zeros({C});
  for (std::size_t i = 0; i < gw.size(); ++i) {
    result.gw.array() += gw[i].array();
    result.gb.array() += gb[i].array();
  }
  return result;
}

// The replicas' run against the plain op on the whole batch.
template <class T>
void check_against_whole_batch(const Shape& shape, const std::vector<std::int64_t>& bounds, double tolerance,
                               double offset = 0) {
  const std::int64_t C = shape[1];
  const Tensor<double> x = random_tensor(shape, 11, -2 + offset, 3 + offset), gy = random_tensor(shape, 12);
  const Tensor<double> w = random_tensor({C}, 13, 0.5, 1.5), b = random_tensor({C}, 14);
  // The split's statistics differ from the whole batch's in their last bits, and y = x * a + b
  // (gx likewise, times |gy| / std) amplifies rounding by the data's conditioning: a large offset
  // costs digits. tolerance is what remains: the rounding of y and of the sums.
  const Conditioning k = channel_conditioning(x.to_vector(), shape[0], C, x.numel() / (shape[0] * C));
  const double largest_w = 1.5, largest_gy = 1.0;
  tolerance += normalisation_error<T>(k.condition, largest_w * std::max(1.0, largest_gy / k.smallest_std));
  const int steps = 2;  // the running statistics move twice
  const Result whole = run_replicas<T>(x, gy, w, b, {0, shape[0]}, steps);
  const Result split = run_replicas<T>(x, gy, w, b, bounds, steps);
  for (std::size_t r = 0; r + 1 < bounds.size(); ++r) {
    BOOST_TEST_CONTEXT("replica " << r << " of rows [" << bounds[r] << ", " << bounds[r + 1] << ")") {
      BOOST_TEST(worst_error(split.y[r], whole.y[0].slice(bounds[r], bounds[r + 1])) <= tolerance);
      BOOST_TEST(worst_error(split.gx[r], whole.gx[0].slice(bounds[r], bounds[r + 1])) <= tolerance);
      BOOST_TEST(worst_error(split.running_mean[r], whole.running_mean[0]) <= tolerance);
      BOOST_TEST(worst_error(split.running_var[r], whole.running_var[0]) <= tolerance);
    }
  }
  BOOST_TEST(worst_error(split.gw, whole.gw) <= tolerance);
  BOOST_TEST(worst_error(split.gb, whole.gb) <= tolerance);
}

// Replicas other than this one, as constants: the hook adds their count and sums, then their
// squared deviations from the global mean, and nothing in backward (their output gradient is
// zero). The gradient checked is then that of this replica's output through global statistics.
class ConstantReplicas {
 public:
  explicit ConstantReplicas(const Tensor<double>& others) : channels_(others.size(1)) {
    const std::int64_t C = channels_, inner = others.numel() / (others.size(0) * C);
    count_ = static_cast<double>(others.size(0) * inner);
    mean_.assign(static_cast<std::size_t>(C), 0.0);
    var_.assign(mean_.size(), 0.0);
    auto at = [&](std::int64_t n, std::int64_t c, std::int64_t k) { return others[(n * C + c) * inner + k]; };
    for (std::int64_t c = 0; c < C; ++c) {
      double s = 0, s2 = 0;
      for (std::int64_t n = 0; n < others.size(0); ++n)
        for (std::int64_t k = 0; k < inner; ++k) s += at(n, c, k);
      const double m = s / count_;
      for (std::int64_t n = 0; n < others.size(0); ++n)
        for (std::int64_t k = 0; k < inner; ++k) s2 += (at(n, c, k) - m) * (at(n, c, k) - m);
      mean_[static_cast<std::size_t>(c)] = m;
      var_[static_cast<std::size_t>(c)] = s2 / count_;
    }
  }
  BatchNormSync hook() {
    return [this](std::span<double> v) {
      const auto C = static_cast<std::size_t>(channels_);
      if (v.size() == C + 1) {  // count, sums
        v[0] += count_;
        for (std::size_t c = 0; c < C; ++c) v[c + 1] += count_ * mean_[c];
        global_mean_.resize(C);
        for (std::size_t c = 0; c < C; ++c) global_mean_[c] = v[c + 1] / v[0];
      } else if (v.size() == C) {  // squared deviations from the global mean
        for (std::size_t c = 0; c < C; ++c) {
          const double d = mean_[c] - global_mean_.at(c);
          v[c] += count_ * (var_[c] + d * d);
        }
      } else {
        BOOST_REQUIRE_EQUAL(v.size(), 2 * C);  // backward: the others add zeros
      }
    };
  }

 private:
  std::int64_t channels_;
  double count_;
  std::vector<double> mean_, var_, global_mean_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(replicas_equal_the_whole_batch_in_double) {
  // Even and uneven splits, a replica with a single row and one with none.
  for (const Shape& shape : {Shape{6, 3, 4, 5}, Shape{7, 4}, Shape{12, 2, 3, 3}}) {
    for (const std::vector<std::int64_t>& bounds :
         {std::vector<std::int64_t>{0, shape[0] / 2, shape[0]}, std::vector<std::int64_t>{0, 1, 3, shape[0]},
          std::vector<std::int64_t>{0, 2, 2, shape[0]}}) {
      BOOST_TEST_CONTEXT("input " << shape << ", " << bounds.size() - 1 << " replicas, first rows " << bounds[1]) {
        check_against_whole_batch<double>(shape, bounds, 1e-12);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(replicas_equal_the_whole_batch_in_float) {
  // The largest input is above the size where channels are spread over OpenMP threads.
  for (const Shape& shape : {Shape{6, 3, 4, 5}, Shape{9, 5}, Shape{6, 5, 40, 40}}) {
    BOOST_TEST_CONTEXT("input " << shape) {
      check_against_whole_batch<float>(shape, {0, 2, 3, shape[0]}, 2e-5);
      check_against_whole_batch<float>(shape, {0, 3, shape[0]}, 2e-5, 50.0);
    }
  }
}

BOOST_AUTO_TEST_CASE(gradients_through_global_statistics) {
  for (const Shape& shape : {Shape{2, 3, 2, 3}, Shape{3, 4}}) {
    BOOST_TEST_CONTEXT("input " << shape) {
      const std::int64_t C = shape[1];
      Shape others_shape = shape;
      others_shape[0] = 4;
      ConstantReplicas others(random_tensor(others_shape, 21, -1, 2));
      Tensor<double> rm = Tensor<double>::zeros({C}), rv = Tensor<double>::ones({C});
      auto affine = gradcheck(
          [&](const std::vector<Var<double>>& v) {
            return batch_norm(v[0], v[1], v[2], rm, rv, true, 0.1, 1e-5, others.hook());
          },
          {random_tensor(shape, 1), random_tensor({C}, 2, 0.5, 1.5), random_tensor({C}, 3)});
      BOOST_TEST(affine.ok, affine.report);
      Tensor<double> none;
      auto plain = gradcheck(
          [&](const std::vector<Var<double>>& v) { return batch_norm(v[0], {}, {}, none, none, true, 0.1, 1e-3, others.hook()); },
          {random_tensor(shape, 4, 0, 3)});
      BOOST_TEST(plain.ok, plain.report);
    }
  }
  // One row here (one value per channel): allowed, the statistics are global.
  ConstantReplicas others(random_tensor({3, 3}, 22));
  Tensor<double> none;
  auto single = gradcheck(
      [&](const std::vector<Var<double>>& v) { return batch_norm(v[0], v[1], {}, none, none, true, 0.1, 1e-5, others.hook()); },
      {random_tensor({1, 3}, 5), random_tensor({3}, 6, 0.5, 1.5)});
  BOOST_TEST(single.ok, single.report);
}

BOOST_AUTO_TEST_CASE(the_hook_is_called_twice_in_forward_and_once_in_backward) {
  // A world of one: the identity hook gives the plain op's results.
  std::vector<std::size_t> sizes;
  BatchNormSync identity = [&](std::span<double> v) { sizes.push_back(v.size()); };
  const Shape shape{4, 3, 2, 2};
  const Tensor<double> x = random_tensor(shape, 1), gy = random_tensor(shape, 2);
  Tensor<double> rm = Tensor<double>::zeros({3}), rv = Tensor<double>::ones({3});
  Tensor<double> rm_plain = rm.clone(), rv_plain = rv.clone();
  Var<double> xs(x, true), xp(x, true), w(random_tensor({3}, 3), true);
  Var<double> ys = batch_norm(xs, w, {}, rm, rv, true, 0.1, 1e-5, identity);
  BOOST_TEST(sizes == (std::vector<std::size_t>{4, 3}), boost::test_tools::per_element());
  backward(ys, gy.clone());
  BOOST_TEST(sizes == (std::vector<std::size_t>{4, 3, 6}), boost::test_tools::per_element());
  Var<double> yp = batch_norm(xp, w, {}, rm_plain, rv_plain, true);
  backward(yp, gy.clone());
  BOOST_TEST(worst_error(ys.value(), yp.value()) < 1e-13);
  BOOST_TEST(worst_error(xs.grad(), xp.grad()) < 1e-13);
  BOOST_TEST(worst_error(rm, rm_plain) < 1e-15);
  BOOST_TEST(worst_error(rv, rv_plain) < 1e-15);

  // No input gradient wanted: backward stays local (the weight's gradient needs no other replica).
  sizes.clear();
  Var<double> y = batch_norm(Var<double>(x), w, {}, rm, rv, true, 0.1, 1e-5, identity);
  backward(y, gy.clone());
  BOOST_TEST(sizes == (std::vector<std::size_t>{4, 3}), boost::test_tools::per_element());

  // Evaluation never synchronises.
  sizes.clear();
  Var<double> e = batch_norm(xs, w, {}, rm, rv, false, 0.1, 1e-5, identity);
  backward(e, gy.clone());
  BOOST_TEST(sizes.empty());
}

BOOST_AUTO_TEST_CASE(variance_survives_a_large_mean_across_replicas) {
  // Mean 1e8, variance 0.25: sum(x^2) / n - mean^2 over the replicas would lose every digit of
  // the variance even in double (sum(x^2) is 1e17, whose last bit is 16); deviations from the
  // global mean lose only what rounding the means to a double at 1e8 (1.5e-8) costs.
  const Shape shape{10, 1};
  Tensor<double> x(shape);
  for (std::int64_t i = 0; i < 10; ++i) x[i] = 1e8 + static_cast<double>(i % 2);
  ThreadGroup group(2);
  std::vector<Tensor<double>> rv(2), y(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      Tensor<double> rm = Tensor<double>::zeros({1});
      rv[i] = Tensor<double>::zeros({1});
      // Rows [0, 3) and [3, 10): local means 1e8 + 1/3 and 1e8 + 4/7.
      const Tensor<double> xr = r == 0 ? x.slice(0, 3) : x.slice(3, 10);
      y[i] = batch_norm(Var<double>(xr), {}, {}, rm, rv[i], true, 1.0, 1e-12, group.hook(r)).value();
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < 2; ++i) {
    BOOST_TEST(std::abs(rv[i][0] - 0.25 * 10 / 9) < 1e-9);
    BOOST_TEST(std::abs(y[i][0] - (i == 0 ? -1.0 : 1.0)) < 1e-7);  // row 3 holds 1e8 + 1
  }
}

BOOST_AUTO_TEST_CASE(one_value_per_channel_over_all_replicas_is_an_error_on_each) {
  // One row on one replica, none on the other: every replica fails, none waits for the others.
  const Tensor<double> x = random_tensor({1, 3}, 1);
  const Tensor<double> empty({0, 3});
  ThreadGroup group(2);
  std::vector<std::string> messages(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      Tensor<double> rm = Tensor<double>::zeros({3}), rv = Tensor<double>::ones({3});
      try {
        batch_norm(Var<double>(r == 0 ? x : empty), {}, {}, rm, rv, true, 0.1, 1e-5, group.hook(r));
      } catch (const Error& e) {
        messages[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const std::string& m : messages)
    BOOST_TEST(m.find("more than 1 value per channel when training, got 1 over all replicas") != std::string::npos, m);
}

BOOST_AUTO_TEST_SUITE_END()
