// DataParallel under mpiexec -n 2 and -n 3 (and 8 and 16, selected cases): N ranks each training
// on B/N of every batch end with the weights of one process training on all B, whatever the
// bucket size, with gradient accumulation, with fp16/bf16 on the wire (within a stated
// tolerance); fp16 moves half the bytes; fp32 gradients are averaged in place;
// a parameter unused on some ranks does not hang the step; a mismatched model is reported on
// every rank; ranks whose loaders give different numbers of batches agree on one count; a half
// model's float batch norm weights under MixedPrecision are averaged as the rest.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/ops/arithmetic.hpp>
#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/data/sampler.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/parallel/sync_batch_norm.hpp>
#include <ptrain/parallel/mixed_precision.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/list_loader.hpp"
#include "mpi_test_main.hpp"
#include "small_conv_net.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(data_parallel_test)

namespace {

// Divisible by 1, 2, 3 ranks and by 2 micro-batches; 2 rows a rank past 4 ranks.
std::int64_t global_batch() { return test::global_batch_for(12, 2); }
constexpr int steps = 3;

template <class T>
std::shared_ptr<Sequential<T>> make_net(std::uint64_t seed) {
  return test::make_small_conv_net<T>(seed);
}

using test::Batches;

template <class T>
Batches<T> make_batches() {
  return test::make_small_conv_batches<T>(steps, global_batch(), 99);
}

template <class T>
std::shared_ptr<Sgd<T>> make_sgd(Sequential<T>& net) {
  return std::make_shared<Sgd<T>>(net.parameters(), SgdOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3});
}

// The serial run: one process, the whole batch each step.
template <class T>
std::vector<Tensor<T>> serial_weights(const Batches<T>& data) {
  auto net = make_net<T>(1);
  Trainer<Sequential<T>> trainer(net, make_sgd(*net), {.progress_bar = false, .print_epochs = false});
  for (int s = 0; s < steps; ++s) trainer.train_step(data.inputs[s], data.targets[s]);
  std::vector<Tensor<T>> out;
  for (auto& p : net->parameters()) out.push_back(p.value().clone());
  return out;
}

// The same run data-parallel: this rank trains on its rows of every batch, in `micro` micro-batches.
template <class T, class Compression>
std::vector<Tensor<T>> parallel_weights(MpiComm& comm, const Batches<T>& data, std::size_t bucket_bytes, int micro,
                                        std::uint64_t* bytes = nullptr, WireFormat wire = WireFormat::fp32) {
  // Every rank but 0 starts from other weights: setup must broadcast rank 0's.
  auto net = make_net<T>(comm.rank() == 0 ? 1 : 100 + static_cast<std::uint64_t>(comm.rank()));
  using DP = DataParallel<MpiAllreduce, Compression>;
  Trainer<Sequential<T>, DP> trainer(net, make_sgd(*net),
                                     {.progress_bar = false, .print_epochs = false, .accumulation_steps = micro},
                                     DP(comm, {.bucket_bytes = bucket_bytes, .compression = wire}));
  const std::int64_t local = global_batch() / comm.size(), part = local / micro;
  const std::uint64_t before = comm.bytes_sent();
  for (int s = 0; s < steps; ++s)
    for (int m = 0; m < micro; ++m) {
      const std::int64_t begin = comm.rank() * local + m * part;
      const std::vector<std::int64_t> y(data.targets[s].begin() + begin, data.targets[s].begin() + begin + part);
      trainer.train_step(data.inputs[s].slice(begin, begin + part).clone(), y);
    }
  if (bytes) *bytes = comm.bytes_sent() - before;
  std::vector<Tensor<T>> out;
  for (auto& p : net->parameters()) out.push_back(p.value().clone());
  return out;
}

template <class T>
double max_difference(const std::vector<Tensor<T>>& a, const std::vector<Tensor<T>>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, static_cast<double>((a[i].array() - b[i].array()).abs().maxCoeff()));
  return worst;
}

