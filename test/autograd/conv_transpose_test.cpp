#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/conv.hpp>

#include "../common/compare.hpp"

#include "../common/typed_devices.hpp"

using namespace ptrain;
using test::emulated;
using namespace ptrain::test;

BOOST_AUTO_TEST_SUITE(conv_transpose_test)

namespace {

// The definition: every input pixel adds its weighted kernel into the output, at stride apart.
Tensor<double> reference_conv_transpose(const Tensor<double>& x, const Tensor<double>& w,
                                        const ConvTranspose2dOptions& o) {
  const std::int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), kh = w.size(2), kw = w.size(3);
  const std::int64_t Kg = w.size(1), K = Kg * o.groups, Cg = C / o.groups;
  const std::int64_t OH = (H - 1) * o.stride_h - 2 * o.pad_h + o.dilation_h * (kh - 1) + o.output_pad_h + 1;
  const std::int64_t OW = (W - 1) * o.stride_w - 2 * o.pad_w + o.dilation_w * (kw - 1) + o.output_pad_w + 1;
  Tensor<double> y = Tensor<double>::zeros({N, K, OH, OW});
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t ih = 0; ih < H; ++ih)
        for (std::int64_t iw = 0; iw < W; ++iw)
          for (std::int64_t k = 0; k < Kg; ++k)
            for (std::int64_t i = 0; i < kh; ++i)
              for (std::int64_t j = 0; j < kw; ++j) {
                const std::int64_t oh = ih * o.stride_h - o.pad_h + i * o.dilation_h;
                const std::int64_t ow = iw * o.stride_w - o.pad_w + j * o.dilation_w;
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                const std::int64_t out_channel = c / Cg * Kg + k;
                y[((n * K + out_channel) * OH + oh) * OW + ow] +=
                    x[((n * C + c) * H + ih) * W + iw] * w[((c * Kg + k) * kh + i) * kw + j];
              }
  return y;
}

struct Case {
  const char* name;
  Shape x, w;
  ConvTranspose2dOptions options;
  bool bias;
};

// Every option on its own and together; small enough for finite differences.
const std::vector<Case>& cases() {
  static const std::vector<Case> all{
      {"UNet's 2x2 stride 2 with bias", {2, 4, 3, 3}, {4, 2, 2, 2}, ConvTranspose2dOptions::square(2), true},
      {"3x3 stride 1 pad 1", {2, 3, 4, 5}, {3, 2, 3, 3}, ConvTranspose2dOptions::square(1, 1), true},
      {"3x3 stride 2 pad 1 output_pad 1", {2, 2, 3, 4}, {2, 3, 3, 3}, ConvTranspose2dOptions::square(2, 1, 1), false},
      {"dilation 2", {1, 2, 3, 3}, {2, 2, 3, 3}, ConvTranspose2dOptions::square(1, 0, 0, 2), true},
      {"groups 2", {2, 4, 3, 3}, {4, 3, 3, 3}, ConvTranspose2dOptions::square(2, 1, 0, 1, 2), true},
      {"1x1", {2, 3, 3, 2}, {3, 4, 1, 1}, {}, true},
      {"everything at once", {2, 4, 3, 4}, {4, 1, 3, 2},
       ConvTranspose2dOptions{.stride_h = 3, .stride_w = 2, .pad_h = 1, .pad_w = 0, .output_pad_h = 2,
                              .output_pad_w = 1, .dilation_h = 1, .dilation_w = 2, .groups = 2},
       true},
      // 16 output channels a group at stride 1: the forward runs conv2d's input gradient as a
      // convolution (kernels::detail::grad_input_is_convolution).
      {"16 output channels stride 1", {2, 3, 4, 3}, {3, 16, 3, 3}, ConvTranspose2dOptions::square(1, 1), true},
  };
  return all;
}

}  // namespace

namespace {
struct ConvTransposeCase {
  Shape x, weight;
  bool bias;
  ConvTranspose2dOptions options;
};
}  // namespace

