#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ptrain/nn/linear.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/callbacks/early_stopping.hpp>
#include <ptrain/train/callbacks/model_checkpoint.hpp>
#include <ptrain/train/callbacks/reduce_lr_on_plateau.hpp>
#include <ptrain/train/callbacks/weight_ema.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/files.hpp"

using namespace ptrain;
using namespace ptrain::test;

BOOST_AUTO_TEST_SUITE(callback_test)

namespace {

template <class T>
struct Batch {
  Tensor<T> inputs;
  std::vector<std::int64_t> targets;
};

// Batches in a fixed order; a loader for validation may give another list on each pass (passes),
// which is how a test scripts the validation metric.
template <class T>
struct ScriptedLoader {
  std::vector<std::vector<Batch<T>>> passes;
  mutable std::size_t pass = 0;
  void set_epoch(int) {}
  std::size_t size() const { return passes.front().size(); }
  auto begin() const { return passes[std::min(pass, passes.size() - 1)].begin(); }
  auto end() const { return passes[std::min(pass++, passes.size() - 1)].end(); }
};

template <class T>
std::vector<Batch<T>> blob_batches(int batches, int batch_size, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Batch<T>> out;
  for (int b = 0; b < batches; ++b) {
    Batch<T> batch{Tensor<T>({batch_size, 2}), {}};
    for (int i = 0; i < batch_size; ++i) {
      const std::int64_t label = static_cast<std::int64_t>(rng.below(2));
      batch.inputs[2 * i] = static_cast<T>((label ? 1.0 : -1.0) + rng.normal(0, 1));
      batch.inputs[2 * i + 1] = static_cast<T>(rng.normal());
      batch.targets.push_back(label);
    }
    out.push_back(batch);
  }
  return out;
}
template <class T>
ScriptedLoader<T> loader_of(std::vector<Batch<T>> batches) {
  return {{std::move(batches)}};
}

template <class T>
struct Setup {
  std::shared_ptr<Linear<T>> model;
  std::shared_ptr<Sgd<T>> sgd;
  explicit Setup(double lr) {
    manual_seed(11);
    model = std::make_shared<Linear<T>>(2, 2);
    sgd = std::make_shared<Sgd<T>>(model->parameters(), SgdOptions{.lr = lr, .momentum = 0.9});
  }
};

TrainerOptions quiet(std::int64_t val_every_steps = 0) {
  return {.progress_bar = false, .print_epochs = false, .val_every_steps = val_every_steps};
}

// Validation passes whose accuracy under the (frozen) model is accuracies[k] on pass k: the
// targets agree with the model's prediction on that share of 20 examples.
ScriptedLoader<float> scripted_accuracy(Linear<float>& model, const std::vector<double>& accuracies) {
  const auto batch = blob_batches<float>(1, 20, 4).front();
  NoGradGuard no_grad;
  const Tensor<float> logits = model.forward(Var<float>(batch.inputs)).value();
  ScriptedLoader<float> loader;
  for (double accuracy : accuracies) {
    Batch<float> pass{batch.inputs, {}};
    for (int i = 0; i < 20; ++i) {
      const std::int64_t predicted = logits[2 * i + 1] > logits[2 * i] ? 1 : 0;
      pass.targets.push_back(i < std::lround(accuracy * 20) ? predicted : 1 - predicted);
    }
    loader.passes.push_back({pass});
  }
  return loader;
}

// Every point, recorded in the order reached.
struct Recorder {
  std::vector<std::string> calls;
  void on_fit_start(TrainerView&) { calls.push_back("fit_start"); }
  void on_fit_end(TrainerView&) { calls.push_back("fit_end"); }
  void on_train_epoch_start(TrainerView&, int epoch) { calls.push_back("epoch_start " + std::to_string(epoch)); }
  void on_train_epoch_end(TrainerView&, const EpochResult& r) { calls.push_back("epoch_end " + std::to_string(r.epoch)); }
  void on_train_batch_start(TrainerView&, std::int64_t b) { calls.push_back("batch_start " + std::to_string(b)); }
  void on_train_batch_end(TrainerView&, std::int64_t b, const EpochTotals& t) {
    BOOST_TEST(t.samples == 4);
    calls.push_back("batch_end " + std::to_string(b));
  }
  void on_before_optimizer_step(TrainerView&) { calls.push_back("before_step"); }
  void on_step_end(TrainerView& v, std::int64_t step) {
    BOOST_TEST(v.global_step() == step);
    calls.push_back("step_end " + std::to_string(step));
  }
  void on_validation_start(TrainerView&) { calls.push_back("val_start"); }
  void on_validation_end(TrainerView&, const ValidationResult& r) {
    calls.push_back("val_end " + std::to_string(r.step) + (r.epoch_end ? " epoch_end" : ""));
  }
  void on_exception(TrainerView&, const std::exception& e) { calls.push_back(std::string("exception ") + e.what()); }
};

std::string joined(const std::vector<std::string>& calls) {
  std::string text;
  for (const auto& c : calls) text += c + "; ";
  return text;
}

std::vector<std::filesystem::path> step_directories(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& [step, path] : checkpoint::list(dir)) out.push_back(path.filename());
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(contract_accepts_the_archetype_and_refuses_a_wrong_point) {
  static_assert(Callback<CallbackArchetype>);
  static_assert(Callback<EarlyStopping> && Callback<ModelCheckpoint> && Callback<ReduceLROnPlateau>);
  static_assert(Callback<WeightEma<float>>);
  struct WrongSignature {
    void on_step_end(TrainerView&) {}  // lacks the step
  };
  struct StateWithoutLoad {
    CallbackState state() const { return {}; }
  };
  struct NoPoint {
    void on_stepend(TrainerView&, std::int64_t) {}
  };
  static_assert(!Callback<WrongSignature> && !Callback<StateWithoutLoad> && !Callback<NoPoint>);
  BOOST_TEST(true);
}

BOOST_AUTO_TEST_CASE(points_run_in_order_with_validation_every_two_steps) {
  Setup<float> s(0.1);
  Trainer<Linear<float>> trainer(s.model, s.sgd, quiet(2));
  auto recorder = trainer.add_callback(Recorder{});
  auto train = loader_of(blob_batches<float>(3, 4, 1)), val = loader_of(blob_batches<float>(1, 4, 2));
  trainer.fit(train, &val, 2);
  const std::string expected =
      "fit_start; epoch_start 1; "
      "batch_start 0; before_step; step_end 1; batch_end 0; "
      "batch_start 1; before_step; step_end 2; batch_end 1; val_start; val_end 2; "
      "batch_start 2; before_step; step_end 3; batch_end 2; val_start; val_end 3 epoch_end; epoch_end 1; "
      "epoch_start 2; batch_start 0; before_step; step_end 4; batch_end 0; val_start; val_end 4; "
      "batch_start 1; before_step; step_end 5; batch_end 1; "
      "batch_start 2; before_step; step_end 6; batch_end 2; val_start; val_end 6; epoch_end 2; fit_end; ";
  BOOST_TEST(joined(recorder->calls) == expected);
}

BOOST_AUTO_TEST_CASE(an_exception_reaches_on_exception_and_goes_on) {
  Setup<float> s(0.1);
  Trainer<Linear<float>> trainer(s.model, s.sgd, quiet());
  auto recorder = trainer.add_callback(Recorder{});
  auto train = loader_of(blob_batches<float>(1, 4, 1));
  train.passes.front().front().targets[0] = 7;  // not a class of two
  BOOST_CHECK_THROW(trainer.fit(train, 1), Error);
  BOOST_TEST(recorder->calls.back().rfind("exception ", 0) == 0);
}

BOOST_AUTO_TEST_CASE(validation_every_n_steps_equals_a_separate_evaluate_at_that_step) {
  Setup<float> s(0.2);
  Trainer<Linear<float>> trainer(s.model, s.sgd, quiet(3));
  struct Snapshot {
    Linear<float>* model;
    std::vector<std::pair<ValidationResult, std::vector<Tensor<float>>>> taken;
    void on_validation_end(TrainerView&, const ValidationResult& r) {
      std::vector<Tensor<float>> weights;
      for (auto& p : model->parameters()) weights.push_back(p.value().clone());
      taken.emplace_back(r, weights);
    }
  };
  auto snapshot = trainer.add_callback(Snapshot{s.model.get(), {}});
  auto train = loader_of(blob_batches<float>(5, 4, 1)), val = loader_of(blob_batches<float>(2, 8, 2));
  trainer.fit(train, &val, 2);
  BOOST_TEST_REQUIRE(snapshot->taken.size() == 5u);  // steps 3, 5 (epoch end), 6, 9, 10 (epoch end)
  std::vector<std::int64_t> steps;
  for (const auto& [r, weights] : snapshot->taken) steps.push_back(r.step);
  BOOST_TEST(steps == (std::vector<std::int64_t>{3, 5, 6, 9, 10}), boost::test_tools::per_element());
  for (const auto& [r, weights] : snapshot->taken) {
    auto params = s.model->parameters();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].value().copy_from(weights[i]);
    const EpochTotals again = trainer.evaluate(val);
    BOOST_TEST(again.loss() == r.loss);
    BOOST_TEST(trainer.metrics(again).at("accuracy") == r.metrics.at("accuracy"));
  }
}

