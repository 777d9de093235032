// Must not compile: DataParallel and Sharded both average the gradients over the ranks; a Trainer
// takes one of them.
#include <ptrain/comm/self_comm.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/backends.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/sharded.hpp>
#include <ptrain/train/trainer.hpp>

int main() {
  using Dp = ptrain::DataParallel<ptrain::SelfAllreduce>;
  using Zero1 = ptrain::Sharded<ptrain::Zero1, ptrain::SelfAllreduce>;
  auto model = std::make_shared<ptrain::Sequential<float>>(
      std::initializer_list<std::shared_ptr<ptrain::Module<float>>>{ptrain::make<ptrain::Linear<float>>(2, 2)});
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{.lr = 0.1});
  ptrain::SelfComm comm;
  ptrain::Trainer<ptrain::Sequential<float>, Dp, Zero1> trainer(model, sgd, {}, Dp(comm), Zero1(comm));
}
