#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/batch_norm.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::relative_difference;
using test::CpuVars;
using test::Emulated;
using test::EmulatedVars;

BOOST_AUTO_TEST_SUITE(batch_norm_test)

namespace {

// 2 * sin(0.7 * i + 0.3) + offset over the flattened tensor, as in the PyTorch script.
Tensor<double> sequence(const Shape& shape, double offset = 0) {
  Tensor<double> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = 2.0 * std::sin(0.7 * static_cast<double>(i) + 0.3) + offset;
  return t;
}

void check_close(const Tensor<double>& got, const std::vector<double>& expected, double tol = 1e-8) {
  BOOST_REQUIRE_EQUAL(got.numel(), static_cast<std::int64_t>(expected.size()));
  for (std::int64_t i = 0; i < got.numel(); ++i)
    BOOST_TEST(std::abs(got[i] - expected[static_cast<std::size_t>(i)]) <= tol,
               "element " << i << ": got " << got[i] << ", expected " << expected[static_cast<std::size_t>(i)]);
}

Tensor<float> to_float(const Tensor<double>& t) {
  Tensor<float> f(t.shape());
  for (std::int64_t i = 0; i < t.numel(); ++i) f[i] = static_cast<float>(t[i]);
  return f;
}

}  // namespace

BOOST_AUTO_TEST_CASE(training_gradients_4d_and_2d) {
  for (const Shape& shape : {Shape{3, 4, 3, 2}, Shape{5, 3}}) {
    BOOST_TEST_CONTEXT("input " << shape) {
      const std::int64_t C = shape[1];
      Tensor<double> rm = Tensor<double>::zeros({C}), rv = Tensor<double>::ones({C});
      auto affine = gradcheck(
          [&](const std::vector<Var<double>>& v) { return batch_norm(v[0], v[1], v[2], rm, rv, true); },
          {random_tensor(shape, 1), random_tensor({C}, 2, 0.5, 1.5), random_tensor({C}, 3)});
      BOOST_TEST(affine.ok, affine.report);
      auto plain = gradcheck([&](const std::vector<Var<double>>& v) { return batch_norm(v[0], {}, {}, rm, rv, true); },
                             {random_tensor(shape, 4)});
      BOOST_TEST(plain.ok, plain.report);
      auto untracked = gradcheck(
          [&](const std::vector<Var<double>>& v) {
            Tensor<double> none;
            return batch_norm(v[0], v[1], {}, none, none, true, 0.1, 1e-3);
          },
          {random_tensor(shape, 5), random_tensor({C}, 6)});
      BOOST_TEST(untracked.ok, untracked.report);
    }
  }
}

BOOST_AUTO_TEST_CASE(evaluation_gradients_4d_and_2d) {
  for (const Shape& shape : {Shape{2, 3, 2, 3}, Shape{4, 3}}) {
    BOOST_TEST_CONTEXT("input " << shape) {
      const std::int64_t C = shape[1];
      Tensor<double> rm = random_tensor({C}, 7), rv = random_tensor({C}, 8, 0.5, 2.0);
      auto r = gradcheck(
          [&](const std::vector<Var<double>>& v) { return batch_norm(v[0], v[1], v[2], rm, rv, false); },
          {random_tensor(shape, 1), random_tensor({C}, 2), random_tensor({C}, 3)});
      BOOST_TEST(r.ok, r.report);
    }
  }
}

