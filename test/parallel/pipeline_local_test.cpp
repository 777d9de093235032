// Pipeline in one process: the schedules' orders, the partition, and S = 1 (micro-batching
// alone), which must give the step of no pipeline. The multi-rank runs are test/mpi/pipeline_test.
#include <algorithm>
#include <string>
#include <vector>

#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/self_comm.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/compare.hpp"

using namespace ptrain;
using detail::PipelineAction;
using detail::StageRange;

BOOST_AUTO_TEST_SUITE(pipeline_local_test)

namespace {

constexpr TrainerOptions quiet{.progress_bar = false, .print_epochs = false};

std::string order(const std::vector<PipelineAction>& actions) {
  std::string out;
  for (const auto& a : actions) out += (a.kind == PipelineAction::forward ? "F" : "B") + std::to_string(a.micro_batch) + " ";
  return out;
}

std::string ranges(const std::vector<StageRange>& stages) {
  std::string out;
  for (const auto& r : stages) out += "[" + std::to_string(r.begin) + "," + std::to_string(r.end) + ") ";
  return out;
}

// The most micro-batches whose forward ran and backward did not, at any point.
int most_in_flight(const std::vector<PipelineAction>& actions) {
  int live = 0, most = 0;
  for (const auto& a : actions) most = std::max(most, live += a.kind == PipelineAction::forward ? 1 : -1);
  return most;
}

std::shared_ptr<Sequential<double>> make_net() {
  manual_seed(11);
  Conv2dOptions same;
  same.pad_h = same.pad_w = 1;
  return std::make_shared<Sequential<double>>(std::initializer_list<std::shared_ptr<Module<double>>>{
      make<Conv2d<double>>(1, 3, 3, same), make<ReLU<double>>(), make<MaxPool2d<double>>(2), make<Flatten<double>>(),
      make<Linear<double>>(3 * 3 * 3, 5), make<ReLU<double>>(), make<Linear<double>>(5, 4)});
}

struct Data {
  std::vector<Tensor<double>> inputs;
  std::vector<std::vector<std::int64_t>> targets;
};

Data make_data(int steps, std::int64_t batch) {
  Rng rng(3);
  Data d;
  for (int s = 0; s < steps; ++s) {
    Tensor<double> x({batch, 1, 6, 6});
    for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = rng.normal();
    std::vector<std::int64_t> y;
    for (std::int64_t i = 0; i < batch; ++i) y.push_back(static_cast<std::int64_t>(rng.below(4)));
    d.inputs.push_back(x);
    d.targets.push_back(y);
  }
  return d;
}

template <class... Policies>
std::vector<Tensor<double>> trained(const Data& data, double smoothing, Policies... policies) {
  auto net = make_net();
  auto sgd = std::make_shared<Sgd<double>>(net->parameters(), SgdOptions{.lr = 0.2, .momentum = 0.9});
  Trainer<Sequential<double>, Classification, Policies...> trainer(net, sgd, quiet,
                                                                   Classification{.label_smoothing = smoothing},
                                                                   policies...);
  for (std::size_t s = 0; s < data.inputs.size(); ++s) trainer.train_step(data.inputs[s], data.targets[s]);
  std::vector<Tensor<double>> out;
  for (auto& p : net->parameters()) out.push_back(p.value().clone());
  return out;
}

double worst(const std::vector<Tensor<double>>& a, const std::vector<Tensor<double>>& b) {
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, test::worst_error(a[i], b[i]));
  return w;
}

bool says(const Error& e, const std::string& part) {
  const bool found = std::string(e.what()).find(part) != std::string::npos;
  if (!found) BOOST_TEST_MESSAGE("message was: " << e.what());
  return found;
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpipe_runs_every_forward_then_every_backward) {
  BOOST_TEST(order(detail::stage_actions<GPipe>(0, 3, 4)) == "F0 F1 F2 F3 B0 B1 B2 B3 ");
  BOOST_TEST(most_in_flight(detail::stage_actions<GPipe>(2, 3, 4)) == 4);
}

BOOST_AUTO_TEST_CASE(one_f_one_b_warms_up_then_alternates) {
  BOOST_TEST(order(detail::stage_actions<OneFOneB>(0, 3, 4)) == "F0 F1 F2 B0 F3 B1 B2 B3 ");
  BOOST_TEST(order(detail::stage_actions<OneFOneB>(1, 3, 4)) == "F0 F1 B0 F2 B1 F3 B2 B3 ");
  BOOST_TEST(order(detail::stage_actions<OneFOneB>(2, 3, 4)) == "F0 B0 F1 B1 F2 B2 F3 B3 ");
  BOOST_TEST(order(detail::stage_actions<OneFOneB>(0, 4, 2)) == "F0 F1 B0 B1 ");
  for (int stages : {1, 2, 3, 5})
    for (int m : {1, 2, 4, 8, 16})
      for (int s = 0; s < stages; ++s) {
        const auto actions = detail::stage_actions<OneFOneB>(s, stages, m);
        BOOST_TEST(actions.size() == 2u * static_cast<std::size_t>(m));
        BOOST_TEST(most_in_flight(actions) == std::min(stages - s, m), "S " << stages << " M " << m << " stage " << s);
        BOOST_TEST(order({actions.back()}) == "B" + std::to_string(m - 1) + " ");
      }
}

