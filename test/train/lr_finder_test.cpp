#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/lr_finder.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/list_loader.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(lr_finder_test)

namespace {

constexpr std::int64_t features = 8, classes = 4;

// Four overlapping Gaussian blobs in 8 dimensions (unit spread, centres about 4 apart), times
// scale. At scale 4 a softmax classifier trained with SGD barely moves below 1e-3, learns from
// about 5e-3 to 0.1 (its loss falls fastest from 1e-2 to 5e-2) and diverges above about 1.
test::ListLoader<float> blobs(std::int64_t batches, std::int64_t batch_size, std::uint64_t seed, float scale = 1) {
  Rng rng(seed);
  std::vector<float> centres(classes * features);
  for (auto& c : centres) c = float(rng.normal());
  test::ListLoader<float> loader;
  for (std::int64_t b = 0; b < batches; ++b) {
    test::ListBatch<float> batch{Tensor<float>({batch_size, features}), {}};
    for (std::int64_t i = 0; i < batch_size; ++i) {
      const auto label = static_cast<std::int64_t>(rng.below(classes));
      batch.targets.push_back(label);
      for (std::int64_t f = 0; f < features; ++f)
        batch.inputs.data()[i * features + f] = scale * (centres[label * features + f] + float(rng.normal()));
    }
    loader.batches.push_back(std::move(batch));
  }
  return loader;
}

std::shared_ptr<Sequential<float>> classifier() {
  manual_seed(7);
  using Layers = std::initializer_list<std::pair<std::string, std::shared_ptr<Module<float>>>>;
  return make<Sequential<float>>(Layers{{"fc1", make<Linear<float>>(features, 16)},
                                        {"bn", make<BatchNorm2d<float>>(16)},
                                        {"relu", make<ReLU<float>>()},
                                        {"fc2", make<Linear<float>>(16, classes)}});
}

std::vector<std::vector<unsigned char>> bytes_of(Sequential<float>& model, const Sgd<float>& sgd) {
  std::vector<std::vector<unsigned char>> out;
  const auto add = [&out](const Tensor<float>& t) {
    const auto* p = reinterpret_cast<const unsigned char*>(t.data());
    out.emplace_back(p, p + t.numel() * sizeof(float));
  };
  for (auto& [name, p] : model.named_parameters()) add(p.value());
  for (auto& [name, b] : model.named_buffers()) add(*b);
  const OptimizerState<float> state = sgd.state();
  for (const auto& [key, t] : state.tensors) add(t);
  for (const auto& [key, value] : state.scalars) {
    const auto* p = reinterpret_cast<const unsigned char*>(&value);
    out.emplace_back(p, p + sizeof value);
  }
  return out;
}

const TrainerOptions quiet{.progress_bar = false, .print_epochs = false};

}  // namespace

BOOST_AUTO_TEST_CASE(weights_buffers_optimizer_state_and_generator_are_restored_bit_for_bit) {
  auto model = classifier();
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.05, .momentum = 0.9});
  Trainer<Sequential<float>> trainer(model, sgd, quiet);
  auto loader = blobs(4, 16, 1);
  for (const auto& batch : loader) trainer.train_step(batch.inputs, batch.targets);  // momentum buffers exist
  const auto before = bytes_of(*model, *sgd);
  BOOST_TEST(sgd->state().tensors.size() == model->named_parameters().size());
  Rng rng_before = global_rng();

  const LrFinderResult found = find_lr(trainer, loader, {.steps = 30});
  BOOST_TEST(found.points.size() > 3u);

  const auto after = bytes_of(*model, *sgd);
  BOOST_REQUIRE(after.size() == before.size());
  for (std::size_t i = 0; i < before.size(); ++i) BOOST_TEST(after[i] == before[i], "tensor or scalar " << i);
  BOOST_TEST(sgd->lr() == 0.05);
  BOOST_TEST((global_rng().engine() == rng_before.engine()));
  BOOST_TEST(model->is_training());
}

BOOST_AUTO_TEST_CASE(suggestion_lies_inside_the_sweep_in_the_decade_that_trains) {
  manual_seed(7);
  auto model = make<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{make<Linear<float>>(features, classes)});
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.01});
  Trainer<Sequential<float>> trainer(model, sgd, quiet);
  auto loader = blobs(16, 32, 2, 4);
  const LrFinderResult found = find_lr(trainer, loader);
  BOOST_REQUIRE(found.suggestion.has_value());
  const double lr = *found.suggestion;
  BOOST_TEST_MESSAGE("suggested " << lr << " of " << found.points.size() << " points, last lr " << found.points.back().lr);
  BOOST_TEST(lr >= found.points.front().lr);
  BOOST_TEST(lr <= found.points.back().lr);
  BOOST_TEST(lr >= 1e-2, "suggested " << lr);
  BOOST_TEST(lr <= 1e-1, "suggested " << lr);
  BOOST_TEST(found.diverged);  // past the good range the loss blows up before max_lr = 10
  BOOST_TEST(found.points.back().lr > 0.3);
  BOOST_TEST(found.points.back().lr < 10.0);
}

