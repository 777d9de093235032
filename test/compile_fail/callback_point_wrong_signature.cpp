// Must not compile: the callback names on_validation_end but takes the epoch's result, where the
// Trainer passes a ValidationResult; without the contract the point would silently never run.
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/trainer.hpp>

struct LogValidation {
  void on_validation_end(ptrain::TrainerView&, const ptrain::EpochResult&) {}
};

int main() {
  auto model = std::make_shared<ptrain::Sequential<float>>(
      std::initializer_list<std::shared_ptr<ptrain::Module<float>>>{ptrain::make<ptrain::Linear<float>>(2, 2)});
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{});
  ptrain::Trainer<ptrain::Sequential<float>> trainer(model, sgd);
  trainer.add_callback(LogValidation{});
}
