// MixedPrecision<Fp16> under a Pipeline (mpiexec -n 2 and 3, a stage per rank): the masters track
// the serial mixed-precision run closely and the serial fp32 run within fp16's error; the stages
// skip overflowing steps together, so the loss scale moves in step on every rank as in the serial
// run; a veto on one stage alone is every stage's.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/parallel/mixed_precision.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/compare.hpp"
#include "../common/stdout_capture.hpp"
#include "mpi_test_main.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(pipeline_mixed_precision_test)

namespace {

constexpr std::int64_t batch = 12;
constexpr int steps = 8;
constexpr TrainerOptions quiet{.progress_bar = false, .print_epochs = false};
// Above what this network's fp16 gradients bear (they overflow from about 2^18): the first step
// overflows and halves it, after which it doubles every 3 clean steps and overflows again. Not a
// power of two, so no scale sits at the edge where rounding decides.
constexpr LossScalerOptions overflowing{.initial_scale = 3 * 131072.0, .scale_window = 3};
// Below it: no step overflows.
constexpr LossScalerOptions fitting{.initial_scale = 256.0};

template <class T>
std::shared_ptr<Sequential<T>> make_net() {
  manual_seed(5);
  Conv2dOptions same;
  same.pad_h = same.pad_w = 1;
  auto net = std::make_shared<Sequential<float>>(std::initializer_list<std::shared_ptr<Module<float>>>{
      make<Conv2d<float>>(2, 4, 3, same), make<ReLU<float>>(), make<Conv2d<float>>(4, 4, 3, same),
      make<MaxPool2d<float>>(2), make<Flatten<float>>(), make<Linear<float>>(4 * 4 * 4, 8), make<ReLU<float>>(),
      make<Linear<float>>(8, 3)});
  if constexpr (std::is_same_v<T, float>) {
    return net;
  } else {
    auto low = std::make_shared<Sequential<T>>(std::initializer_list<std::shared_ptr<Module<T>>>{
        make<Conv2d<T>>(2, 4, 3, same), make<ReLU<T>>(), make<Conv2d<T>>(4, 4, 3, same), make<MaxPool2d<T>>(2),
        make<Flatten<T>>(), make<Linear<T>>(4 * 4 * 4, 8), make<ReLU<T>>(), make<Linear<T>>(8, 3)});
    const auto from = net->parameters();
    auto to = low->parameters();
    for (std::size_t i = 0; i < to.size(); ++i) to[i].value().copy_from(tensor_cast<T>(from[i].value()));
    return low;
  }
}

struct Batch {
  Tensor<float> inputs;
  std::vector<std::int64_t> targets;
};

std::vector<Batch> make_batches() {
  Rng rng(17);
  std::vector<Batch> out;
  for (int s = 0; s < steps; ++s) {
    Batch b{Tensor<float>({batch, 2, 8, 8}), {}};
    for (std::int64_t i = 0; i < b.inputs.numel(); ++i) b.inputs[i] = static_cast<float>(rng.normal());
    for (std::int64_t i = 0; i < batch; ++i) b.targets.push_back(static_cast<std::int64_t>(rng.below(3)));
    out.push_back(std::move(b));
  }
  return out;
}

SgdOptions sgd_options() { return {.lr = 0.05, .momentum = 0.9}; }

struct Run {
  std::vector<double> scales;  // after each step
  std::map<std::string, Tensor<float>> weights;  // the masters (fp32 runs: the weights), by name
};

// A policy that vetoes one step on one rank: a stage's overflow the others did not see.
struct VetoOnce {
  int rank = -1, step = -1, seen = 0;
  bool before_optimizer_step(Module<half>&) { return !(seen++ == step && detect_process_info().rank == rank); }
};

Run serial_fp32(const std::vector<Batch>& data) {
  auto net = make_net<float>();
  Trainer<Sequential<float>> trainer(net, std::make_shared<Sgd<float>>(net->parameters(), sgd_options()), quiet);
  Run r;
  for (const auto& b : data) trainer.train_step(b.inputs, b.targets);
  for (auto& [name, p] : net->named_parameters()) r.weights[name] = p.value().clone();
  return r;
}

// The mixed-precision run: serial with no Policies, else under them (the Pipeline first). The
// masters of the parameters this rank trains, by name.
template <class... Policies>
Run mixed(const std::vector<Batch>& data, LossScalerOptions scaling, Policies... policies) {
  auto net = make_net<half>();
  MixedPrecision<Fp16> amp(*net, scaling);
  auto sgd = std::make_shared<Sgd<float>>(amp.master_parameters(), sgd_options());
  Trainer<Sequential<half>, Policies..., MixedPrecision<Fp16>> trainer(net, sgd, quiet, policies..., amp);
  Run r;
  {
    test::StdoutCapture quiet_overflow_lines;
    for (const auto& b : data) {
      trainer.train_step(tensor_cast<half>(b.inputs), b.targets);
      r.scales.push_back(trainer.template policy<MixedPrecision<Fp16>>().loss_scale());
    }
  }
  const auto masters = trainer.template policy<MixedPrecision<Fp16>>().master_parameters();
  const auto named = net->named_parameters();
  std::vector<const void*> local;
  for (const auto& p : trainer.local_model().parameters()) local.push_back(p.node().get());
  for (std::size_t i = 0; i < named.size(); ++i)
    if (std::find(local.begin(), local.end(), named[i].second.node().get()) != local.end())
      r.weights[named[i].first] = masters[i].value().clone();
  return r;
}

double worst_weight_error(const Run& run, const Run& reference) {
  double worst = 0;
  for (const auto& [name, w] : run.weights) worst = std::max(worst, test::worst_error(w, reference.weights.at(name)));
  return worst;
}

std::string listed(const std::vector<double>& scales) {
  std::string text;
  for (double s : scales) text += std::to_string(static_cast<long long>(s)) + " ";
  return text;
}

void check_same_on_every_rank(MpiComm& world, const std::vector<double>& scales) {
  const std::size_t n = scales.size();
  std::vector<double> all(n * static_cast<std::size_t>(world.size()));
  world.allgather(std::span<const double>(scales), std::span<double>(all));
  for (int r = 0; r < world.size(); ++r)
    BOOST_TEST(std::equal(scales.begin(), scales.end(), all.begin() + static_cast<std::ptrdiff_t>(r * n)),
               "rank " << r << "'s loss scales differ from rank " << world.rank() << "'s");
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_stages_track_the_serial_fp16_and_fp32_runs) {
  MpiComm world(test::session());
  const auto data = make_batches();
  const Run fp32 = serial_fp32(data), serial = mixed(data, fitting);
  const Run piped = mixed(data, fitting, Pipeline<4>(world, {.print_plan = false}));
  BOOST_TEST(piped.scales == std::vector<double>(steps, fitting.initial_scale), boost::test_tools::per_element());
  BOOST_REQUIRE(!piped.weights.empty());
  const double to_serial = worst_weight_error(piped, serial), to_fp32 = worst_weight_error(piped, fp32);
  BOOST_TEST_MESSAGE("stage " << world.rank() << ": masters against serial fp16 " << to_serial << ", against fp32 "
                              << to_fp32 << " (relative)");
  BOOST_TEST(to_serial <= 1e-4);  // fp16 gradients summed over micro-batches in another order
  BOOST_TEST(to_fp32 <= 2e-2);    // fp16's rounding of activations and gradients, over 8 steps (0.008 here)
}

BOOST_AUTO_TEST_CASE(the_stages_skip_overflows_together_as_the_serial_run_does) {
  MpiComm world(test::session());
  const auto data = make_batches();
  const Run serial = mixed(data, overflowing);
  const Run piped = mixed(data, overflowing, Pipeline<4>(world, {.print_plan = false}));
  BOOST_TEST_MESSAGE("rank " << world.rank() << ": loss scales after each step, serial: " << listed(serial.scales)
                              << "pipeline: " << listed(piped.scales));
  BOOST_TEST(serial.scales.front() < overflowing.initial_scale, "the first step overflowed");
  BOOST_TEST(serial.scales.back() > *std::min_element(serial.scales.begin(), serial.scales.end()),
             "later steps were taken and the scale grew again");
  BOOST_TEST(piped.scales == serial.scales, boost::test_tools::per_element());
  check_same_on_every_rank(world, piped.scales);
  BOOST_TEST(worst_weight_error(piped, serial) <= 1e-4);
}

BOOST_AUTO_TEST_CASE(one_stages_veto_skips_the_step_on_every_stage) {
  MpiComm world(test::session());
  const auto data = make_batches();
  const int last = world.size() - 1, veto_step = 5;
  const Run piped = mixed(data, fitting, Pipeline<4>(world, {.print_plan = false}));
  const Run vetoed =
      mixed(data, fitting, Pipeline<4>(world, {.print_plan = false}), VetoOnce{.rank = last, .step = veto_step});
  // Step 5 skipped on every stage: the scale halved everywhere, and every stage's masters lag.
  std::vector<double> expected(steps, fitting.initial_scale);
  std::fill(expected.begin() + veto_step, expected.end(), fitting.initial_scale / 2);
  BOOST_TEST(vetoed.scales == expected, boost::test_tools::per_element());
  check_same_on_every_rank(world, vetoed.scales);
  BOOST_TEST(worst_weight_error(vetoed, piped) > 1e-3, "stage " << world.rank() << " took the vetoed step");
}

BOOST_AUTO_TEST_SUITE_END()