BOOST_AUTO_TEST_CASE(forward_matches_the_definition) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const Tensor<double> x = random_tensor(c.x, 4), w = random_tensor(c.w, 5);
      const Tensor<double> b = random_tensor({c.w[1] * c.options.groups}, 6);
      Tensor<double> expected = reference_conv_transpose(x, w, c.options);
      const std::int64_t plane = expected.size(2) * expected.size(3);
      for (std::int64_t i = 0; i < expected.numel(); ++i) expected[i] += b[i / plane % expected.size(1)];
      const Var<double> y = conv_transpose2d(Var<double>(x), Var<double>(w), Var<double>(b), c.options);
      BOOST_REQUIRE(y.shape() == expected.shape());
      BOOST_TEST((y.value().array() - expected.array()).abs().maxCoeff() < 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(gradients_for_every_option) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      std::vector<Tensor<double>> inputs(c.bias ? 3 : 2);
      inputs[0] = random_tensor(c.x, 1);
      inputs[1] = random_tensor(c.w, 2);
      if (c.bias) inputs[2] = random_tensor({c.w[1] * c.options.groups}, 3);
      const ConvTranspose2dOptions o = c.options;
      auto r = gradcheck(
          [o](const std::vector<Var<double>>& v) {
            return conv_transpose2d(v[0], v[1], v.size() > 2 ? v[2] : Var<double>{}, o);
          },
          inputs);
      BOOST_TEST(r.ok, r.report);
    }
  }
}

