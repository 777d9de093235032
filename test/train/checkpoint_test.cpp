// Training checkpoints (train/checkpoint.hpp, Trainer::save_checkpoints / load_checkpoint): a run
// of 2 epochs and a run stopped by SIGUSR1 after 1.5 epochs and resumed in a fresh Trainer (the
// global generator's and the model's own generator's states restored) end with bit-identical weights, epoch losses and learning rate, in float and under
// MixedPrecision<Fp16>; a save killed half-way leaves the previous checkpoint loadable; the last N
// and the best are kept; a checkpoint of another model or a corrupt manifest is refused with the
// file and the mismatch named, and nothing on disk changes.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <ptrain/data/loader.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/schedule.hpp>
#include <ptrain/optim/scheduler.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/mixed_precision.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/blobs.hpp"
#include "../common/child_process.hpp"
#include "../common/files.hpp"

using namespace ptrain;
namespace fs = std::filesystem;

BOOST_AUTO_TEST_SUITE(checkpoint_test)

namespace {

constexpr TrainerOptions quiet{.progress_bar = false, .print_epochs = false};
constexpr std::int64_t batch = 8, batches_per_epoch = 6;

// Two blobs, shuffled each epoch by the loader (so resuming mid-epoch must find the same order).
TensorDataset blobs() { return test::class_blobs(batch * batches_per_epoch, 2); }

// With two dropouts, so the RNGs' states are part of what must resume: one draws from the global
// generator, the other from a generator the model owns (as TransformerLM's and ALBERT's layers do),
// seeded from the model's seed.
template <class T>
struct DropoutNet : Sequential<T> {
  explicit DropoutNet(std::uint64_t seed) : own(std::make_unique<Rng>(seed + 7)) {
    this->push_back("0", make<Linear<T>>(4, 16));
    this->push_back("1", make<ReLU<T>>());
    this->push_back("2", make<Dropout<T>>(0.2));
    this->push_back("3", make<Dropout<T>>(0.3, own.get()));
    this->push_back("4", make<Linear<T>>(16, 2));
    this->register_generator("own_rng", own.get());
  }
  std::unique_ptr<Rng> own;
};
template <class T>
std::shared_ptr<Sequential<T>> make_net(std::uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<DropoutNet<T>>(seed);
}

template <class T>
std::map<std::string, std::vector<float>> weights_of(Module<T>& m) {
  std::map<std::string, std::vector<float>> out;
  for (auto& [name, p] : m.named_parameters()) out[name] = tensor_cast<float>(p.value()).to_vector();
  return out;
}

struct Run {
  std::vector<double> losses;  // per epoch, of the epochs this fit ran
  std::map<std::string, std::vector<float>> weights;
  double lr = 0;
  bool preempted = false;
};

// The CSV log of the run checkpointing into dir (dir/log.csv), its timings (images_per_second,
// seconds) left out: what a resumed run's log must equal.
std::vector<std::vector<std::string>> log_without_timings(const fs::path& dir) {
  std::ifstream in(dir / "log.csv");
  std::vector<std::vector<std::string>> rows;
  std::vector<std::size_t> timings;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields, kept;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
    if (rows.empty())
      for (std::size_t i = 0; i < fields.size(); ++i)
        if (fields[i] == "images_per_second" || fields[i] == "seconds") timings.push_back(i);
    for (std::size_t i = 0; i < fields.size(); ++i)
      if (std::find(timings.begin(), timings.end(), i) == timings.end()) kept.push_back(fields[i]);
    rows.push_back(kept);
  }
  return rows;
}

// A run in T (float, or half under MixedPrecision<Fp16>): `stop_at_step` > 0 raises SIGUSR1 there;
// `resume` loads the latest checkpoint under dir first (into a model made from another seed). Its
// CSV log is dir/log.csv.
template <class T>
Run train(const fs::path& dir, std::int64_t stop_at_step, bool resume) {
  auto model = make_net<T>(resume ? 99 : 1);
  const TensorDataset data = blobs();
  DataLoader loader(data, LoaderOptions{.batch_size = batch, .shuffle = true, .seed = 5});
  Run run;
  const auto fit = [&](auto& trainer, auto& sgd) {
    Scheduler schedule(*sgd, CosineAnnealingLR{.base_lr = 0.2, .t_max = 2 * batches_per_epoch});
    trainer.on_step_end([&](std::int64_t step) {
      schedule.step();
      if (step == stop_at_step) std::raise(SIGUSR1);
    });
    trainer.checkpoint_scheduler(schedule);
    trainer.save_checkpoints({.directory = dir, .keep_last = 3});
    if (resume) BOOST_REQUIRE(trainer.resume_latest(dir));
    for (const auto& r : trainer.fit(loader, 2)) run.losses.push_back(r.train_loss);
    run.weights = weights_of<T>(*model);
    run.lr = sgd->lr();
    run.preempted = trainer.preempted();
  };
  TrainerOptions options = quiet;
  options.csv_log = (dir / "log.csv").string();
  if constexpr (std::is_same_v<T, float>) {
    auto sgd = make<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.2, .momentum = 0.9});
    Trainer<Sequential<T>> trainer(model, sgd, options);
    fit(trainer, sgd);
  } else {
    MixedPrecision<Fp16> amp(*model, {.initial_scale = 1024, .scale_window = 4});
    auto sgd = make<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.2, .momentum = 0.9});
    Trainer<Sequential<T>, MixedPrecision<Fp16>> trainer(model, sgd, options, amp);
    fit(trainer, sgd);
  }
  return run;
}