// How far training moved the weights from their start (the scale of the fp16/bf16 tolerances).
template <class T>
double largest_update(const std::vector<Tensor<T>>& trained) {
  auto start = make_net<T>(1)->parameters();
  double worst = 0;
  for (std::size_t i = 0; i < trained.size(); ++i)
    worst = std::max(worst, static_cast<double>((trained[i].array() - start[i].value().array()).abs().maxCoeff()));
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_CASE(equals_the_serial_run_in_double_whatever_the_bucket_size) {
  MpiComm comm(test::session());
  const auto data = make_batches<double>();
  const auto reference = serial_weights(data);
  for (std::size_t bucket_bytes : {std::size_t{256}, std::size_t{4096}, std::size_t{25} << 20}) {
    const auto parallel = parallel_weights<double, Fp32>(comm, data, bucket_bytes, 1);
    BOOST_TEST(max_difference(parallel, reference) < 1e-12, "bucket_bytes " << bucket_bytes);
  }
}

BOOST_AUTO_TEST_CASE(equals_the_serial_run_in_float_within_1e_5_relative) {
  MpiComm comm(test::session());
  const auto data = make_batches<float>();
  const auto reference = serial_weights(data);
  for (std::size_t bucket_bytes : {std::size_t{512}, std::size_t{25} << 20}) {
    const auto parallel = parallel_weights<float, Fp32>(comm, data, bucket_bytes, 1);
    for (std::size_t i = 0; i < reference.size(); ++i) {
      const double scale = std::max(1.0, static_cast<double>(reference[i].array().abs().maxCoeff()));
      BOOST_TEST(max_difference<float>({parallel[i]}, {reference[i]}) <= 1e-5 * scale, "parameter " << i);
    }
  }
}

BOOST_AUTO_TEST_CASE(gradient_accumulation_synchronises_only_on_the_last_micro_step) {
  MpiComm comm(test::session());
  const auto data = make_batches<double>();
  const auto reference = serial_weights(data);
  std::uint64_t accumulated = 0, plain = 0;
  const auto parallel = parallel_weights<double, Fp32>(comm, data, 4096, 2, &accumulated);
  parallel_weights<double, Fp32>(comm, data, 4096, 1, &plain);
  BOOST_TEST(max_difference(parallel, reference) < 1e-12);
  // Two micro-steps per optimizer step, and the same bytes as one: the first kept its gradients local.
  BOOST_TEST(accumulated == plain);
}

BOOST_AUTO_TEST_CASE(fp16_and_bf16_on_the_wire_stay_within_their_precision) {
  MpiComm comm(test::session());
  const auto data = make_batches<float>();
  const auto reference = serial_weights(data);
  const double moved = largest_update(reference);
  std::uint64_t fp32_bytes = 0, fp16_bytes = 0, bf16_bytes = 0;
  parallel_weights<float, Fp32>(comm, data, 1024, 1, &fp32_bytes);
  const auto fp16 = parallel_weights<float, Fp16>(comm, data, 1024, 1, &fp16_bytes);
  const auto bf16 = parallel_weights<float, Bf16>(comm, data, 1024, 1, &bf16_bytes);
  // Stated tolerances: the largest weight error stays below 1% (fp16, 11-bit mantissa) and 5%
  // (bf16, 8-bit mantissa) of the largest weight update the serial run made.
  BOOST_TEST(max_difference(fp16, reference) <= 0.01 * moved);
  BOOST_TEST(max_difference(bf16, reference) <= 0.05 * moved);
  BOOST_TEST(fp16_bytes * 2 == fp32_bytes);
  BOOST_TEST(bf16_bytes * 2 == fp32_bytes);
  // Fp32 reduces every gradient once: the parameters' element count times 4 bytes per step.
  std::uint64_t elements = 0;
  for (auto& p : make_net<float>(1)->parameters()) elements += static_cast<std::uint64_t>(p.numel());
  BOOST_TEST(fp32_bytes == elements * sizeof(float) * steps);
}

// The format read at run time gives the bytes and the weights of the format in the type.
BOOST_AUTO_TEST_CASE(compression_chosen_at_run_time_equals_the_one_in_the_type) {
  MpiComm comm(test::session());
  const auto data = make_batches<float>();
  const std::pair<WireFormat, std::vector<Tensor<float>> (*)(MpiComm&, const Batches<float>&, std::size_t, int,
                                                             std::uint64_t*, WireFormat)>
      formats[] = {{WireFormat::fp32, parallel_weights<float, Fp32>},
                   {WireFormat::fp16, parallel_weights<float, Fp16>},
                   {WireFormat::bf16, parallel_weights<float, Bf16>}};
  for (const auto& [wire, in_type] : formats) {
    std::uint64_t typed_bytes = 0, runtime_bytes = 0;
    const auto typed = in_type(comm, data, 1024, 1, &typed_bytes, WireFormat::fp32);
    const auto runtime = parallel_weights<float, RuntimeCompression>(comm, data, 1024, 1, &runtime_bytes, wire);
    BOOST_TEST(max_difference(runtime, typed) == 0.0, "format " << static_cast<int>(wire));
    BOOST_TEST(runtime_bytes == typed_bytes, "format " << static_cast<int>(wire));
  }
  // With the format in the type, the run-time option is refused rather than ignored.
  BOOST_CHECK_THROW((DataParallel<MpiAllreduce, Fp16>(comm, {.compression = WireFormat::bf16})), Error);
}

// Fp32 in host memory: each gradient is averaged in the tensor backward left it in (no copy into a
// bucket and back), and equals the whole batch's gradient.
BOOST_AUTO_TEST_CASE(fp32_gradients_are_averaged_where_backward_left_them) {
  MpiComm comm(test::session());
  const auto data = make_batches<double>();
  auto serial = make_net<double>(1);
  backward(cross_entropy(serial->forward(Var<double>(data.inputs[0])), data.targets[0]));

  auto net = make_net<double>(1);
  DataParallel<MpiAllreduce, Fp32> dp(comm, {.bucket_bytes = 512});
  dp.setup(*net);
  const std::int64_t local = global_batch() / comm.size(), begin = comm.rank() * local;
  const std::vector<std::int64_t> y(data.targets[0].begin() + begin, data.targets[0].begin() + begin + local);
  dp.before_backward(*net, true);
  backward(cross_entropy(net->forward(Var<double>(data.inputs[0].slice(begin, begin + local).clone())), y));
  auto params = net->parameters();
  std::vector<const double*> left_at;
  for (auto& p : params) left_at.push_back(p.grad().data());
  dp.before_optimizer_step(*net);
  const auto expected = serial->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    BOOST_TEST(params[i].grad().data() == left_at[i], "parameter " << i);
    BOOST_TEST((params[i].grad().array() - expected[i].grad().array()).abs().maxCoeff() < 1e-14, "parameter " << i);
  }
}

