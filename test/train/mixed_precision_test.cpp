// MixedPrecision<Fp16 | Bf16> and its LossScaler: one step against fp32, the rounding the optimizer
// takes over, the loss scale's rule, skipped steps, the minimum scale.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/data/dataset.hpp>
#include <ptrain/data/loader.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/models/small_cnn.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/adam.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/mixed_precision.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/stdout_capture.hpp"

using namespace ptrain;
using ptrain::test::StdoutCapture;

BOOST_AUTO_TEST_SUITE(mixed_precision_test)

namespace {

const TrainerOptions quiet{.csv_log = "", .progress_bar = false, .print_epochs = false};
// A poisoned batch (an inf input) makes the loss non-finite, which stops training by default; the
// tests of MixedPrecision's own skipping let the Trainer skip such steps too (silently: the policy
// already said so).
const TrainerOptions quiet_skipping{.progress_bar = false, .print_epochs = false, .terminate_on_nan = false};

// Uniform values rounded to T, as float.
template <class T>
Tensor<float> representable(const Shape& shape, std::uint64_t seed, double lo = -1, double hi = 1) {
  return tensor_cast<float>(tensor_cast<T>(tensor_cast<float>(random_tensor(shape, seed, lo, hi))));
}

template <class T>
bool bit_identical(const Tensor<T>& a, const Tensor<T>& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

template <class T>
std::vector<Tensor<T>> values(const std::vector<Var<T>>& params) {
  std::vector<Tensor<T>> out;
  for (const auto& p : params) out.push_back(p.value().clone());
  return out;
}

std::vector<std::int64_t> some_targets(std::int64_t n) {
  std::vector<std::int64_t> t;
  for (std::int64_t i = 0; i < n; ++i) t.push_back((i * 7) % 10);
  return t;
}

// The reference's weights rounded to T, in both models: the two runs start from the same values.
template <class T>
void start_alike(Module<float>& reference, Module<T>& model) {
  std::map<std::string, Var<float>> ref_params;
  for (auto& [name, p] : reference.named_parameters()) ref_params.emplace(name, p);
  for (auto& [name, p] : model.named_parameters()) {
    const Tensor<T> rounded = tensor_cast<T>(ref_params.at(name).value());
    p.value().copy_from(rounded);
    ref_params.at(name).value().copy_from(tensor_cast<float>(rounded));
  }
  for (auto& [name, p] : model.named_float_parameters()) p.value().copy_from(ref_params.at(name).value());
}

// One step of SmallCnn in the 16-bit type under MixedPrecision and in float, from the same
// (16-bit) weights and images, through DataLoader and Trainer. Measure: per weight tensor,
// |w_amp - w_fp32| / |w_fp32 - w_0| (L2 norms), the error relative to the step taken. ReLU and
// max-pool route gradients by decisions a 16-bit rounding can flip, and at a batch of 32 one
// flipped decision moves a whole sample's share (one ReLU flip in fc1 alone measured 6% there), so
// `flip_tolerance` is loose; fc2, with nothing between it and the loss, gets `tolerance`.
template <class Precision>
void check_one_step_matches_fp32(double tolerance, double flip_tolerance) {
  using T = typename MixedPrecision<Precision>::scalar_type;
  manual_seed(11);
  auto reference = make<SmallCnn<float>>();
  auto model = make<SmallCnn<T>>();
  start_alike(*reference, *model);
  auto ref_params = reference->parameters();
  auto params = model->parameters();
  const std::int64_t batch = 32;
  const TensorDataset data(representable<T>({batch, 1, 28, 28}, 3), some_targets(batch));
  DataLoader ref_loader(data, LoaderOptions{.batch_size = batch});
  DataLoader loader(data, LoaderOptions{.batch_size = batch});

  MixedPrecision<Precision> amp(*model);
  auto ref_sgd = make<Sgd<float>>(reference->parameters(), SgdOptions{.lr = 0.1, .momentum = 0.9});
  auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.1, .momentum = 0.9});
  Trainer<SmallCnn<float>> ref_trainer(reference, ref_sgd, quiet);
  Trainer<SmallCnn<T>, MixedPrecision<Precision>> trainer(model, sgd, quiet, amp);
  const auto before = values(ref_params);
  manual_seed(5);  // the same dropout mask in both
  const auto ref_result = ref_trainer.fit(ref_loader, 1);
  manual_seed(5);
  const auto result = trainer.fit(loader, 1);
  BOOST_TEST(std::abs(result[0].train_loss - ref_result[0].train_loss) <= 0.01 * ref_result[0].train_loss);
  BOOST_TEST(trainer.template policy<MixedPrecision<Precision>>().loss_scale() == amp.loss_scale(),
             "the step overflowed and was skipped");