BOOST_AUTO_TEST_CASE(early_stopping_stops_at_the_epoch_the_script_says) {
  Setup<float> s(0);  // frozen: the scripted targets set the validation accuracy
  Trainer<Linear<float>> trainer(s.model, s.sgd, quiet());
  auto stopper = trainer.add_callback(EarlyStopping(
      {.monitor = {.name = "val_accuracy", .mode = BestIs::higher, .min_delta = 0.06}, .patience = 2}));
  auto train = loader_of(blob_batches<float>(2, 4, 1));
  // best 0.75 at epoch 2; 0.8 is within min_delta of it; epoch 4 is the second check without improvement
  auto val = scripted_accuracy(*s.model, {0.5, 0.75, 0.8, 0.6, 1.0, 1.0});
  const auto results = trainer.fit(train, &val, 6);
  BOOST_TEST(results.size() == 4u);
  BOOST_TEST(trainer.stopped_early());
  BOOST_TEST(stopper->stopped_step() == 8);
  BOOST_TEST(std::abs(stopper->best() - 0.75) < 1e-9);
  BOOST_TEST(contains(trainer.stop_reason(), "val_accuracy has not improved"));
}

BOOST_AUTO_TEST_CASE(early_stopping_without_improvement_never_stops_a_run_that_improves) {
  Setup<float> s(0);
  Trainer<Linear<float>> trainer(s.model, s.sgd, quiet());
  trainer.add_callback(EarlyStopping({.monitor = {.name = "val_accuracy", .mode = BestIs::higher}, .patience = 1}));
  auto train = loader_of(blob_batches<float>(1, 4, 1));
  auto val = scripted_accuracy(*s.model, {0.5, 0.6, 0.7, 0.8});
  BOOST_TEST(trainer.fit(train, &val, 4).size() == 4u);
  BOOST_TEST(!trainer.stopped_early());
}