namespace {
// Two heads; the second is used only on rank 0, so on the other ranks its gradient never comes.
class TwoHeads : public Module<double> {
 public:
  explicit TwoHeads(bool use_b) : use_b_(use_b) {
    manual_seed(5);
    a = register_module("a", make<Linear<double>>(4, 2));
    b = register_module("b", make<Linear<double>>(4, 2));
  }
  Var<double> forward(const Var<double>& x) override {
    return use_b_ ? add(a->forward(x), b->forward(x)) : a->forward(x);
  }
  std::shared_ptr<Linear<double>> a, b;

 private:
  bool use_b_;
};
}  // namespace

BOOST_AUTO_TEST_CASE(a_parameter_without_gradient_on_some_ranks_does_not_hang) {
  MpiComm comm(test::session());
  Tensor<double> x({2, 4});
  for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = 0.1 * static_cast<double>(i + 1);
  const std::vector<std::int64_t> y{0, 1};
  // Rank 0's local gradient of head b, computed here on every rank.
  TwoHeads alone(true);
  backward(cross_entropy(alone.forward(Var<double>(x)), y));
  const Tensor<double> rank0_grad = alone.b->weight.grad().clone();

  auto net = std::make_shared<TwoHeads>(comm.rank() == 0);
  DataParallel<MpiAllreduce, Fp32> dp(comm, {.bucket_bytes = 64});
  dp.setup(*net);
  dp.before_backward(*net, true);
  backward(cross_entropy(net->forward(Var<double>(x)), y));
  dp.before_optimizer_step(*net);
  // Rank 0's contribution averaged with zeros from the others.
  const auto expected = rank0_grad.array() / static_cast<double>(comm.size());
  BOOST_TEST((net->b->weight.grad().array() - expected).abs().maxCoeff() < 1e-14);
}

