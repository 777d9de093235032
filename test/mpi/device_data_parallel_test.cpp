// DataParallel on a HostEmulated model (the GPU algorithms on the host, reduced by MpiAllreduce)
// under mpiexec -n 2 and -n 3: for fp32, fp16 and bf16 on the wire the averaged gradients equal
// the same data-parallel run of a CPU model, and for fp32 the serial full-batch gradient; several
// buckets; an unused parameter gets zeros; rank 0's weights and buffers everywhere after setup;
// SGD steps keep every rank's weights equal and equal to the CPU run's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>

#include "../common/device_mlp.hpp"
#include "mpi_test_main.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(device_data_parallel_test)

namespace {

constexpr std::int64_t batch = 12, inputs = 5, hidden = 7, classes = 3;
// 16 floats a bucket: the parameters, last first, fill 4 buckets ([unused, b2], [w2], [b1], [w1]).
constexpr std::size_t bucket_bytes = 64;

// An MLP with one parameter the forward never uses, and a buffer: what DataParallel needs of a
// model (named_parameters, named_buffers) on any device.
template <class D>
struct TinyNet {
  Var<float, D> w1, b1, w2, b2, unused;
  Tensor<float, D> running;

  TinyNet(std::uint64_t seed, float buffer_value) {
    const auto ws = test::mlp_weights<float>(inputs, hidden, classes, seed);
    w1 = Var<float, D>(ws[0].template to<D>(), true);
    b1 = Var<float, D>(ws[1].template to<D>(), true);
    w2 = Var<float, D>(ws[2].template to<D>(), true);
    b2 = Var<float, D>(ws[3].template to<D>(), true);
    unused = Var<float, D>(Tensor<float>::full(Shape{4}, static_cast<float>(seed)).template to<D>(), true);
    running = Tensor<float>::full(Shape{3}, buffer_value).template to<D>();
  }
  std::vector<std::pair<std::string, Var<float, D>>> named_parameters() {
    return {{"w1", w1}, {"b1", b1}, {"w2", w2}, {"b2", b2}, {"unused", unused}};
  }
  std::vector<std::pair<std::string, Tensor<float, D>*>> named_buffers() { return {{"running", &running}}; }
  std::vector<Var<float, D>> parameters() { return {w1, b1, w2, b2, unused}; }

