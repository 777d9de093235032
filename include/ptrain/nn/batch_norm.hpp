#pragma once
#include <cstddef>
#include <type_traits>
#include <utility>

#include "ptrain/autograd/ops/activation.hpp"
#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/autograd/ops/batch_norm.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

// nn.BatchNorm2d (and BatchNorm1d on [N, C]): weight 1, bias 0, running mean 0 and var 1;
// buffers named as torchvision's state_dict names them. In a half or bfloat16 model weight, bias
// and the buffers are float (statistics_t<T>, Apex O2's keep_batchnorm_fp32; Module's
// named_float_parameters() and named_float_buffers()): the op computes in float, reading the
// 16-bit input as it goes (autograd/ops/batch_norm.hpp); a moving average rounded to 16 bits every
// step would drift, and a 16-bit num_batches_tracked stops at 2048. With a sync hook (set_sync, or
// convert_sync_batchnorm in ptrain/parallel/sync_batch_norm.hpp) training normalises by the
// statistics of the global batch, as torch.nn.SyncBatchNorm, on any device: off the CPU
// (autograd/ops/batch_norm.hpp) the hook sums spans in the device's memory.
template <class T = float, class D = Cpu>
class BatchNorm2d : public Module<T, D> {
 public:
  using S = statistics_t<T>;  // the type of weight, bias and the running statistics
  explicit BatchNorm2d(std::int64_t channels, double eps = 1e-5, double momentum = 0.1, bool affine = true)
      : eps_(eps), momentum_(momentum) {
    check(channels > 0, "BatchNorm2d: channels must be positive");
    if (affine) {
      weight = this->register_wide_parameter("weight", Tensor<S>::ones({channels}));
      bias = this->register_wide_parameter("bias", Tensor<S>::zeros({channels}));
    }
    running_mean = this->register_statistics_buffer("running_mean", Tensor<S>::zeros({channels}));
    running_var = this->register_statistics_buffer("running_var", Tensor<S>::ones({channels}));
    num_batches_tracked = this->register_statistics_buffer("num_batches_tracked", Tensor<S>::zeros({}));
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    return batch_norm(x, weight, bias, running_mean, running_var, count_batch(), momentum_, eps_, sync_);
  }

  // relu(forward(x) + residual), the residual when defined, as one fused op (batch_norm_relu,
  // batch_norm_add_relu) with the same statistics and updates. A forward hook sees this layer's
  // own output, so a hooked (or checkpointed) layer runs unfused through operator().
  Var<T, D> forward_relu(const Var<T, D>& x, const Var<T, D>& residual = {}) {
    if (!this->has_forward_hook() && !this->checkpoints_activations()) {
      const bool batch_statistics = count_batch();
      return residual.defined() ? batch_norm_add_relu(x, residual, weight, bias, running_mean, running_var,
                                                      batch_statistics, momentum_, eps_, sync_)
                                : batch_norm_relu(x, weight, bias, running_mean, running_var, batch_statistics,
                                                  momentum_, eps_, sync_);
    }
    const Var<T, D> y = (*this)(x);
    return relu(residual.defined() ? add(y, residual) : y);
  }

  // torchvision.ops.FrozenBatchNorm2d: normalises with the running statistics in training too and
  // never updates them; weight and bias get no gradient. What a frozen pretrained backbone needs:
  // with small batches, batch statistics would make its features noise.
  void freeze() {
    frozen_ = true;
    this->set_requires_grad(false);
  }
  bool frozen() const { return frozen_; }

  // An empty hook makes the layer local again; off the CPU the hook is given spans in D's memory.
  // Forward's graph keeps a copy of the hook: what it refers to (a communicator) must live until
  // that graph's backward has run.
  void set_sync(BatchNormSync sync) { sync_ = std::move(sync); }
  bool synchronised() const { return static_cast<bool>(sync_); }

  Var<S, D> weight, bias;
  Tensor<S, D> running_mean, running_var, num_batches_tracked;

 private:
  // Whether this forward normalises by batch statistics; if so, counts the batch as BatchNorm2d does.
  bool count_batch() {
    const bool batch_statistics = this->is_training() && !frozen_;
    if (batch_statistics)
      kernels::map(kernels::executor_for<D>{}, num_batches_tracked.data(), num_batches_tracked.data(), 1,
                   kernels::AddConstant{1.0});
    return batch_statistics;
  }

  double eps_, momentum_;
  BatchNormSync sync_;
  bool frozen_ = false;
};

// Freezes every BatchNorm2d<T, D> in model (depth first, the model itself included; see
// BatchNorm2d::freeze) and returns how many there are.
template <class T, class D>
std::size_t freeze_batch_norm(Module<T, D>& model) {
  std::size_t found = 0;
  if (auto* bn = dynamic_cast<BatchNorm2d<T, D>*>(&model)) {
    bn->freeze();
    ++found;
  }
  for (const auto& [name, child] : model.children()) found += freeze_batch_norm(*child);
  return found;
}

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::BatchNorm2d)
