#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include <ptrain/optim/adam.hpp>
#include <ptrain/optim/one_cycle.hpp>
#include <ptrain/optim/schedule.hpp>
#include <ptrain/optim/scheduler.hpp>
#include <ptrain/optim/sgd.hpp>

#include "optim_test_util.hpp"

using namespace ptrain;
using namespace optim_test;

BOOST_AUTO_TEST_SUITE(schedule_test)

namespace {

// The smallest Optimizer: the concept's archetype. It has no momentum.
struct LrOnly {
  double rate = 0;
  int steps = 0;
  void step() { ++steps; }
  void zero_grad() {}
  double lr() const { return rate; }
  void set_lr(double lr) { rate = lr; }
};
static_assert(Optimizer<LrOnly> && !MomentumOptimizer<LrOnly>);
static_assert(LrSchedule<StepLR> && LrSchedule<CosineAnnealingLR> && MomentumSchedule<OneCycleLR>);
static_assert(LrSchedule<WarmupLinearDecay>);
static_assert(MomentumSchedule<LinearWarmup<OneCycleLR>> && !MomentumSchedule<LinearWarmup<StepLR>>);

template <LrSchedule S>
std::vector<double> lrs(const S& s, std::int64_t n) {
  std::vector<double> out;
  for (std::int64_t k = 0; k < n; ++k) out.push_back(s.lr_at(k));
  return out;
}

void check_values(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  check_rows({got}, {want}, tol);
}

std::vector<Var<double>> one_param() { return {Var<double>(Tensor<double>::zeros({1}), true)}; }

// The expected sequences are PyTorch 1.13's param_groups[0]['lr'] (and momentum) before each
// scheduler.step(), printed by test/optim/make_references.py.

}  // namespace

BOOST_AUTO_TEST_CASE(step_lr_matches_pytorch) {
  check_values(lrs(StepLR{.base_lr = 0.1, .step_size = 3, .gamma = 0.5}, 10),
               {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125});
}

BOOST_AUTO_TEST_CASE(cosine_annealing_matches_pytorch) {
  // Past t_max the rate climbs back, as PyTorch's does.
  check_values(lrs(CosineAnnealingLR{.base_lr = 0.1, .t_max = 10, .eta_min = 0.001}, 25),
               {0.1, 0.09757729755661011, 0.0905463412215599, 0.07959536998847742, 0.0657963412215599, 0.0505,
                0.03520365877844011, 0.02140463001152259, 0.010453658778440109, 0.0034227024433899004, 0.001,
                0.0034227024433899004, 0.01045365877844014, 0.02140463001152267, 0.035203658778440255,
                0.05050000000000022, 0.06579634122156018, 0.07959536998847777, 0.09054634122156031,
                0.09757729755661054, 0.10000000000000045, 0.09757729755661054, 0.09054634122156033,
                0.07959536998847778, 0.0657963412215602});
}

BOOST_AUTO_TEST_CASE(one_cycle_cos_cycles_sgd_momentum_like_pytorch) {
  auto params = one_param();
  Sgd<double> opt(params, {.lr = 0.1, .momentum = 0.9});
  Scheduler sched(opt, OneCycleLR{.max_lr = 0.1, .total_steps = 20});
  std::vector<double> lr, momentum;
  for (int k = 0; k <= 20; ++k) {
    if (k) sched.step();
    lr.push_back(opt.lr());
    momentum.push_back(opt.momentum());
  }
  check_values(lr, {0.0040000000000000036, 0.013167184270002533, 0.037167184270002526, 0.06683281572999747,
                    0.09083281572999748, 0.1, 0.09874640062350874, 0.09504846320134738, 0.089091617757105,
                    0.0811745653949763, 0.07169430017913009, 0.06112620219362893, 0.0500002, 0.03887419780637107,
                    0.028306099820869922, 0.0188258346050237, 0.010908782242895003, 0.004951936798652629,
                    0.0012539993764912555, 4e-07, 0.0012539993764912555});
  check_values(momentum, {0.95, 0.9404508497187474, 0.9154508497187474, 0.8845491502812526, 0.8595491502812526, 0.85,
                          0.8512536043909088, 0.854951556604879, 0.8609084258765984, 0.8688255099070633,
                          0.878305813044122, 0.8888739533021842, 0.8999999999999999, 0.9111260466978157,
                          0.9216941869558779, 0.9311744900929366, 0.9390915741234015, 0.945048443395121,
                          0.9487463956090911, 0.95, 0.9487463956090911});
  BOOST_TEST(sched.step_count() == 20);
  check_throws_with([&] { sched.step(); }, "OneCycleLR: tried to step 22 times; total_steps is 20");
}

