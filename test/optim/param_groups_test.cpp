// Parameter groups (optim/optimizer.hpp): a group steps exactly as an optimizer of its own with the
// group's rate and weight decay; schedulers scale every group's initial rate by the same factor
// (PyTorch's StepLR/LambdaLR over param_groups); a checkpoint file keeps every group's rate.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <vector>

#include <ptrain/optim/adam.hpp>
#include <ptrain/optim/lamb.hpp>
#include <ptrain/optim/one_cycle.hpp>
#include <ptrain/optim/schedule.hpp>
#include <ptrain/optim/scheduler.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/checkpoint.hpp>

#include "../common/files.hpp"
#include "optim_test_util.hpp"

using namespace ptrain;
using namespace optim_test;

BOOST_AUTO_TEST_SUITE(param_groups_test)

namespace {

// p in group 0 at the options' rate and weight decay, q in group 1 at its own.
template <class D>
std::vector<ParamGroup<double, D>> two_groups(Var<double, D> p, Var<double, D> q, double q_lr, double q_decay) {
  return {{{p}, {}, {}}, {{q}, q_lr, q_decay}};
}

// The grouped optimizer against one optimizer per parameter with that group's options: the same
// values to the bit after every step of the quadratic run (q skipped on odd steps).
template <class D, class Make>
void check_groups_equal_separate_optimizers(Make make) {
  auto p = initial_p<D>(), q = initial_q<D>();
  auto p_alone = initial_p<D>(), q_alone = initial_q<D>();
  auto [grouped, first, second] = make(p, q, p_alone, q_alone);
  BOOST_TEST(grouped.group_count() == 2u);
  for (int k = 0; k < 5; ++k) {
    grouped.zero_grad();
    quadratic_grads(p, q, k);
    grouped.step();
    quadratic_grads(p_alone, q_alone, k);
    first.step();
    second.step();
    BOOST_TEST(p.value().to_vector() == p_alone.value().to_vector(), "step " << k);
    BOOST_TEST(q.value().to_vector() == q_alone.value().to_vector(), "step " << k);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(sgd_groups_step_as_separate_optimizers, D, Devices) {
  check_groups_equal_separate_optimizers<D>([](auto p, auto q, auto p_alone, auto q_alone) {
    const SgdOptions options{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.05, .nesterov = true};
    SgdOptions q_options = options;
    q_options.lr = 0.03;
    q_options.weight_decay = 0;
    return std::tuple{Sgd<double, D>(two_groups(p, q, 0.03, 0.0), options), Sgd<double, D>({p_alone}, options),
                      Sgd<double, D>({q_alone}, q_options)};
  });
}

BOOST_AUTO_TEST_CASE_TEMPLATE(adam_groups_step_as_separate_optimizers, D, Devices) {
  check_groups_equal_separate_optimizers<D>([](auto p, auto q, auto p_alone, auto q_alone) {
    const AdamOptions options{.lr = 0.05, .weight_decay = 0.01, .amsgrad = true};
    AdamOptions q_options = options;
    q_options.lr = 0.2;
    q_options.weight_decay = 0.1;
    return std::tuple{Adam<double, D>(two_groups(p, q, 0.2, 0.1), options), Adam<double, D>({p_alone}, options),
                      Adam<double, D>({q_alone}, q_options)};
  });
}

BOOST_AUTO_TEST_CASE_TEMPLATE(adamw_groups_step_as_separate_optimizers, D, Devices) {
  check_groups_equal_separate_optimizers<D>([](auto p, auto q, auto p_alone, auto q_alone) {
    const AdamWOptions options{.lr = 0.05};
    AdamWOptions q_options = options;
    q_options.lr = 0.01;
    q_options.weight_decay = 0;
    return std::tuple{AdamW<double, D>(two_groups(p, q, 0.01, 0.0), options), AdamW<double, D>({p_alone}, options),
                      AdamW<double, D>({q_alone}, q_options)};
  });
}

BOOST_AUTO_TEST_CASE_TEMPLATE(lamb_groups_step_as_separate_optimizers, D, Devices) {
  check_groups_equal_separate_optimizers<D>([](auto p, auto q, auto p_alone, auto q_alone) {
    const LambOptions options{.lr = 0.05, .weight_decay = 0.01};
    LambOptions q_options = options;
    q_options.lr = 0.2;
    q_options.weight_decay = 0.1;
    return std::tuple{Lamb<double, D>(two_groups(p, q, 0.2, 0.1), options), Lamb<double, D>({p_alone}, options),
                      Lamb<double, D>({q_alone}, q_options)};
  });
}

// A Lamb state keeps the groups' rates, and a schedule scales them all.
BOOST_AUTO_TEST_CASE(lamb_state_and_schedule_keep_every_group_s_rate) {
  auto p = initial_p(), q = initial_q();
  Lamb<double> lamb(two_groups(p, q, 0.02, 0.0), {.lr = 0.1});
  lamb.set_lr(0.05);
  BOOST_TEST(lamb.group_lr(1) == 0.01, boost::test_tools::tolerance(1e-15));
  Lamb<double> restored(two_groups(initial_p(), initial_q(), 0.02, 0.0), {.lr = 0.1});
  restored.load_state(lamb.state());
  BOOST_TEST(restored.group_lr(0) == 0.05);
  BOOST_TEST(restored.group_lr(1) == 0.01, boost::test_tools::tolerance(1e-15));
  Lamb<double> one({initial_p(), initial_q()}, {.lr = 0.1});
  check_throws_with([&] { one.load_state(lamb.state()); }, "the saved state has 2 parameter groups, this optimizer 1");
}

// params() is every group's parameters in order; unset group options are the optimizer's.
BOOST_AUTO_TEST_CASE(groups_list_their_parameters_in_order_with_the_options_defaults) {
  auto p = initial_p(), q = initial_q(), r = initial_q();
  Sgd<double> sgd(std::vector<ParamGroup<double>>{{{p, q}, {}, 0.5}, {{r}, 0.01, {}}}, {.lr = 0.1, .weight_decay = 0.2});
  BOOST_REQUIRE(sgd.params().size() == 3u);
  BOOST_TEST(sgd.params()[2].node() == r.node());
  BOOST_TEST(sgd.group_lr(0) == 0.1);
  BOOST_TEST(sgd.group_weight_decay(0) == 0.5);
  BOOST_TEST(sgd.group_lr(1) == 0.01);
  BOOST_TEST(sgd.group_weight_decay(1) == 0.2);
  sgd.set_group_lr(1, 0.02);
  BOOST_TEST(sgd.group_lr(1) == 0.02);
  BOOST_TEST(sgd.lr() == 0.1);
}

// PyTorch: StepLR(step_size=2, gamma=0.5) over groups of lr 0.1 and 0.03 gives each group
// initial_lr * 0.5 ** (epoch // 2); OneCycleLR with max_lr=[0.1, 0.03] cycles both alike.
BOOST_AUTO_TEST_CASE(schedulers_scale_every_group_s_initial_rate) {
  auto p = initial_p(), q = initial_q();
  Sgd<double> sgd(two_groups(p, q, 0.03, 0.0), {.lr = 0.1, .momentum = 0.9});
  Scheduler scheduler(sgd, StepLR{.base_lr = 0.1, .step_size = 2, .gamma = 0.5});
  for (int k = 0; k < 6; ++k) {
    const double factor = std::pow(0.5, k / 2);
    BOOST_TEST(sgd.group_lr(0) == 0.1 * factor, boost::test_tools::tolerance(1e-15));
    BOOST_TEST(sgd.group_lr(1) == 0.03 * factor, boost::test_tools::tolerance(1e-15));
    scheduler.step();
  }

  Adam<double> adam(two_groups(initial_p(), initial_q(), 0.03 / 25, 0.0), {.lr = 0.1 / 25});
  const OneCycleLR cycle{.max_lr = 0.1, .total_steps = 10};
  Scheduler one_cycle(adam, cycle);
  for (int k = 0; k < 10; ++k) {
    BOOST_TEST(adam.group_lr(0) == cycle.lr_at(k), boost::test_tools::tolerance(1e-14));
    BOOST_TEST(adam.group_lr(1) == cycle.lr_at(k) * 0.3, boost::test_tools::tolerance(1e-14));
    BOOST_TEST(adam.momentum() == *cycle.momentum_at(k), boost::test_tools::tolerance(1e-14));
    one_cycle.step();
  }
}

// A run saved to a checkpoint file after its schedule moved the rates, loaded into a fresh
// optimizer, ends where the straight run ends; a state of another group count is refused.
BOOST_AUTO_TEST_CASE_TEMPLATE(checkpoint_round_trip_keeps_every_group, D, Devices) {
  const AdamOptions options{.lr = 0.1};
  const StepLR schedule{.base_lr = 0.1, .step_size = 1, .gamma = 0.5};
  const auto run = [&](Adam<double, D>& adam, Var<double, D>& p, Var<double, D>& q, int from, int to) {
    Scheduler scheduler(adam, schedule, from);
    for (int k = from; k < to; ++k) {
      quadratic_grads(p, q, k);
      adam.step();
      scheduler.step();
    }
  };
  auto p = initial_p<D>(), q = initial_q<D>();
  Adam<double, D> straight(two_groups(p, q, 0.02, 0.0), options);
  run(straight, p, q, 0, 4);

  auto p2 = initial_p<D>(), q2 = initial_q<D>();
  const auto file = test::temp_dir("param_groups_test") / "optimizer.safetensors";
  {
    Adam<double, D> first(two_groups(p2, q2, 0.02, 0.0), options);
    run(first, p2, q2, 0, 2);
    first.set_group_lr(1, 0.007);  // by hand: only the saved state knows it (the scheduler resets it)
    checkpoint::save_state(file, first.state());
  }
  const OptimizerState<double> saved = checkpoint::read_state<double>(file);
  Adam<double, D> second(two_groups(p2, q2, 0.02, 0.0), options);
  second.load_state(saved);
  BOOST_TEST(second.group_lr(0) == 0.025);
  BOOST_TEST(second.group_lr(1) == 0.007);
  run(second, p2, q2, 2, 4);
  BOOST_TEST(p2.value().to_vector() == p.value().to_vector());
  BOOST_TEST(q2.value().to_vector() == q.value().to_vector());

  Adam<double, D> one_group({initial_p<D>(), initial_q<D>()}, options);
  check_throws_with([&] { one_group.load_state(saved); }, "the saved state has 2 parameter groups, this optimizer 1");
  Adam<double, D> three(std::vector<ParamGroup<double, D>>{{{initial_p<D>()}}, {{initial_q<D>()}}, {{initial_q<D>()}}},
                        options);
  check_throws_with([&] { three.load_state(saved); }, "the saved state has 2 parameter groups, this optimizer 3");
  check_throws_with([&] { three.load_state(one_group.state()); },
                    "the saved state has one parameter group, this optimizer 3");
  check_throws_with([&] { three.load_state({{{"group.3.lr", 0.1}, {"groups", 3}}, {}}); },
                    "state scalar 'group.3.lr' does not name a parameter group of the 3");
  BOOST_TEST(three.group_lr(2) == 0.1);  // nothing changed
}

BOOST_AUTO_TEST_CASE(bad_groups_are_refused) {
  const auto p = initial_p(), q = initial_q();
  check_throws_with([&] { Sgd<double>(std::vector<ParamGroup<double>>{{{p}}, {{}, 0.1}}, {.lr = 0.1}); }, "parameter group 1 has no parameters");
  check_throws_with([&] { Sgd<double>(two_groups(p, q, -0.1, 0.0), {.lr = 0.1}); },
                    "parameter group 1 has learning rate -0.1");
  check_throws_with([&] { Adam<double>(two_groups(p, q, 0.1, -1.0)); }, "parameter group 1 has weight_decay -1");
  check_throws_with([&] { Sgd<double>(two_groups(p, p, 0.1, 0.0), {.lr = 0.1}); },
                    "parameter 1 appears more than once");
  Sgd<double> zero_base(two_groups(p, q, 0.1, 0.0), {.lr = 0});
  check_throws_with([&] { zero_base.set_lr(0.1); }, "group 0's initial rate, which is 0");
  check_throws_with([&] { zero_base.set_group_lr(2, 0.1); }, "parameter group 2 of 2");
}

BOOST_AUTO_TEST_SUITE_END()