template <class T>
void check_resume_is_bit_identical(const std::string& name) {
  const fs::path whole = test::temp_dir(name + "_whole"), cut = test::temp_dir(name + "_cut");
  const Run reference = train<T>(whole, 0, false);
  const Run stopped = train<T>(cut, batches_per_epoch * 3 / 2, false);
  BOOST_TEST(log_without_timings(cut).size() == 2u);  // the header and epoch 1
  BOOST_TEST(stopped.preempted);
  BOOST_REQUIRE_EQUAL(stopped.losses.size(), 1u);  // epoch 2 was cut at its middle
  BOOST_TEST(fs::exists(cut / ("step-" + std::to_string(batches_per_epoch * 3 / 2)) / "manifest.txt"));
  const Run resumed = train<T>(cut, 0, true);
  BOOST_TEST(!resumed.preempted);
  BOOST_REQUIRE_EQUAL(reference.losses.size(), 2u);
  BOOST_REQUIRE_EQUAL(resumed.losses.size(), 1u);  // the rest of epoch 2
  BOOST_TEST(stopped.losses[0] == reference.losses[0]);
  BOOST_TEST(resumed.losses[0] == reference.losses[1]);  // bit for bit, the first half's sums included
  BOOST_TEST(resumed.lr == reference.lr);
  BOOST_TEST((resumed.weights == reference.weights), "the resumed run's weights differ from the whole run's");
  // The resumed run continued the stopped one's log: it reads as the whole run's.
  const auto whole_log = log_without_timings(whole);
  BOOST_REQUIRE_EQUAL(whole_log.size(), 3u);
  BOOST_TEST((log_without_timings(cut) == whole_log), "the resumed run's CSV log differs from the whole run's");
}

// The files under dir with their sizes and contents: what must not change.
std::map<std::string, test::Bytes> snapshot(const fs::path& dir) {
  std::map<std::string, test::Bytes> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = test::read_bytes(e.path());
  return out;
}

// An Sgd whose state() (called while a checkpoint is written, after the weights) can pause: the
// moment a test kills the writer.
struct PausingSgd : Sgd<float> {
  using Sgd<float>::Sgd;
  std::function<void()> on_state;
  OptimizerState<float> state() const {
    if (on_state) on_state();
    return Sgd<float>::state();
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_run_stopped_at_one_and_a_half_epochs_resumes_bit_identically) {
  check_resume_is_bit_identical<float>("ckpt_float");
}

BOOST_AUTO_TEST_CASE(mixed_precision_resumes_its_masters_and_loss_scale_bit_identically) {
  check_resume_is_bit_identical<half>("ckpt_fp16");
}

BOOST_AUTO_TEST_CASE(the_last_n_and_the_best_are_kept) {
  const fs::path dir = test::temp_dir("ckpt_keep");
  auto model = make_net<float>(1);
  auto sgd = make<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.2});
  const TensorDataset data = blobs();
  DataLoader loader(data, LoaderOptions{.batch_size = batch, .shuffle = true});
  Trainer<Sequential<float>> trainer(model, sgd, quiet);
  trainer.save_checkpoints({.directory = dir, .every_steps = 4, .keep_last = 2, .best_metric = "train_loss"});
  const auto results = trainer.fit(loader, 3);
  std::vector<std::string> kept;
  for (const auto& [step, path] : checkpoint::list(dir)) kept.push_back(path.filename().string());
  // Steps 4, 6 (epoch 1), 8, 12 (epoch 2), 16, 18 (epoch 3): the last two, and the best epoch's.
  const auto lowest = std::min_element(results.begin(), results.end(),
                                       [](auto& a, auto& b) { return a.train_loss < b.train_loss; });
  const auto best = static_cast<std::size_t>(lowest - results.begin());
  std::vector<std::string> expected;
  if (best < 2) expected.push_back("step-" + std::to_string(6 * (best + 1)));
  expected.push_back("step-16");
  expected.push_back("step-18");
  BOOST_TEST(kept == expected, boost::test_tools::per_element());
  for (const auto& e : fs::directory_iterator(dir)) BOOST_TEST(e.path().filename().string().rfind(".tmp", 0) != 0);
}