BOOST_AUTO_TEST_CASE(one_cycle_linear_cycles_adam_beta1_like_pytorch) {
  auto params = one_param();
  Adam<double> opt(params, {.lr = 0.1});
  Scheduler sched(opt, OneCycleLR{.max_lr = 0.01, .total_steps = 15, .pct_start = 0.4, .anneal = Anneal::linear,
                                  .div_factor = 10, .final_div_factor = 100, .base_momentum = 0.8,
                                  .max_momentum = 0.9});
  std::vector<double> lr, beta1;
  for (int k = 0; k <= 15; ++k) {
    if (k) sched.step();
    lr.push_back(opt.lr());
    beta1.push_back(opt.options().beta1);
  }
  // The step after the last extrapolates below zero, as in PyTorch; the optimizer refuses to use it.
  check_values(lr, {0.001, 0.0028000000000000004, 0.004600000000000001, 0.0064, 0.008200000000000002,
                    0.010000000000000002, 0.00889, 0.0077800000000000005, 0.006670000000000001, 0.00556, 0.00445,
                    0.00334, 0.0022299999999999993, 0.0011199999999999995, 9.999999999999593e-06,
                    -0.0011000000000000003});
  check_values(beta1, {0.9, 0.88, 0.86, 0.8400000000000001, 0.8200000000000001, 0.8, 0.8111111111111111,
                       0.8222222222222223, 0.8333333333333334, 0.8444444444444444, 0.8555555555555556,
                       0.8666666666666667, 0.8777777777777778, 0.888888888888889, 0.9, 0.9111111111111111});
  params[0].grad() = Tensor<double>::ones({1});
  check_throws_with([&] { opt.step(); }, "invalid learning rate -0.0011");
}

BOOST_AUTO_TEST_CASE(one_cycle_three_phase_matches_pytorch) {
  const OneCycleLR s{.max_lr = 0.2, .total_steps = 30, .pct_start = 0.25, .three_phase = true};
  check_values(lrs(s, 31),
               {0.008000000000000007, 0.018996221537291857, 0.04946578431380905, 0.09242847869548901,
                0.13804206915608344, 0.17585703182442572, 0.197210414472901, 0.197210414472901, 0.17585703182442572,
                0.1380420691560834, 0.09242847869548901, 0.049465784313809054, 0.018996221537291857, 0.008,
                0.00792314880750076, 0.007695548578232142, 0.00732594586136526, 0.006828544282033715,
                0.0062224587039852, 0.005530980656087412, 0.004780683251935707, 0.0040003999999999994,
                0.0032201167480642935, 0.002469819343912587, 0.0017783412960148, 0.0011722557179662848,
                0.0006748541386347397, 0.00030525142176785755, 7.765119249923958e-05, 8e-07,
                7.765119249923958e-05});
  std::vector<double> momentum;
  for (int k = 0; k <= 30; ++k) momentum.push_back(*s.momentum_at(k));
  const std::vector<double> rising = {0.95, 0.9442728012826604, 0.9284032373365577, 0.9060268340127661,
                                      0.8822697556478731, 0.8625744625914449, 0.8514529091286974};
  std::vector<double> want = rising;
  want.insert(want.end(), rising.rbegin(), rising.rend());
  want.resize(31, 0.95);
  check_values(momentum, want);
}

BOOST_AUTO_TEST_CASE(one_cycle_momentum_overrides_sgd_without_momentum) {
  // As in PyTorch: cycle_momentum (the default) writes momentum even where the optimizer had none.
  auto params = one_param();
  Sgd<double> plain(params, {.lr = 0.1});
  Scheduler sched(plain, OneCycleLR{.max_lr = 0.1, .total_steps = 10});
  BOOST_TEST(plain.momentum() == 0.95);
  Sgd<double> kept(params, {.lr = 0.1});
  Scheduler off(kept, OneCycleLR{.max_lr = 0.1, .total_steps = 10, .cycle_momentum = false});
  off.step();
  BOOST_TEST(kept.momentum() == 0.0);
}

BOOST_AUTO_TEST_CASE(one_cycle_refuses_bad_settings) {
  check_throws_with([] { OneCycleLR{.max_lr = 0.1, .total_steps = 0}.lr_at(0); }, "total_steps is 0");
  check_throws_with([] { OneCycleLR{.max_lr = 0.1, .total_steps = 10, .pct_start = 1.5}.lr_at(0); },
                    "pct_start is 1.5, expected a value in [0, 1]");
  check_throws_with([] { OneCycleLR{.total_steps = 10}.lr_at(0); }, "max_lr is nan (not set)");
  check_throws_with([] { OneCycleLR{.max_lr = 0.1, .total_steps = 10}.lr_at(11); }, "tried to step 12 times");
  // pct_start * total_steps = 1: the warm-up phase ends where it starts (PyTorch divides by zero).
  check_throws_with([] { OneCycleLR{.max_lr = 0.1, .total_steps = 4, .pct_start = 0.25}.lr_at(0); },
                    "phase 1 of 2 is empty");
  LrOnly plain;
  check_throws_with([&] { Scheduler(plain, OneCycleLR{.max_lr = 0.1, .total_steps = 10}); },
                    "turn cycle_momentum off");
  Scheduler ok(plain, OneCycleLR{.max_lr = 0.1, .total_steps = 10, .cycle_momentum = false});
  BOOST_TEST(plain.lr() == 0.1 / 25, boost::test_tools::tolerance(1e-15));
}