BOOST_AUTO_TEST_CASE(forward_and_running_statistics_match_pytorch) {
  // F.batch_norm in float64: training on x, then evaluation with the updated statistics.
  Var<double> x(sequence({3, 2, 2, 2}, 0.5));
  Var<double> w(Tensor<double>::from({2}, {0.5, 1.5})), b(Tensor<double>::from({2}, {0.1, -0.2}));
  Tensor<double> rm = Tensor<double>::from({2}, {0.2, -0.1}), rv = Tensor<double>::from({2}, {1.5, 0.7});
  check_close(batch_norm(x, w, b, rm, rv, true).value(),
              {0.03040046011, 0.4917777724, 0.618705009, 0.3514863073, 0.3369155022, -1.144690361, -1.973815169,
               -1.76050857, -0.535299859, 0.04393977278, 0.4993545378, 0.6167557559, 1.745851263, 0.2988113262,
               -1.174648954, -1.981538185, -0.9591760946, -0.5220764191, 0.05740464892, 0.5067281085, 2.480041229,
               1.717097493, 0.2606912678, -1.204206842});
  check_close(rm, {0.3055755591, -0.07904346532});
  check_close(rv, {1.50274956, 0.8209733307});
  check_close(batch_norm(x, w, b, rm, rv, false).value(),
              {0.4203701258, 0.8657275942, 0.9882476906, 0.7303072992, 0.8962671674, -1.267242498, -2.477969035,
               -2.166488835, -0.1256880684, 0.4334393294, 0.8730412808, 0.9863661191, 2.953660575, 0.8406256806,
               -1.310989426, -2.489246541, -0.5348465643, -0.1129237699, 0.446436681, 0.8801588279, 4.025758849,
               2.911672985, 0.7849610015, -1.354151226});
  check_close(rm, {0.3055755591, -0.07904346532});  // evaluation leaves them alone

  Var<double> x2(sequence({4, 3}));
  Tensor<double> rm2 = Tensor<double>::zeros({3}), rv2 = Tensor<double>::ones({3});
  check_close(batch_norm(x2, {}, {}, rm2, rv2, true, 0.2, 1e-3).value(),
              {0.3495559951, 0.8820440133, 0.9949481028, 0.955249462, -0.2397055003, -1.152776983, -1.67990189,
               -1.536955747, -0.8340298589, 0.3750964333, 0.8946172341, 0.991858739});
  check_close(rm2, {0.03049946331, 0.08500336121, 0.09952885013});
  check_close(rv2, {1.219453446, 1.342106042, 1.394328767});
}

BOOST_AUTO_TEST_CASE(running_statistics_by_hand) {
  // One channel, values 1, 2, 3, 6: mean 3, biased variance 3.5, unbiased 14/3.
  Var<double> x(Tensor<double>::from({2, 1, 1, 2}, {1, 2, 3, 6}));
  Tensor<double> rm = Tensor<double>::from({1}, {1.0}), rv = Tensor<double>::from({1}, {2.0});
  Var<double> y = batch_norm(x, {}, {}, rm, rv, true, 0.25, 0.5);
  BOOST_TEST(std::abs(rm[0] - (0.75 * 1.0 + 0.25 * 3.0)) < 1e-15);
  BOOST_TEST(std::abs(rv[0] - (0.75 * 2.0 + 0.25 * 14.0 / 3.0)) < 1e-15);
  // Normalised by the biased variance plus eps: (v - 3) / 2.
  check_close(y.value(), {-1, -0.5, 0, 1.5}, 1e-15);
}

BOOST_AUTO_TEST_CASE(variance_survives_a_large_mean) {
  // Shifted sums keep float statistics right where sum(x^2) - n*mean^2 would cancel.
  Tensor<float> x({64, 1});
  for (std::int64_t i = 0; i < 64; ++i) x[i] = 10000.0f + static_cast<float>(i % 2);  // variance 0.25
  Tensor<float> rm = Tensor<float>::zeros({1}), rv = Tensor<float>::zeros({1});
  Var<float> y = batch_norm(Var<float>(x), {}, {}, rm, rv, true, 1.0, 1e-8);
  BOOST_TEST(std::abs(rv[0] - 0.25f * 64 / 63) < 1e-5f);
  BOOST_TEST(std::abs(y.value()[0] + 1.0f) < 1e-4f);
  BOOST_TEST(std::abs(y.value()[1] - 1.0f) < 1e-4f);
}

