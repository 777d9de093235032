#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/conv.hpp>

#include "../common/compare.hpp"

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::CpuVars;
using test::Emulated;
using test::EmulatedVars;
using test::relative_difference;
using namespace ptrain::test;

BOOST_AUTO_TEST_SUITE(conv_test)

namespace {

// The definition, one multiply-add at a time.
Tensor<double> reference_conv(const Tensor<double>& x, const Tensor<double>& w, const Conv2dOptions& o) {
  const auto g = conv2d_geometry(x.shape(), w.shape(), o);
  Tensor<double> y = Tensor<double>::zeros({g.batch, g.out_channels, g.out_h, g.out_w});
  const std::int64_t Kg = g.out_channels / g.groups, Cg = g.in_channels / g.groups;
  for (std::int64_t n = 0; n < g.batch; ++n)
    for (std::int64_t k = 0; k < g.out_channels; ++k)
      for (std::int64_t oh = 0; oh < g.out_h; ++oh)
        for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
          double s = 0;
          for (std::int64_t c = 0; c < Cg; ++c)
            for (std::int64_t i = 0; i < g.kernel_h; ++i)
              for (std::int64_t j = 0; j < g.kernel_w; ++j) {
                const std::int64_t ih = oh * g.stride_h - g.pad_h + i * g.dilation_h;
                const std::int64_t iw = ow * g.stride_w - g.pad_w + j * g.dilation_w;
                if (ih < 0 || ih >= g.in_h || iw < 0 || iw >= g.in_w) continue;
                const std::int64_t cin = k / Kg * Cg + c;
                s += x[((n * g.in_channels + cin) * g.in_h + ih) * g.in_w + iw] *
                     w[((k * Cg + c) * g.kernel_h + i) * g.kernel_w + j];
              }
          y[((n * g.out_channels + k) * g.out_h + oh) * g.out_w + ow] = s;
        }
  return y;
}

struct Case {
  const char* name;
  Shape x, w;
  Conv2dOptions options;
  bool bias;
};

// Every option on its own and together; small enough for finite differences.
const std::vector<Case>& cases() {
  static const std::vector<Case> all{
      {"3x3 pad 1 with bias", {2, 3, 5, 6}, {4, 3, 3, 3}, Conv2dOptions::square(1, 1), true},
      {"stride 2 pad 1 no bias", {2, 3, 7, 6}, {4, 3, 3, 3}, Conv2dOptions::square(2, 1), false},
      {"dilation 2 pad 2", {2, 2, 7, 7}, {3, 2, 3, 3}, Conv2dOptions::square(1, 2, 2), true},
      {"groups 2", {2, 4, 5, 5}, {6, 2, 3, 3}, Conv2dOptions::square(1, 1, 1, 2), true},
      {"depthwise", {2, 3, 6, 6}, {3, 1, 3, 3}, Conv2dOptions::square(1, 1, 1, 3), false},
      {"depthwise multiplier 2 stride 2", {2, 2, 6, 5}, {4, 1, 3, 3}, Conv2dOptions::square(2, 1, 1, 2), true},
      {"non-square kernel, stride and padding", {2, 3, 6, 7}, {2, 3, 2, 3},
       Conv2dOptions{.stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 0}, true},
      {"everything at once", {3, 4, 7, 8}, {4, 2, 3, 2},
       Conv2dOptions{.stride_h = 1, .stride_w = 2, .pad_h = 2, .pad_w = 1, .dilation_h = 2, .dilation_w = 1,
                     .groups = 2},
       true},
      {"1x1 pointwise", {3, 4, 3, 4}, {5, 4, 1, 1}, {}, true},
      {"1x1 stride 2", {2, 4, 5, 5}, {3, 4, 1, 1}, Conv2dOptions::square(2), false},
      {"1x1 pointwise groups 2", {2, 4, 3, 3}, {6, 2, 1, 1}, Conv2dOptions::square(1, 0, 1, 2), false},
      {"1x1 with padding", {2, 3, 3, 4}, {2, 3, 1, 1}, Conv2dOptions::square(1, 1), true},
      // 16 input channels a group: the input gradient is computed as a transposed convolution.
      {"16 channels 3x3 pad 1", {2, 16, 5, 4}, {3, 16, 3, 3}, Conv2dOptions::square(1, 1), true},
      {"16 channels a group, dilation 2, non-square", {3, 32, 5, 6}, {4, 16, 3, 2},
       Conv2dOptions{.pad_h = 2, .pad_w = 1, .dilation_h = 2, .dilation_w = 1, .groups = 2}, false},
      {"16 channels 1x1", {2, 16, 3, 3}, {5, 16, 1, 1}, {}, true},
      {"3x3 stride 1 pad 3", {2, 2, 4, 4}, {3, 2, 3, 3}, Conv2dOptions::square(1, 3), false},
      {"batch of 5 small images", {5, 2, 3, 3}, {3, 2, 2, 2}, Conv2dOptions::square(1, 1), true},
      {"kernel as large as the padded input", {2, 2, 3, 3}, {2, 2, 5, 5}, Conv2dOptions::square(1, 1), true},
  };
  return all;
}