  const auto& masters = amp.master_parameters();
  const auto names = model->named_parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    double change = 0, error = 0;
    for (std::int64_t e = 0; e < params[i].numel(); ++e) {
      const double after = ref_params[i].value()[e];
      change += std::pow(after - static_cast<double>(before[i][e]), 2);
      error += std::pow(static_cast<double>(masters[i].value()[e]) - after, 2);
    }
    const double relative = std::sqrt(error / change);
    const double tol = names[i].first.rfind("fc2.", 0) == 0 ? tolerance : flip_tolerance;
    BOOST_TEST_CONTEXT(Precision::name << " " << names[i].first) {
      BOOST_TEST(change > 0);
      BOOST_TEST(relative <= tol, "error " << relative << " of the step's size, more than " << tol);
      BOOST_TEST(bit_identical(params[i].value(), tensor_cast<T>(masters[i].value())),
                 "the model's weights are not the masters rounded");
    }
  }
}

// A small CNN with batch norm: conv 3x3 (1 -> 4 channels, 8x8 kept), BatchNorm2d, ReLU, a linear head.
template <class T>
std::shared_ptr<Sequential<T>> batch_norm_cnn() {
  manual_seed(21);
  Conv2dOptions same;
  same.pad_h = same.pad_w = 1;
  return make<Sequential<T>>(std::initializer_list<std::shared_ptr<Module<T>>>{
      make<Conv2d<T>>(1, 4, 3, same), make<BatchNorm2d<T>>(4), make<ReLU<T>>(), make<Flatten<T>>(),
      make<Linear<T>>(4 * 8 * 8, 3)});
}

// A linear classifier: quick to step many times.
template <class T>
std::shared_ptr<Sequential<T>> small_linear() {
  manual_seed(2);
  return make<Sequential<T>>(std::initializer_list<std::shared_ptr<Module<T>>>{make<Linear<T>>(4, 10)});
}

// 8 inputs of 0.1-ish (gradients far from fp16's range at the scales used), one of them inf if poisoned.
template <class T>
Tensor<T> linear_inputs(bool poisoned) {
  Tensor<float> x = representable<T>({8, 4}, 4, -0.1, 0.1);
  if (poisoned) x[5] = std::numeric_limits<float>::infinity();
  return tensor_cast<T>(x);
}

}  // namespace