BOOST_AUTO_TEST_CASE(float_path_agrees_with_double) {
  for (bool training : {true, false}) {
    // The largest shape is above the size where the channels are spread over threads.
    for (const Shape& shape : {Shape{4, 5, 6, 7}, Shape{16, 5}, Shape{16, 5, 24, 20}}) {
      BOOST_TEST_CONTEXT((training ? "training " : "evaluation ") << shape) {
        const Tensor<double> xd = random_tensor(shape, 1, -2, 3), wd = random_tensor({5}, 2), bd = random_tensor({5}, 3);
        Tensor<double> rmd = random_tensor({5}, 4), rvd = random_tensor({5}, 5, 0.5, 2);
        Tensor<float> rmf = to_float(rmd), rvf = to_float(rvd);
        Var<double> x(xd, true), w(wd, true), b(bd, true);
        Var<float> xf(to_float(xd), true), wf(to_float(wd), true), bf(to_float(bd), true);
        Var<double> y = batch_norm(x, w, b, rmd, rvd, training);
        Var<float> yf = batch_norm(xf, wf, bf, rmf, rvf, training);
        const Tensor<double> gy = random_tensor(shape, 6);
        backward(y, gy.clone());
        backward(yf, to_float(gy));
        auto worst = [](const Tensor<float>& f, const Tensor<double>& d) {
          double e = 0;
          for (std::int64_t i = 0; i < d.numel(); ++i)
            e = std::max(e, std::abs(static_cast<double>(f[i]) - d[i]) / std::max(1.0, std::abs(d[i])));
          return e;
        };
        BOOST_TEST(worst(yf.value(), y.value()) < 1e-5);
        BOOST_TEST(worst(xf.grad(), x.grad()) < 1e-5);
        BOOST_TEST(worst(wf.grad(), w.grad()) < 1e-5);
        BOOST_TEST(worst(bf.grad(), b.grad()) < 1e-5);
        BOOST_TEST(worst(rmf, rmd) < 1e-6);
        BOOST_TEST(worst(rvf, rvd) < 1e-6);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_inputs_are_reported) {
  auto error_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor<double> rm = Tensor<double>::zeros({3}), rv = Tensor<double>::ones({3}), none;
  const std::string single = error_of([&] { batch_norm(Var<double>(random_tensor({1, 3}, 1)), {}, {}, rm, rv, true); });
  BOOST_TEST(single.find("more than 1 value per channel") != std::string::npos, single);
  const std::string weight = error_of(
      [&] { batch_norm(Var<double>(random_tensor({2, 3}, 1)), Var<double>(random_tensor({4}, 2)), {}, rm, rv, true); });
  BOOST_TEST(weight.find("expected [3]") != std::string::npos, weight);
  const std::string rank = error_of([&] { batch_norm(Var<double>(random_tensor({2, 3, 4}, 1)), {}, {}, rm, rv, true); });
  BOOST_TEST(rank.find("[N, C] or [N, C, H, W]") != std::string::npos, rank);
  const std::string eval = error_of([&] { batch_norm(Var<double>(random_tensor({2, 3}, 1)), {}, {}, none, none, false); });
  BOOST_TEST(eval.find("needs running_mean") != std::string::npos, eval);
}

// batch_norm on both devices from the same inputs and running statistics: outputs, gradients and
// the updated running statistics agree.
void check_batch_norm_matches_cpu(const Shape& x_shape, bool affine, bool training, std::uint64_t seed) {
  const std::int64_t C = x_shape[1];
  const Tensor<double> mean0 = random_tensor({C}, seed + 5), var0 = random_tensor({C}, seed + 6, 0.5, 2);
  Tensor<double> cpu_mean = mean0.clone(), cpu_var = var0.clone();
  Tensor<double, HostEmulated> mean = mean0.to<HostEmulated>(), var = var0.to<HostEmulated>();
  std::vector<Tensor<double>> inputs{random_tensor(x_shape, seed, -2, 3)};
  if (affine) {
    inputs.push_back(random_tensor({C}, seed + 1));
    inputs.push_back(random_tensor({C}, seed + 2));
  }
  test::check_matches_cpu(
      [&](const CpuVars& v) {
        return batch_norm(v[0], affine ? v[1] : Var<double>(), affine ? v[2] : Var<double>(), cpu_mean, cpu_var,
                          training, 0.2);
      },
      [&](const EmulatedVars& v) {
        return batch_norm(v[0], affine ? v[1] : Emulated(), affine ? v[2] : Emulated(), mean, var, training, 0.2);
      },
      inputs);
  BOOST_TEST(relative_difference(mean.to<Cpu>(), cpu_mean) <= 1e-12);
  BOOST_TEST(relative_difference(var.to<Cpu>(), cpu_var) <= 1e-12);
  if (training) BOOST_TEST(relative_difference(cpu_var, var0) > 1e-3);  // the update happened
}

BOOST_AUTO_TEST_CASE(batch_norm_matches_the_cpu_with_its_running_statistics) {
  for (bool training : {true, false}) {
    BOOST_TEST_CONTEXT("training " << training) {
      check_batch_norm_matches_cpu({3, 4, 5, 3}, true, training, 30);
      check_batch_norm_matches_cpu({6, 5}, true, training, 40);
      check_batch_norm_matches_cpu({2, 3, 2, 3}, false, training, 50);
    }
  }
}

BOOST_AUTO_TEST_CASE(batch_norm_without_running_statistics_trains) {
  const std::vector<Tensor<double>> inputs{random_tensor({4, 3, 2, 2}, 60), random_tensor({3}, 61),
                                           random_tensor({3}, 62)};
  test::check_matches_cpu(
      [](const CpuVars& v) {
        Tensor<double> none;
        return batch_norm(v[0], v[1], v[2], none, none, true);
      },
      [](const EmulatedVars& v) {
        Tensor<double, HostEmulated> none;
        return batch_norm(v[0], v[1], v[2], none, none, true);
      },
      inputs);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(batch_norm_matches_finite_differences, D, test::Devices) {
  for (bool training : {true, false}) {
    Tensor<double, D> mean = on_device<D>(random_tensor({3}, 70));
    Tensor<double, D> var = on_device<D>(random_tensor({3}, 71, 0.5, 2));
    test::expect_gradcheck_on<D>(
        [&](const auto& v) { return batch_norm(v[0], v[1], v[2], mean, var, training); },
        {random_tensor({3, 3, 2, 2}, 72), random_tensor({3}, 73), random_tensor({3}, 74)});
  }
}

// A 16-bit model's batch norm keeps its running statistics in float (BatchNorm2d): from half x
// they move exactly as the float op's do from the same values, where 16-bit ones drift by their
// rounding; the output and gradients match the float op's within half's precision.
BOOST_AUTO_TEST_CASE_TEMPLATE(half_input_with_float_running_statistics_tracks_the_float_op, D, test::Devices) {
  const std::int64_t C = 3;
  const auto to_half = [](const Tensor<double>& t) { return on_device<D>(tensor_cast<half>(t)); };
  const auto widened = [](const Tensor<double>& t) { return on_device<D>(tensor_cast<float>(tensor_cast<half>(t))); };
  Tensor<float, D> kept_mean = on_device<D>(Tensor<float>::zeros({C})), kept_var = on_device<D>(Tensor<float>::ones({C}));
  Tensor<float, D> float_mean = kept_mean.clone(), float_var = kept_var.clone();
  Tensor<half, D> rounded_mean = on_device<D>(Tensor<half>::zeros({C})), rounded_var = on_device<D>(Tensor<half>::ones({C}));
  const Tensor<double> wd = random_tensor({C}, 90, 0.5, 2), bd = random_tensor({C}, 91);
  Var<half, D> w(to_half(wd), true), b(to_half(bd), true);
  Var<float, D> wf(widened(wd), true), bf(widened(bd), true);
  for (int step = 0; step < 40; ++step) {
    const Tensor<double> xd = random_tensor({8, C, 4, 4}, 100 + step, -2, 3);
    Var<half, D> x(to_half(xd), true);
    Var<float, D> xf(widened(xd), true);
    const Var<half, D> y = batch_norm(x, w, b, kept_mean, kept_var, true);
    const Var<float, D> yf = batch_norm(xf, wf, bf, float_mean, float_var, true);
    batch_norm(x, w, b, rounded_mean, rounded_var, true);
    if (step + 1 < 40) continue;
    const Tensor<double> gy = random_tensor({8, C, 4, 4}, 99);
    backward(y, to_half(gy));
    backward(yf, widened(gy));
    const auto as_float = [](const auto& t) { return tensor_cast<float>(t.template to<Cpu>()); };
    BOOST_TEST(relative_difference(as_float(y.value()), as_float(yf.value())) <= 2e-3);
    BOOST_TEST(relative_difference(as_float(x.grad()), as_float(xf.grad())) <= 2e-3);
    BOOST_TEST(relative_difference(as_float(w.grad()), as_float(wf.grad())) <= 2e-3);
    BOOST_TEST(relative_difference(as_float(b.grad()), as_float(bf.grad())) <= 2e-3);
  }
  const auto host = [](const Tensor<float, D>& t) { return t.template to<Cpu>(); };
  BOOST_TEST(relative_difference(host(kept_mean), host(float_mean)) <= 1e-7);
  BOOST_TEST(relative_difference(host(kept_var), host(float_var)) <= 1e-7);
  const auto widen = [](const Tensor<half, D>& t) { return tensor_cast<float>(t.template to<Cpu>()); };
  BOOST_TEST(relative_difference(widen(rounded_var), host(float_var)) > 1e-4, "16-bit statistics do not drift here");
}

// Apex O2's keep_batchnorm_fp32: half x with float weight and bias, the op computing in float on
// x as it reads it. Its output and x's gradient match the float op's within half's rounding, and weight
// and bias get float gradients equal to the float op's on the same (rounded) x, their hooks fired.
BOOST_AUTO_TEST_CASE_TEMPLATE(half_input_with_float_weight_matches_the_float_op, D, test::Devices) {
  const std::int64_t C = 3;
  const auto to_half = [](const Tensor<double>& t) { return on_device<D>(tensor_cast<half>(t)); };
  const auto widened = [](const Tensor<double>& t) { return on_device<D>(tensor_cast<float>(tensor_cast<half>(t))); };
  const auto as_float = [](const auto& t) { return tensor_cast<float>(t.template to<Cpu>()); };
  const Tensor<double> wd = random_tensor({C}, 190, 0.5, 2), bd = random_tensor({C}, 191);
  for (bool training : {true, false}) {
    BOOST_TEST_CONTEXT("training " << training) {
      Tensor<float, D> mean = on_device<D>(tensor_cast<float>(random_tensor({C}, 192)));
      Tensor<float, D> var = on_device<D>(tensor_cast<float>(random_tensor({C}, 193, 0.5, 2)));
      Tensor<float, D> float_mean = mean.clone(), float_var = var.clone();
      const Tensor<double> xd = random_tensor({4, C, 3, 3}, 194, -2, 3), gyd = random_tensor({4, C, 3, 3}, 195);
      Var<half, D> x(to_half(xd), true);
      Var<float, D> w(on_device<D>(tensor_cast<float>(wd)), true), b(on_device<D>(tensor_cast<float>(bd)), true);
      Var<float, D> xf(widened(xd), true), wf(w.value().clone(), true), bf(b.value().clone(), true);
      int hooks = 0;
      w.on_grad_ready([&](Node<float, D>&) { ++hooks; });
      b.on_grad_ready([&](Node<float, D>&) { ++hooks; });
      const Var<half, D> y = batch_norm(x, w, b, mean, var, training);
      const Var<float, D> yf = batch_norm(xf, wf, bf, float_mean, float_var, training);
      backward(y, to_half(gyd));
      backward(yf, widened(gyd));
      BOOST_TEST(relative_difference(as_float(y.value()), as_float(yf.value())) <= 2e-3);
      BOOST_TEST(relative_difference(as_float(x.grad()), as_float(xf.grad())) <= 2e-3);
      BOOST_TEST(relative_difference(as_float(w.grad()), as_float(wf.grad())) <= 1e-6);
      BOOST_TEST(relative_difference(as_float(b.grad()), as_float(bf.grad())) <= 1e-6);
      BOOST_TEST(relative_difference(as_float(mean), as_float(float_mean)) <= 1e-7);
      BOOST_TEST(relative_difference(as_float(var), as_float(float_var)) <= 1e-7);
      BOOST_TEST(hooks == 2);
    }
  }
}

// Between forward and backward the mixed op keeps x's and its output's 16-bit values, not the float
// copies it computed on (four times x's bytes more, as the op once kept); backward, run twice on a
// retained graph, gives the same gradients each time, made again from x.
BOOST_AUTO_TEST_CASE(half_input_with_float_weight_keeps_no_float_activations) {
  const std::int64_t C = 4;
  const Tensor<double> xd = random_tensor({8, C, 16, 16}, 196, -2, 3), gyd = random_tensor({8, C, 16, 16}, 197);
  Var<half> x(tensor_cast<half>(xd), true);
  Var<float> w(tensor_cast<float>(random_tensor({C}, 198, 0.5, 2)), true), b(Tensor<float>::zeros({C}), true);
  Tensor<float> mean = Tensor<float>::zeros({C}), var = Tensor<float>::ones({C});
  const std::int64_t before = Cpu::live_bytes();
  const Var<half> y = batch_norm(x, w, b, mean, var, true);
  const std::int64_t kept = Cpu::live_bytes() - before, output = y.numel() * std::int64_t(sizeof(half));
  BOOST_TEST(kept >= output);
  BOOST_TEST(kept <= output + 1024, "the graph keeps " << kept << " bytes for a " << output << "-byte output");
  backward(y, tensor_cast<half>(gyd), /*retain_graph=*/true);
  const Tensor<half> first = x.grad().clone();
  const Tensor<float> first_w = w.grad().clone();
  x.zero_grad();
  w.zero_grad();
  backward(y, tensor_cast<half>(gyd));
  BOOST_TEST(tensor_cast<float>(x.grad()).to_vector() == tensor_cast<float>(first).to_vector(),
             boost::test_tools::per_element());
  BOOST_TEST(w.grad().to_vector() == first_w.to_vector(), boost::test_tools::per_element());
}

// The same op with bfloat16 x and float weight and bias, the fused relu and residual too, on the
// CPU's channel-by-channel 16-bit kernels: the float op's output and gradients on the same
// (rounded) values within bfloat16's rounding, weight and bias gradients in float.
BOOST_AUTO_TEST_CASE(bfloat16_input_with_float_weight_matches_the_float_op) {
  const std::int64_t C = 5;
  const Tensor<double> xd = random_tensor({6, C, 7, 9}, 200, -2, 3), gy = random_tensor({6, C, 7, 9}, 201);
  const Tensor<double> rd = random_tensor({6, C, 7, 9}, 204, -1, 1);
  const Tensor<double> wd = random_tensor({C}, 202, 0.5, 2), bd = random_tensor({C}, 203);
  const auto rounded = [](const Tensor<double>& t) { return tensor_cast<float>(tensor_cast<ptrain::bfloat16>(t)); };
  for (int fusion = 0; fusion < 3; ++fusion) {
    BOOST_TEST_CONTEXT((fusion == 0 ? "batch_norm" : fusion == 1 ? "batch_norm_relu" : "batch_norm_add_relu")) {
      Tensor<float> rm = Tensor<float>::zeros({C}), rv = Tensor<float>::ones({C});
      Tensor<float> rm_b = rm.clone(), rv_b = rv.clone();
      Var<float> xf(rounded(xd), true), rf(rounded(rd), true), wf(tensor_cast<float>(wd), true),
          bf(tensor_cast<float>(bd), true);
      Var<ptrain::bfloat16> xb(tensor_cast<ptrain::bfloat16>(xd), true), rb(tensor_cast<ptrain::bfloat16>(rd), true);
      Var<float> wb(tensor_cast<float>(wd), true), bb(tensor_cast<float>(bd), true);
      const auto run = [&](const auto& x, const auto& r, const auto& w, const auto& b, auto& m, auto& v) {
        if (fusion == 0) return batch_norm(x, w, b, m, v, true);
        if (fusion == 1) return batch_norm_relu(x, w, b, m, v, true);
        return batch_norm_add_relu(x, r, w, b, m, v, true);
      };
      const Var<float> yf = run(xf, rf, wf, bf, rm, rv);
      const Var<ptrain::bfloat16> yb = run(xb, rb, wb, bb, rm_b, rv_b);
      backward(yf, rounded(gy));
      backward(yb, tensor_cast<ptrain::bfloat16>(gy));
      BOOST_TEST(relative_difference(tensor_cast<float>(yb.value()), yf.value()) <= 1e-2);
      BOOST_TEST(relative_difference(tensor_cast<float>(xb.grad()), xf.grad()) <= 1e-2);
      if (fusion == 2) BOOST_TEST(relative_difference(tensor_cast<float>(rb.grad()), rf.grad()) <= 1e-2);
      BOOST_TEST(relative_difference(wb.grad(), wf.grad()) <= 1e-5);
      BOOST_TEST(relative_difference(bb.grad(), bf.grad()) <= 1e-5);
      BOOST_TEST(relative_difference(rv_b, rv) <= 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(batch_norm_checks_its_arguments_as_the_cpu_op) {
  const Emulated x(random_tensor({1, 2}, 80).to<HostEmulated>());
  Tensor<double, HostEmulated> mean = Tensor<double>::zeros({2}).to<HostEmulated>();
  Tensor<double, HostEmulated> var = Tensor<double>::ones({2}).to<HostEmulated>();
  BOOST_TEST(test::error_message([&] { (void)batch_norm(x, Emulated(), Emulated(), mean, var, true); })
                 .find("expected more than 1 value per channel") != std::string::npos);
  Tensor<double, HostEmulated> short_var = Tensor<double>::ones({3}).to<HostEmulated>();
  BOOST_TEST(test::error_message([&] { (void)batch_norm(x, Emulated(), Emulated(), mean, short_var, false); })
                 .find("batch_norm: running_var [3]") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
