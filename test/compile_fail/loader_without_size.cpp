// Must not compile: the loader has batches and set_epoch but no size(), which fit needs to agree the
// ranks' batch counts and draw the progress bar.
#include <vector>

#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/train/trainer.hpp>

struct Batch {
  ptrain::Tensor<float> inputs;
  std::vector<std::int64_t> targets;
};
struct Batches {
  std::vector<Batch> batches;
  void set_epoch(int) {}
  auto begin() const { return batches.begin(); }
  auto end() const { return batches.end(); }
};

int main() {
  auto model = std::make_shared<ptrain::Sequential<float>>(
      std::initializer_list<std::shared_ptr<ptrain::Module<float>>>{ptrain::make<ptrain::Linear<float>>(2, 2)});
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{});
  ptrain::Trainer<ptrain::Sequential<float>> trainer(model, sgd);
  Batches loader;
  trainer.fit(loader, 1);
}