BOOST_AUTO_TEST_CASE(a_save_killed_half_way_leaves_the_previous_checkpoint_loadable) {
  const fs::path dir = test::temp_dir("ckpt_killed");
  const TensorDataset data = blobs();
  {
    test::ChildProcess writer([&](auto ready) {
      auto model = make_net<float>(1);
      auto sgd = std::make_shared<PausingSgd>(model->parameters(), SgdOptions{.lr = 0.2, .momentum = 0.9});
      int saves = 0;
      sgd->on_state = [&] {
        if (++saves < 2) return;
        ready();  // step 4's weights are written, its optimizer state is not
        std::this_thread::sleep_for(std::chrono::seconds(60));
      };
      DataLoader loader(data, LoaderOptions{.batch_size = batch});
      Trainer<Sequential<float>> trainer(model, sgd, quiet);
      trainer.save_checkpoints({.directory = dir, .every_steps = 2, .every_epochs = 0});
      trainer.fit(loader, 1);
    });
    BOOST_REQUIRE(writer.wait_ready(std::chrono::seconds(60)));
    const int status = writer.end_with(SIGKILL);
    BOOST_TEST(WIFSIGNALED(status));
  }
  BOOST_TEST(fs::exists(dir / ".tmp-step-4" / "model.safetensors"));
  BOOST_TEST(!fs::exists(dir / "step-4"));
  BOOST_REQUIRE(checkpoint::latest(dir).has_value());
  BOOST_TEST(checkpoint::latest(dir)->filename() == "step-2");

  // The reference: 2 steps of the same run, uninterrupted.
  auto reference = make_net<float>(1);
  {
    auto sgd = make<Sgd<float>>(reference->parameters(), SgdOptions{.lr = 0.2, .momentum = 0.9});
    Trainer<Sequential<float>> trainer(reference, sgd, quiet);
    DataLoader loader(data, LoaderOptions{.batch_size = batch});
    std::int64_t done = 0;
    for (const auto& b : loader) {
      if (done++ == 2) break;
      trainer.train_step(b.inputs, b.targets);
    }
  }
  auto model = make_net<float>(99);
  auto sgd = make<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.2, .momentum = 0.9});
  Trainer<Sequential<float>> trainer(model, sgd, quiet);
  trainer.save_checkpoints({.directory = dir, .every_steps = 2, .every_epochs = 0});
  BOOST_REQUIRE(trainer.resume_latest(dir));
  BOOST_TEST(trainer.global_step() == 2);
  BOOST_TEST((weights_of<float>(*model) == weights_of<float>(*reference)));
  // Training on saves step 4 again: the stale staging directory is replaced, not reused.
  DataLoader loader(data, LoaderOptions{.batch_size = batch});
  trainer.fit(loader, 1);
  BOOST_TEST(fs::exists(dir / "step-4" / "optimizer.safetensors"));
  BOOST_TEST(!fs::exists(dir / ".tmp-step-4"));
}

BOOST_AUTO_TEST_CASE(another_model_or_a_corrupt_manifest_is_refused_and_nothing_changes_on_disk) {
  const fs::path dir = test::temp_dir("ckpt_refused");
  const TensorDataset data = blobs();
  {
    auto model = make_net<float>(1);
    auto sgd = make<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.2});
    Trainer<Sequential<float>> trainer(model, sgd, quiet);
    trainer.save_checkpoints({.directory = dir});
    DataLoader loader(data, LoaderOptions{.batch_size = batch});
    trainer.fit(loader, 1);
  }
  const fs::path saved = *checkpoint::latest(dir);
  const auto before = snapshot(dir);

  manual_seed(1);
  auto other = std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Linear<float>>(4, 8), make<ReLU<float>>(), make<Linear<float>>(8, 2)});
  auto other_sgd = make<Sgd<float>>(other->parameters(), SgdOptions{.lr = 0.2});
  Trainer<Sequential<float>> other_trainer(other, other_sgd, quiet);
  const std::string wrong_model = test::error_of([&] { other_trainer.resume_latest(dir); });
  BOOST_TEST(test::contains(wrong_model, (saved / "model.safetensors").string()), wrong_model);
  BOOST_TEST(test::contains(wrong_model, "shape mismatch: 0.weight: file has [16, 4], model expects [8, 4]"),
             wrong_model);
  BOOST_TEST((snapshot(dir) == before));

  auto model = make_net<float>(1);
  auto sgd = make<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.2});
  Trainer<Sequential<float>> trainer(model, sgd, quiet);
  const fs::path manifest = saved / "manifest.txt";
  const test::Bytes good = test::read_bytes(manifest);
  std::string text(good.begin(), good.end());
  text.replace(text.find("\nparts 1"), 8, "\nparts x");
  test::write_bytes(manifest, std::vector<char>(text.begin(), text.end()));
  const std::string corrupt = test::error_of([&] { trainer.resume_latest(dir); });
  BOOST_TEST(
      test::contains(corrupt, manifest.string() + ": 'parts' is 'x', expected an integer from 1 to 2147483647"),
      corrupt);
  const auto before_parts = static_cast<std::ptrdiff_t>(text.find("parts"));
  test::write_bytes(manifest, std::vector<char>(text.begin(), text.begin() + before_parts));
  const std::string truncated = test::error_of([&] { trainer.resume_latest(dir); });
  BOOST_TEST(test::contains(truncated, manifest.string() + ": the manifest has no '"), truncated);
  test::write_bytes(manifest, good);
  BOOST_TEST((snapshot(dir) == before));
}

BOOST_AUTO_TEST_SUITE_END()