// The ImageNet recipe's batch norm under MixedPrecision<Fp16>: 3 epochs of 6 steps from the same
// (half) weights and images as the fp32 run. The half model's batch norm is float (BatchNorm2d,
// keep_batchnorm_fp32): its weight and bias are float parameters, stepped in place as their own
// masters, and they and the running statistics end close to the fp32 run's; the epoch losses
// track it. Measured here: the losses within 0.07%, the statistics within 5e-4 (mean) and 7e-5
// (var), weight and bias within 1e-4, of max(1, |fp32|).
BOOST_AUTO_TEST_CASE(fp16_with_batch_norm_tracks_the_fp32_run) {
  auto reference = batch_norm_cnn<float>();
  auto model = batch_norm_cnn<half>();
  start_alike(*reference, *model);
  std::vector<std::int64_t> targets;
  for (std::int64_t i = 0; i < 48; ++i) targets.push_back((i * 5) % 3);
  const TensorDataset data(representable<half>({48, 1, 8, 8}, 31, -1, 3), targets);
  DataLoader ref_loader(data, LoaderOptions{.batch_size = 8});
  DataLoader loader(data, LoaderOptions{.batch_size = 8});
  MixedPrecision<Fp16> amp(*model);
  auto ref_sgd = make<Sgd<float>>(reference->parameters(), SgdOptions{.lr = 0.05, .momentum = 0.9});
  auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.05, .momentum = 0.9});
  Trainer<Sequential<float>> ref_trainer(reference, ref_sgd, quiet);
  Trainer<Sequential<half>, MixedPrecision<Fp16>> trainer(model, sgd, quiet, amp);
  const auto ref_results = ref_trainer.fit(ref_loader, 3);
  const auto results = trainer.fit(loader, 3);
  BOOST_REQUIRE_EQUAL(results.size(), 3u);
  BOOST_TEST(ref_results.back().train_loss < 0.8 * ref_results.front().train_loss, "the fp32 run did not learn");
  for (std::size_t e = 0; e < results.size(); ++e) {
    BOOST_TEST_MESSAGE("epoch " << e + 1 << " loss fp16 " << results[e].train_loss << " fp32 " << ref_results[e].train_loss);
    BOOST_TEST(std::abs(results[e].train_loss - ref_results[e].train_loss) <= 0.01 * ref_results[e].train_loss,
               "epoch " << e + 1);
  }
  const auto& bn = dynamic_cast<BatchNorm2d<half>&>(*(*model)[1]);
  const auto& ref_bn = dynamic_cast<BatchNorm2d<float>&>(*(*reference)[1]);
  static_assert(std::is_same_v<decltype(bn.running_mean), Tensor<float>>, "a half model's statistics are float");
  static_assert(std::is_same_v<decltype(bn.weight), Var<float>>, "a half model's batch norm weight is float");
  BOOST_TEST(model->named_float_parameters().size() == 2u);
  BOOST_TEST(model->parameters().size() == 4u);  // the convolution's and the linear layer's
  const auto& masters = amp.master_parameters();
  BOOST_REQUIRE_EQUAL(masters.size(), 6u);
  BOOST_TEST((masters[4].node() == bn.weight.node() && masters[5].node() == bn.bias.node()),
             "the float weights are their own masters");
  const auto worst = [](const Tensor<float>& got, const Tensor<float>& want) {  // relative to max(1, |want|)
    double e = 0;
    for (std::int64_t i = 0; i < want.numel(); ++i)
      e = std::max(e, std::abs(double(got[i]) - double(want[i])) / std::max(1.0, std::abs(double(want[i]))));
    return e;
  };
  const double mean_error = worst(bn.running_mean, ref_bn.running_mean);
  const double var_error = worst(bn.running_var, ref_bn.running_var);
  BOOST_TEST_MESSAGE("running statistics: mean " << mean_error << ", var " << var_error);
  BOOST_TEST(mean_error <= 5e-3);
  BOOST_TEST(var_error <= 5e-3);
  const double weight_error = worst(bn.weight.value(), ref_bn.weight.value());
  const double bias_error = worst(bn.bias.value(), ref_bn.bias.value());
  BOOST_TEST_MESSAGE("weight " << weight_error << ", bias " << bias_error);
  BOOST_TEST(worst(bn.weight.value(), Tensor<float>::ones({4})) > 1e-3, "batch norm's weight was not trained");
  BOOST_TEST(weight_error <= 5e-3);
  BOOST_TEST(bias_error <= 5e-3);
  BOOST_TEST(bn.num_batches_tracked[0] == 18.0f);
}

// Measured here: fc2 0.6% (bf16) and 0.08% (fp16); the others up to 9.2% (bf16) and 3.9% (fp16).
BOOST_AUTO_TEST_CASE(bf16_step_matches_fp32) { check_one_step_matches_fp32<Bf16>(0.02, 0.2); }

BOOST_AUTO_TEST_CASE(fp16_step_matches_fp32) { check_one_step_matches_fp32<Fp16>(0.003, 0.1); }

