#pragma once
// Device check: DataParallel<NcclAllreduce, ...> on a Var<float, Cuda> MLP over a world of one:
// the averaged gradients are the model's own, exactly with fp32 on the wire (views of the reduced
// bucket) and within fp16 rounding with fp16. Then the headline type, Trainer<Sequential<float,
// Cuda>, DataParallel<NcclAllreduce, Fp16>, Pipeline<4>> over NCCL: a step (four micro-batches,
// messages through the pipeline's NCCL communicators) equals a plain Trainer's, and a BatchNorm2d
// synchronised over NCCL the plain layer. It needs an MPI session (NcclComm takes NCCL's id
// through MPI), which device_check's main does not start: there the whole NcclAllreduce path is
// compiled (instantiated) but not run. Without the MPI headers (a target not linked to
// ptrain::mpi) the check is left out.
#include <cstdio>

#if __has_include(<mpi.h>) && __has_include(<nccl.h>)
#include <string>
#include <utility>
#include <vector>

#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/linear.hpp>
#include <ptrain/autograd/ops/loss.hpp>
#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/kernels/cuda/executor_for.cuh>
#include <ptrain/launch/mpi_session.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/nccl_allreduce.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/parallel/sync_batch_norm.hpp>
#include <ptrain/train/trainer.hpp>

#include "../../common/device_mlp.hpp"
#include "checks/common.cuh"

namespace ptrain::device_checks {

namespace data_parallel_detail {
// What DataParallel needs of a model: named Var<float, Cuda> parameters and named buffers.
struct CudaMlp {
  std::vector<Var<float, Cuda>> params;  // w1, b1, w2, b2

