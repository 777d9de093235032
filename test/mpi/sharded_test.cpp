// Sharded<Zero1>, <Zero2> and <Zero3> under mpiexec -n 2, -n 3 and -n 4 (uneven shards: 6
// parameters of unequal sizes): N ranks each training on B/N of every batch end with the weights of
// DataParallel's run and of one process training on all B (in double within 1e-12; Zero1 equals
// DataParallel exactly, the same arithmetic), with SGD + momentum and with Adam, with gradient
// accumulation, and with MixedPrecision<Bf16>; each rank's optimizer holds state for its own
// parameters only (Zero2 and Zero3: and the model the gradients of its own only), every
// parameter's once; under MixedPrecision each rank keeps the fp32 masters of its own parameters
// only (1/N of their bytes, counted from the allocations); a checkpoint written on N ranks resumes
// on 2, whose checkpoint resumes on 3 ranks, under Zero2 or Zero3, DataParallel and one process
// alike (with MixedPrecision: its masters whole in the checkpoint); between uses a Zero3 rank holds
// its own parameters only. In a data x pipeline grid each stage is sharded over its replicas, with
// MixedPrecision too (each stage's masters kept once over its replicas).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include <boost/mpl/list.hpp>
#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/core/half.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/adam.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/parallel/sharded.hpp>
#include <ptrain/tensor/storage_census.hpp>
#include <ptrain/parallel/mixed_precision.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/list_loader.hpp"
#include "mpi_test_main.hpp"
#include "shared_dir.hpp"
#include "small_conv_net.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(sharded_test)

namespace {

// Divisible by 1, 2, 3, 4 ranks times 2 micro-batches; past 4 ranks 4 rows a rank (2 micro-batches,
// or a grid's replica 4 micro-batches).
std::int64_t global_batch() { return test::global_batch_for(24, 4); }
constexpr int steps = 3;

template <class U>
std::shared_ptr<Sgd<U>> make_optimizer(const std::vector<Var<U>>& params, std::shared_ptr<Sgd<U>>*) {
  return std::make_shared<Sgd<U>>(params, SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3});
}
template <class U>
std::shared_ptr<Adam<U>> make_optimizer(const std::vector<Var<U>>& params, std::shared_ptr<Adam<U>>*) {
  return std::make_shared<Adam<U>>(params, AdamOptions{.lr = 0.01, .weight_decay = 1e-3});
}

// Two parameter groups (optim/optimizer.hpp): the first half of the parameters at the options' rate,
// the others at a third of it without weight decay.
template <class U>
std::vector<ParamGroup<U>> halves(const std::vector<Var<U>>& params, double second_lr) {
  const auto middle = params.begin() + static_cast<std::ptrdiff_t>(params.size() / 2);
  return {{{params.begin(), middle}, {}, {}}, {{middle, params.end()}, second_lr, 0.0}};
}
template <class Base>
struct Grouped : Base {
  template <class U, class Options>
  Grouped(const std::vector<Var<U>>& params, Options options) : Base(halves(params, options.lr / 3), options) {}
};
template <class U, class Base>
std::shared_ptr<Grouped<Base>> make_optimizer(const std::vector<Var<U>>& params, std::shared_ptr<Grouped<Base>>*) {
  const auto plain = make_optimizer(params, static_cast<std::shared_ptr<Base>*>(nullptr));
  return std::make_shared<Grouped<Base>>(params, plain->options());
}

// What a run ends with: the weights (as double) and how many per-parameter state tensors its
// optimizer holds.
struct Outcome {
  std::vector<std::vector<double>> weights;
  std::size_t state_tensors = 0;
  std::size_t model_gradients = 0;  // the model's parameters holding a gradient after the last step
  double last_gradient_norm = 0;    // before clipping, with StepOptions::clip_grad_norm
};

struct StepOptions {
  int micro = 1;  // micro-batches per step (gradient accumulation)
  double clip_grad_norm = 0;
};

template <class T>
std::vector<std::vector<double>> weights_of(Sequential<T>& net) {
  std::vector<std::vector<double>> out;
  const auto add = [&](const auto& p) {
    std::vector<double> w;
    for (std::int64_t i = 0; i < p.numel(); ++i) w.push_back(static_cast<double>(p.value()[i]));
    out.push_back(w);
  };
  for (auto& p : net.parameters()) add(p);
  for (auto& p : net.float_parameters()) add(p);  // a 16-bit model's batch norm weights
  return out;
}

// Sharded<Zero3>'s ranks hold their own parameters only: the whole model on every rank first.
template <class... Policies, class TrainerType>
void gather_whole_model(TrainerType& trainer) {
  const auto whole = [&]<class P>(P*) {
    if constexpr (requires(P& p) { p.gather_parameters(); }) trainer.template policy<P>().gather_parameters();
  };
  (whole(static_cast<Policies*>(nullptr)), ...);
}