BOOST_AUTO_TEST_CASE(frozen_parameters_are_not_reduced_and_stay_put) {
  MpiComm comm(test::session());
  auto net = make_net<double>(1);
  (*net)[0]->set_requires_grad(false);
  const Tensor<double> frozen = (*net)[0]->parameters()[0].value().clone();
  using DP = DataParallel<MpiAllreduce, Fp32>;
  Trainer<Sequential<double>, DP> trainer(net, make_sgd(*net), {.progress_bar = false, .print_epochs = false},
                                          DP(comm));
  const auto data = make_batches<double>();
  const std::uint64_t before = comm.bytes_sent();
  trainer.train_step(data.inputs[0], data.targets[0]);
  std::uint64_t trainable = 0;
  for (auto& p : net->parameters())
    if (p.requires_grad()) trainable += static_cast<std::uint64_t>(p.numel());
  BOOST_TEST(comm.bytes_sent() - before == trainable * sizeof(double));
  BOOST_TEST(((*net)[0]->parameters()[0].value().array() == frozen.array()).all());
}

BOOST_AUTO_TEST_CASE(a_mismatched_model_is_reported_on_every_rank) {
  MpiComm comm(test::session());
  // Rank 1 builds a wider hidden layer: every rank must get the same error naming it.
  manual_seed(1);
  Sequential<double> net{make<Linear<double>>(4, comm.rank() == 1 ? 9 : 8), make<Linear<double>>(8, 2)};
  DataParallel<MpiAllreduce, Fp32> dp(comm);
  try {
    dp.setup(net);
    BOOST_FAIL("expected the model check to fail");
  } catch (const Error& e) {
    const std::string what = e.what();
    BOOST_TEST(what.find("the model differs between ranks") != std::string::npos, what);
    BOOST_TEST(what.find("'parameter 0.weight [8, 4]' on rank 0 but 'parameter 0.weight [9, 4]' on rank 1") !=
                   std::string::npos,
               what);
  }
}

BOOST_AUTO_TEST_CASE(the_distributed_sampler_covers_the_dataset_once_per_epoch_across_ranks) {
  MpiComm comm(test::session());
  constexpr std::int64_t n = 13;
  DistributedSampler sampler(n, comm.size(), comm.rank(), true, 7, false);
  std::vector<std::vector<double>> epochs;
  for (int epoch = 0; epoch < 2; ++epoch) {
    const auto mine = sampler.indices(epoch);
    std::vector<double> local(mine.begin(), mine.end()), all(local.size() * static_cast<std::size_t>(comm.size()));
    comm.allgather(std::span<const double>(local), std::span<double>(all));
    std::vector<int> seen(n, 0);
    for (double i : all) ++seen[static_cast<std::size_t>(i)];
    // Padding repeats the head of the permutation so every rank gets the same count.
    const std::int64_t padded = static_cast<std::int64_t>(all.size()) - n;
    std::int64_t extra = 0;
    for (int s : seen) {
      BOOST_TEST(s >= 1);
      extra += s - 1;
    }
    BOOST_TEST(extra == padded);
    epochs.push_back(all);
  }
  BOOST_TEST(epochs[0] != epochs[1]);
}

BOOST_AUTO_TEST_CASE(sync_batch_norm_makes_a_batch_norm_model_equal_the_serial_run) {
  MpiComm comm(test::session());
  MpiComm bn_comm = comm.split(0, comm.rank());  // the blocking statistics sums get their own communicator
  const auto data = make_batches<double>();
  const auto make_bn_net = test::make_small_batch_norm_net<double>;
  auto serial = make_bn_net(1);
  Trainer<Sequential<double>> reference(serial, make_sgd(*serial), {.progress_bar = false, .print_epochs = false});
  for (int s = 0; s < steps; ++s) reference.train_step(data.inputs[s], data.targets[s]);

  auto net = make_bn_net(comm.rank() == 0 ? 1 : 7);
  BOOST_TEST(convert_sync_batchnorm(*net, bn_comm) == (comm.size() > 1 ? 1u : 0u));
  using DP = DataParallel<MpiAllreduce, Fp32>;
  Trainer<Sequential<double>, DP> trainer(net, make_sgd(*net), {.progress_bar = false, .print_epochs = false}, DP(comm));
  const std::int64_t local = global_batch() / comm.size();
  for (int s = 0; s < steps; ++s) {
    const std::int64_t begin = comm.rank() * local;
    trainer.train_step(data.inputs[s].slice(begin, begin + local).clone(),
                       {data.targets[s].begin() + begin, data.targets[s].begin() + begin + local});
  }
  const auto expected = serial->parameters();
  const auto got = net->parameters();
  for (std::size_t i = 0; i < got.size(); ++i)
    BOOST_TEST((got[i].value().array() - expected[i].value().array()).abs().maxCoeff() < 1e-10, "parameter " << i);
  const auto expected_buffers = serial->named_buffers();
  const auto got_buffers = net->named_buffers();
  for (std::size_t i = 0; i < got_buffers.size(); ++i)
    BOOST_TEST((got_buffers[i].second->array() - expected_buffers[i].second->array()).abs().maxCoeff() < 1e-10,
               got_buffers[i].first);
}

