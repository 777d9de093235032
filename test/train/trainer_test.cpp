#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <limits>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/stdout_capture.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(trainer_test)

namespace {

struct Batch {
  Tensor<float> inputs;
  std::vector<std::int64_t> targets;
};

// The smallest loader the Trainer accepts: set_epoch, size, and iteration over batches.
struct VectorLoader {
  std::vector<Batch> batches;
  int epochs_seen = 0;
  void set_epoch(int) { ++epochs_seen; }
  std::size_t size() const { return batches.size(); }
  auto begin() const { return batches.begin(); }
  auto end() const { return batches.end(); }
};

// Two Gaussian blobs, class = sign of the first coordinate.
VectorLoader blobs(int batches, int batch_size, std::uint64_t seed) {
  Rng rng(seed);
  VectorLoader loader;
  for (int b = 0; b < batches; ++b) {
    Batch batch{Tensor<float>({batch_size, 2}), {}};
    for (int i = 0; i < batch_size; ++i) {
      const std::int64_t label = static_cast<std::int64_t>(rng.below(2));
      batch.inputs[2 * i] = static_cast<float>((label ? 2.0 : -2.0) + rng.normal(0, 0.5));
      batch.inputs[2 * i + 1] = static_cast<float>(rng.normal());
      batch.targets.push_back(label);
    }
    loader.batches.push_back(batch);
  }
  return loader;
}

// Records the order in which the Trainer reaches its named points.
struct RecordingPolicy {
  std::vector<std::string>* calls;
  bool skip_first_step = false;
  void setup(Module<float>&) { calls->push_back("setup"); }
  bool before_optimizer_step(Module<float>& model) {
    calls->push_back("before_optimizer_step");
    for (auto& p : model.parameters()) BOOST_TEST(p.grad().defined());
    if (skip_first_step) {
      skip_first_step = false;
      return false;
    }
    return true;
  }
  void after_optimizer_step(Module<float>&) { calls->push_back("after_optimizer_step"); }
  void reduce(std::span<double>) { calls->push_back("reduce"); }
};

std::shared_ptr<Sequential<float>> two_linear_layers() {
  manual_seed(5);
  return std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Linear<float>>(2, 3), make<Linear<float>>(3, 2)});
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// A NaN in the second layer's weights (loaded from a bad file, say) ends training at the first step,
// naming it and the first parameter whose gradient the NaN reached.
BOOST_AUTO_TEST_CASE(nan_loss_stops_training_naming_step_epoch_rank_and_parameter) {
  auto model = two_linear_layers();
  model->named_parameters()[2].second.value()[1] = std::numeric_limits<float>::quiet_NaN();  // 1.weight
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.1});
  Trainer<Sequential<float>> trainer(model, sgd, {.progress_bar = false, .print_epochs = false});
  auto train = blobs(3, 8, 1);
  std::string what;
  try {
    trainer.fit(train, 1);
  } catch (const Error& e) {
    what = e.what();
  }
  BOOST_TEST(contains(what, "Trainer: the loss is nan at step 1 (epoch 1, batch 1) on rank 0, and the gradient of "
                            "'0.weight' holds 6 inf or NaN values of 6"),
             what);
  BOOST_TEST(contains(what, "TrainerOptions::terminate_on_nan"), what);
  BOOST_TEST(trainer.global_step() == 0);
}

// An inf input: found even where the step's first micro-batch was the non-finite one (gradient
// accumulation), and outside fit (no epoch in the message).
BOOST_AUTO_TEST_CASE(an_inf_input_stops_training_under_accumulation) {
  auto model = two_linear_layers();
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.1});
  Trainer<Sequential<float>> trainer(model, sgd, {.progress_bar = false, .print_epochs = false, .accumulation_steps = 2});
  auto data = blobs(2, 8, 2);
  Tensor<float> huge = data.batches[0].inputs.clone();
  huge[0] = std::numeric_limits<float>::infinity();
  trainer.train_step(huge, data.batches[0].targets);
  BOOST_CHECK_EXCEPTION(trainer.train_step(data.batches[1].inputs, data.batches[1].targets), Error, [](const Error& e) {
    const std::string what = e.what();
    BOOST_TEST_MESSAGE(what);
    return contains(what, "Trainer: the loss is ") && contains(what, " at step 1 on rank 0, and the gradient of '0.");
  });
}

