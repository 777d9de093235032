// ALBERT cut into pipeline stages under mpiexec -n 2, 3 and 4: the cut puts the one shared layer's
// applications on several stages (on 4, only on the middle two) and the word embedding on the first
// stage with the MLM decoder tied to it on the last, so those stages hold copies whose gradients
// the pipeline sums. Trained with LAMB (weight decay on), every stage's weights and each step's
// loss equal the serial AlbertForPreTraining's, with and without gradient clipping (the norm counts
// a shared parameter once), and so does a 2-stage x 2-replica grid with DataParallel. Sharded<Zero2>,
// which keeps each gradient on one replica, is refused beside shared stages in a sentence.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/models/albert.hpp>
#include <ptrain/optim/lamb.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/parallel/sharded.hpp>
#include <ptrain/tasks/albert_pretraining.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/compare.hpp"
#include "mpi_test_main.hpp"
#include "staged_runs.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(albert_pipeline_test)

namespace {

constexpr std::int64_t vocabulary = 19, batch = 8, length = 6;
constexpr int steps = 3, chunks = 4;
constexpr TrainerOptions quiet{.progress_bar = false, .print_epochs = false};

AlbertConfig config() {
  return {.vocab_size = vocabulary, .embedding_size = 6, .hidden_size = 8, .num_hidden_layers = 4,
          .num_attention_heads = 2, .intermediate_size = 12, .max_position_embeddings = 16,
          .classifier_dropout_prob = 0.0};
}
template <class Net>
std::shared_ptr<Net> make_model() {
  manual_seed(31);
  return std::make_shared<Net>(config());
}
template <class Net>
std::shared_ptr<Lamb<float>> make_lamb(Net& net) {
  return std::make_shared<Lamb<float>>(net.named_parameters(), LambOptions{.lr = 0.02, .weight_decay = 0.01});
}
TrainerOptions clipping() {
  TrainerOptions o = quiet;
  o.clip_grad_norm = 0.5;
  return o;
}

// Two masked tokens in every row, so that each micro-batch's mean MLM loss weighs as its rows do
// and the pipeline's loss is the whole batch's; rows 1 and 6 padded at the end.
struct Batches {
  std::vector<Tensor<float>> inputs;
  std::vector<AlbertTargets> targets;
};
Batches make_batches() {
  Rng rng(23);
  Batches b;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::int64_t> ids, types, mask;
    AlbertTargets t{Tensor<std::int64_t>({batch, length}), {}};
    for (std::int64_t n = 0; n < batch; ++n) {
      const std::int64_t padded = n == 1 ? 2 : n == 6 ? 1 : 0;
      for (std::int64_t p = 0; p < length; ++p) {
        ids.push_back(p < length - padded ? 5 + static_cast<std::int64_t>(rng.below(vocabulary - 5)) : 0);
        types.push_back(p < length / 2 ? 0 : 1);
        mask.push_back(p < length - padded ? 1 : 0);
        t.mlm_labels[n * length + p] = -100;
      }
      for (std::int64_t p : {std::int64_t{1}, std::int64_t{3}})
        t.mlm_labels[n * length + p] = 5 + static_cast<std::int64_t>(rng.below(vocabulary - 5));
      t.sop_labels.push_back(static_cast<std::int64_t>(rng.below(2)));
    }
    b.inputs.push_back(albert_inputs<float>(ids, types, mask, batch, length));
    b.targets.push_back(t);
  }
  return b;
}

using test::StagedRun;

StagedRun serial_run(const Batches& data, const TrainerOptions& options) {
  auto model = make_model<AlbertForPreTraining<float>>();
  Trainer<AlbertForPreTraining<float>, AlbertPreTraining> trainer(model, make_lamb(*model), options,
                                                                  AlbertPreTraining{.vocab_size = vocabulary});
  StagedRun run = test::train_rows(trainer, data.inputs, data.targets, 0, batch);
  for (const auto& [alias, of] : model->named_tied_parameters()) run.weights[alias] = run.weights.at(of);
  return run;
}

using Net = AlbertForPreTrainingSequential<float>;
using P = Pipeline<chunks, OneFOneB>;

// The cut of 2 + 4 + 3 layers into S stages: the shared layer on two or more of them.
std::vector<std::size_t> cut_points(int stages) {
  if (stages == 2) return {4};
  if (stages == 3) return {3, 5};
  if (stages == 4) return {2, 4, 6};
  return {};
}

// One stage per rank of the world.
StagedRun pipelined_run(MpiComm& world, const Batches& data, const TrainerOptions& options) {
  auto model = make_model<Net>();
  P pipeline(world, {.cut_points = cut_points(world.size()), .print_plan = false});
  Trainer<Net, P, AlbertPreTraining> trainer(model, make_lamb(*model), options, std::move(pipeline),
                                             AlbertPreTraining{.vocab_size = vocabulary});
  const auto shared = trainer.policy<P>().shared_parameters();
  const auto is_shared = [&](const std::string& name) {
    return std::any_of(shared.begin(), shared.end(), [&](const auto& s) { return s.name == name; });
  };
  BOOST_TEST(is_shared("albert.embeddings.word_embeddings.weight"));
  BOOST_TEST(is_shared("albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"));
  return test::train_rows<P>(trainer, data.inputs, data.targets, 0, batch);
}