// The schedule read at run time runs the same actions, and trains to the same weights, as the one in
// the type; with the schedule in the type the run-time option is refused rather than ignored.
BOOST_AUTO_TEST_CASE(the_schedule_chosen_at_run_time_equals_the_one_in_the_type) {
  for (int stages : {1, 3, 4})
    for (int m : {1, 4, 8})
      for (int s = 0; s < stages; ++s) {
        BOOST_TEST(order(detail::stage_actions(ScheduleKind::gpipe, s, stages, m)) ==
                   order(detail::stage_actions<GPipe>(s, stages, m)));
        BOOST_TEST(order(detail::stage_actions(ScheduleKind::one_f_one_b, s, stages, m)) ==
                   order(detail::stage_actions<OneFOneB>(s, stages, m)));
      }
  SelfComm self;
  const auto data = make_data(3, 10);
  BOOST_TEST(worst(trained(data, 0.0, Pipeline<4, RuntimeSchedule>(self, {.schedule = ScheduleKind::one_f_one_b})),
                   trained(data, 0.0, Pipeline<4, OneFOneB>(self))) == 0.0);
  BOOST_CHECK_THROW(Pipeline<4>(self, {.schedule = ScheduleKind::one_f_one_b}), Error);
}

BOOST_AUTO_TEST_CASE(balanced_partition_minimises_the_largest_stage) {
  // Weights (parameters + 1): 101 1 101 1 1 201 -> [0,3) 203 and [3,6) 203.
  BOOST_TEST(ranges(detail::balanced_stages({100, 0, 100, 0, 0, 200}, 2)) == "[0,3) [3,6) ");
  BOOST_TEST(ranges(detail::balanced_stages({5, 5, 5}, 3)) == "[0,1) [1,2) [2,3) ");
  BOOST_TEST(ranges(detail::balanced_stages({1000, 1, 1, 1}, 2)) == "[0,1) [1,4) ");
  BOOST_CHECK_EXCEPTION(detail::balanced_stages({1, 2}, 3), Error,
                        [](const Error& e) { return says(e, "the model has 2 layer(s) for 3 stages"); });
}

BOOST_AUTO_TEST_CASE(explicit_cut_points_are_checked) {
  BOOST_TEST(ranges(detail::stages_at({2, 5}, 7, 3)) == "[0,2) [2,5) [5,7) ");
  BOOST_CHECK_EXCEPTION(detail::stages_at({2}, 7, 3), Error, [](const Error& e) { return says(e, "expected 2"); });
  BOOST_CHECK_EXCEPTION(detail::stages_at({3, 3}, 7, 3), Error,
                        [](const Error& e) { return says(e, "cut point 3 must lie in (3, 7)"); });
  BOOST_CHECK_EXCEPTION(detail::stages_at({7}, 7, 2), Error, [](const Error& e) { return says(e, "(0, 7)"); });
}

BOOST_AUTO_TEST_CASE(one_stage_micro_batching_equals_no_pipeline) {
  SelfComm self;
  const auto data = make_data(3, 10);  // 10 rows in 4 micro-batches: 2, 3, 2, 3
  for (double smoothing : {0.0, 0.1}) {
    const auto plain = trained(data, smoothing);
    BOOST_TEST(worst(trained(data, smoothing, Pipeline<4>(self)), plain) < 1e-12);
    BOOST_TEST(worst(trained(data, smoothing, Pipeline<4, OneFOneB>(self)), plain) < 1e-12);
    BOOST_TEST(worst(trained(data, smoothing, Pipeline<4>(self, {.checkpoint = true})), plain) < 1e-12);
    BOOST_TEST(worst(trained(data, smoothing, Pipeline<3, OneFOneB>(self, {.checkpoint = true})), plain) < 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(one_stage_reports_the_loss_and_accuracy_of_no_pipeline) {
  SelfComm self;
  const auto data = make_data(1, 8);
  const auto totals = [&](auto... policies) {
    auto net = make_net();
    auto sgd = std::make_shared<Sgd<double>>(net->parameters(), SgdOptions{.lr = 0.1});
    Trainer<Sequential<double>, decltype(policies)...> trainer(net, sgd, quiet, policies...);
    return trainer.train_step(data.inputs[0], data.targets[0]);
  };
  const EpochTotals plain = totals(), piped = totals(Pipeline<4>(self));
  BOOST_TEST(piped.loss_sum == plain.loss_sum, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(piped.metric_state == plain.metric_state);
  BOOST_TEST(piped.samples == 8.0);
}

BOOST_AUTO_TEST_CASE(a_batch_smaller_than_m_makes_fewer_micro_batches) {
  SelfComm self;
  const auto data = make_data(2, 3);  // 3 rows: 3 micro-batches of 1, as torch.chunk would cut them
  BOOST_TEST(worst(trained(data, 0.0, Pipeline<4, OneFOneB>(self)), trained(data, 0.0)) < 1e-12);
}

BOOST_AUTO_TEST_CASE(the_plan_is_printed_with_stages_layers_and_parameters) {
  SelfComm self;
  auto net = make_net();
  auto sgd = std::make_shared<Sgd<double>>(net->parameters(), SgdOptions{.lr = 0.1});
  std::FILE* out = std::tmpfile();
  {
    // log_line writes to stdout: swap it for a file while the Trainer is made.
    std::fflush(stdout);
    const int saved = dup(fileno(stdout));
    dup2(fileno(out), fileno(stdout));
    Trainer<Sequential<double>, Pipeline<2>> trainer(net, sgd, quiet, Pipeline<2>(self));
    std::fflush(stdout);
    dup2(saved, fileno(stdout));
    close(saved);
  }
  std::rewind(out);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), out));
  std::fclose(out);
  BOOST_TEST_MESSAGE(text);
  BOOST_TEST(text.find("pipeline: 1 rank(s) = 1 stage(s) x 1 data-parallel replica(s)") != std::string::npos);
  BOOST_TEST(text.find("GPipe, 2 micro-batches") != std::string::npos);
  BOOST_TEST(text.find("stage 0 (ranks 0): layers 0-6 [0 1 2 3 4 5 6], " + std::to_string(net->parameter_count()) +
                       " parameters") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
