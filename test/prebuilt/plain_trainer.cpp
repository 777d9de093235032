// A Trainer without policies on a DataLoader of a TensorDataset, built against the prebuilt
// library: plain_trainer_from_library.sh checks that this program's object leaves the loop (fit,
// the constructor) to the library, and runs it. It trains a small MLP on two Gaussian blobs,
// validating each epoch, and fails unless it learns: the last epoch's training loss under 0.2 and
// half the first's, and evaluate's loss on the validation set under 0.2.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <ptrain/ptrain.hpp>

namespace {

// count points per class around (-1, -1) and (1, 1), label 0 and 1.
ptrain::TensorDataset blobs(std::int64_t count, std::uint64_t seed) {
  ptrain::Rng rng(seed);
  std::vector<float> points;
  std::vector<std::int64_t> labels;
  for (std::int64_t i = 0; i < 2 * count; ++i) {
    const std::int64_t label = i % 2;
    const float centre = label == 0 ? -1.0f : 1.0f;
    points.push_back(centre + 0.5f * static_cast<float>(rng.normal()));
    points.push_back(centre + 0.5f * static_cast<float>(rng.normal()));
    labels.push_back(label);
  }
  return ptrain::TensorDataset(ptrain::Tensor<float>::from({2 * count, 2}, points), labels);
}

}  // namespace

int main() {
  ptrain::manual_seed(0);
  const ptrain::TensorDataset train_set = blobs(128, 1), val_set = blobs(64, 2);
  ptrain::DataLoader train(train_set, {.batch_size = 32, .shuffle = true});
  ptrain::DataLoader val(val_set, {.batch_size = 64});
  auto model = std::make_shared<ptrain::Sequential<float>>(std::initializer_list<std::shared_ptr<ptrain::Module<float>>>{
      std::make_shared<ptrain::Linear<float>>(2, 16), std::make_shared<ptrain::ReLU<float>>(),
      std::make_shared<ptrain::Linear<float>>(16, 2)});
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{.lr = 0.1, .momentum = 0.9});
  ptrain::Trainer<ptrain::Sequential<float>> trainer(model, sgd, {.progress_bar = false, .print_epochs = false});
  const std::vector<ptrain::EpochResult> results = trainer.fit(train, &val, 5);
  const double val_loss = trainer.evaluate(val).loss();
  ptrain::Sequential<float>& own = trainer.model();  // the model as its own type
  std::printf("plain_trainer: train loss %.4f after epoch 1, %.4f after epoch %zu; validation loss %.4f; %zu layers\n",
              results.front().train_loss, results.back().train_loss, results.size(), val_loss, own.size());
  const bool learned = results.size() == 5 && results.back().train_loss < 0.2 &&
                       results.back().train_loss < 0.5 * results.front().train_loss && val_loss < 0.2;
  if (!learned) std::fprintf(stderr, "plain_trainer: did not learn the two blobs\n");
  return learned ? 0 : 1;
}