// ResNet-18's ops (batch norm, residual add, adaptive pooling) in bfloat16: a step's loss is the
// float step's, and the model ends as its masters rounded.
BOOST_AUTO_TEST_CASE(resnet18_bf16_step) {
  manual_seed(12);
  auto reference = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  auto model = resnet18<ptrain::bfloat16>({.num_classes = 10, .cifar_stem = true});
  start_alike(*reference, *model);
  auto params = model->parameters();
  MixedPrecision<Bf16> amp(*model);
  auto ref_sgd = make<Sgd<float>>(reference->parameters(), SgdOptions{.lr = 0.01});
  auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.01});
  Trainer<ResNet<float, BasicBlock>> ref_trainer(reference, ref_sgd, quiet);
  Trainer<ResNet<ptrain::bfloat16, BasicBlock>, MixedPrecision<Bf16>> trainer(model, sgd, quiet, amp);
  const Tensor<float> images = representable<ptrain::bfloat16>({4, 3, 16, 16}, 6);
  const auto targets = some_targets(4);
  const auto before = values(params);
  const double ref_loss = ref_trainer.train_step(images, targets).loss();
  const double loss = trainer.train_step(tensor_cast<ptrain::bfloat16>(images), targets).loss();
  BOOST_TEST(std::abs(loss - ref_loss) <= 0.03 * ref_loss, "loss " << loss << ", in float " << ref_loss);
  BOOST_TEST(!bit_identical(params.back().value(), before.back()), "the classifier's bias did not move");
  for (std::size_t i = 0; i < params.size(); ++i)
    BOOST_TEST(bit_identical(params[i].value(), tensor_cast<ptrain::bfloat16>(amp.master_parameters()[i].value())));
}

// After each step the 16-bit parameters' masters hold no gradient (torch's zero_grad(set_to_none=True)):
// the next step writes them afresh, so the forward between does not carry four bytes a parameter.
BOOST_AUTO_TEST_CASE(masters_let_go_of_their_gradients_after_each_step) {
  manual_seed(13);
  auto model = batch_norm_cnn<ptrain::bfloat16>();
  MixedPrecision<Bf16> amp(*model);
  auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.05, .momentum = 0.9});
  Trainer<Sequential<ptrain::bfloat16>, MixedPrecision<Bf16>> trainer(model, sgd, quiet, amp);
  const auto images = tensor_cast<ptrain::bfloat16>(representable<ptrain::bfloat16>({8, 1, 8, 8}, 32));
  const std::vector<std::int64_t> targets{0, 1, 2, 0, 1, 2, 0, 1};
  const auto params = model->parameters();
  const auto& masters = amp.master_parameters();
  for (int step = 1; step <= 2; ++step) {
    const auto before = values(params);
    trainer.train_step(images, targets);
    BOOST_TEST(!bit_identical(params.front().value(), before.front()), "step " << step << " did not move the weights");
    for (std::size_t i = 0; i < params.size(); ++i)
      BOOST_TEST(!masters[i].grad().defined(), "step " << step << ": master " << i << " kept its gradient");
  }
}

BOOST_AUTO_TEST_CASE(python_float_prints_as_apex) {
  BOOST_TEST(python_float(32768.0) == "32768.0");
  BOOST_TEST(python_float(65536.0) == "65536.0");
  BOOST_TEST(python_float(16777216.0) == "16777216.0");
  BOOST_TEST(python_float(1.0) == "1.0");
  BOOST_TEST(python_float(0.5) == "0.5");
  BOOST_TEST(python_float(std::ldexp(1.0, -13)) == "0.0001220703125");
  BOOST_TEST(python_float(std::ldexp(1.0, -16)) == "1.52587890625e-05");
  BOOST_TEST(python_float(1e16) == "1e+16");
  BOOST_TEST(python_float(-2.5) == "-2.5");
}

// Apex's rule: overflow halves the scale and restarts the count; scale_window clean steps in a
// row double it.
BOOST_AUTO_TEST_CASE(scale_follows_overflows_with_a_short_window) {
  LossScaler scaler({.initial_scale = 65536, .scale_window = 3});
  const bool overflow[] = {false, false, false, true, false, false, true, true, false, false, false, false, false, false};
  const double expected[] = {65536, 65536, 131072, 65536, 65536, 65536, 32768, 16384, 16384, 16384, 32768, 32768, 32768, 65536};
  for (std::size_t i = 0; i < std::size(overflow); ++i) {
    scaler.update(overflow[i]);
    BOOST_TEST(scaler.scale() == expected[i], "after step " << i);
  }
}

