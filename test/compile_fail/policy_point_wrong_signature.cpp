// Must not compile: the policy names before_optimizer_step but returns nothing, where the Trainer
// needs a bool (false skips the step); without the contract the point would silently never run.
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/trainer.hpp>

struct GradientClipping {
  void before_optimizer_step(ptrain::Module<float>&) {}
};

int main() {
  auto model = std::make_shared<ptrain::Sequential<float>>(
      std::initializer_list<std::shared_ptr<ptrain::Module<float>>>{ptrain::make<ptrain::Linear<float>>(2, 2)});
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{});
  ptrain::Trainer<ptrain::Sequential<float>, GradientClipping> trainer(model, sgd, {}, GradientClipping{});
}