// Trains `steps` steps: this rank's rows of every batch (all of them without a communicator), in
// how.micro micro-batches. Policy: none, DataParallel or Sharded<Zero1>, each optionally followed
// by MixedPrecision<Bf16> (T bfloat16, the optimizer on its fp32 masters). batch_norm: the net
// with batch norm (float weights in a bf16 model).
template <class T, class Opt, bool batch_norm = false, class... Policies>
Outcome run(MpiComm* comm, StepOptions how, Policies... policies_without_amp) {
  const int micro = how.micro;
  constexpr bool amp = std::is_same_v<T, ptrain::bfloat16>;
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  // Every rank but 0 starts from other weights: setup must broadcast rank 0's.
  const std::uint64_t seed = rank == 0 ? 1 : 100 + static_cast<std::uint64_t>(rank);
  auto net = batch_norm ? test::make_small_batch_norm_net<T>(seed) : test::make_small_conv_net<T>(seed);
  const auto data = test::make_small_conv_batches<T>(steps, global_batch(), 7);
  const TrainerOptions options{
      .progress_bar = false, .print_epochs = false, .accumulation_steps = micro, .clip_grad_norm = how.clip_grad_norm};
  const std::int64_t local = global_batch() / world, part = local / micro;
  Outcome outcome;
  const auto train = [&](auto& trainer, auto& optimizer) {
    for (int s = 0; s < steps; ++s)
      for (int m = 0; m < micro; ++m) {
        const std::int64_t begin = rank * local + m * part;
        const std::vector<std::int64_t> y(data.targets[s].begin() + begin, data.targets[s].begin() + begin + part);
        trainer.train_step(data.inputs[s].slice(begin, begin + part).clone(), y);
      }
    gather_whole_model<Policies...>(trainer);
    outcome.weights = weights_of(*net);
    outcome.state_tensors = optimizer->state().tensors.size();
    for (const auto& p : net->parameters()) outcome.model_gradients += p.grad().defined() ? 1 : 0;
    outcome.last_gradient_norm = trainer.last_gradient_norm();
  };
  if constexpr (amp) {
    MixedPrecision<ptrain::Bf16> mixed(*net);
    auto optimizer = make_optimizer(mixed.master_parameters(), static_cast<Opt*>(nullptr));
    Trainer<Sequential<T>, Policies..., MixedPrecision<ptrain::Bf16>> trainer(net, optimizer, options,
                                                                              policies_without_amp..., mixed);
    train(trainer, optimizer);
  } else {
    auto optimizer = make_optimizer(net->parameters(), static_cast<Opt*>(nullptr));
    Trainer<Sequential<T>, Policies...> trainer(net, optimizer, options, policies_without_amp...);
    train(trainer, optimizer);
  }
  return outcome;
}

double max_difference(const Outcome& a, const Outcome& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.weights.size(); ++i)
    for (std::size_t j = 0; j < a.weights[i].size(); ++j)
      worst = std::max(worst, std::abs(a.weights[i][j] - b.weights[i][j]));
  return worst;
}

using Zero1Policy = Sharded<Zero1>;
using Zero2Policy = Sharded<Zero2>;
using Zero3Policy = Sharded<Zero3>;
using DataParallelPolicy = DataParallel<MpiAllreduce>;

// The state tensors each parameter has once stepped: SGD's momentum buffer, Adam's step and moments.
template <class Opt>
constexpr std::size_t state_per_parameter = std::is_base_of_v<Sgd<double>, typename Opt::element_type> ? 1 : 3;

double sum_over_ranks(MpiComm& comm, std::size_t value) {
  double sum = static_cast<double>(value);
  comm.allreduce_sum(std::span<double>(&sum, 1));
  return sum;
}