BOOST_AUTO_TEST_CASE(scale_doubles_after_2000_clean_steps_by_default) {
  LossScaler scaler;
  BOOST_TEST(scaler.scale() == 65536.0);
  for (int i = 0; i < 1999; ++i) scaler.update(false);
  BOOST_TEST(scaler.scale() == 65536.0);
  scaler.update(false);
  BOOST_TEST(scaler.scale() == 131072.0);
  for (int i = 0; i < 1000; ++i) scaler.update(false);
  scaler.update(true);  // restarts the count
  BOOST_TEST(scaler.scale() == 65536.0);
  for (int i = 0; i < 1999; ++i) scaler.update(false);
  BOOST_TEST(scaler.scale() == 65536.0);
  scaler.update(false);
  BOOST_TEST(scaler.scale() == 131072.0);

  LossScaler capped({.initial_scale = 16777216.0, .scale_window = 1});
  capped.update(false);
  BOOST_TEST(capped.scale() == 16777216.0);
  LossScaler fixed({.initial_scale = 128, .dynamic = false});
  fixed.update(true);
  fixed.update(false);
  BOOST_TEST(fixed.scale() == 128.0);
}

// The same rule through the Trainer, with injected infs, and Apex's line for each overflow.
BOOST_AUTO_TEST_CASE(trainer_scale_sequence_under_injected_overflows) {
  auto model = small_linear<ptrain::half>();
  MixedPrecision<Fp16> amp(*model, {.scale_window = 3});
  auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.1});
  Trainer<Sequential<ptrain::half>, MixedPrecision<Fp16>> trainer(model, sgd, quiet_skipping, amp);
  const bool poisoned[] = {false, false, false, true, false, true, false, false, false};
  const double expected[] = {65536, 65536, 131072, 65536, 65536, 32768, 32768, 32768, 65536};
  StdoutCapture capture;
  for (std::size_t i = 0; i < std::size(poisoned); ++i) {
    trainer.train_step(linear_inputs<ptrain::half>(poisoned[i]), some_targets(8));
    BOOST_TEST(trainer.policy<MixedPrecision<Fp16>>().loss_scale() == expected[i], "after step " << i);
  }
  BOOST_TEST(capture.finish() ==
             "Gradient overflow. Skipping step, loss scale reduced to 65536.0\n"
             "Gradient overflow. Skipping step, loss scale reduced to 32768.0\n");
}

// A step with an inf in its gradients changes nothing: not the masters, not the model, not the
// optimizer's state; it prints why. The next clean step trains.
namespace {
// Opt without round_into: MixedPrecision keeps the rounding, a pass after the step.
template <class Opt>
struct RoundedAfterTheStep {
  std::shared_ptr<Opt> optimizer;
  void step() { optimizer->step(); }
  void zero_grad() { optimizer->zero_grad(); }
  double lr() const { return optimizer->lr(); }
  void set_lr(double lr) { optimizer->set_lr(lr); }
};

// Three Trainer steps of batch_norm_cnn in Precision's type, the optimizer rounding the masters into
// the model as it steps (the Trainer hands it that) against MixedPrecision rounding them after it:
// the same model and masters, bit for bit.
template <class Precision, class Opt, class Options>
void check_optimizer_rounds_as_it_steps(Options options) {
  using T = typename MixedPrecision<Precision>::scalar_type;
  const auto images = tensor_cast<T>(representable<T>({8, 1, 8, 8}, 33));
  const std::vector<std::int64_t> targets{0, 1, 2, 0, 1, 2, 0, 1};
  auto fused_model = batch_norm_cnn<T>(), after_model = batch_norm_cnn<T>();
  MixedPrecision<Precision> fused_amp(*fused_model), after_amp(*after_model);
  auto fused_optimizer = make<Opt>(fused_amp.master_parameters(), options);
  auto after_optimizer = make<RoundedAfterTheStep<Opt>>(make<Opt>(after_amp.master_parameters(), options));
  Trainer<Sequential<T>, MixedPrecision<Precision>> fused(fused_model, fused_optimizer, quiet, fused_amp);
  Trainer<Sequential<T>, MixedPrecision<Precision>> after(after_model, after_optimizer, quiet, after_amp);
  const auto params = fused_model->parameters(), after_params = after_model->parameters();
  BOOST_TEST(fused.template policy<MixedPrecision<Precision>>().masters_rounded_by_optimizer() == params.size());
  BOOST_TEST(after.template policy<MixedPrecision<Precision>>().masters_rounded_by_optimizer() == 0u);
  const auto before = values(params);
  for (int step = 0; step < 3; ++step) {
    fused.train_step(images, targets);
    after.train_step(images, targets);
  }
  // (The convolution's bias, before batch norm, gets no gradient.)
  BOOST_TEST(!bit_identical(params.front().value(), before.front()), "the convolution's weight did not move");
  BOOST_TEST(!bit_identical(params.back().value(), before.back()), "the classifier's bias did not move");
  for (std::size_t i = 0; i < params.size(); ++i) {
    BOOST_TEST(bit_identical(params[i].value(), after_params[i].value()), "parameter " << i);
    BOOST_TEST(bit_identical(fused_amp.master_parameters()[i].value(), after_amp.master_parameters()[i].value()),
               "master " << i);
  }
}
}  // namespace

