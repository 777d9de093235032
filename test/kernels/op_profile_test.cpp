// The kernel-family profile (core/op_profile.hpp): nothing is recorded unless a profile is active
// on the thread, self time excludes the families an op encloses, an Outermost op inside another
// counts nothing, and a training step of the demo CNN on the CPU reaches every family it uses
// through the dispatch points, each call counted once.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/core/op_profile.hpp>
#include <ptrain/models/small_cnn.hpp>
#include <ptrain/optim/sgd.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(op_profile_test)

namespace {

std::int64_t calls(const OpProfile& profile, const char* family) {
  const auto it = profile.families().find(family);
  return it == profile.families().end() ? 0 : it->second.calls;
}

}  // namespace

BOOST_AUTO_TEST_CASE(records_only_while_a_profile_is_active) {
  OpProfile profile;
  { const ProfiledOp off("conv_forward"); }
  {
    const OpProfileScope on(profile);
    const ProfiledOp op("conv_forward");
  }
  { const ProfiledOp off_again("conv_forward"); }
  BOOST_TEST(calls(profile, "conv_forward") == 1);
  BOOST_TEST(profile.families().size() == 1u);
}

BOOST_AUTO_TEST_CASE(self_time_leaves_out_enclosed_ops_and_outermost_ops_count_alone) {
  OpProfile profile;
  const auto start = std::chrono::steady_clock::now();
  {
    const OpProfileScope on(profile);
    const ProfiledOp outer("conv_backward");
    {
      const ProfiledOp inner("elementwise");
      const ProfiledOp gemm_inside("gemm", ProfiledOp::Outermost);
    }
  }
  {
    const OpProfileScope on(profile);
    const ProfiledOp gemm_alone("gemm", ProfiledOp::Outermost);
  }
  const double wall_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST(calls(profile, "conv_backward") == 1);
  BOOST_TEST(calls(profile, "elementwise") == 1);
  BOOST_TEST(calls(profile, "gemm") == 1);  // the one no other op enclosed
  for (const auto& [family, time] : profile.families()) BOOST_TEST(time.self_us >= 0.0, family);
  BOOST_TEST(profile.self_us() <= wall_us);
}

BOOST_AUTO_TEST_CASE(a_training_step_of_the_demo_cnn_reaches_each_family_once_per_call) {
  SmallCnn<float> net(1, 10, 0.0);
  Sgd<float> sgd(net.parameters(), {.lr = 0.01, .momentum = 0.9});
  Tensor<float> x = Tensor<float>::full({4, 1, 28, 28}, 0.5f);
  const std::vector<std::int64_t> y{1, 2, 3, 4};
  OpProfile profile;
  {
    const OpProfileScope on(profile);
    backward(cross_entropy(net.forward(Var<float>(x)), y));
    NoGradGuard no_grad;
    sgd.step();
  }
  BOOST_TEST(calls(profile, "conv_forward") == 2);
  BOOST_TEST(calls(profile, "conv_backward") == 2);
  BOOST_TEST(calls(profile, "pool_forward") == 2);
  BOOST_TEST(calls(profile, "pool_backward") == 2);
  BOOST_TEST(calls(profile, "loss") == 2);  // cross-entropy forward and backward
  BOOST_TEST(calls(profile, "gemm") >= 2);  // the two linear layers, forward and backward
  BOOST_TEST(calls(profile, "optimizer") >= 1);
  BOOST_TEST(calls(profile, "elementwise") >= 4);  // the ReLUs, forward and backward
  // Profiled or not, the step computes the same thing: a second, unprofiled step records nothing.
  const std::size_t families = profile.families().size();
  backward(cross_entropy(net.forward(Var<float>(x)), y));
  BOOST_TEST(profile.families().size() == families);
}

BOOST_AUTO_TEST_SUITE_END()
