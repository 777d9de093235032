// The Loader concept (train/loader.hpp): an archetype with exactly the documented members satisfies
// it and trains through fit, the library's loaders do, and loaders missing a member do not.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <memory>
#include <vector>

#include <ptrain/data/bptt_batches.hpp>
#include <ptrain/data/dataset.hpp>
#include <ptrain/data/loader.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/tasks/sequence_modelling.hpp>
#include <ptrain/train/loader.hpp>
#include <ptrain/train/trainer.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(loader_concept_test)

namespace {

struct ArchetypeBatch {
  Tensor<double> inputs;  // any scalar type: the Trainer casts to the model's
  std::vector<std::int64_t> targets;
};

// The documented members and nothing else, resuming mid-epoch included.
struct LoaderArchetype {
  std::vector<ArchetypeBatch> batches;
  std::int64_t first = 0;
  int epochs = 0;
  void set_epoch(int) { ++epochs; }
  std::size_t size() const { return batches.size(); }
  void set_first_batch(std::int64_t b) { first = b; }
  auto begin() const { return batches.begin() + first; }
  auto end() const { return batches.end(); }
};

struct WithoutSize {
  std::vector<ArchetypeBatch> batches;
  void set_epoch(int) {}
  auto begin() const { return batches.begin(); }
  auto end() const { return batches.end(); }
};
struct WithoutSetEpoch {
  std::vector<ArchetypeBatch> batches;
  std::size_t size() const { return batches.size(); }
  auto begin() const { return batches.begin(); }
  auto end() const { return batches.end(); }
};
struct WrongTargets {
  struct B {
    Tensor<float> inputs;
    Tensor<std::int64_t> targets;  // Classification wants class indices in a vector
  };
  std::vector<B> batches;
  void set_epoch(int) {}
  std::size_t size() const { return batches.size(); }
  auto begin() const { return batches.begin(); }
  auto end() const { return batches.end(); }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_archetype_and_the_library_loaders_satisfy_it) {
  static_assert(Loader<LoaderArchetype, Classification> && ResumesMidEpoch<LoaderArchetype>);
  static_assert(Loader<DataLoader<TensorDataset>, Classification> && ResumesMidEpoch<DataLoader<TensorDataset>>);
  static_assert(Loader<BpttLoader, SequenceModelling> && ResumesMidEpoch<BpttLoader>);
}

BOOST_AUTO_TEST_CASE(what_is_not_a_loader) {
  static_assert(!Loader<WithoutSize, Classification>);
  static_assert(!Loader<WithoutSetEpoch, Classification>);
  static_assert(!Loader<WrongTargets, Classification>);
  static_assert(!Loader<int, Classification>);
  // evaluate takes the batches alone: a vector of them is no Loader but is BatchesFor.
  static_assert(BatchesFor<std::vector<ArchetypeBatch>, Classification> && !Loader<std::vector<ArchetypeBatch>, Classification>);
  static_assert(!ResumesMidEpoch<WithoutSize>);
}

BOOST_AUTO_TEST_CASE(fit_trains_on_the_archetype) {
  LoaderArchetype loader;
  for (int b = 0; b < 4; ++b) {
    ArchetypeBatch batch{Tensor<double>({2, 3}), {0, 1}};
    for (std::int64_t i = 0; i < 6; ++i) batch.inputs[i] = (i < 3 ? -1.0 : 1.0) * (1 + 0.1 * b);
    loader.batches.push_back(batch);
  }
  auto model = std::make_shared<Sequential<float>>(
      std::initializer_list<std::shared_ptr<Module<float>>>{make<Linear<float>>(3, 2)});
  auto sgd = std::make_shared<Sgd<float>>(model->parameters(), SgdOptions{.lr = 0.5});
  Trainer<Sequential<float>> trainer(model, sgd, {.progress_bar = false, .print_epochs = false});
  const auto results = trainer.fit(loader, 3);
  BOOST_TEST(loader.epochs == 3);
  BOOST_TEST(trainer.global_step() == 12);
  BOOST_TEST(results.back().train_loss < results.front().train_loss);
}

BOOST_AUTO_TEST_SUITE_END()