BOOST_AUTO_TEST_CASE(forward_and_gradients_match_pytorch) {
  // torch.nn.functional.conv_transpose2d in float64 on the same sequences; gradients of
  // sum(y * cos(0.3 i + 0.1)).
  {
    Var<double> x(sequence({1, 2, 3, 3}, 0.7, 0.3, 2.0), true), w(sequence({2, 3, 3, 3}, 0.5, -0.2, 1.0, true), true);
    Var<double> b(Tensor<double>::from({3}, {0.1, -0.2, 0.3}), true);
    const Var<double> y = conv_transpose2d(x, w, b, ConvTranspose2dOptions::square(2, 1, 1));
    BOOST_TEST(y.shape() == (Shape{1, 3, 6, 6}));
    check_close(y.value(),
                {-0.6062324338375166, -1.5106932189093354, -1.8436518424765627, -3.402048116817949,
                 -2.1669414192010836, -3.191786759821432, 0.9585480948681014, -2.5068071661589193,
                 -2.2495878242502436, -6.783674343629643, -4.352675876301218, -2.0766291557271996,
                 -1.424053024538556, -2.128662093057562, 0.03562132154986661, 0.43718548443144933,
                 1.5255739660579843, 2.160182693181839, -4.361600888747957, -5.136079075726755,
                 -2.2721652887795907, 0.01349357076591512, 0.9329367126069109, 0.6365516755617707,
                 2.3450568991213583, 3.9609559712082856, 2.1086544925462367, 3.2615945601322838,
                 0.9275504920343987, 1.3116363449876438, 2.9343750649571483, 4.722453696306628,
                 2.6513913426742466, 2.759452457016489, 1.1684484053422093, 0.6762320142227096,
                 0.7531684414977771, 3.410153209327471, 2.4714587771267515, 5.004979861714729,
                 2.9333203071781613, 1.7618702864564642, 0.6007030161355202, 1.25290294688456,
                 -1.3702121316642484, -2.322249690656803, -2.790758228873373, -4.925243143104987,
                 1.92153233728335, 1.2519360195043394, -0.08804544069302242, -2.3308193131740786,
                 -2.150277197249709, -1.4139897879584573, -2.992830249329349, -5.266158059155046,
                 -1.8813905643493094, -3.2503476845700536, 0.020833375496492834, 0.4251404488117591,
                 -3.295263114018036, -5.276161696477448, -2.9844984234433944, -3.2535082019905763,
                 -1.3641406153352758, -0.9361142555067967, 1.2061648757560017, 2.2888501453345764,
                 1.053762671621245, 2.153356859620613, 0.31169629244087343, 0.8259729395082169,
                 0.6043846266020885, 0.3886829552537778, 1.1173872653349504, 1.60767233487542,
                 1.2459599011524514, 2.764678728995267, -0.8961177596539485, 2.294275489791187,
                 3.1429394278457687, 8.078396983897095, 5.844917780275686, 4.46875196743845,
                 0.9296328144267685, 1.91653806515004, 0.3171795767920635, 0.8611500366946998,
                 -0.30335348424623937, -1.248374797474828, 5.939034658911646, 7.671928751971305,
                 3.3810254251143563, 1.6725073866556288, -0.6260382084644729, -0.5001056368893526,
                 -0.6401199739852865, -1.4208888455105544, -0.5347333501792455, -1.5742611551181929,
                 -0.03675858871552068, -0.6012967590637475, -3.127202363190088, -5.371732008405057,
                 -2.7799671519959883, -3.3516079381557615, -0.9841752634038892, -0.7087735861786724},
                1e-12);
    backward(y, sequence(y.shape(), 0.3, 0.1, 1.0, true));
    check_close(x.grad(),
                {-0.25581874262256465, 5.357049932028363, 8.354300513192815, -2.6435029214550143,
                 -11.291290950869591, -13.893980089408469, 6.335473911683813, 13.710972275497934,
                 12.597403997270339, -4.925417224113779, -2.55539574794177, 2.5434820956067243,
                 4.7709475206556, -1.0786920232002948, -8.00153252930757, -1.3547141977147057,
                 6.540540116846232, 11.505685329295677},
                1e-12);
    check_close(w.grad(),
                {-1.2032181941908888, -3.0872784099018724, -3.740136521889952, 2.514225539663751,
                 0.5014459846952244, 0.6446122811089947, -1.6071003160679749, 0.43166011707940355,
                 0.23045251446848647, 0.6174313089151297, 3.2247192279682357, 2.339397435178981,
                 0.5548137997037413, -0.647006972736475, -0.5049207309438299, 2.477039771019486,
                 0.519999480670611, 0.6572609886462666, 0.9632474571827442, 1.833959638070296,
                 2.8309067524095886, -2.7298593672568665, -0.24998037571956438,
                 -0.44836988428564784, 0.6443745020912545, -0.6337630179504867, -0.4859034473492243,
                 -1.1132854861743282, -2.986345641645391, -3.634757710860708, 2.5465894438284744,
                 0.5523835694824242, 0.6591473372092491, -1.7115730477408, 0.307624417723514,
                 0.10505110751957358, 0.5608989709924579, 3.175383294201806, 2.3197840214879575,
                 0.6463510397857719, -0.543624484713515, -0.3847575613019507, 2.506032226980753,
                 0.5670253836570975, 0.6675722379515537, 0.895286597046612, 1.7522017646012482,
                 2.733150887076037, -2.7978001180262315, -0.3410985789600077, -0.5096075354176683,
                 0.7375790312543526, -0.5280043972512798, -0.36450960862617965},
                1e-12);
    check_close(b.grad(), {-3.0782594891318555, 4.674095573658074, 1.2616263779473118}, 1e-12);
  }
  {
    Var<double> x(sequence({1, 4, 2, 3}, 0.7, 0.3, 2.0)), w(sequence({4, 1, 2, 3}, 0.5, -0.2, 1.0, true));
    const ConvTranspose2dOptions o{.stride_h = 1, .stride_w = 2, .pad_h = 1, .pad_w = 0, .output_pad_h = 0,
                                   .output_pad_w = 1, .dilation_h = 2, .dilation_w = 1, .groups = 2};
    const Var<double> y = conv_transpose2d(x, w, {}, o);
    BOOST_TEST(y.shape() == (Shape{1, 2, 2, 8}));
    check_close(y.value(),
                {0.7369153101516948, 0.6753076589641355, -1.072735990803067, -1.6001308687916604,
                 -4.351110587290288, -3.12300284622022, -2.4176718527643084, 0.0,
                 0.9416891419204323, -0.3053514031094575, -0.3192704804746125, -0.536970709324337,
                 -1.2705957903624592, -0.5160443005452008, -1.7359802244592457, 0.0,
                 -2.792164201758797, -3.252059250422272, -4.479114514198503, -1.766459380453016,
                 -1.1363604553631257, 0.5499339378324961, 0.5645351654312291, 0.0,
                 0.27783786995032067, -0.05573458698992162, -1.4507408604920322,
                 -0.33124813322220803, -1.4286858994936997, -0.4509705065052328, 1.1308426111415568,
                 0.0},
                1e-12);
  }
  {
    Var<double> x(sequence({2, 3, 2, 2}, 0.7, 0.3, 2.0)), w(sequence({3, 2, 2, 2}, 0.5, -0.2, 1.0, true));
    Var<double> b(Tensor<double>::from({2}, {0.5, -0.25}));
    const Var<double> y = conv_transpose2d(x, w, b, ConvTranspose2dOptions::square(2));
    BOOST_TEST(y.shape() == (Shape{2, 2, 4, 4}));
    check_close(y.value(),
                {0.9731356870225868, 1.353874955404647, 3.150933539480287, 2.3294566839552746,
                 1.5255558547734884, 1.446144913382931, 1.0600650276655859, -0.34645008034734004,
                 4.081955926341239, 2.4446163479925116, 3.3283284714386534, 1.645192558100259,
                 0.3311668667891001, -1.7409463751429115, -0.3183264334478214, -2.0814905739557608,
                 0.3850846992387862, -0.08146639863222921, -2.295724687712647, -2.9941345443831544,
                 -0.589280399932908, -1.0140267265123941, -3.0206845595506326, -2.368874363537931,
                 -4.014397788702822, -4.61619333562564, -3.962615789328069, -4.184763177470589,
                 -4.1489924776712215, -2.7271822790663647, -3.443543310105017, -1.9204326617090546,
                 3.2909001687527266, 1.6171372536430209, 1.1854318321053916, 0.2734555017895848,
                 -0.3301398226822907, -2.0741697182765093, -0.583054834348721, -1.1743955741805918,
                 -1.2424058053489226, -0.9636788327000618, -2.8507627667059126, -1.512422141558229,
                 -0.3265922342223383, 0.5128729716050086, 0.31862960951874864, 2.1940871576990415,
                 -3.937953089529146, -4.148796922604496, -2.1057858808658905, -1.8328150811199477,
                 -3.405079293729964, -1.888888216513123, -1.172315946910034, -0.286001702003357,
                 0.5991864250228691, 1.227589425183184, 2.904773086319461, 3.5930605368510196,
                 1.4942270013258947, 1.3338169755006986, 3.3404327365395567, 2.208741781603872},
                1e-12);
  }
}

