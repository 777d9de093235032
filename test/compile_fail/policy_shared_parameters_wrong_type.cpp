// Must not compile: the policy names shared_parameters but returns a count, where the Trainer needs
// the list of shared parameters with their names (it refuses Sharded<Zero2|3> beside any); without
// the contract the member would be silently ignored.
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/trainer.hpp>

struct TiedStages {
  void setup(ptrain::Module<float>&) {}
  int shared_parameters() const { return 0; }
};

int main() {
  auto model = std::make_shared<ptrain::Sequential<float>>(
      std::initializer_list<std::shared_ptr<ptrain::Module<float>>>{ptrain::make<ptrain::Linear<float>>(2, 2)});
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{});
  ptrain::Trainer<ptrain::Sequential<float>, TiedStages> trainer(model, sgd, {}, TiedStages{});
}