BOOST_AUTO_TEST_CASE(reduce_lr_on_plateau_cuts_the_rate_after_patience) {
  Setup<float> s(0);
  Trainer<Linear<float>> trainer(s.model, s.sgd, quiet());
  s.sgd->set_lr(1e-30);  // frozen in effect; a rate to cut
  auto plateau = trainer.add_callback(
      ReduceLROnPlateau({.monitor = {.name = "val_accuracy", .mode = BestIs::higher}, .factor = 0.5, .patience = 1}));
  auto train = loader_of(blob_batches<float>(1, 4, 1));
  // improve, then 1 bad (tolerated), 2 bad: cut; then 1 bad, 2 bad: cut again
  auto val = scripted_accuracy(*s.model, {0.5, 0.4, 0.4, 0.4, 0.4});
  trainer.fit(train, &val, 5);
  BOOST_TEST(plateau->reductions() == 2);
  BOOST_TEST(trainer.lr() == 1e-30 * 0.25, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(model_checkpoint_keeps_the_k_best_and_the_newest) {
  const auto dir = test_dir() / "model_checkpoint_top_k";
  std::filesystem::remove_all(dir);
  Setup<float> s(0.1);
  Trainer<Linear<float>> trainer(s.model, s.sgd, quiet());
  ModelCheckpoint keep({.directory = dir, .monitor = {.name = "val_loss"}, .top_k = 2});
  keep.on_fit_start(trainer.view());
  const auto batch = blob_batches<float>(1, 4, 1).front();
  const std::vector<double> losses{0.9, 0.5, 0.7, 0.3, 0.8, 0.6, 0.95};
  for (double loss : losses) {
    trainer.train_step(batch.inputs, batch.targets);
    keep.on_validation_end(trainer.view(), ValidationResult{.step = trainer.global_step(), .loss = loss});
  }
  // the two lowest: 0.3 (step 4) and 0.5 (step 2); the newest: step 7
  const std::vector<std::filesystem::path> expected{"step-2", "step-4", "step-7"};
  BOOST_TEST(step_directories(dir) == expected, boost::test_tools::per_element());
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    BOOST_TEST(entry.path().filename().string().rfind("step-", 0) == 0, entry.path());
  BOOST_TEST(checkpoint::Manifest::read(dir / "step-4" / checkpoint::manifest_name).metric == 0.3);
  trainer.load_checkpoint(dir / "step-7");
  BOOST_TEST(trainer.global_step() == 7);
}

BOOST_AUTO_TEST_CASE(a_prune_cut_short_leaves_the_checkpoints_loadable_and_is_finished_next_time) {
  const auto dir = test_dir() / "model_checkpoint_cut_short";
  std::filesystem::remove_all(dir);
  Setup<float> s(0.1);
  Trainer<Linear<float>> trainer(s.model, s.sgd, quiet());
  ModelCheckpoint keep({.directory = dir, .monitor = {.name = "val_loss"}, .top_k = 1});
  keep.on_fit_start(trainer.view());
  const auto batch = blob_batches<float>(1, 4, 1).front();
  for (double loss : {0.5, 0.4}) {
    trainer.train_step(batch.inputs, batch.targets);
    keep.on_validation_end(trainer.view(), ValidationResult{.step = trainer.global_step(), .loss = loss});
  }
  // What a kill between the rename and the removal leaves: a .pruned- folder, half removed.
  std::filesystem::create_directories(dir / ".pruned-step-1");
  std::filesystem::copy_file(dir / "step-2" / checkpoint::manifest_name, dir / ".pruned-step-1" / checkpoint::manifest_name);
  BOOST_TEST(checkpoint::latest(dir)->filename() == "step-2");
  trainer.train_step(batch.inputs, batch.targets);
  keep.on_validation_end(trainer.view(), ValidationResult{.step = trainer.global_step(), .loss = 0.6});
  BOOST_TEST(!std::filesystem::exists(dir / ".pruned-step-1"));
  const std::vector<std::filesystem::path> expected{"step-2", "step-3"};
  BOOST_TEST(step_directories(dir) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(weight_ema_equals_the_formula) {
  Setup<double> s(0.3);
  Trainer<Linear<double>> trainer(s.model, s.sgd, quiet());
  const double decay = 0.75;
  // Each step's weights, recorded before the average takes them (callbacks run in order).
  struct Weights {
    Linear<double>* model;
    std::vector<std::vector<double>> after_steps;
    void on_fit_start(TrainerView&) { record(); }
    void on_step_end(TrainerView&, std::int64_t) { record(); }
    void record() {
      std::vector<double> w;
      for (auto& p : model->parameters())
        for (std::int64_t i = 0; i < p.numel(); ++i) w.push_back(p.value()[i]);
      after_steps.push_back(w);
    }
  };
  auto weights = trainer.add_callback(Weights{s.model.get(), {}});
  auto ema = trainer.add_callback(WeightEma<double>(*s.model, decay));
  auto train = loader_of(blob_batches<double>(4, 4, 1));
  trainer.fit(train, 1);
  BOOST_TEST_REQUIRE(weights->after_steps.size() == 5u);
  std::vector<double> expected = weights->after_steps[0];
  for (std::size_t k = 1; k < 5; ++k)
    for (std::size_t i = 0; i < expected.size(); ++i)
      expected[i] = decay * expected[i] + (1 - decay) * weights->after_steps[k][i];
  std::vector<double> got;
  for (const auto& [name, p] : s.model->named_parameters())
    for (std::int64_t i = 0; i < p.numel(); ++i) got.push_back(ema->average(name)[i]);
  BOOST_TEST_REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) BOOST_TEST(std::abs(got[i] - expected[i]) <= 1e-12);
  BOOST_TEST(std::abs(got[0] - weights->after_steps[4][0]) > 1e-6);  // an average, not the last weights
  BOOST_TEST(ema->updates() == 4);
}

BOOST_AUTO_TEST_CASE(weight_ema_is_what_validation_sees_and_the_live_weights_come_back) {
  Setup<double> s(0.3);
  Trainer<Linear<double>> trainer(s.model, s.sgd, quiet());
  auto ema = trainer.add_callback(WeightEma<double>(*s.model, 0.5));
  struct SeenAtValidation {
    Linear<double>* model;
    std::vector<double> first;
    void on_validation_start(TrainerView&) { first.push_back(model->parameters()[0].value()[0]); }
  };
  auto seen = trainer.add_callback(SeenAtValidation{s.model.get(), {}});
  auto train = loader_of(blob_batches<double>(3, 4, 1)), val = loader_of(blob_batches<double>(1, 4, 2));
  trainer.fit(train, &val, 1);
  const std::string name = s.model->named_parameters()[0].first;
  BOOST_TEST(seen->first.at(0) == ema->average(name)[0]);
  BOOST_TEST(s.model->parameters()[0].value()[0] != ema->average(name)[0]);
}

BOOST_AUTO_TEST_CASE(callback_state_survives_resume_and_a_resumed_ema_equals_the_straight_run) {
  const auto dir = test_dir() / "callback_resume";
  std::filesystem::remove_all(dir);
  auto train_data = blob_batches<double>(3, 4, 1);
  const auto run = [&](int epochs, bool resume, bool save) {
    Setup<double> s(0.3);
    Trainer<Linear<double>> trainer(s.model, s.sgd, quiet());
    auto ema = trainer.add_callback(WeightEma<double>(*s.model, 0.6));
    auto stopper = trainer.add_callback(EarlyStopping({.monitor = {.name = "train_loss"}, .patience = 5}));
    if (save) trainer.save_checkpoints({.directory = dir});
    if (resume) BOOST_TEST_REQUIRE(trainer.resume_latest(dir));
    auto train = loader_of(train_data);
    trainer.fit(train, epochs);
    std::vector<double> averages;
    for (const auto& [name, p] : s.model->named_parameters())
      for (std::int64_t i = 0; i < p.numel(); ++i) averages.push_back(ema->average(name)[i]);
    return std::make_tuple(averages, ema->updates(), stopper->best());
  };
  const auto [straight, straight_updates, straight_best] = run(3, false, false);
  run(2, false, true);
  const auto [resumed, resumed_updates, resumed_best] = run(3, true, false);
  BOOST_TEST(resumed_updates == straight_updates);
  BOOST_TEST(resumed_best == straight_best);
  BOOST_TEST(resumed == straight, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(bad_options_are_refused_with_a_sentence) {
  BOOST_CHECK_EXCEPTION(EarlyStopping({.monitor = {.name = "accuracy"}}), Error,
                        [](const Error& e) { return contains(e.what(), "expected val_loss, train_loss"); });
  BOOST_CHECK_EXCEPTION(EarlyStopping({.patience = 0}), Error,
                        [](const Error& e) { return contains(e.what(), "patience 0"); });
  BOOST_CHECK_EXCEPTION(ReduceLROnPlateau({.factor = 1.5}), Error,
                        [](const Error& e) { return contains(e.what(), "factor 1.5"); });
  BOOST_CHECK_EXCEPTION(ModelCheckpoint({}), Error, [](const Error& e) { return contains(e.what(), "directory is empty"); });
  Setup<float> s(0.1);
  BOOST_CHECK_EXCEPTION(WeightEma<float>(*s.model, 1.0), Error,
                        [](const Error& e) { return contains(e.what(), "decay 1"); });
}

BOOST_AUTO_TEST_CASE(a_validation_metric_without_validation_is_refused) {
  Setup<float> s(0.1);
  Trainer<Linear<float>> trainer(s.model, s.sgd, quiet());
  trainer.add_callback(EarlyStopping({.monitor = {.name = "val_accuracy", .mode = BestIs::higher}}));
  auto train = loader_of(blob_batches<float>(1, 4, 1));
  BOOST_CHECK_EXCEPTION(trainer.fit(train, 1), Error,
                        [](const Error& e) { return contains(e.what(), "needs a validation loader"); });
}

BOOST_AUTO_TEST_SUITE_END()
