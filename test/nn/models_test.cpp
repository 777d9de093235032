#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/models/small_cnn.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(models_test)

// Whole blocks, in double: the composition of the ops (residual add, downsample branch, batch
// norm in both modes) passes the same finite-difference check as each op alone.
BOOST_AUTO_TEST_CASE(basic_block_with_downsample_gradient) {
  manual_seed(11);
  BasicBlock<double> block(3, 4, 2);
  for (bool training : {true, false}) {
    block.train(training);
    auto r = gradcheck([&](const auto& v) { return block.forward(v[0]); }, {random_tensor({2, 3, 6, 6}, 12)}, 1e-6,
                       1e-5);
    BOOST_TEST(r.ok, (training ? "training: " : "eval: ") << r.report);
  }
}

BOOST_AUTO_TEST_CASE(bottleneck_gradient) {
  manual_seed(13);
  Bottleneck<double> block(8, 2, 1);
  auto r = gradcheck([&](const auto& v) { return block.forward(v[0]); }, {random_tensor({2, 8, 4, 4}, 14)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(parameter_gradients_of_a_network_match_finite_differences) {
  // Perturb each parameter of a small CNN in place and compare with what backward accumulated.
  manual_seed(15);
  SmallCnn<double> net(1, 3, 0.0);
  net.eval();
  const Tensor<double> x = random_tensor({2, 1, 28, 28}, 16);
  const std::vector<std::int64_t> y{2, 0};
  auto loss = [&] { return cross_entropy(net.forward(Var<double>(x)), y); };
  backward(loss());
  Rng pick(17);
  for (auto& [name, p] : net.named_parameters()) {
    for (int trial = 0; trial < 5; ++trial) {
      const auto i = static_cast<std::int64_t>(pick.below(static_cast<std::uint64_t>(p.numel())));
      double& w = p.value()[i];
      const double saved = w;
      NoGradGuard no_grad;
      w = saved + 1e-6;
      const double plus = loss().value()[0];
      w = saved - 1e-6;
      const double minus = loss().value()[0];
      w = saved;
      const double numeric = (plus - minus) / 2e-6;
      BOOST_TEST(std::abs(p.grad()[i] - numeric) < 1e-6 + 1e-5 * std::abs(numeric), name << "[" << i << "]: analytic "
                                                                                    << p.grad()[i] << ", numeric " << numeric);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
