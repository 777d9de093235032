// What the Trainer writes besides its CSV: the TensorBoard run directory (TrainerOptions::
// tensorboard; every scalar read back by test/common/event_file_reader.hpp and compared with what
// fit returned) and the timeline (TrainerOptions::timeline; Chrome trace JSON with the spans of
// every step). The multi-rank timeline is checked in test/mpi/timeline_test.cpp.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/chrome_trace.hpp"
#include "../common/event_file_reader.hpp"
#include "../common/files.hpp"
#include "../common/list_loader.hpp"

using namespace ptrain;
using namespace ptrain::test;

BOOST_AUTO_TEST_SUITE(trainer_logs_test)

namespace {

constexpr int batches = 5;

ListLoader<float> random_batches(std::uint64_t seed) {
  Rng rng(seed);
  ListLoader<float> loader;
  for (int b = 0; b < batches; ++b) {
    ListBatch<float> batch{Tensor<float>({8, 3}), {}};
    for (std::int64_t i = 0; i < batch.inputs.numel(); ++i) batch.inputs[i] = static_cast<float>(rng.normal());
    for (int i = 0; i < 8; ++i) batch.targets.push_back(batch.inputs[3 * i] > 0 ? 1 : 0);
    loader.batches.push_back(batch);
  }
  return loader;
}

std::shared_ptr<Sequential<float>> small_net() {
  manual_seed(11);
  return std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Linear<float>>(3, 4), make<ReLU<float>>(), make<Linear<float>>(4, 2)});
}

}  // namespace

BOOST_AUTO_TEST_CASE(tensorboard_holds_every_step_and_epoch_scalar) {
  const auto run = temp_dir("trainer_logs") / "tensorboard_run";
  auto model = small_net();
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.05});
  std::vector<EpochResult> results;
  {
    Trainer<Sequential<float>> trainer(
        model, sgd, {.progress_bar = false, .print_epochs = false, .accumulation_steps = 1, .tensorboard = run.string()});
    auto train = random_batches(1), val = random_batches(2);
    results = trainer.fit(train, &val, 2);
  }
  const EventFile file = read_event_file(event_file_in(run));
  BOOST_TEST(file.file_version == "brain.Event:2");
  std::map<std::string, std::vector<ScalarEvent>> by_tag;
  for (const auto& s : file.scalars) by_tag[s.tag].push_back(s);
  for (const char* tag : {"step/loss", "step/lr", "step/loss_scale", "step/images_per_second"}) {
    BOOST_TEST_CONTEXT(tag) {
      BOOST_REQUIRE(by_tag[tag].size() == 2u * batches);
      for (int i = 0; i < 2 * batches; ++i) BOOST_TEST(by_tag[tag][i].step == i + 1);
    }
  }
  for (const auto& s : by_tag["step/lr"]) BOOST_TEST(s.value == 0.05f);
  for (const auto& s : by_tag["step/loss_scale"]) BOOST_TEST(s.value == 1.0f);
  for (const auto& s : by_tag["step/loss"]) BOOST_TEST((std::isfinite(s.value) && s.value > 0));
  const auto epoch_values = [&](const std::string& tag) {
    BOOST_REQUIRE(by_tag[tag].size() == 2u);
    BOOST_TEST(by_tag[tag][0].step == 1);
    BOOST_TEST(by_tag[tag][1].step == 2);
    return std::vector<float>{by_tag[tag][0].value, by_tag[tag][1].value};
  };
  for (int e = 0; e < 2; ++e) {
    BOOST_TEST(epoch_values("train/loss")[e] == static_cast<float>(results[e].train_loss));
    BOOST_TEST(epoch_values("train/accuracy")[e] == static_cast<float>(results[e].train.at("accuracy")));
    BOOST_TEST(epoch_values("val/loss")[e] == static_cast<float>(results[e].val_loss));
    BOOST_TEST(epoch_values("val/accuracy")[e] == static_cast<float>(results[e].val.at("accuracy")));
    BOOST_TEST(epoch_values("epoch/lr")[e] == 0.05f);
    BOOST_TEST(epoch_values("epoch/loss_scale")[e] == 1.0f);
    BOOST_TEST(epoch_values("epoch/images_per_second")[e] == static_cast<float>(results[e].images_per_second));
  }
}

BOOST_AUTO_TEST_CASE(timeline_has_each_steps_spans_on_one_rank) {
  const auto path = temp_dir("trainer_logs") / "timeline.json";
  auto model = small_net();
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.05});
  Trainer<Sequential<float>> trainer(model, sgd, {.progress_bar = false, .print_epochs = false, .timeline = path.string()});
  auto train = random_batches(3);
  trainer.fit(train, 2);
  const ChromeTrace trace = read_chrome_trace(path);
  for (const char* name : {"data", "forward", "backward", "gradient wait", "optimizer"})
    BOOST_TEST(trace.named(name, 0).size() == 2u * batches, name);
  for (const auto& span : trace.spans) {
    BOOST_TEST(span.pid == 0);
    BOOST_TEST(span.dur >= 0);
    BOOST_TEST(span.ts >= 0);
  }
  BOOST_TEST(trace.track_names.at({0, 0}) == "compute");
  BOOST_TEST(trace.track_names.at({0, 1}) == "data");
  // Each step's forward ends before its backward starts, and its optimizer step after that.
  const auto forward = trace.named("forward", 0), backward = trace.named("backward", 0),
             optimizer = trace.named("optimizer", 0);
  for (std::size_t i = 0; i < forward.size(); ++i) {
    BOOST_TEST(forward[i].end() <= backward[i].ts);
    BOOST_TEST(backward[i].end() <= optimizer[i].ts);
  }
  // Off (the default), fit writes nothing and records nothing.
  BOOST_TEST(active_timeline() == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