BOOST_AUTO_TEST_CASE(float_path_agrees_with_double) {
  // Large enough for the convolution kernels to split the batch over threads.
  const Shape xs{8, 32, 12, 12}, ws{32, 16, 2, 2};
  const Tensor<double> x = random_tensor(xs, 11), w = random_tensor(ws, 12), b = random_tensor({16}, 13);
  Var<double> xd(x, true), wd(w, true), bd(b, true);
  Var<float> xf(to_float(x), true), wf(to_float(w), true), bf(to_float(b), true);
  const auto o = ConvTranspose2dOptions::square(2);
  Var<double> yd = conv_transpose2d(xd, wd, bd, o);
  Var<float> yf = conv_transpose2d(xf, wf, bf, o);
  const Tensor<double> gy = random_tensor(yd.shape(), 14);
  backward(yd, gy.clone());
  backward(yf, to_float(gy));
  BOOST_TEST(worst_error(yf.value(), yd.value()) < 1e-5);
  BOOST_TEST(worst_error(xf.grad(), xd.grad()) < 1e-5);
  BOOST_TEST(worst_error(wf.grad(), wd.grad()) < 1e-4);  // sums of 8 * 144 products
  BOOST_TEST(worst_error(bf.grad(), bd.grad()) < 1e-4);
}