// MixedPrecision<Fp16> beside DataParallel on a half model with SyncBatchNorm: its batch norm
// weight and bias are float parameters (their own masters), with gradient buckets of their own.
// Every rank ends with the same float weights, bit for bit, and the run tracks the serial one on
// the whole batch within fp16's rounding (the ranks' gradients are summed in half). Without the
// float buckets each rank would step its batch norm on its own gradient and the ranks would part.
BOOST_AUTO_TEST_CASE(mixed_precision_averages_a_half_models_float_batch_norm_weights) {
  MpiComm comm(test::session());
  MpiComm bn_comm = comm.split(0, comm.rank());
  const auto data = make_batches<double>();
  const auto make_half_net = test::make_small_batch_norm_net<half>;
  const TrainerOptions quiet{.progress_bar = false, .print_epochs = false};
  const LossScalerOptions scaling{.initial_scale = 1024};
  const auto sgd_on = [](const MixedPrecision<Fp16>& amp) {
    return std::make_shared<Sgd<float>>(amp.master_parameters(), SgdOptions{.lr = 0.1, .momentum = 0.9});
  };
  auto serial = make_half_net(1);
  MixedPrecision<Fp16> serial_amp(*serial, scaling);
  Trainer<Sequential<half>, MixedPrecision<Fp16>> reference(serial, sgd_on(serial_amp), quiet, serial_amp);
  for (int s = 0; s < steps; ++s) reference.train_step(tensor_cast<half>(data.inputs[s]), data.targets[s]);

  auto net = make_half_net(comm.rank() == 0 ? 1 : 7);
  convert_sync_batchnorm(*net, bn_comm);
  MixedPrecision<Fp16> amp(*net, scaling);
  using DP = DataParallel<MpiAllreduce, Fp32>;
  Trainer<Sequential<half>, DP, MixedPrecision<Fp16>> trainer(net, sgd_on(amp), quiet, DP(comm), amp);
  const std::int64_t local = global_batch() / comm.size();
  for (int s = 0; s < steps; ++s) {
    const std::int64_t begin = comm.rank() * local;
    trainer.train_step(tensor_cast<half>(data.inputs[s].slice(begin, begin + local).clone()),
                       {data.targets[s].begin() + begin, data.targets[s].begin() + begin + local});
  }
  const auto& masters = trainer.policy<MixedPrecision<Fp16>>().master_parameters();
  const auto& expected = reference.policy<MixedPrecision<Fp16>>().master_parameters();
  BOOST_REQUIRE_EQUAL(masters.size(), expected.size());
  const auto bn = std::dynamic_pointer_cast<BatchNorm2d<half>>((*net)[1]);
  BOOST_TEST((masters[masters.size() - 2].node() == bn->weight.node()), "the float weight is its own master");
  for (std::size_t i = 0; i < masters.size(); ++i) {
    const Tensor<float> got = masters[i].value(), want = expected[i].value();
    double diff = 0, scale = 1;
    for (std::int64_t k = 0; k < want.numel(); ++k) {
      diff = std::max(diff, std::abs(double(got[k]) - double(want[k])));
      scale = std::max(scale, std::abs(double(want[k])));
    }
    BOOST_TEST(diff / scale <= 1e-2, "master " << i << " differs from the serial run's by " << diff / scale);
  }
  for (const Var<float>& p : {bn->weight, bn->bias}) {
    Tensor<float> root = p.value().clone();
    comm.broadcast(root, 0);
    BOOST_TEST((root.array() == p.value().array()).all(), "a rank's batch norm weights part from rank 0's");
  }
}

