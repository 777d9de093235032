// Must not compile: a pipeline cuts a Sequential between its layers, and this model is not one.
// test/compile_fail/CMakeLists.txt checks that the compiler says so in a sentence.
#include <ptrain/comm/self_comm.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/train/trainer.hpp>

struct Branching : ptrain::Module<float> {
  ptrain::Var<float> forward(const ptrain::Var<float>& x) override { return x; }
};

int main() {
  ptrain::SelfComm self;
  auto model = std::make_shared<Branching>();
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{});
  ptrain::Trainer<Branching, ptrain::Pipeline<4>> trainer(model, sgd, {}, ptrain::Pipeline<4>(self));
}