// terminate_on_nan = false skips the step (weights untouched, counted, said once) and trains on; the
// epoch line keeps its validation fields.
BOOST_AUTO_TEST_CASE(non_finite_steps_are_skipped_when_asked) {
  auto model = two_linear_layers();
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.1});
  Trainer<Sequential<float>> trainer(model, sgd, {.progress_bar = false, .terminate_on_nan = false});
  auto train = blobs(3, 8, 3);
  train.batches[1].inputs[0] = std::numeric_limits<float>::quiet_NaN();
  auto val = blobs(2, 8, 4);
  std::vector<Tensor<float>> weights_after;
  trainer.on_step_end([&](std::int64_t) { weights_after.push_back(model->parameters()[0].value().clone()); });
  test::StdoutCapture capture;
  const auto results = trainer.fit(train, &val, 1);
  const std::string printed = capture.finish();
  BOOST_TEST(trainer.skipped_steps() == 1);
  BOOST_TEST(trainer.global_step() == 3);
  BOOST_REQUIRE(weights_after.size() == 3u);
  BOOST_TEST((weights_after[1].array() == weights_after[0].array()).all());
  BOOST_TEST(!(weights_after[2].array() == weights_after[1].array()).all());
  for (const auto& p : model->parameters()) BOOST_TEST(p.value().array().isFinite().all());
  BOOST_TEST(contains(printed, "Trainer: skipping the optimizer step: the loss is nan at step 2 (epoch 1, batch 2) on rank 0"),
             printed);
  BOOST_TEST(contains(printed, " val_loss "), printed);
  BOOST_TEST(contains(printed, " val_accuracy "), printed);
  BOOST_TEST(std::isfinite(results.back().val_loss));
}

BOOST_AUTO_TEST_CASE(fit_learns_separable_blobs_and_writes_csv) {
  manual_seed(3);
  auto model = std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Linear<float>>(2, 2)});
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.1});
  const auto csv = std::filesystem::temp_directory_path() / "ptrain_trainer_test.csv";
  Trainer<Sequential<float>> trainer(model, sgd, {.csv_log = csv.string(), .progress_bar = false, .print_epochs = false});
  auto train = blobs(20, 16, 1);
  auto val = blobs(5, 16, 2);
  auto results = trainer.fit(train, &val, 3);
  BOOST_TEST(results.size() == 3u);
  BOOST_TEST(results.back().val.at("accuracy") > 0.95);
  BOOST_TEST(results.back().train_loss < results.front().train_loss);
  BOOST_TEST(train.epochs_seen == 3);
  BOOST_TEST(trainer.global_step() == 60);
  std::ifstream in(csv);
  std::string header, line;
  std::getline(in, header);
  BOOST_TEST(header == "epoch,train_loss,train_accuracy,val_loss,val_accuracy,images_per_second,seconds,lr");
  int rows = 0;
  while (std::getline(in, line)) ++rows;
  BOOST_TEST(rows == 3);
  std::filesystem::remove(csv);
}

BOOST_AUTO_TEST_CASE(policies_are_called_at_their_points_in_order) {
  std::vector<std::string> calls;
  auto model = std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Linear<float>>(2, 2)});
  auto before = model->parameters()[0].value().clone();
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.1});
  Trainer<Sequential<float>, RecordingPolicy> trainer(model, sgd, {.progress_bar = false, .print_epochs = false},
                                                      RecordingPolicy{&calls, true});
  auto data = blobs(1, 8, 4);
  trainer.train_step(data.batches[0].inputs, data.batches[0].targets);
  // A step the policy vetoes (an fp16 overflow, say) leaves the weights untouched.
  BOOST_TEST((model->parameters()[0].value().array() == before.array()).all());
  trainer.train_epoch(data, 0);
  const std::vector<std::string> expected{"setup", "before_optimizer_step", "after_optimizer_step",
                                          "before_optimizer_step", "after_optimizer_step", "reduce"};
  BOOST_TEST(calls == expected, boost::test_tools::per_element());
  BOOST_TEST(!(model->parameters()[0].value().array() == before.array()).all());
}

// Records its before_optimizer_step and after_optimizer_step under its tag.
template <char Tag>
struct TaggedPolicy {
  std::vector<std::string>* calls;
  bool before_optimizer_step(Module<float>&) {
    calls->push_back(std::string("before ") + Tag);
    return true;
  }
  void after_optimizer_step(Module<float>&) { calls->push_back(std::string("after ") + Tag); }
};

// after_optimizer_step unwinds: the policy listed last, nearest the optimizer, goes first
// (MixedPrecision rounds its masters before Sharded, listed before it, gathers the weights).
BOOST_AUTO_TEST_CASE(after_optimizer_step_runs_in_reverse_policy_order) {
  std::vector<std::string> calls;
  auto model = two_linear_layers();
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.1});
  Trainer<Sequential<float>, TaggedPolicy<'a'>, TaggedPolicy<'b'>> trainer(
      model, sgd, {.progress_bar = false, .print_epochs = false}, TaggedPolicy<'a'>{&calls},
      TaggedPolicy<'b'>{&calls});
  auto data = blobs(1, 8, 2);
  trainer.train_step(data.batches[0].inputs, data.batches[0].targets);
  const std::vector<std::string> expected{"before a", "before b", "after b", "after a"};
  BOOST_TEST(calls == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