// Sgd, Adam and AdamW write the model's 16-bit weights from the masters in the pass that steps them
// (one read of a master a step, not two); MixedPrecision then leaves those to them.
BOOST_AUTO_TEST_CASE(the_optimizer_rounds_the_masters_as_it_steps) {
  check_optimizer_rounds_as_it_steps<Bf16, Sgd<float>>(SgdOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-3});
  check_optimizer_rounds_as_it_steps<Fp16, AdamW<float>>(AdamWOptions{.lr = 1e-2, .weight_decay = 1e-2});
}

template <class Precision>
void check_overflow_skips_the_step(const std::string& message) {
  using T = typename MixedPrecision<Precision>::scalar_type;
  manual_seed(4);
  auto model = make<SmallCnn<T>>();
  MixedPrecision<Precision> amp(*model);
  auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.1, .momentum = 0.9});
  Trainer<SmallCnn<T>, MixedPrecision<Precision>> trainer(model, sgd, quiet_skipping, amp);
  const auto model_before = values(model->parameters());
  const auto masters_before = values(amp.master_parameters());
  Tensor<float> images = representable<T>({4, 1, 28, 28}, 5);
  const auto targets = some_targets(4);
  Tensor<float> poisoned = images.clone();
  poisoned[100] = std::numeric_limits<float>::infinity();
  StdoutCapture capture;
  trainer.train_step(tensor_cast<T>(poisoned), targets);
  BOOST_TEST(capture.finish() == message + "\n");
  const auto params = model->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    BOOST_TEST(bit_identical(params[i].value(), model_before[i]), "model parameter " << i << " changed");
    BOOST_TEST(bit_identical(amp.master_parameters()[i].value(), masters_before[i]), "master " << i << " changed");
  }
  BOOST_TEST(sgd->state().tensors.empty(), "the optimizer stepped (momentum buffers exist)");

  trainer.train_step(tensor_cast<T>(images), targets);
  BOOST_TEST(!bit_identical(amp.master_parameters()[0].value(), masters_before[0]));
  BOOST_TEST(bit_identical(params[0].value(), tensor_cast<T>(amp.master_parameters()[0].value())));
}

BOOST_AUTO_TEST_CASE(fp16_overflow_skips_the_step) {
  check_overflow_skips_the_step<Fp16>("Gradient overflow. Skipping step, loss scale reduced to 32768.0");
}

BOOST_AUTO_TEST_CASE(bf16_nan_skips_the_step_without_scaling) {
  check_overflow_skips_the_step<Bf16>("Gradient overflow. Skipping step, loss scale stays 1.0");
}

