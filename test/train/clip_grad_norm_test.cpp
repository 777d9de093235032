// Gradient clipping by global norm (train/clip_grad_norm.hpp, TrainerOptions::clip_grad_norm):
// torch's rule on known gradients; a Trainer that clips equals clipping by hand between backward
// and the optimizer step; under MixedPrecision the unscaled gradients are clipped, and a step that
// overflows is skipped, not clipped.
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/clip_grad_norm.hpp>
#include <ptrain/parallel/mixed_precision.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/compare.hpp"
#include "../common/stdout_capture.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(clip_grad_norm_test)

namespace {

const TrainerOptions quiet{.progress_bar = false, .print_epochs = false};

template <class T>
std::shared_ptr<Sequential<T>> small_mlp() {
  manual_seed(3);
  return make<Sequential<T>>(std::initializer_list<std::shared_ptr<Module<T>>>{
      make<Linear<T>>(4, 6), make<ReLU<T>>(), make<Linear<T>>(6, 3)});
}
Tensor<float> some_inputs(std::uint64_t seed) { return tensor_cast<float>(random_tensor({8, 4}, seed, -2, 2)); }
const std::vector<std::int64_t> some_targets{0, 2, 1, 1, 0, 2, 2, 1};

std::vector<Tensor<float>> values(const std::vector<Var<float>>& params) {
  std::vector<Tensor<float>> out;
  for (const auto& p : params) out.push_back(p.value().clone());
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(gradients_above_the_norm_scale_by_max_norm_over_the_norm_plus_epsilon) {
  Var<double> a(Tensor<double>::zeros({2}), true), b(Tensor<double>::zeros({1}), true), frozen(Tensor<double>::zeros({1}));
  const auto set = [&] {
    a.grad() = Tensor<double>::from(Shape{2}, {3.0, 4.0});
    b.grad() = Tensor<double>::from(Shape{1}, {12.0});
  };
  set();
  // the norm is sqrt(9 + 16 + 144) = 13; a parameter without a gradient adds nothing
  BOOST_TEST(clip_grad_norm(std::vector<Var<double>>{a, b, frozen}, 6.5) == 13.0);
  const double coefficient = 6.5 / (13.0 + 1e-6);
  BOOST_TEST(a.grad()[0] == 3.0 * coefficient);
  BOOST_TEST(a.grad()[1] == 4.0 * coefficient);
  BOOST_TEST(b.grad()[0] == 12.0 * coefficient);
  // within the norm: left as it is
  set();
  BOOST_TEST(clip_grad_norm(std::vector<Var<double>>{a, b}, 20.0) == 13.0);
  BOOST_TEST(a.grad()[1] == 4.0);
  BOOST_TEST(b.grad()[0] == 12.0);
  BOOST_CHECK_THROW(clip_grad_norm(std::vector<Var<double>>{a}, 0.0), Error);
}

BOOST_AUTO_TEST_CASE(a_trainer_that_clips_equals_clipping_by_hand) {
  constexpr double max_norm = 0.05;
  auto net = small_mlp<float>();
  TrainerOptions clipping = quiet;
  clipping.clip_grad_norm = max_norm;
  Trainer<Sequential<float>> trainer(net, make<Sgd<float>>(net->parameters(), SgdOptions{.lr = 0.5, .momentum = 0.9}),
                                     clipping);
  auto by_hand = small_mlp<float>();
  Sgd<float> sgd(by_hand->parameters(), SgdOptions{.lr = 0.5, .momentum = 0.9});
  BOOST_TEST(std::isnan(trainer.last_gradient_norm()));
  for (std::uint64_t step = 0; step < 4; ++step) {
    trainer.train_step(some_inputs(step), some_targets);
    by_hand->zero_grad();
    backward(cross_entropy((*by_hand)(Var<float>(some_inputs(step))), std::span<const std::int64_t>(some_targets)));
    const double norm = clip_grad_norm(by_hand->parameters(), max_norm);
    sgd.step();
    BOOST_TEST(norm > max_norm, "step " << step << " was not clipped: the test proves nothing");
    BOOST_TEST(std::abs(trainer.last_gradient_norm() - norm) <= 1e-6 * norm);
  }
  const auto params = net->parameters(), expected = by_hand->parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    BOOST_TEST(test::worst_error(params[i].value(), expected[i].value()) <= 1e-6, "parameter " << i);
  BOOST_CHECK_THROW(Trainer<Sequential<float>>(net, make<Sgd<float>>(net->parameters(), SgdOptions{.lr = 0.1}),
                                               TrainerOptions{.clip_grad_norm = -1}),
                    Error);
}

// fp16 with a loss scale of 65536: the norm clipped is the unscaled gradients' (the float
// model's, to fp16's precision), and the step is the float model's clipped step.
BOOST_AUTO_TEST_CASE(mixed_precision_clips_the_unscaled_gradients_and_skips_an_overflow) {
  constexpr double max_norm = 0.05;
  TrainerOptions clipping = quiet;
  clipping.clip_grad_norm = max_norm;
  auto reference = small_mlp<float>();
  auto model = small_mlp<half>();
  auto ref_params = reference->parameters();
  const auto params = model->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) ref_params[i].value().copy_from(tensor_cast<float>(params[i].value()));
  Trainer<Sequential<float>> ref_trainer(reference, make<Sgd<float>>(ref_params, SgdOptions{.lr = 0.5}), clipping);
  MixedPrecision<Fp16> amp(*model);
  clipping.terminate_on_nan = false;
  Trainer<Sequential<half>, MixedPrecision<Fp16>> trainer(
      model, make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.5}), clipping, amp);
  const Tensor<float> x = tensor_cast<float>(tensor_cast<half>(some_inputs(1)));
  ref_trainer.train_step(x, some_targets);
  trainer.train_step(tensor_cast<half>(x), some_targets);
  BOOST_TEST(trainer.template policy<MixedPrecision<Fp16>>().loss_scale() == 65536.0);
  BOOST_TEST(ref_trainer.last_gradient_norm() > max_norm);
  BOOST_TEST(std::abs(trainer.last_gradient_norm() - ref_trainer.last_gradient_norm()) <=
             0.01 * ref_trainer.last_gradient_norm());
  const auto masters = values(trainer.template policy<MixedPrecision<Fp16>>().master_parameters());
  for (std::size_t i = 0; i < masters.size(); ++i)
    BOOST_TEST(test::worst_error(masters[i], ref_params[i].value()) <= 1e-2, "master " << i);

  // an inf input: the step is skipped before clipping, the masters and the last norm stay
  Tensor<float> poisoned = x.clone();
  poisoned[3] = std::numeric_limits<float>::infinity();
  const double norm = trainer.last_gradient_norm();
  test::StdoutCapture capture;
  trainer.train_step(tensor_cast<half>(poisoned), some_targets);
  capture.finish();
  BOOST_TEST(trainer.last_gradient_norm() == norm);
  const auto after = values(trainer.template policy<MixedPrecision<Fp16>>().master_parameters());
  for (std::size_t i = 0; i < masters.size(); ++i)
    BOOST_TEST(std::memcmp(after[i].data(), masters[i].data(), masters[i].bytes()) == 0, "master " << i << " changed");
}

BOOST_AUTO_TEST_SUITE_END()