namespace {
// Every rank's buffers, flattened, in rank order: size() blocks of one rank's values each.
std::vector<double> every_ranks_buffers(MpiComm& comm, Sequential<double>& net) {
  std::vector<double> mine;
  for (auto& [name, b] : net.named_buffers())
    for (std::int64_t i = 0; i < b->numel(); ++i) mine.push_back((*b)[i]);
  std::vector<double> all(mine.size() * static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const double>(mine), std::span<double>(all));
  return all;
}

// Two steps on data of this rank's own, with or without broadcast_buffers; every rank's buffers after.
std::vector<double> buffers_after_steps_on_own_data(MpiComm& comm, bool broadcast_buffers, std::size_t* per_rank) {
  manual_seed(3);
  auto net = std::make_shared<Sequential<double>>(std::initializer_list<std::shared_ptr<Module<double>>>{
      make<Conv2d<double>>(2, 4, 3), make<BatchNorm2d<double>>(4), make<ReLU<double>>(), make<Flatten<double>>(),
      make<Linear<double>>(4 * 6 * 6, 3)});
  using DP = DataParallel<MpiAllreduce, Fp32>;
  Trainer<Sequential<double>, DP> trainer(net, make_sgd(*net), {.progress_bar = false, .print_epochs = false},
                                          DP(comm, {.broadcast_buffers = broadcast_buffers}));
  Rng rng(10 + static_cast<std::uint64_t>(comm.rank()));
  for (int s = 0; s < 2; ++s) {
    Tensor<double> x({4, 2, 8, 8});
    for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = rng.normal(comm.rank(), 1.0 + comm.rank());
    trainer.train_step(x, {0, 1, 2, 0});
  }
  std::size_t n = 0;
  for (auto& [name, b] : net->named_buffers()) n += static_cast<std::size_t>(b->numel());
  *per_rank = n;
  return every_ranks_buffers(comm, *net);
}
}  // namespace

BOOST_AUTO_TEST_CASE(broadcast_buffers_ends_every_step_with_rank_0s_running_statistics) {
  MpiComm comm(test::session());
  std::size_t n = 0;
  const auto on = buffers_after_steps_on_own_data(comm, true, &n);
  for (int r = 1; r < comm.size(); ++r)
    for (std::size_t i = 0; i < n; ++i)
      BOOST_TEST_REQUIRE(on[r * n + i] == on[i], "rank " << r << " buffer element " << i);
  // Off, each rank keeps the statistics of its own data: the ranks differ.
  const auto off = buffers_after_steps_on_own_data(comm, false, &n);
  for (int r = 1; r < comm.size(); ++r) {
    bool differs = false;
    for (std::size_t i = 0; i < n; ++i) differs = differs || off[r * n + i] != off[i];
    BOOST_TEST(differs, "rank " << r);
  }
  // Rank 0's own statistics are the same either way: the broadcast only replaces the others'.
  for (std::size_t i = 0; i < n; ++i) BOOST_TEST_REQUIRE(on[i] == off[i], "buffer element " << i);
}


namespace {
using ListLoader = test::ListLoader<double>;

// count batches of 4 examples, from this rank's own random stream.
ListLoader loader_of(int count, std::uint64_t seed) {
  Rng rng(seed);
  ListLoader loader;
  for (int b = 0; b < count; ++b) {
    Tensor<double> x({4, 2, 8, 8});
    for (std::int64_t i = 0; i < x.numel(); ++i) x[i] = rng.normal();
    loader.batches.push_back({x, {0, 1, 2, 0}});
  }
  return loader;
}

std::vector<double> every_ranks_weights(MpiComm& comm, Sequential<double>& net) {
  std::vector<double> mine;
  for (auto& p : net.parameters())
    for (std::int64_t i = 0; i < p.value().numel(); ++i) mine.push_back(p.value()[i]);
  std::vector<double> all(mine.size() * static_cast<std::size_t>(comm.size()));
  comm.allgather(std::span<const double>(mine), std::span<double>(all));
  return all;
}
}  // namespace

