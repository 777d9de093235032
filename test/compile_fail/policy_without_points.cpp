// Must not compile: the policy misspells its only point (before_optimiser_step), so it implements
// none of the Trainer's points; without the contract it would compile and never run.
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/trainer.hpp>

struct GradientClipping {
  bool before_optimiser_step(ptrain::Module<float>&) { return true; }
};

int main() {
  auto model = std::make_shared<ptrain::Sequential<float>>(
      std::initializer_list<std::shared_ptr<ptrain::Module<float>>>{ptrain::make<ptrain::Linear<float>>(2, 2)});
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{});
  ptrain::Trainer<ptrain::Sequential<float>, GradientClipping> trainer(model, sgd, {}, GradientClipping{});
}