  Var<float, D> loss(const Tensor<float>& x, std::span<const std::int64_t> targets) {
    const Var<float, D> input(x.template to<D>());
    return cross_entropy(linear(relu(linear(input, w1, b1)), w2, b2), targets);
  }
};

struct Data {
  Tensor<float> x;
  std::vector<std::int64_t> y;
};

Data make_data() {
  Rng rng(7);
  Data d{Tensor<float>({batch, inputs}), {}};
  for (std::int64_t i = 0; i < d.x.numel(); ++i) d.x[i] = static_cast<float>(rng.normal());
  for (std::int64_t i = 0; i < batch; ++i) d.y.push_back(static_cast<std::int64_t>(rng.below(classes)));
  return d;
}

struct Run {
  std::vector<Tensor<float>> grads;    // averaged, at the first step
  std::vector<Tensor<float>> weights;  // after the last step
  Tensor<float> buffer;
  std::size_t buckets = 0;
};

template <class D>
auto make_sgd(std::vector<Var<float, D>> params) {
  const SgdOptions options{.lr = 0.2, .momentum = 0.9, .weight_decay = 0.01};
  return Sgd<float, D>(params, options);
}

// This rank trains on its rows of the batch; every rank but 0 starts from other weights and
// another buffer, which setup must replace with rank 0's.
template <class D, class Compression>
Run data_parallel_run(MpiComm& comm, const Data& data, int steps) {
  const int rank = comm.rank();
  TinyNet<D> net(rank == 0 ? 1 : 100 + static_cast<std::uint64_t>(rank), static_cast<float>(rank + 1));
  DataParallel<MpiAllreduce, Compression> dp(comm, {.bucket_bytes = bucket_bytes});
  dp.setup(net);
  auto optimizer = make_sgd<D>(net.parameters());
  const std::int64_t local = batch / comm.size(), begin = rank * local;
  const Tensor<float> x = data.x.slice(begin, begin + local).clone();
  const std::vector<std::int64_t> y(data.y.begin() + begin, data.y.begin() + begin + local);
  Run run;
  for (int s = 0; s < steps; ++s) {
    optimizer.zero_grad();
    dp.before_backward(net, true);
    backward(net.loss(x, y));
    BOOST_REQUIRE(dp.before_optimizer_step(net));
    if (s == 0)
      for (auto& p : net.parameters()) run.grads.push_back(p.grad().template to<Cpu>());
    optimizer.step();
  }
  for (auto& p : net.parameters()) run.weights.push_back(p.value().template to<Cpu>());
  run.buffer = net.running.template to<Cpu>();
  run.buckets = dp.bucket_count();
  return run;
}

// max |got - want| over max |want| (want not all zero).
double relative_to_largest(const Tensor<float>& got, const Tensor<float>& want) {
  BOOST_REQUIRE(got.shape() == want.shape());
  double diff = 0, scale = 0;
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / scale;
}

// The wire's rounding: fp32 exact up to the order of additions; fp16 and bf16 a few units of
// their last place (2^-11, 2^-8) of the largest gradient.
template <class Compression>
constexpr double tolerance() {
  if constexpr (std::is_same_v<Compression, Fp32>) return 1e-5;
  else if constexpr (std::is_same_v<Compression, Fp16>) return 2e-3;
  else return 1.6e-2;
}

template <class Compression>
void check_gradients(MpiComm& comm, const Data& data) {
  const std::string wire = Compression::name;
  const Run device = data_parallel_run<HostEmulated, Compression>(comm, data, 1);
  const Run cpu = data_parallel_run<Cpu, Compression>(comm, data, 1);

  TinyNet<Cpu> serial(1, 1.0f);
  backward(serial.loss(data.x, data.y));
  const auto reference = serial.parameters();

  BOOST_TEST(device.buckets == 4u);
  BOOST_REQUIRE(device.grads.size() == 5u);
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST(relative_to_largest(device.grads[i], cpu.grads[i]) <= tolerance<Compression>(),
               wire << " parameter " << i << " against the CPU data-parallel run");
    BOOST_TEST(relative_to_largest(device.grads[i], reference[i].grad()) <= tolerance<Compression>(),
               wire << " parameter " << i << " against the serial full-batch gradient");
  }
  // The parameter no rank used was reduced as zeros.
  const Tensor<float>& unused = device.grads[4];
  BOOST_TEST(unused.numel() == 4);
  BOOST_TEST((unused.array() == 0.0f).all(), wire << " unused parameter's gradient");
  // Rank 0's buffer everywhere.
  BOOST_TEST((device.buffer.array() == 1.0f).all(), wire << " buffer broadcast from rank 0");
}

}  // namespace

BOOST_AUTO_TEST_CASE(fp32_gradients_equal_the_cpu_run_and_the_serial_gradient) {
  MpiComm comm(test::session());
  check_gradients<Fp32>(comm, make_data());
}

BOOST_AUTO_TEST_CASE(fp16_gradients_equal_the_cpu_run_within_fp16_rounding) {
  MpiComm comm(test::session());
  check_gradients<Fp16>(comm, make_data());
}

BOOST_AUTO_TEST_CASE(bf16_gradients_equal_the_cpu_run_within_bf16_rounding) {
  MpiComm comm(test::session());
  check_gradients<Bf16>(comm, make_data());
}

BOOST_AUTO_TEST_CASE(sgd_steps_keep_the_ranks_equal_and_match_the_cpu_run) {
  MpiComm comm(test::session());
  const Data data = make_data();
  constexpr int steps = 3;
  const Run device = data_parallel_run<HostEmulated, Fp32>(comm, data, steps);
  const Run cpu = data_parallel_run<Cpu, Fp32>(comm, data, steps);
  const Run fp16 = data_parallel_run<HostEmulated, Fp16>(comm, data, steps);
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST(test::relative_difference(device.weights[i], cpu.weights[i]) <= 1e-5, "parameter " << i);
    BOOST_TEST(test::relative_difference(fp16.weights[i], cpu.weights[i]) <= 1e-2, "fp16 parameter " << i);
  }
  // Every rank holds rank 0's weights after the steps.
  for (const Run* run : {&device, &fp16})
    for (std::size_t i = 0; i < run->weights.size(); ++i) {
      const Tensor<float>& mine = run->weights[i];
      std::vector<float> all(static_cast<std::size_t>(mine.numel() * comm.size()));
      comm.allgather(std::span<const float>(mine.data(), static_cast<std::size_t>(mine.numel())),
                     std::span<float>(all));
      for (int r = 1; r < comm.size(); ++r)
        BOOST_TEST(std::equal(all.begin(), all.begin() + mine.numel(), all.begin() + r * mine.numel()),
                   "parameter " << i << " on rank " << r);
    }
}

BOOST_AUTO_TEST_SUITE_END()