// The blockings that drive every path of the kernel: one output row per GEMM, the default, and
// a whole thread's images in one GEMM.
const std::vector<kernels::ConvBlocking>& blockings() {
  static const std::vector<kernels::ConvBlocking> all{{1, 1}, {}, {1 << 20, 1 << 30}};
  return all;
}

}  // namespace

namespace {

struct ConvCase {
  Shape x, weight;
  bool bias;
  Conv2dOptions options;
};

// ResNet's 3x3 and strided 1x1 convolutions, and an odd one: rectangular kernel, stride,
// padding and dilation per axis, groups.
const std::vector<ConvCase> conv_cases{
    {{2, 3, 7, 6}, {4, 3, 3, 3}, true, Conv2dOptions::square(1, 1)},
    {{2, 4, 7, 7}, {6, 4, 1, 1}, false, Conv2dOptions::square(2)},
    {{2, 4, 6, 7}, {6, 2, 3, 2}, true, {.stride_h = 1, .stride_w = 2, .pad_h = 2, .pad_w = 1, .dilation_h = 2,
                                        .dilation_w = 1, .groups = 2}},
};

std::vector<Tensor<double>> conv_inputs(const ConvCase& c, std::uint64_t seed) {
  std::vector<Tensor<double>> inputs{random_tensor(c.x, seed), random_tensor(c.weight, seed + 1)};
  if (c.bias) inputs.push_back(random_tensor({c.weight[0]}, seed + 2));
  return inputs;
}

template <class V>
V conv_of(const std::vector<V>& v, const Conv2dOptions& options) {
  return conv2d(v[0], v[1], v.size() > 2 ? v[2] : V(), options);
}

}  // namespace

BOOST_AUTO_TEST_CASE(gradients_for_every_option) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      std::vector<Tensor<double>> inputs(c.bias ? 3 : 2);
      inputs[0] = random_tensor(c.x, 1);
      inputs[1] = random_tensor(c.w, 2);
      if (c.bias) inputs[2] = random_tensor({c.w[0]}, 3);
      const Conv2dOptions o = c.options;
      auto r = gradcheck(
          [o](const std::vector<Var<double>>& v) { return conv2d(v[0], v[1], v.size() > 2 ? v[2] : Var<double>{}, o); },
          inputs);
      BOOST_TEST(r.ok, r.report);
    }
  }
}