BOOST_AUTO_TEST_CASE(warmup_matches_pytorch_chained_linear_lr) {
  // ChainedScheduler([LinearLR(start_factor=0.25, total_iters=4), StepLR(3, 0.5)]): the step
  // decay keeps its own milestones through the warm-up.
  check_values(lrs(LinearWarmup(StepLR{.base_lr = 0.1, .step_size = 3, .gamma = 0.5}, 4, 0.25), 10),
               {0.025, 0.043750000000000004, 0.06250000000000001, 0.04062500000000001, 0.05000000000000001,
                0.05000000000000001, 0.025000000000000005, 0.025000000000000005, 0.025000000000000005,
                0.012500000000000002});
  // LinearLR(start_factor=0.5, total_iters=5) alone.
  check_values(lrs(LinearWarmup(FixedLR{0.1}, 5, 0.5), 8), {0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.1, 0.1});
  check_values(lrs(LinearWarmup(FixedLR{0.1}, 0, 0.0), 2), {0.1, 0.1});
  check_throws_with([] { LinearWarmup(FixedLR{0.1}, 5, 1.5); }, "start_factor is 1.5");
  check_throws_with([] { LinearWarmup(FixedLR{0.1}, -1); }, "warmup_steps is -1");
}

BOOST_AUTO_TEST_CASE(warmup_linear_decay_matches_huggingface) {
  // get_linear_schedule_with_warmup(warmup 4, total 10): a LambdaLR; 0 from total on.
  check_values(lrs(WarmupLinearDecay{.base_lr = 0.1, .warmup_steps = 4, .total_steps = 10}, 13),
               {0.0, 0.025, 0.05, 0.07500000000000001, 0.1, 0.08333333333333334, 0.06666666666666667, 0.05,
                0.03333333333333333, 0.016666666666666666, 0.0, 0.0, 0.0});
  check_values(lrs(WarmupLinearDecay{.base_lr = 0.2, .warmup_steps = 0, .total_steps = 2}, 3), {0.2, 0.1, 0.0});
  check_throws_with([] { WarmupLinearDecay{.base_lr = 0.1, .warmup_steps = 5, .total_steps = 4}.lr_at(0); },
                    "expected 0 <= warmup_steps <= total_steps");
}

BOOST_AUTO_TEST_CASE(linear_scaling_ramps_from_single_worker_rate) {
  // Goyal et al.: from base_lr to world_size * base_lr in warmup_steps equal increments.
  check_values(lrs(linear_scaling(0.1, 4, 5), 8), {0.1, 0.16, 0.22, 0.28, 0.34, 0.4, 0.4, 0.4});
  // Over a step decay: 8 workers, 2 warm-up epochs, decay by 10 every 3 epochs.
  check_values(lrs(linear_scaling(StepLR{.base_lr = 0.1, .step_size = 3}, 8, 2), 7),
               {0.1, 0.45, 0.8, 0.08, 0.08, 0.08, 0.008});
  check_values(lrs(linear_scaling(0.1, 1, 5), 2), {0.1, 0.1});
  check_throws_with([] { linear_scaling(0.1, 0, 5); }, "world_size is 0");
  // Momentum cycling passes through the wrappers.
  const auto scaled = linear_scaling(OneCycleLR{.max_lr = 0.1, .total_steps = 10}, 2, 3);
  BOOST_TEST(*scaled.momentum_at(0) == 0.95);
}

BOOST_AUTO_TEST_CASE(scheduler_sets_rate_at_construction_and_resumes) {
  auto params = one_param();
  Sgd<double> opt(params, {.lr = 1.0});
  Scheduler sched(opt, StepLR{.base_lr = 0.1, .step_size = 2});
  BOOST_TEST(opt.lr() == 0.1);  // like a PyTorch scheduler, making it applies step 0
  sched.step();
  sched.step();
  BOOST_TEST(sched.step_count() == 2);
  BOOST_TEST(opt.lr() == 0.1 * 0.1, boost::test_tools::tolerance(1e-15));
  Scheduler resumed(opt, StepLR{.base_lr = 0.1, .step_size = 2}, 5);
  BOOST_TEST(opt.lr() == 0.1 * 0.1 * 0.1, boost::test_tools::tolerance(1e-15));
  resumed.set_step_count(0);
  BOOST_TEST(opt.lr() == 0.1);
}

BOOST_AUTO_TEST_CASE(schedules_refuse_bad_settings) {
  check_throws_with([] { StepLR{.base_lr = 0.1}.lr_at(0); }, "step_size is 0");
  check_throws_with([] { StepLR{.step_size = 3}.lr_at(0); }, "StepLR: base_lr is nan (not set)");
  check_throws_with([] { CosineAnnealingLR{.base_lr = 0.1, .t_max = 0}.lr_at(0); }, "t_max is 0");
  check_throws_with([] { StepLR{.base_lr = 0.1, .step_size = 3}.lr_at(-1); }, "step -1 is negative");
  check_throws_with([] { FixedLR{-0.5}.lr_at(0); }, "lr is -0.5");
}

BOOST_AUTO_TEST_SUITE_END()