// MixedPrecision skips a step whose gradients overflow and would go on skipping (bf16 never lowers
// its scale to a floor); a non-finite loss is no overflow that a scale mends, so by default the
// Trainer stops there, before the policy moves its scale or says anything.
BOOST_AUTO_TEST_CASE(a_non_finite_loss_stops_mixed_precision_training_by_default) {
  auto model = small_linear<ptrain::bfloat16>();
  MixedPrecision<Bf16> amp(*model);
  auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.1});
  Trainer<Sequential<ptrain::bfloat16>, MixedPrecision<Bf16>> trainer(model, sgd, quiet, amp);
  trainer.train_step(linear_inputs<ptrain::bfloat16>(false), some_targets(8));
  StdoutCapture capture;
  std::string what;
  try {
    trainer.train_step(linear_inputs<ptrain::bfloat16>(true), some_targets(8));
  } catch (const Error& e) {
    what = e.what();
  }
  BOOST_TEST(capture.finish() == "");
  BOOST_TEST(what.starts_with("Trainer: the loss is nan at step 2 on rank 0, and the gradient of '0.weight' holds"), what);
  BOOST_TEST(trainer.skipped_steps() == 0);
}

BOOST_AUTO_TEST_CASE(overflow_below_the_minimum_scale_is_an_error) {
  LossScaler scaler({.initial_scale = 1, .min_loss_scale = 0.25});
  scaler.update(true);
  scaler.update(true);
  BOOST_TEST(scaler.scale() == 0.25);
  BOOST_CHECK_EXCEPTION(scaler.update(true), Error, [](const Error& e) {
    const std::string what = e.what();
    return what.find("overflowed (inf or NaN) at loss scale 0.25") != std::string::npos &&
           what.find("below min_loss_scale 0.25") != std::string::npos;
  });
  BOOST_TEST(scaler.scale() == 0.25);

  // Through the Trainer: an inf on every batch ends training with the error, told where and which
  // parameter's gradient overflowed.
  auto model = small_linear<ptrain::half>();
  MixedPrecision<Fp16> amp(*model, {.initial_scale = 4, .min_loss_scale = 2});
  auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.1});
  Trainer<Sequential<ptrain::half>, MixedPrecision<Fp16>> trainer(model, sgd, quiet_skipping, amp);
  StdoutCapture capture;
  trainer.train_step(linear_inputs<ptrain::half>(true), some_targets(8));
  std::string what;
  try {
    trainer.train_step(linear_inputs<ptrain::half>(true), some_targets(8));
  } catch (const Error& e) {
    what = e.what();
  }
  BOOST_TEST(capture.finish() == "Gradient overflow. Skipping step, loss scale reduced to 2.0\n");
  BOOST_TEST(what.starts_with("Trainer: the loss is "), what);
  BOOST_TEST(what.find(" at step 2 on rank 0, and the gradient of '") != std::string::npos, what);
  BOOST_TEST(what.find("LossScaler: the gradients overflowed (inf or NaN) at loss scale 2.0, and halving it would go "
                       "below min_loss_scale 2.0. The loss, the weights or the inputs are probably inf or NaN already "
                       "(a learning rate too high?)") != std::string::npos,
             what);
  BOOST_CHECK_THROW(LossScaler({.initial_scale = 1, .min_loss_scale = 2}), Error);
}

BOOST_AUTO_TEST_CASE(frozen_parameters_stay_and_models_must_match) {
  auto model = small_linear<ptrain::bfloat16>();
  model->parameters()[1].set_requires_grad(false);  // the bias
  MixedPrecision<Bf16> amp(*model);
  BOOST_TEST(amp.loss_scale() == 1.0);
  BOOST_TEST(!amp.master_parameters()[1].requires_grad());
  auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.1});
  Trainer<Sequential<ptrain::bfloat16>, MixedPrecision<Bf16>> trainer(model, sgd, quiet, amp);
  const auto before = values(model->parameters());
  trainer.train_step(linear_inputs<ptrain::bfloat16>(false), some_targets(8));
  BOOST_TEST(!bit_identical(model->parameters()[0].value(), before[0]));
  BOOST_TEST(bit_identical(model->parameters()[1].value(), before[1]));

  auto other = small_linear<ptrain::bfloat16>();
  BOOST_CHECK_EXCEPTION(
      (Trainer<Sequential<ptrain::bfloat16>, MixedPrecision<Bf16>>(other, sgd, quiet, amp)), Error,
      [](const Error& e) { return std::string(e.what()).find("not the one this policy was made from") != std::string::npos; });
}

BOOST_AUTO_TEST_SUITE_END()