BOOST_AUTO_TEST_CASE(forward_matches_the_definition_under_every_blocking) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const Tensor<double> x = random_tensor(c.x, 4), w = random_tensor(c.w, 5), b = random_tensor({c.w[0]}, 6);
      const auto g = conv2d_geometry(c.x, c.w, c.options);
      Tensor<double> expected = reference_conv(x, w, c.options);
      const std::int64_t plane = g.out_h * g.out_w;
      for (std::int64_t i = 0; i < expected.numel(); ++i) expected[i] += b[i / plane % g.out_channels];
      for (const auto& blocking : blockings()) {
        Tensor<double> y(expected.shape());
        kernels::conv2d_forward<double>(g, x.data(), w.data(), b.data(), y.data(), blocking);
        BOOST_TEST((y.array() - expected.array()).abs().maxCoeff() < 1e-12,
                   "blocking " << blocking.target_columns << "/" << blocking.column_budget);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(backward_is_the_same_under_every_blocking) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const Tensor<double> x = random_tensor(c.x, 4), w = random_tensor(c.w, 5);
      const auto g = conv2d_geometry(c.x, c.w, c.options);
      const Tensor<double> gy = random_tensor({g.batch, g.out_channels, g.out_h, g.out_w}, 7);
      Tensor<double> gx0(c.x), gw0(c.w), gb0({c.w[0]});
      kernels::conv2d_backward<double>(g, x.data(), w.data(), gy.data(), gx0.data(), gw0.data(), gb0.data());
      for (const auto& blocking : blockings()) {
        Tensor<double> gx = Tensor<double>::full(c.x, 9.0), gw = Tensor<double>::full(c.w, 9.0), gb({c.w[0]});
        kernels::conv2d_backward<double>(g, x.data(), w.data(), gy.data(), gx.data(), gw.data(), gb.data(), blocking);
        BOOST_TEST((gx.array() - gx0.array()).abs().maxCoeff() < 1e-12);
        BOOST_TEST((gw.array() - gw0.array()).abs().maxCoeff() < 1e-12);
        BOOST_TEST((gb.array() - gb0.array()).abs().maxCoeff() < 1e-12);
      }
      // Each gradient alone equals the same gradient computed with the others.
      Tensor<double> gx(c.x), gw(c.w);
      kernels::conv2d_grad_input<double>(g, w.data(), gy.data(), gx.data());
      kernels::conv2d_grad_weight<double>(g, x.data(), gy.data(), gw.data());
      BOOST_TEST((gx.array() - gx0.array()).abs().maxCoeff() < 1e-12);
      BOOST_TEST((gw.array() - gw0.array()).abs().maxCoeff() < 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(large_images_cut_into_row_bands_match_the_definition) {
  // 40 output rows of 40 columns: more than target_columns per image, so images go one at a
  // time and a budget of 4 rows of columns cuts each into 10 bands.
  const Shape xs{3, 2, 40, 40}, ws{3, 2, 3, 3};
  const Conv2dOptions o = Conv2dOptions::square(1, 1);
  const Tensor<double> x = random_tensor(xs, 1), w = random_tensor(ws, 2);
  const auto g = conv2d_geometry(xs, ws, o);
  const kernels::ConvBlocking bands{64, 18 * 40 * 4};
  Tensor<double> y({3, 3, 40, 40}), y0(y.shape());
  kernels::conv2d_forward<double>(g, x.data(), w.data(), nullptr, y.data(), bands);
  BOOST_TEST((y.array() - reference_conv(x, w, o).array()).abs().maxCoeff() < 1e-12);
  const Tensor<double> gy = random_tensor(y.shape(), 3);
  Tensor<double> gx(xs), gw(ws), gx0(xs), gw0(ws);
  kernels::conv2d_backward<double>(g, x.data(), w.data(), gy.data(), gx.data(), gw.data(), nullptr, bands);
  kernels::conv2d_backward<double>(g, x.data(), w.data(), gy.data(), gx0.data(), gw0.data(), nullptr,
                                   kernels::ConvBlocking{1 << 20, 1 << 30});
  BOOST_TEST((gx.array() - gx0.array()).abs().maxCoeff() < 1e-12);
  BOOST_TEST((gw.array() - gw0.array()).abs().maxCoeff() < 1e-11);
}

BOOST_AUTO_TEST_CASE(threads_split_the_batch_without_changing_results) {
  // Big enough to run in parallel (above kernels::detail::parallel_flops): whole images per
  // thread, grouped images, row bands, both input-gradient routes, per-thread weight gradients.
  struct Big {
    Shape x, w;
    Conv2dOptions options;
    kernels::ConvBlocking blocking;
  };
  const std::vector<Big> bigs{
      {{8, 16, 12, 12}, {16, 16, 3, 3}, Conv2dOptions::square(1, 1), {}},
      {{7, 16, 20, 20}, {16, 16, 3, 3}, Conv2dOptions::square(1, 1), {64, 16 * 9 * 20 * 2}},
      {{8, 16, 24, 24}, {24, 16, 3, 3}, Conv2dOptions::square(2, 1), {}},
      {{8, 64, 12, 12}, {64, 64, 1, 1}, {}, {}},
      {{3, 32, 16, 16}, {32, 16, 3, 3}, Conv2dOptions::square(1, 1, 1, 2), {}},
  };
  const int saved = num_threads();
  for (const Big& c : bigs) {
    BOOST_TEST_CONTEXT("input " << c.x << " weight " << c.w) {
      const auto g = conv2d_geometry(c.x, c.w, c.options);
      BOOST_REQUIRE(g.flops() >= kernels::detail::parallel_flops);
      const Tensor<double> x = random_tensor(c.x, 1), w = random_tensor(c.w, 2), b = random_tensor({c.w[0]}, 3);
      const Tensor<double> gy = random_tensor({g.batch, g.out_channels, g.out_h, g.out_w}, 4);
      auto run = [&](int threads) {
        set_num_threads(threads);
        std::vector<Tensor<double>> out{Tensor<double>(gy.shape()), Tensor<double>(c.x), Tensor<double>(c.w),
                                        Tensor<double>({c.w[0]})};
        kernels::conv2d_forward<double>(g, x.data(), w.data(), b.data(), out[0].data(), c.blocking);
        kernels::conv2d_backward<double>(g, x.data(), w.data(), gy.data(), out[1].data(), out[2].data(),
                                         out[3].data(), c.blocking);
        return out;
      };
      const auto serial = run(1);
      Tensor<double> expected = reference_conv(x, w, c.options);
      for (std::int64_t i = 0; i < expected.numel(); ++i) expected[i] += b[i / g.out_plane() % g.out_channels];
      BOOST_TEST((serial[0].array() - expected.array()).abs().maxCoeff() < 1e-12);
      for (int threads : {2, 3}) {
        const auto parallel = run(threads);
        for (std::size_t k = 0; k < serial.size(); ++k)
          BOOST_TEST((parallel[k].array() - serial[k].array()).abs().maxCoeff() < 1e-11,
                     threads << " threads, output " << k);
      }
    }
  }
  set_num_threads(saved);
}

BOOST_AUTO_TEST_CASE(forward_matches_pytorch) {
  // torch.nn.functional.conv2d in float64 on the same sequences.
  {
    Var<double> x(sequence({1, 2, 5, 5}, 0.7, 0.3, 2.0)), w(sequence({3, 2, 3, 3}, 0.5, -0.2, 1.0, true));
    Var<double> b(Tensor<double>::from({3}, {0.1, -0.2, 0.3}));
    check_close(conv2d(x, w, b, Conv2dOptions::square(2, 1)).value(),
                {-0.6540468492, 5.738363548,  2.90485991,   -0.1710910897, 0.8291687394, 0.6443366649, -2.763181028,
                 3.349298533,   4.113666394,  -1.206452109, -6.463675935,  -1.464525608, -0.19555481,  -1.14167028,
                 -0.561611372,  1.13206262,   -5.361527157, -3.378271344,  2.888064797,  6.075685842,  -0.2005648128,
                 0.5629907954,  1.286799839,  0.4146134633, 0.7358159006,  6.456348647,  2.07797201},
                1e-8);
  }
  {
    Var<double> x(sequence({1, 4, 4, 5}, 0.7, 0.3, 2.0)), w(sequence({4, 2, 2, 3}, 0.5, -0.2, 1.0, true));
    const Conv2dOptions o{.stride_h = 1, .stride_w = 2, .pad_h = 1, .pad_w = 0, .dilation_h = 2, .dilation_w = 1,
                          .groups = 2};
    check_close(conv2d(x, w, {}, o).value(),
                {2.309964939,   0.2496403879, -1.699860099, 6.667659304,  -0.8844366848, -7.25246707,  4.327172993,
                 5.010103653,   1.463322994,  -1.426046116, 0.2501878815, 8.206483258,   -3.140354209, -8.092466781,
                 4.832252615,   4.749212813,  -1.3262354,   2.599291385,  0.2986784288,  -8.926186497, 2.915759582,
                 9.005357004,   -3.868744388, -5.125715373, -0.6778184021, 4.087712168,  -1.429922719, -9.556378551,
                 4.654260748,   9.018315087,  -3.857551239, -4.164991796},
                1e-8);
  }
  {
    Var<double> x(sequence({1, 3, 4, 4}, 0.7, 0.3, 2.0)), w(sequence({3, 1, 3, 3}, 0.5, -0.2, 1.0, true));
    check_close(conv2d(x, w, {}, Conv2dOptions::square(1, 1, 1, 3)).value(),
                {-0.3697899534, 1.13071735,   3.580641515,   3.810493683,  2.779150457,  3.915652471,  1.947681102,
                 -0.443689779,  -2.366908434, -4.233938084,  -3.096641215, -0.4834486396, -0.6145206637, 2.223783515,
                 5.218591977,   3.668639284,  -2.828098954,  -0.5958664139, 2.749916335, 2.237570611,  3.19558418,
                 3.230515255,   0.1095457174, -1.697376547,  -3.337290645, -4.271715236, -1.739491405, 0.6316478441,
                 2.312136276,   4.869855322,  4.017675916,   1.445811494,  2.05831809,   4.818668798,  5.772017078,
                 3.845375584,   2.173112142,  1.157098414,   -1.735751219, -2.524197497, -2.600725532, -2.453012872,
                 0.3434524733,  1.927788008,  1.631237221,   3.982316105,  4.383940128,  1.779184956},
                1e-8);
  }
}

BOOST_AUTO_TEST_CASE(float_path_agrees_with_double) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const Tensor<double> x = random_tensor(c.x, 11), w = random_tensor(c.w, 12), b = random_tensor({c.w[0]}, 13);
      Var<double> xd(x, true), wd(w, true), bd(b, true);
      Var<float> xf(to_float(x), true), wf(to_float(w), true), bf(to_float(b), true);
      Var<double> yd = conv2d(xd, wd, c.bias ? bd : Var<double>{}, c.options);
      Var<float> yf = conv2d(xf, wf, c.bias ? bf : Var<float>{}, c.options);
      const Tensor<double> gy = random_tensor(yd.shape(), 14);
      backward(yd, gy.clone());
      backward(yf, to_float(gy));
      BOOST_TEST(worst_error(yf.value(), yd.value()) < 1e-5);
      BOOST_TEST(worst_error(xf.grad(), xd.grad()) < 1e-5);
      BOOST_TEST(worst_error(wf.grad(), wd.grad()) < 1e-5);
      if (c.bias) BOOST_TEST(worst_error(bf.grad(), bd.grad()) < 1e-5);
    }
  }
}