// 2 stages x (world / 2) replicas: replica r trains on its rows of every batch.
StagedRun grid_run(MpiComm& world, const Batches& data, const TrainerOptions& options) {
  auto model = make_model<Net>();
  using DP = DataParallel<MpiAllreduce>;
  P pipeline(world, {.stages = 2, .cut_points = cut_points(2), .print_plan = false});
  const std::int64_t rows = batch / pipeline.replicas();
  const std::int64_t begin = pipeline.replica() * rows;
  Trainer<Net, DP, P, AlbertPreTraining> trainer(model, make_lamb(*model), options, DP(world), std::move(pipeline),
                                                 AlbertPreTraining{.vocab_size = vocabulary});
  return test::train_rows<P, DP>(trainer, data.inputs, data.targets, begin, rows);
}

// Every weight within 2e-5 of the serial run's: fp32 sums in another order, through LAMB's trust ratios.
void check_against_serial(const StagedRun& run, const StagedRun& reference, const std::string& what) {
  test::check_run(run, reference, what, 2e-5);
}

}  // namespace

BOOST_AUTO_TEST_CASE(stages_sharing_the_layer_and_the_tied_embedding_equal_the_serial_run) {
  MpiComm world(test::session());
  const auto data = make_batches();
  const StagedRun serial = serial_run(data, quiet);
  // The weights moved: a run that never summed the copies would be far from them.
  const auto initial = make_model<AlbertForPreTraining<float>>()->named_parameters().front().second.value();
  BOOST_TEST(test::worst_error(serial.weights.at("albert.embeddings.word_embeddings.weight"), initial) > 1e-3);
  check_against_serial(pipelined_run(world, data, quiet), serial, std::to_string(world.size()) + " stages");
}

BOOST_AUTO_TEST_CASE(gradient_clipping_counts_a_shared_parameter_once) {
  MpiComm world(test::session());
  const auto data = make_batches();
  const StagedRun serial = serial_run(data, clipping());
  for (double norm : serial.gradient_norms)
    BOOST_TEST(norm > clipping().clip_grad_norm, "a serial step was not clipped: the test proves nothing");
  check_against_serial(pipelined_run(world, data, clipping()), serial,
                       std::to_string(world.size()) + " stages, clipped");
}

BOOST_AUTO_TEST_CASE(a_data_by_pipeline_grid_equals_the_serial_run) {
  MpiComm world(test::session());
  if (world.size() < 4) return;  // 2 and 3 ranks run the pipeline alone above
  const auto data = make_batches();
  check_against_serial(grid_run(world, data, quiet), serial_run(data, quiet), "2 stages x 2 replicas");
  check_against_serial(grid_run(world, data, clipping()), serial_run(data, clipping()),
                       "2 stages x 2 replicas, clipped");
}

BOOST_AUTO_TEST_CASE(sharded_gradients_beside_shared_stages_are_refused) {
  MpiComm world(test::session());
  if (world.size() < 4) return;  // a grid needs replicas to shard over
  auto model = make_model<Net>();
  using Z2 = Sharded<Zero2>;
  try {
    Trainer<Net, Z2, P, AlbertPreTraining> trainer(model, make_lamb(*model), quiet, Z2(world),
                                                   P(world, {.stages = 2, .cut_points = cut_points(2), .print_plan = false}),
                                                   AlbertPreTraining{.vocab_size = vocabulary});
    BOOST_FAIL("Sharded<Zero2> beside stages that share parameters was accepted");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("use Sharded<Zero1> or DataParallel beside this pipeline") !=
                   std::string::npos,
               e.what());
  }
  // With the stage chosen at run time: refused at stage 2, taken at stage 1.
  using Chosen = Sharded<RuntimeStage>;
  const auto make = [&](int stage) {
    auto fresh = make_model<Net>();
    return Trainer<Net, Chosen, P, AlbertPreTraining>(
        fresh, make_lamb(*fresh), quiet, Chosen(world, RuntimeStage{stage}),
        P(world, {.stages = 2, .cut_points = cut_points(2), .print_plan = false}),
        AlbertPreTraining{.vocab_size = vocabulary});
  };
  BOOST_CHECK_EXCEPTION(make(2), Error, [](const Error& e) {
    return std::string(e.what()).find("use Sharded<Zero1> or DataParallel beside this pipeline") != std::string::npos;
  });
  BOOST_CHECK_NO_THROW(make(1));
}

BOOST_AUTO_TEST_SUITE_END()