BOOST_AUTO_TEST_CASE(csv_has_a_row_per_step_at_most_and_the_plot_is_written_where_images_are) {
  const auto dir = std::filesystem::temp_directory_path() / "ptrain_lr_finder_test";
  std::filesystem::remove_all(dir);
  auto model = classifier();
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.01});
  Trainer<Sequential<float>> trainer(model, sgd, quiet);
  auto loader = blobs(8, 16, 3);
  const LrFinderResult found =
      find_lr(trainer, loader, {.steps = 40, .csv = dir / "lr.csv", .plot = dir / "lr.png"});
  std::ifstream csv(dir / "lr.csv");
  std::string line;
  std::getline(csv, line);
  BOOST_TEST(line == "lr,loss,smoothed_loss");
  std::size_t rows = 0;
  double first_lr = 0;
  while (std::getline(csv, line)) {
    if (rows == 0) first_lr = std::stod(line.substr(0, line.find(',')));
    ++rows;
  }
  BOOST_TEST(rows == found.points.size());
  BOOST_TEST(rows <= 40u);
  BOOST_TEST(first_lr == 1e-7, boost::test_tools::tolerance(1e-6));
#ifdef PTRAIN_HAS_IMAGE
  BOOST_TEST(found.plot_written);
  std::ifstream png(dir / "lr.png", std::ios::binary);
  char signature[8] = {};
  png.read(signature, 8);
  BOOST_TEST(std::memcmp(signature, "\x89PNG\r\n\x1a\n", 8) == 0);
#else
  BOOST_TEST(!found.plot_written);
  BOOST_TEST(!std::filesystem::exists(dir / "lr.png"));
#endif
  std::filesystem::remove_all(dir);
}

// The rule alone, on a curve that falls fastest at 1e-3: a logistic step in log10(lr).
BOOST_AUTO_TEST_CASE(the_suggestion_is_the_steepest_fall_against_log_lr) {
  std::vector<LrFinderPoint> points;
  for (int i = 0; i <= 60; ++i) {
    const double lr = std::pow(10.0, -6 + i * 0.1);
    const double loss = 1 + 1 / (1 + std::exp(4 * (std::log10(lr) + 3)));
    points.push_back({lr, loss, loss});
  }
  const auto lr = detail::steepest_fall(points, 61);
  BOOST_REQUIRE(lr.has_value());
  BOOST_TEST(*lr == 1e-3, boost::test_tools::tolerance(0.3));
  // Too few points after the first tenth: no slope to speak of.
  BOOST_TEST(!detail::steepest_fall(std::vector<LrFinderPoint>(points.begin(), points.begin() + 2), 100).has_value());
}

// A NaN in the inputs makes the first loss NaN. A Trainer that skips such steps lets the sweep stop
// there; one that stops training (terminate_on_nan, the default) cannot step again, so the finder
// says so. Both leave the weights as they were.
BOOST_AUTO_TEST_CASE(a_non_finite_loss_ends_the_sweep_and_the_weights_are_restored) {
  auto loader = blobs(2, 8, 5);
  loader.batches[0].inputs.data()[3] = std::numeric_limits<float>::quiet_NaN();
  for (const bool terminate_on_nan : {false, true}) {
    auto model = classifier();
    auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.01, .momentum = 0.9});
    Trainer<Sequential<float>> trainer(
        model, sgd, {.progress_bar = false, .print_epochs = false, .terminate_on_nan = terminate_on_nan});
    const auto before = bytes_of(*model, *sgd);
    if (terminate_on_nan) {
      std::string what;
      try {
        find_lr(trainer, loader, {.steps = 10});
      } catch (const Error& e) {
        what = e.what();
      }
      BOOST_TEST(what.find("find_lr: at lr 1e-07 (step 1 of the sweep)") != std::string::npos, what);
      BOOST_TEST(what.find("terminate_on_nan = false") != std::string::npos, what);
    } else {
      const LrFinderResult found = find_lr(trainer, loader, {.steps = 10});
      BOOST_TEST(found.diverged);
      BOOST_TEST(found.points.size() == 1u);
      BOOST_TEST(!found.suggestion.has_value());
    }
    BOOST_TEST((bytes_of(*model, *sgd) == before));
  }
}

BOOST_AUTO_TEST_CASE(options_out_of_range_are_refused) {
  auto model = classifier();
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.01});
  Trainer<Sequential<float>> trainer(model, sgd, quiet);
  auto loader = blobs(1, 4, 4);
  BOOST_CHECK_THROW(find_lr(trainer, loader, {.min_lr = 1, .max_lr = 0.1}), Error);
  BOOST_CHECK_THROW(find_lr(trainer, loader, {.steps = 0}), Error);
  BOOST_CHECK_THROW(find_lr(trainer, loader, {.smoothing = 1}), Error);
}

BOOST_AUTO_TEST_SUITE_END()