BOOST_AUTO_TEST_CASE(errors_say_what_was_expected) {
  const Var<double> x(random_tensor({2, 4, 3, 3}, 1));
  const std::string channels = error_message([&] { conv_transpose2d(x, Var<double>(random_tensor({3, 2, 2, 2}, 2))); });
  BOOST_TEST(channels.find("expects 3 input channels") != std::string::npos, channels);
  const std::string output_pad = error_message([&] {
    conv_transpose2d(x, Var<double>(random_tensor({4, 2, 3, 3}, 2)), {}, ConvTranspose2dOptions::square(2, 1, 2));
  });
  BOOST_TEST(output_pad.find("must be non-negative and smaller than the stride") != std::string::npos, output_pad);
  const std::string groups = error_message([&] {
    conv_transpose2d(Var<double>(random_tensor({2, 3, 3, 3}, 1)), Var<double>(random_tensor({3, 1, 2, 2}, 2)), {},
                     ConvTranspose2dOptions::square(1, 0, 0, 1, 2));
  });
  BOOST_TEST(groups.find("not divisible by groups=2") != std::string::npos, groups);
  const std::string empty = error_message([&] {
    conv_transpose2d(Var<double>(random_tensor({1, 4, 1, 1}, 1)), Var<double>(random_tensor({4, 2, 1, 1}, 2)), {},
                     ConvTranspose2dOptions::square(1, 1));
  });
  BOOST_TEST(empty.find("give an empty output") != std::string::npos, empty);
  const std::string bias = error_message([&] {
    conv_transpose2d(x, Var<double>(random_tensor({4, 2, 2, 2}, 2)), Var<double>(random_tensor({4}, 3)));
  });
  BOOST_TEST(bias.find("expected [2]") != std::string::npos, bias);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(conv_transpose2d_matches_the_cpu_and_finite_differences, D, test::Devices) {
  const std::vector<ConvTransposeCase> cases{
      {{2, 3, 4, 3}, {3, 2, 3, 3}, true, ConvTranspose2dOptions::square(1, 1)},
      {{1, 2, 3, 4}, {2, 3, 2, 2}, false, ConvTranspose2dOptions::square(2)},  // UNet's up-convolution
      {{2, 4, 3, 3}, {4, 1, 3, 2}, true,
       {.stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 0, .output_pad_h = 1, .output_pad_w = 0, .dilation_h = 1,
        .dilation_w = 2, .groups = 2}},
  };
  std::uint64_t seed = 10;
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT("x " << c.x << ", weight " << c.weight << ", bias " << c.bias) {
      std::vector<Tensor<double>> inputs{random_tensor(c.x, seed), random_tensor(c.weight, seed + 1)};
      if (c.bias) inputs.push_back(random_tensor({c.weight[1] * c.options.groups}, seed + 2));
      seed += 3;
      test::check_op<D>(
          [&c](const auto& v) {
            using V = std::decay_t<decltype(v[0])>;
            return conv_transpose2d(v[0], v[1], v.size() > 2 ? v[2] : V(), c.options);
          },
          inputs);
    }
  }
  const Tensor<double> x = random_tensor({1, 2, 3, 3}, 20), w = random_tensor({2, 3, 3, 3}, 21);
  const Tensor<double> bad_bias = random_tensor({2}, 22);
  test::expect_same_error<D>([&] { (void)conv_transpose2d(Var<double>(x), Var<double>(w), Var<double>(bad_bias)); },
                    [&] { (void)conv_transpose2d(emulated(x), emulated(w), emulated(bad_bias)); });
}

BOOST_AUTO_TEST_SUITE_END()