// Rank r's loader has 2 + r batches: without an agreement the last rank would wait forever in an
// allreduce the others never start. Every rank trains 2 batches per epoch and ends with the same
// weights.
BOOST_AUTO_TEST_CASE(ranks_with_different_batch_counts_train_the_fewest_and_agree) {
  MpiComm comm(test::session());
  auto net = make_net<double>(1);
  using DP = DataParallel<MpiAllreduce, Fp32>;
  Trainer<Sequential<double>, DP> trainer(net, make_sgd(*net), {.progress_bar = false, .print_epochs = false},
                                          DP(comm));
  ListLoader loader = loader_of(2 + comm.rank(), 50 + static_cast<std::uint64_t>(comm.rank()));
  const auto results = trainer.fit(loader, 2);
  BOOST_TEST(trainer.global_step() == 4);  // 2 epochs of 2 batches, on every rank
  BOOST_TEST(results.size() == 2u);
  const std::vector<double> all = every_ranks_weights(comm, *net);
  const std::size_t n = all.size() / static_cast<std::size_t>(comm.size());
  for (int r = 1; r < comm.size(); ++r)
    for (std::size_t i = 0; i < n; ++i) BOOST_TEST_REQUIRE(all[r * n + i] == all[i], "rank " << r << " weight " << i);
}

// Counts that cannot be reconciled end every rank with the same message naming the ranks and
// their counts: a rank without a batch, or any difference under UnevenInputs::fail.
BOOST_AUTO_TEST_CASE(unreconcilable_batch_counts_name_the_ranks_and_their_counts) {
  MpiComm comm(test::session());
  using DP = DataParallel<MpiAllreduce, Fp32>;
  const auto expect_failure = [&](UnevenInputs policy, int count, const std::string& expected) {
    auto net = make_net<double>(1);
    Trainer<Sequential<double>, DP> trainer(net, make_sgd(*net), {.progress_bar = false, .print_epochs = false},
                                            DP(comm, {.uneven_inputs = policy}));
    ListLoader loader = loader_of(count, 7);
    BOOST_CHECK_EXCEPTION(trainer.fit(loader, 1), Error, [&](const Error& e) {
      const std::string what = e.what();
      BOOST_TEST_MESSAGE(what);
      return what.find(expected) != std::string::npos;
    });
    BOOST_TEST(trainer.global_step() == 0);
  };
  const int last = comm.size() - 1;
  std::string others = last == 1 ? "rank 0" : "ranks 0";
  for (int r = 1; r < last; ++r) others += ", " + std::to_string(r);
  // The last rank has no batch.
  expect_failure(UnevenInputs::shortest, comm.rank() == last ? 0 : 3,
                 "3 on " + others + "; 0 on rank " + std::to_string(last) + ". A rank without a batch");
  // The last rank has one more batch than the others, refused under UnevenInputs::fail.
  expect_failure(UnevenInputs::fail, comm.rank() == last ? 3 : 2,
                 "in epoch 1: 3 on rank " + std::to_string(last) + "; 2 on " + others +
                     " (DataParallelOptions::uneven_inputs is UnevenInputs::fail");
}

// PTRAIN_DEBUG_COLLECTIVES=1: DataParallel compares the ranks' collectives after every step (its
// own steps agree), so the log after the last step holds only what came after it.
BOOST_AUTO_TEST_CASE(debug_collectives_checks_every_step) {
  struct DebugCollectives {
    DebugCollectives() { ::setenv("PTRAIN_DEBUG_COLLECTIVES", "1", 1); }
    ~DebugCollectives() { ::unsetenv("PTRAIN_DEBUG_COLLECTIVES"); }
  } debug;
  MpiComm comm(test::session());
  BOOST_TEST(comm.check_collectives_every_step());
  auto net = make_net<double>(1);
  using DP = DataParallel<MpiAllreduce, Fp32>;
  Trainer<Sequential<double>, DP> trainer(net, make_sgd(*net), {.progress_bar = false, .print_epochs = false},
                                          DP(comm, {.bucket_bytes = 1000}));
  ListLoader loader = loader_of(3, 5);
  BOOST_CHECK_NO_THROW(trainer.fit(loader, 1));
  std::vector<float> x(1, 1.0f);
  comm.label_next_collective(comm.rank() == 0 ? "here" : "elsewhere");
  comm.allreduce_sum(x);
  BOOST_CHECK_EXCEPTION(comm.check_collectives("the end"), Error, [&](const Error& e) {
    const std::string what = e.what();
    BOOST_TEST_MESSAGE(what);
    // Entry #1: the last step's check emptied the log; only the epoch's sums (doubles) came since.
    return what.find("entry #1 is '") != std::string::npos && what.find("(here)' on rank 0 but") != std::string::npos &&
           what.find(" double', the same on every rank)") != std::string::npos;
  });
}

BOOST_AUTO_TEST_SUITE_END()
