#pragma once
#include <utility>

#include "ptrain/autograd/ops/batch_norm.hpp"
#include "ptrain/kernels/elementwise.hpp"
#include "ptrain/kernels/executor_for.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

// nn.BatchNorm2d (and BatchNorm1d on [N, C]): weight 1, bias 0, running mean 0 and var 1;
// buffers named as torchvision's state_dict names them. With a sync hook (set_sync, or
// convert_sync_batchnorm in ptrain/parallel/sync_batch_norm.hpp) training normalises by the
// statistics of the global batch, as torch.nn.SyncBatchNorm, on any device: off the CPU
// (autograd/ops/batch_norm.hpp) the hook sums spans in the device's memory.
template <class T = float, class D = Cpu>
class BatchNorm2d : public Module<T, D> {
 public:
  explicit BatchNorm2d(std::int64_t channels, double eps = 1e-5, double momentum = 0.1, bool affine = true)
      : eps_(eps), momentum_(momentum) {
    check(channels > 0, "BatchNorm2d: channels must be positive");
    if (affine) {
      weight = this->register_parameter("weight", Tensor<T>::ones({channels}));
      bias = this->register_parameter("bias", Tensor<T>::zeros({channels}));
    }
    running_mean = this->register_buffer("running_mean", Tensor<T>::zeros({channels}));
    running_var = this->register_buffer("running_var", Tensor<T>::ones({channels}));
    num_batches_tracked = this->register_buffer("num_batches_tracked", Tensor<T>::zeros({}));
  }
  Var<T, D> forward(const Var<T, D>& x) override {
    if (this->is_training())
      kernels::map(kernels::executor_for<D>{}, num_batches_tracked.data(), num_batches_tracked.data(), 1,
                   kernels::AddConstant{1.0});
    return batch_norm(x, weight, bias, running_mean, running_var, this->is_training(), momentum_, eps_, sync_);
  }

  // An empty hook makes the layer local again; off the CPU the hook is given spans in D's memory.
  // Forward's graph keeps a copy of the hook: what it refers to (a communicator) must live until
  // that graph's backward has run.
  void set_sync(BatchNormSync sync) { sync_ = std::move(sync); }
  bool synchronised() const { return static_cast<bool>(sync_); }

  Var<T, D> weight, bias;
  Tensor<T, D> running_mean, running_var, num_batches_tracked;

 private:
  double eps_, momentum_;
  BatchNormSync sync_;
};

}  // namespace ptrain