  explicit CudaMlp(const std::vector<Tensor<float>>& weights) {
    for (const auto& w : weights) params.emplace_back(w.to<Cuda>(), true);
  }
  std::vector<std::pair<std::string, Var<float, Cuda>>> named_parameters() {
    return {{"w1", params[0]}, {"b1", params[1]}, {"w2", params[2]}, {"b2", params[3]}};
  }
  std::vector<std::pair<std::string, Tensor<float, Cuda>*>> named_buffers() { return {}; }
  Var<float, Cuda> loss(const Tensor<float>& x, const std::vector<std::int64_t>& targets) {
    const Var<float, Cuda> input(x.to<Cuda>());
    return cross_entropy(linear(relu(linear(input, params[0], params[1])), params[2], params[3]), targets);
  }
};

// One data-parallel step's averaged gradients against the same model's own (world of one).
template <class Compression>
void check_one_step(NcclComm& nccl, double tol) {
  const auto weights = test::mlp_weights<float>(6, 9, 4, 41);
  const Tensor<float> x = signed_values<float>(Shape{8, 6}, 42, -1.0, 1.0);
  const std::vector<std::int64_t> targets{0, 1, 2, 3, 3, 2, 1, 0};

  CudaMlp alone(weights);
  backward(alone.loss(x, targets));

  CudaMlp model(weights);
  DataParallel<NcclAllreduce, Compression> dp(nccl, {.bucket_bytes = 64});
  dp.setup(model);
  dp.before_backward(model, true);
  backward(model.loss(x, targets));
  dp.before_optimizer_step(model);
  for (std::size_t i = 0; i < model.params.size(); ++i)
    expect_close(model.params[i].grad(), alone.params[i].grad().to<Cpu>(), tol,
                 std::string("DataParallel<NcclAllreduce, ") + Compression::name + "> on Var<float, Cuda>: gradient " +
                     std::to_string(i) + " averaged over a world of one");
  expect(dp.bucket_count() > 1, "DataParallel<NcclAllreduce>: 64-byte buckets make several");
}

std::shared_ptr<Sequential<float, Cuda>> pipeline_net() {
  manual_seed(43);
  auto net = make<Sequential<float, Cuda>>();
  net->push_back("fc1", make<Linear<float, Cuda>>(6, 9));
  net->push_back("relu", make<ReLU<float, Cuda>>());
  net->push_back("fc2", make<Linear<float, Cuda>>(9, 4));
  return net;
}

void check_pipeline_step(NcclComm& nccl) {
  const Tensor<float> x = signed_values<float>(Shape{8, 6}, 44, -1.0, 1.0);
  const std::vector<std::int64_t> targets{0, 1, 2, 3, 3, 2, 1, 0};
  const SgdOptions options{.lr = 0.1, .momentum = 0.9};
  TrainerOptions quiet;
  quiet.progress_bar = quiet.print_epochs = false;
  PipelineOptions plan;
  plan.print_plan = false;

  auto plain = pipeline_net();
  Trainer<Sequential<float, Cuda>> alone(plain, std::make_shared<Sgd<float, Cuda>>(plain->parameters(), options),
                                         quiet);
  const double plain_loss = alone.train_step(x, targets).loss_sum;

  auto piped = pipeline_net();
  using Dp = DataParallel<NcclAllreduce, Fp16>;
  Trainer<Sequential<float, Cuda>, Dp, Pipeline<4>> headline(
      piped, std::make_shared<Sgd<float, Cuda>>(piped->parameters(), options), quiet, Dp(nccl),
      Pipeline<4>(nccl, plan));
  const double piped_loss = headline.train_step(x, targets).loss_sum;
  expect(std::abs(piped_loss - plain_loss) <= 1e-4 * std::abs(plain_loss),
         "Trainer<..., DataParallel<NcclAllreduce, Fp16>, Pipeline<4>>: the step's loss is the plain step's");
  const auto a = plain->parameters(), b = piped->parameters();
  for (std::size_t i = 0; i < a.size(); ++i)
    expect_close(b[i].value(), a[i].value().to<Cpu>(), 1e-3,
                 "Trainer<..., DataParallel<NcclAllreduce, Fp16>, Pipeline<4>>: weight " + std::to_string(i) +
                     " after one step (fp16 gradients on the wire)");
}

// SyncBatchNorm on Cuda over a world of one: the hook sums spans of device memory through NCCL,
// and the layer equals the plain one.
void check_sync_batch_norm(NcclComm& nccl) {
  BatchNorm2d<float, Cuda> synced(3), plain(3);
  expect(convert_sync_batchnorm(synced, nccl) == 1u && !synced.synchronised(),
         "convert_sync_batchnorm over NCCL: a world of one leaves the layer local");
  synced.set_sync(allreduce_sync(nccl));
  const Tensor<float> x = signed_values<float>(Shape{4, 3, 2, 3}, 45, -1.0, 3.0);
  const Tensor<float> gy = signed_values<float>(x.shape(), 46, -1.0, 1.0);
  const Var<float, Cuda> xs(x.to<Cuda>(), true), xp(x.to<Cuda>(), true);
  const Var<float, Cuda> ys = synced.forward(xs), yp = plain.forward(xp);
  backward(ys, gy.to<Cuda>());
  backward(yp, gy.to<Cuda>());
  const std::string what = "BatchNorm2d<float, Cuda> synchronised over NCCL (world of one): ";
  expect_close(ys.value(), yp.value().to<Cpu>(), 1e-5, what + "output");
  expect_close(xs.grad(), xp.grad().to<Cpu>(), 1e-5, what + "input gradient");
  expect_close(synced.weight.grad(), plain.weight.grad().to<Cpu>(), 1e-5, what + "weight gradient");
  expect_close(synced.bias.grad(), plain.bias.grad().to<Cpu>(), 1e-5, what + "bias gradient");
  expect_close(synced.running_mean, plain.running_mean.to<Cpu>(), 1e-6, what + "running mean");
  expect_close(synced.running_var, plain.running_var.to<Cpu>(), 1e-6, what + "running var");
}
}  // namespace data_parallel_detail

// Under an MPI session of one rank (a program that has one).
inline void check_data_parallel(MpiSession& session) {
  MpiComm world(session);
  if (world.size() != 1) {
    std::printf("skip: the DataParallel<NcclAllreduce> check runs on a world of one rank\n");
    return;
  }
  NcclComm nccl(world, 0);
  data_parallel_detail::check_one_step<Fp32>(nccl, 1e-6);
  data_parallel_detail::check_one_step<Fp16>(nccl, 1e-3);
  data_parallel_detail::check_pipeline_step(nccl);
  data_parallel_detail::check_sync_batch_norm(nccl);
}

// A singleton MPI session (MPICH starts one without mpiexec) of its own.
inline void check_data_parallel() {
  MpiSession session;
  check_data_parallel(session);
}

}  // namespace ptrain::device_checks

#else
namespace ptrain::device_checks {
inline void check_data_parallel() {
  std::printf("skip: DataParallel<NcclAllreduce> left out (built without the MPI and NCCL headers)\n");
}
}  // namespace ptrain::device_checks
#endif