// Zero1 is DataParallel's arithmetic to the bit, but for a clipped norm (each rank sums its own
// parameters' squares, then the ranks' sums add up: another order). Zero2 and Zero3 sum each
// gradient with a reduce-scatter, whose order of addition MPI may choose otherwise than the allreduce's: within
// `tolerance`.
template <class Stage, class T, class Opt>
void check_sharded_equals_data_parallel_and_serial(MpiComm& comm, StepOptions how, double tolerance) {
  const Outcome serial = run<T, Opt>(nullptr, how);
  const Outcome data_parallel = run<T, Opt>(&comm, how, DataParallelPolicy(comm, {.bucket_bytes = 512}));
  const Outcome sharded = run<T, Opt>(&comm, how, Sharded<Stage>(comm, {.bucket_bytes = 512}));
  if (std::is_same_v<Stage, Zero1> && how.clip_grad_norm == 0) BOOST_TEST(max_difference(sharded, data_parallel) == 0.0);
  else BOOST_TEST(max_difference(sharded, data_parallel) <= tolerance);
  BOOST_TEST(max_difference(sharded, serial) <= tolerance);
  BOOST_TEST(max_difference(data_parallel, serial) <= tolerance);

  // Each rank holds the state and the gradients of its own parameters only; together, of every
  // parameter once.
  const std::size_t parameters = serial.weights.size();
  BOOST_TEST(serial.state_tensors == parameters * state_per_parameter<Opt>);
  BOOST_TEST(data_parallel.state_tensors == parameters * state_per_parameter<Opt>);
  BOOST_TEST(sum_over_ranks(comm, sharded.state_tensors) == static_cast<double>(parameters * state_per_parameter<Opt>));
  BOOST_TEST(sharded.state_tensors < parameters * state_per_parameter<Opt>);
  BOOST_TEST(data_parallel.model_gradients == parameters);
  BOOST_TEST(sum_over_ranks(comm, sharded.model_gradients) == static_cast<double>(parameters));
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_partition_is_balanced_by_size_and_skips_frozen_parameters) {
  // Largest first, each to the lightest rank: 100 -> 0, 60 -> 1, 50 -> 1, 30 -> 0, 10 -> 1.
  const auto owner = detail::balanced_partition({10, 100, 30, 60, 7, 50}, {true, true, true, true, false, true}, 2);
  BOOST_TEST(owner == (std::vector<int>{1, 0, 0, 1, -1, 1}), boost::test_tools::per_element());
  // Equal sizes go round the ranks in index order; more ranks than parameters leave some without.
  BOOST_TEST(detail::balanced_partition({5, 5, 5}, {true, true, true}, 4) == (std::vector<int>{0, 1, 2}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(every_parameter_has_one_owner_on_every_rank_alike) {
  MpiComm comm(test::session());
  auto net = test::make_small_conv_net<double>(1);
  auto sgd = make_optimizer(net->parameters(), static_cast<std::shared_ptr<Sgd<double>>*>(nullptr));
  Trainer<Sequential<double>, Zero1Policy> trainer(net, sgd, {.progress_bar = false, .print_epochs = false},
                                                   Zero1Policy(comm, {.bucket_bytes = 256}));
  const auto& policy = trainer.policy<Zero1Policy>();
  std::vector<double> owners;
  for (std::size_t i = 0; i < net->parameters().size(); ++i) owners.push_back(policy.owner(i));
  std::vector<double> all(owners.size() * static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const double>(owners), std::span<double>(all));
  for (std::size_t i = 0; i < all.size(); ++i) BOOST_TEST(all[i] == owners[i % owners.size()]);
  for (double o : owners) BOOST_TEST((o >= 0 && o < comm.size()));
  BOOST_TEST(policy.gather_bucket_count() > 1u);  // 256-byte buckets: the all-gather runs in several
}

using Stages = boost::mpl::list<Zero1, Zero2, Zero3>;

BOOST_AUTO_TEST_CASE_TEMPLATE(equals_data_parallel_and_the_serial_run_with_sgd_momentum, Stage, Stages) {
  MpiComm comm(test::session());
  check_sharded_equals_data_parallel_and_serial<Stage, double, std::shared_ptr<Sgd<double>>>(comm, {1}, 1e-12);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(equals_data_parallel_and_the_serial_run_with_adam, Stage, Stages) {
  MpiComm comm(test::session());
  check_sharded_equals_data_parallel_and_serial<Stage, double, std::shared_ptr<Adam<double>>>(comm, {1}, 1e-12);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(equals_them_with_gradient_accumulation, Stage, Stages) {
  MpiComm comm(test::session());
  check_sharded_equals_data_parallel_and_serial<Stage, double, std::shared_ptr<Sgd<double>>>(comm, {2}, 1e-12);
  check_sharded_equals_data_parallel_and_serial<Stage, double, std::shared_ptr<Adam<double>>>(comm, {2}, 1e-12);
}

// Sharded<RuntimeStage> (one Trainer type for the three stages, chosen when the program runs)
// computes what the fixed stage computes, to the bit, and holds as much state and as many gradients.
template <class Opt>
void check_runtime_stage_equals(MpiComm& comm, int stage, const Outcome& fixed) {
  const Outcome chosen = run<double, Opt>(&comm, {1}, Sharded<RuntimeStage>(comm, RuntimeStage{stage}, {.bucket_bytes = 512}));
  BOOST_TEST(max_difference(chosen, fixed) == 0.0, "stage " << stage);
  BOOST_TEST(chosen.state_tensors == fixed.state_tensors, "stage " << stage);
  BOOST_TEST(chosen.model_gradients == fixed.model_gradients, "stage " << stage);
}

BOOST_AUTO_TEST_CASE(a_stage_chosen_at_run_time_equals_the_fixed_one) {
  MpiComm comm(test::session());
  using SgdOpt = std::shared_ptr<Sgd<double>>;
  using AdamOpt = std::shared_ptr<Adam<double>>;
  check_runtime_stage_equals<SgdOpt>(comm, 1, run<double, SgdOpt>(&comm, {1}, Zero1Policy(comm, {.bucket_bytes = 512})));
  check_runtime_stage_equals<SgdOpt>(comm, 2, run<double, SgdOpt>(&comm, {1}, Zero2Policy(comm, {.bucket_bytes = 512})));
  check_runtime_stage_equals<SgdOpt>(comm, 3, run<double, SgdOpt>(&comm, {1}, Zero3Policy(comm, {.bucket_bytes = 512})));
  check_runtime_stage_equals<AdamOpt>(comm, 2, run<double, AdamOpt>(&comm, {1}, Zero2Policy(comm, {.bucket_bytes = 512})));
  check_runtime_stage_equals<AdamOpt>(comm, 3, run<double, AdamOpt>(&comm, {1}, Zero3Policy(comm, {.bucket_bytes = 512})));
  for (const int stage : {0, 4})
    try {
      Sharded<RuntimeStage> policy(comm, RuntimeStage{stage});
      BOOST_FAIL("Sharded<RuntimeStage> took stage " << stage);
    } catch (const Error& e) {
      BOOST_TEST(std::string(e.what()).find("expected 1, 2 or 3") != std::string::npos, e.what());
    }
}

// Clipping by the global norm: when the optimizer steps, each rank holds its own parameters'
// gradients only, so the norm is summed over the ranks: every rank clips by the serial run's norm.
BOOST_AUTO_TEST_CASE_TEMPLATE(clips_by_the_global_norm_of_every_rank_s_parameters, Stage, Stages) {
  MpiComm comm(test::session());
  const StepOptions clipped{.micro = 1, .clip_grad_norm = 1e-3};
  check_sharded_equals_data_parallel_and_serial<Stage, double, std::shared_ptr<Adam<double>>>(comm, clipped, 1e-12);
  const Outcome serial = run<double, std::shared_ptr<Sgd<double>>>(nullptr, clipped);
  const Outcome sharded =
      run<double, std::shared_ptr<Sgd<double>>>(&comm, clipped, Sharded<Stage>(comm, {.bucket_bytes = 512}));
  BOOST_TEST(serial.last_gradient_norm > 100 * clipped.clip_grad_norm);  // it did clip
  BOOST_TEST(std::abs(sharded.last_gradient_norm - serial.last_gradient_norm) <= 1e-12 * serial.last_gradient_norm);
  BOOST_TEST(max_difference(sharded, serial) <= 1e-12);
}

// bf16 model, fp32 masters stepped by the optimizer, with SGD + momentum and Adam. Zero1: DataParallel's
// run exactly. Zero2: within two bf16 units in the last place of the largest weight (its
// reduce-scatter adds the ranks' bf16 gradients in another order than the allreduce; on 4 ranks
// some round the other way; Zero3 alike). The serial run with SGD + momentum within the same bound. Adam is not
// compared with the serial run: it divides by the gradient's root mean square, so a gradient near
// 0 that rounds the other way in bf16 can move its weight by a whole learning rate.
template <class Stage, class Opt>
void check_sharded_with_mixed_precision(MpiComm& comm, int micro, bool compare_with_serial) {
  const Outcome serial = run<ptrain::bfloat16, Opt>(nullptr, {micro});
  const Outcome data_parallel =
      run<ptrain::bfloat16, Opt>(&comm, {micro}, DataParallelPolicy(comm, {.bucket_bytes = 512}));
  const Outcome sharded = run<ptrain::bfloat16, Opt>(&comm, {micro}, Sharded<Stage>(comm, {.bucket_bytes = 512}));
  double largest_weight = 0;
  for (const auto& w : serial.weights)
    for (double v : w) largest_weight = std::max(largest_weight, std::abs(v));
  const double two_ulps = std::ldexp(largest_weight, -7);
  if constexpr (std::is_same_v<Stage, Zero1>)
    BOOST_TEST(max_difference(sharded, data_parallel) == 0.0, "micro-batches " << micro);
  else
    BOOST_TEST(max_difference(sharded, data_parallel) <= two_ulps, "micro-batches " << micro);
  if (compare_with_serial) BOOST_TEST(max_difference(sharded, serial) <= two_ulps, "micro-batches " << micro);
  BOOST_TEST(sum_over_ranks(comm, sharded.state_tensors) == static_cast<double>(serial.state_tensors));
  BOOST_TEST(sharded.state_tensors < serial.state_tensors);
  // The model's bf16 gradients: whole on every rank under Zero1 (only the masters' are dropped), a
  // shard of them under Zero2 and Zero3.
  const std::size_t parameters = serial.weights.size();
  if constexpr (std::is_same_v<Stage, Zero1>) BOOST_TEST(sharded.model_gradients == parameters);
  else BOOST_TEST(sum_over_ranks(comm, sharded.model_gradients) == static_cast<double>(parameters));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(with_mixed_precision_equals_them, Stage, Stages) {
  MpiComm comm(test::session());
  for (int micro : {1, 2}) {
    check_sharded_with_mixed_precision<Stage, std::shared_ptr<Sgd<float>>>(comm, micro, true);
    check_sharded_with_mixed_precision<Stage, std::shared_ptr<Adam<float>>>(comm, micro, false);
  }
}

// Parameter groups survive the partition: each rank steps its parameters at their group's rate, and a
// grouped optimizer under DataParallel, Sharded and MixedPrecision ends where the serial run ends.
BOOST_AUTO_TEST_CASE_TEMPLATE(parameter_groups_keep_their_rates, Stage, Stages) {
  MpiComm comm(test::session());
  using GroupedSgd = std::shared_ptr<Grouped<Sgd<double>>>;
  check_sharded_equals_data_parallel_and_serial<Stage, double, GroupedSgd>(comm, {1}, 1e-12);
  check_sharded_equals_data_parallel_and_serial<Stage, double, std::shared_ptr<Grouped<Adam<double>>>>(comm, {2}, 1e-12);
  check_sharded_with_mixed_precision<Stage, std::shared_ptr<Grouped<Sgd<float>>>>(comm, 1, true);
  // The groups' rates matter: the grouped run is not the one-group run.
  BOOST_TEST(max_difference(run<double, GroupedSgd>(nullptr, {1}), run<double, std::shared_ptr<Sgd<double>>>(nullptr, {1})) > 1e-6);
}

// A bf16 model's batch norm weights are float, their own masters: partitioned after the bf16
// ones, each stepped by one rank (one momentum buffer each over the world) and gathered; the run
// equals DataParallel's as above (the batch norm statistics are each rank's own in both).
BOOST_AUTO_TEST_CASE_TEMPLATE(with_mixed_precision_shards_float_batch_norm_weights, Stage, Stages) {
  MpiComm comm(test::session());
  using Opt = std::shared_ptr<Sgd<float>>;
  const Outcome data_parallel = run<ptrain::bfloat16, Opt, true>(&comm, {1}, DataParallelPolicy(comm, {.bucket_bytes = 512}));
  const Outcome sharded = run<ptrain::bfloat16, Opt, true>(&comm, {1}, Sharded<Stage>(comm, {.bucket_bytes = 512}));
  BOOST_REQUIRE_EQUAL(sharded.weights.size(), 6u);  // conv and linear in bf16, batch norm's two in float
  double largest_weight = 0;
  for (const auto& w : data_parallel.weights)
    for (double v : w) largest_weight = std::max(largest_weight, std::abs(v));
  if constexpr (std::is_same_v<Stage, Zero1>) BOOST_TEST(max_difference(sharded, data_parallel) == 0.0);
  else BOOST_TEST(max_difference(sharded, data_parallel) <= std::ldexp(largest_weight, -7));
  BOOST_TEST(sum_over_ranks(comm, sharded.state_tensors) == 6.0);
}

// The bytes of this rank's fp32 masters and of their gradients, counted from their allocations.
struct MasterBytes {
  std::int64_t values = 0, gradients = 0;
};
MasterBytes master_bytes(const std::vector<Var<float>>& masters) {
  StorageCensus values, gradients;
  for (const auto& m : masters) {
    values.count(m.value());
    gradients.count(m.grad());
  }
  return {values.total(), gradients.total()};
}

// 12 linear layers of one size (a bf16 MLP) and a global batch for it.
struct EqualLayers {
  std::shared_ptr<Sequential<ptrain::bfloat16>> net;
  Tensor<ptrain::bfloat16> x;
  std::vector<std::int64_t> y;
};
EqualLayers equal_layers() {
  manual_seed(3);
  EqualLayers d{std::make_shared<Sequential<ptrain::bfloat16>>(), Tensor<ptrain::bfloat16>({global_batch(), 16}), {}};
  for (int layer = 0; layer < 12; ++layer) {
    d.net->push_back(make<Linear<ptrain::bfloat16>>(16, 16));
    d.net->push_back(make<ReLU<ptrain::bfloat16>>());
  }
  Rng rng(5);
  for (std::int64_t i = 0; i < d.x.numel(); ++i) d.x[i] = static_cast<ptrain::bfloat16>(rng.normal());
  for (std::int64_t i = 0; i < global_batch(); ++i) d.y.push_back(static_cast<std::int64_t>(rng.below(16)));
  return d;
}

// This rank's master bytes through an equal_layers_run: the gradients at the last step (they exist
// between the backward and the optimizer step), the values and gradients just after it, after the
// Trainer's checkpoint points gathered them (whole) and after they sharded them again; and the bytes
// of every master.
struct MasterCensus {
  std::int64_t gradients_at_step = 0;
  MasterBytes after_step, gathered, sharded_again;
  std::int64_t whole = 0;
};

// Counts the masters' gradient bytes where the optimizer reads them.
struct CountMasterGradients {
  const std::vector<Var<float>>* masters;
  std::int64_t* bytes;
  void on_before_optimizer_step(TrainerView&) { *bytes = master_bytes(*masters).gradients; }
};

// 12 linear layers of one size (a bf16 MLP), so that every rank owns 1/N of the masters (N = 2, 3, 4);
// SGD + momentum on the masters. Trains `steps` steps of this rank's rows; returns the weights.
template <class... Policies>
Outcome equal_layers_run(MpiComm& comm, MasterCensus& census, Policies... policies) {
  const EqualLayers data = equal_layers();
  const auto& [net, x, y] = data;
  MixedPrecision<ptrain::Bf16> mixed(*net);
  census.whole = master_bytes(mixed.master_parameters()).values;
  auto sgd = make_optimizer(mixed.master_parameters(), static_cast<std::shared_ptr<Sgd<float>>*>(nullptr));
  using Amp = MixedPrecision<ptrain::Bf16>;
  Trainer<Sequential<ptrain::bfloat16>, Policies..., Amp> trainer(
      net, sgd, {.progress_bar = false, .print_epochs = false}, policies..., mixed);
  trainer.add_callback(CountMasterGradients{&mixed.master_parameters(), &census.gradients_at_step});
  const std::int64_t rows = global_batch() / comm.size(), begin = comm.rank() * rows;
  for (int s = 0; s < steps; ++s)
    trainer.train_step(x.slice(begin, begin + rows).clone(), {y.begin() + begin, y.begin() + begin + rows});
  census.after_step = master_bytes(mixed.master_parameters());
  gather_whole_model<Policies...>(trainer);  // what a checkpoint does first
  census.gathered = master_bytes(mixed.master_parameters());
  Outcome outcome{weights_of(*net)};
  const auto shard = [&]<class P>(P*) {
    if constexpr (requires(P& p) { p.shard_parameters(); }) trainer.template policy<P>().shard_parameters();
  };
  (shard(static_cast<Policies*>(nullptr)), ...);
  census.sharded_again = master_bytes(mixed.master_parameters());
  return outcome;
}

BOOST_AUTO_TEST_CASE_TEMPLATE(with_mixed_precision_each_rank_keeps_the_masters_of_its_own_parameters, Stage, Stages) {
  MpiComm comm(test::session());
  MasterCensus census;
  const Outcome data_parallel = equal_layers_run(comm, census, DataParallelPolicy(comm));
  BOOST_TEST(census.after_step.values == census.whole);  // every rank keeps every master
  BOOST_TEST(census.gradients_at_step == census.whole);
  const Outcome sharded = equal_layers_run(comm, census, Sharded<Stage>(comm));
  const std::int64_t whole = census.whole, mine = census.after_step.values;
  BOOST_TEST_MESSAGE("fp32 masters on rank " << comm.rank() << ": " << mine << " of " << whole << " bytes");
  BOOST_TEST(mine * comm.size() == whole);            // 1/N of them: 12 equal layers, each rank 12/N
  BOOST_TEST(census.gradients_at_step == mine);       // and the fp32 gradients of those alone
  BOOST_TEST(census.after_step.gradients == 0);       // let go after the step, as the values are not
  BOOST_TEST(sum_over_ranks(comm, static_cast<std::size_t>(mine)) == static_cast<double>(whole));
  BOOST_TEST(census.gathered.values == whole);  // whole around a checkpoint
  BOOST_TEST(census.sharded_again.values == mine);
  // The same training: Zero1 to the bit, Zero2 and Zero3 within two bf16 units in the last place of
  // the largest weight (the reduce-scatter's order of addition).
  double largest_weight = 0;
  for (const auto& w : data_parallel.weights)
    for (double v : w) largest_weight = std::max(largest_weight, std::abs(v));
  if constexpr (std::is_same_v<Stage, Zero1>) BOOST_TEST(max_difference(sharded, data_parallel) == 0.0);
  else BOOST_TEST(max_difference(sharded, data_parallel) <= std::ldexp(largest_weight, -7));
}

// A data x pipeline grid (2 stages x N/2 replicas; 3 stages on 3 ranks): Sharded over each stage's
// replicas ends with the weights of DataParallel over them, with SGD + momentum (each rank's stage;
// Zero1 exactly, Zero2 and Zero3 within the reduce-scatter's order of addition), and each stage's
// optimizer state is split over its replicas.
template <class Policy>
Outcome grid_run(MpiComm& world) {
  using P = Pipeline<4>;
  P pipeline(world, {.stages = world.size() == 3 ? 3 : 2, .print_plan = false});
  auto net = test::make_small_conv_net<double>(1);
  const auto data = test::make_small_conv_batches<double>(steps, global_batch(), 7);
  const std::int64_t rows = global_batch() / pipeline.replicas(), begin = pipeline.replica() * rows;
  auto sgd = make_optimizer(net->parameters(), static_cast<std::shared_ptr<Sgd<double>>*>(nullptr));
  Trainer<Sequential<double>, Policy, P> trainer(net, sgd, {.progress_bar = false, .print_epochs = false},
                                                 Policy(world, {.bucket_bytes = 512}), pipeline);
  for (int s = 0; s < steps; ++s) {
    const std::vector<std::int64_t> y(data.targets[s].begin() + begin, data.targets[s].begin() + begin + rows);
    trainer.train_step(data.inputs[s].slice(begin, begin + rows).clone(), y);
  }
  gather_whole_model<Policy>(trainer);
  Outcome outcome;
  for (const auto& p : trainer.local_model().parameters()) {
    std::vector<double> w;
    for (std::int64_t i = 0; i < p.numel(); ++i) w.push_back(p.value()[i]);
    outcome.weights.push_back(w);
  }
  outcome.state_tensors = sgd->state().tensors.size();
  return outcome;
}

BOOST_AUTO_TEST_CASE_TEMPLATE(shards_over_a_pipeline_stage_s_replicas_as_data_parallel_averages, Stage, Stages) {
  MpiComm world(test::session());
  const Outcome data_parallel = grid_run<DataParallelPolicy>(world);
  const Outcome sharded = grid_run<Sharded<Stage>>(world);
  BOOST_REQUIRE_EQUAL(sharded.weights.size(), data_parallel.weights.size());
  if constexpr (std::is_same_v<Stage, Zero1>) BOOST_TEST(max_difference(sharded, data_parallel) == 0.0);
  else BOOST_TEST(max_difference(sharded, data_parallel) <= 1e-12);
  // Every stage's momentum buffers once over its replicas: the world's sum is the model's parameters.
  const double replicas = world.size() == 3 ? 1.0 : world.size() / 2.0;  // of each stage
  BOOST_TEST(sum_over_ranks(world, sharded.state_tensors) ==
             sum_over_ranks(world, data_parallel.state_tensors) / replicas);
}

// The grid above with MixedPrecision<Bf16> (the bf16 MLP of 12 equal layers, SGD + momentum on the
// masters): Sharded over each stage's replicas ends with the weights of DataParallel over them, and
// each stage's fp32 masters are kept once over its replicas (DataParallel: on every replica), the
// masters of the other stages' parameters untouched. `held`: the bytes of this rank's masters of its
// own stage's parameters, counted from their allocations.
template <class Policy>
Outcome grid_mixed_precision_run(MpiComm& world, std::int64_t& held, std::int64_t& whole, int& replicas) {
  using P = Pipeline<4>;
  P pipeline(world, {.stages = world.size() == 3 ? 3 : 2, .print_plan = false});
  replicas = pipeline.replicas();
  const EqualLayers data = equal_layers();
  const auto& [net, x, y] = data;
  using Amp = MixedPrecision<ptrain::Bf16>;
  Amp mixed(*net);
  whole = master_bytes(mixed.master_parameters()).values;
  auto sgd = make_optimizer(mixed.master_parameters(), static_cast<std::shared_ptr<Sgd<float>>*>(nullptr));
  Trainer<Sequential<ptrain::bfloat16>, Policy, P, Amp> trainer(
      net, sgd, {.progress_bar = false, .print_epochs = false}, Policy(world, {.bucket_bytes = 512}), pipeline,
      mixed);
  const std::int64_t rows = global_batch() / pipeline.replicas(), begin = pipeline.replica() * rows;
  for (int s = 0; s < steps; ++s)
    trainer.train_step(x.slice(begin, begin + rows).clone(), {y.begin() + begin, y.begin() + begin + rows});
  const auto& amp = trainer.template policy<Amp>();
  std::vector<const void*> stage;
  for (const auto& p : trainer.local_model().parameters()) stage.push_back(p.node().get());
  const std::vector<const void*> sources = amp.master_sources();
  StorageCensus mine;
  for (std::size_t i = 0; i < sources.size(); ++i)
    if (std::ranges::find(stage, sources[i]) != stage.end()) mine.count(amp.master_parameters()[i].value());
  held = mine.total();
  gather_whole_model<Policy>(trainer);
  Outcome outcome;
  for (const auto& p : trainer.local_model().parameters()) {
    std::vector<double> w;
    for (std::int64_t i = 0; i < p.numel(); ++i) w.push_back(static_cast<double>(p.value()[i]));
    outcome.weights.push_back(w);
  }
  outcome.state_tensors = sgd->state().tensors.size();
  return outcome;
}

BOOST_AUTO_TEST_CASE_TEMPLATE(with_mixed_precision_shards_a_pipeline_stage_s_masters_over_its_replicas, Stage,
                              Stages) {
  MpiComm world(test::session());
  std::int64_t held = 0, whole = 0;
  int replicas = 0;
  const Outcome data_parallel = grid_mixed_precision_run<DataParallelPolicy>(world, held, whole, replicas);
  BOOST_TEST(sum_over_ranks(world, static_cast<std::size_t>(held)) == static_cast<double>(whole * replicas));
  const Outcome sharded = grid_mixed_precision_run<Sharded<Stage>>(world, held, whole, replicas);
  BOOST_TEST_MESSAGE("rank " << world.rank() << " keeps " << held << " bytes of its stage's masters (" << replicas
                             << " replicas a stage, " << whole << " bytes of masters in the model)");
  BOOST_TEST(sum_over_ranks(world, static_cast<std::size_t>(held)) == static_cast<double>(whole));
  BOOST_REQUIRE_EQUAL(sharded.weights.size(), data_parallel.weights.size());
  double largest_weight = 0;
  for (const auto& w : data_parallel.weights)
    for (double v : w) largest_weight = std::max(largest_weight, std::abs(v));
  if constexpr (std::is_same_v<Stage, Zero1>) BOOST_TEST(max_difference(sharded, data_parallel) == 0.0);
  else BOOST_TEST(max_difference(sharded, data_parallel) <= std::ldexp(largest_weight, -7));
  BOOST_TEST(sum_over_ranks(world, sharded.state_tensors) ==
             sum_over_ranks(world, data_parallel.state_tensors) / replicas);
}

// Cpu::live_bytes() at its most as forward passes it.
class LiveBytesProbe : public Module<float> {
 public:
  explicit LiveBytesProbe(std::shared_ptr<std::int64_t> forward_peak) : forward_peak_(std::move(forward_peak)) {}
  Var<float> forward(const Var<float>& x) override {
    *forward_peak_ = std::max(*forward_peak_, Cpu::live_bytes());
    return x;
  }

 private:
  std::shared_ptr<std::int64_t> forward_peak_;
};

// The bytes of tensors alive, beyond those before the model was made, at their most as forward
// passes the probes between 8 linear layers of equal size (2 MiB of parameters in all), over two
// steps of SGD (no state).
template <class Policy>
std::int64_t forward_peak_bytes(MpiComm& comm, Policy policy, std::int64_t& parameter_bytes) {
  const std::int64_t rows = 24 / comm.size();
  const Tensor<float> inputs = Tensor<float>::zeros({rows, 256});
  const std::vector<std::int64_t> targets(static_cast<std::size_t>(rows), 1);
  auto peak = std::make_shared<std::int64_t>(0);
  const std::int64_t before = Cpu::live_bytes();
  manual_seed(1);
  auto net = std::make_shared<Sequential<float>>();
  for (int layer = 0; layer < 8; ++layer) {
    net->push_back(make<Linear<float>>(256, 256));
    net->push_back(make<LiveBytesProbe>(peak));
  }
  parameter_bytes = net->parameter_count() * static_cast<std::int64_t>(sizeof(float));
  auto sgd = std::make_shared<Sgd<float>>(net->parameters(), SgdOptions{.lr = 0.01});
  Trainer<Sequential<float>, Policy> trainer(net, sgd, {.progress_bar = false, .print_epochs = false},
                                             std::move(policy));
  for (int step = 0; step < 2; ++step) trainer.train_step(inputs, targets);
  return *peak - before;
}

// Zero3: between uses a rank holds its own parameters (1/N of them, up to one layer more on an
// uneven split) and the next layer's, prefetched: at most (1/N + 1/4) of the model, where
// DataParallel holds it whole (and its gradient buckets beside).
BOOST_AUTO_TEST_CASE(zero3_holds_its_own_parameters_only_between_uses) {
  MpiComm comm(test::session());
  std::int64_t parameter_bytes = 0;
  const std::int64_t data_parallel = forward_peak_bytes(comm, DataParallelPolicy(comm), parameter_bytes);
  const std::int64_t zero3 = forward_peak_bytes(comm, Zero3Policy(comm), parameter_bytes);
  BOOST_TEST_MESSAGE("live bytes in forward: DataParallel " << data_parallel << ", Zero3 " << zero3 << " (model "
                                                            << parameter_bytes << ")");
  BOOST_TEST(data_parallel >= parameter_bytes);
  BOOST_TEST(static_cast<double>(zero3) <= (1.0 / comm.size() + 0.25) * static_cast<double>(parameter_bytes));
}

// A checkpoint holds the whole model and optimizer state: written by Zero2 (Zero3) on the world (N
// ranks), loaded by Zero1 (DataParallel) on 2 ranks, whose checkpoint is loaded by Zero2 (Zero3) on
// 3 ranks (N = 4: 4 -> 2 -> 3), by DataParallel on 3 and by one process; each ends where one process training on every batch ends
// (Adam in double, within 1e-12).
// T bfloat16: under MixedPrecision<Bf16>, Opt stepping its masters.
template <class T = double, class Opt = std::shared_ptr<Adam<double>>, class... Policies>
std::vector<std::vector<double>> fit_epochs(MpiComm* comm, const std::filesystem::path& save_to,
                                            const std::filesystem::path& resume_from, int epochs,
                                            Policies... policies) {
  const int rank = comm ? comm->rank() : 0, world = comm ? comm->size() : 1;
  auto net = test::make_small_conv_net<T>(rank == 0 ? 1 : 100 + static_cast<std::uint64_t>(rank));
  const auto data = test::make_small_conv_batches<T>(steps, global_batch(), 7);
  const std::int64_t local = global_batch() / world;
  test::ListLoader<T> loader;
  for (int s = 0; s < steps; ++s) {
    const std::int64_t begin = rank * local;
    loader.batches.push_back({data.inputs[s].slice(begin, begin + local).clone(),
                              {data.targets[s].begin() + begin, data.targets[s].begin() + begin + local}});
  }
  const auto fit = [&](auto& trainer) {
    if (!save_to.empty()) trainer.save_checkpoints({.directory = save_to, .every_epochs = 1, .keep_last = 1});
    if (!resume_from.empty()) BOOST_REQUIRE(trainer.resume_latest(resume_from));
    trainer.fit(loader, epochs);
    gather_whole_model<Policies...>(trainer);
  };
  const TrainerOptions options{.progress_bar = false, .print_epochs = false};
  if constexpr (std::is_same_v<T, ptrain::bfloat16>) {
    MixedPrecision<ptrain::Bf16> mixed(*net);
    auto optimizer = make_optimizer(mixed.master_parameters(), static_cast<Opt*>(nullptr));
    Trainer<Sequential<T>, Policies..., MixedPrecision<ptrain::Bf16>> trainer(net, optimizer, options, policies...,
                                                                              mixed);
    fit(trainer);
  } else {
    auto optimizer = make_optimizer(net->parameters(), static_cast<Opt*>(nullptr));
    Trainer<Sequential<T>, Policies...> trainer(net, optimizer, options, policies...);
    fit(trainer);
  }
  return weights_of(*net);
}

using CheckpointStages = boost::mpl::list<Zero2, Zero3>;

BOOST_AUTO_TEST_CASE_TEMPLATE(a_checkpoint_resumes_on_another_world_size_stage_and_data_parallel, Stage,
                              CheckpointStages) {
  using Second = std::conditional_t<std::is_same_v<Stage, Zero3>, DataParallelPolicy, Zero1Policy>;
  MpiComm world(test::session());
  const int r = world.rank();
  const test::SharedDir first(world, "ptrain_sharded_first"), second(world, "ptrain_sharded_second");
  const Outcome reference{fit_epochs(nullptr, {}, {}, 3)};
  fit_epochs(&world, first.path, {}, 1, Sharded<Stage>(world));
  world.barrier();
  {
    MpiComm pair = world.split(r < 2 ? 0 : 1, r);
    if (r < 2) fit_epochs(&pair, second.path, first.path, 2, Second(pair));
  }
  world.barrier();
  const int three = std::min(world.size(), 3);
  MpiComm trio = world.split(r < three ? 0 : 1, r);
  if (r < three) {
    const Outcome sharded{fit_epochs(&trio, {}, second.path, 3, Sharded<Stage>(trio))};
    const Outcome data_parallel{fit_epochs(&trio, {}, second.path, 3, DataParallelPolicy(trio))};
    BOOST_TEST(max_difference(sharded, reference) <= 1e-12);
    BOOST_TEST(max_difference(data_parallel, reference) <= 1e-12);
  }
  const Outcome one{fit_epochs(nullptr, {}, second.path, 3)};
  BOOST_TEST(max_difference(one, reference) <= 1e-12);
  // The checkpoint holds every parameter's Adam state (step, exp_avg, exp_avg_sq), not rank 0's part.
  const auto saved = checkpoint::read_state<double>(checkpoint::latest(second.path).value() / "optimizer.safetensors");
  BOOST_TEST(saved.tensors.size() == 3 * reference.weights.size());
}

// Under MixedPrecision each rank keeps its own masters, yet the checkpoint holds them all
// ("master.<index>", gathered for it): written by Sharded on N ranks after one epoch, it resumes
// Sharded to the weights of three epochs in one go, to the bit (with SGD + momentum on the
// masters), and DataParallel from Zero1's (the same arithmetic) to DataParallel's; one process
// loads it too (every master is there, of its shape).
BOOST_AUTO_TEST_CASE_TEMPLATE(with_mixed_precision_a_checkpoint_holds_every_master, Stage, Stages) {
  using Opt = std::shared_ptr<Sgd<float>>;
  MpiComm world(test::session());
  const test::SharedDir saved(world, "ptrain_sharded_mixed");
  const Outcome straight{fit_epochs<ptrain::bfloat16, Opt>(&world, {}, {}, 3, Sharded<Stage>(world))};
  fit_epochs<ptrain::bfloat16, Opt>(&world, saved.path, {}, 1, Sharded<Stage>(world));
  const Outcome resumed{fit_epochs<ptrain::bfloat16, Opt>(&world, {}, saved.path, 3, Sharded<Stage>(world))};
  BOOST_TEST(max_difference(resumed, straight) == 0.0);
  if constexpr (std::is_same_v<Stage, Zero1>) {
    const Outcome data_parallel{fit_epochs<ptrain::bfloat16, Opt>(&world, {}, {}, 3, DataParallelPolicy(world))};
    const Outcome resumed_data_parallel{
        fit_epochs<ptrain::bfloat16, Opt>(&world, {}, saved.path, 3, DataParallelPolicy(world))};
    BOOST_TEST(max_difference(resumed_data_parallel, data_parallel) == 0.0);
  }
  fit_epochs<ptrain::bfloat16, Opt>(nullptr, {}, saved.path, 2);
  const auto policies = checkpoint::read_state<float>(checkpoint::latest(saved.path).value() / "policies.safetensors");
  BOOST_TEST(policies.tensors.size() == straight.weights.size());  // master.0 .. master.5
}

BOOST_AUTO_TEST_SUITE_END()
