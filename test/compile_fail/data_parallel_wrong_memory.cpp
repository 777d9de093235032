// Must not compile: the model's parameters are in host memory (Cpu) but the backend's
// communicator moves GPU memory, as NcclAllreduce's does. NCCL needs nvcc, so a SelfComm here
// stands in for it, declaring the memory it moves the way NcclComm does (`using memory = ...`).
#include <ptrain/comm/self_comm.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/train/trainer.hpp>

struct GpuMemory {
  static constexpr const char* name = "gpu";
};

struct GpuMemoryComm : ptrain::SelfComm {
  using memory = GpuMemory;
  GpuMemoryComm split(int, int) { return {}; }
};

struct GpuMemoryAllreduce {
  using communicator = GpuMemoryComm;
  static constexpr const char* name = "gpu-memory";
};

int main() {
  using Dp = ptrain::DataParallel<GpuMemoryAllreduce>;
  auto model = std::make_shared<ptrain::Sequential<float>>(
      std::initializer_list<std::shared_ptr<ptrain::Module<float>>>{ptrain::make<ptrain::Linear<float>>(2, 2)});
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{});
  GpuMemoryComm comm;
  ptrain::Trainer<ptrain::Sequential<float>, Dp> trainer(model, sgd, {}, Dp(comm));
}