BOOST_AUTO_TEST_CASE(input_without_grad_gets_none_and_weight_still_does) {
  Var<double> x(random_tensor({2, 3, 5, 5}, 1)), w(random_tensor({4, 3, 3, 3}, 2), true);
  Var<double> y = conv2d(x, w, {}, Conv2dOptions::square(1, 1));
  backward(y, Tensor<double>::ones(y.shape()));
  BOOST_TEST(!x.grad().defined());
  BOOST_TEST(w.grad().defined());
  // With all-ones upstream, dL/dw[k][c][i][j] is the sum of the input window shifted by (i, j).
  double centre = 0;
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t p = 0; p < 25; ++p) centre += x.value()[(n * 3 + 1) * 25 + p];
  BOOST_TEST(std::abs(w.grad()[(0 * 3 + 1) * 9 + 4] - centre) < 1e-12);
}

BOOST_AUTO_TEST_CASE(shape_errors_say_what_was_expected) {
  Var<double> x(random_tensor({2, 3, 5, 5}, 1));
  const std::string channels = error_message([&] { conv2d(x, Var<double>(random_tensor({4, 2, 3, 3}, 2))); });
  BOOST_TEST(channels.find("expects 2 input channels") != std::string::npos, channels);
  const std::string groups = error_message(
      [&] { conv2d(x, Var<double>(random_tensor({4, 1, 3, 3}, 2)), {}, Conv2dOptions::square(1, 0, 1, 2)); });
  BOOST_TEST(groups.find("not divisible by groups=2") != std::string::npos, groups);
  const std::string rank = error_message([&] { conv2d(Var<double>(random_tensor({3, 5, 5}, 1)), x); });
  BOOST_TEST(rank.find("input must be [N, C, H, W]") != std::string::npos, rank);
  const std::string small = error_message([&] { conv2d(x, Var<double>(random_tensor({4, 3, 7, 7}, 2))); });
  BOOST_TEST(small.find("smaller than the dilated kernel") != std::string::npos, small);
  const std::string bias = error_message(
      [&] { conv2d(x, Var<double>(random_tensor({4, 3, 3, 3}, 2)), Var<double>(random_tensor({3}, 3))); });
  BOOST_TEST(bias.find("expected [4]") != std::string::npos, bias);
}

BOOST_AUTO_TEST_CASE(conv2d_matches_the_cpu) {
  std::uint64_t seed = 10;
  for (const ConvCase& c : conv_cases) {
    BOOST_TEST_CONTEXT("x " << c.x << ", weight " << c.weight << ", bias " << c.bias) {
      test::check_matches_cpu([&](const CpuVars& v) { return conv_of(v, c.options); },
                        [&](const EmulatedVars& v) { return conv_of(v, c.options); }, conv_inputs(c, seed += 3));
    }
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(conv2d_matches_finite_differences, D, test::Devices) {
  const ConvCase small{{2, 2, 5, 4}, {4, 1, 3, 2}, true,
                       {.stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 1, .dilation_h = 1, .dilation_w = 2,
                        .groups = 2}};
  test::expect_gradcheck_on<D>([&](const auto& v) { return conv_of(v, small.options); }, conv_inputs(small, 20));
  const ConvCase plain{{1, 2, 4, 4}, {3, 2, 3, 3}, false, Conv2dOptions::square(1, 1)};
  test::expect_gradcheck_on<D>([&](const auto& v) { return conv_of(v, plain.options); }, conv_inputs(plain, 23));
}

BOOST_AUTO_TEST_CASE(conv2d_checks_its_arguments_as_the_cpu_op) {
  const Emulated x(Tensor<double>::zeros({1, 2, 4, 4}).to<HostEmulated>());
  const Emulated w(Tensor<double>::zeros({3, 2, 3, 3}).to<HostEmulated>());
  const Emulated bad_bias(Tensor<double>::zeros({2}).to<HostEmulated>());
  const std::string message = test::error_message([&] { (void)conv2d(x, w, bad_bias); });
  BOOST_TEST(message.find("conv2d: bias [2]") != std::string::npos, message);
  BOOST_TEST(message.find("expected [3]") != std::string::npos, message);
}

BOOST_AUTO_TEST_SUITE_END()
