// A Trainer without policies on a DataLoader of a TensorDataset, built against the prebuilt
// library: trainer_from_library.sh checks that this program's object leaves the loop (fit, the
// constructor) to the library, and runs it. It trains a small MLP on two Gaussian blobs,
// validating each epoch, and fails unless it learns (blobs.hpp: learned).
#include <cstdio>
#include <vector>

#include <ptrain/ptrain.hpp>

#include "blobs.hpp"

int main() {
  ptrain::manual_seed(0);
  const ptrain::TensorDataset train_set = prebuilt_test::blobs(128, 1), val_set = prebuilt_test::blobs(64, 2);
  ptrain::DataLoader train(train_set, {.batch_size = 32, .shuffle = true});
  ptrain::DataLoader val(val_set, {.batch_size = 64});
  auto model = prebuilt_test::mlp();
  auto sgd = std::make_shared<ptrain::Sgd<float>>(model->parameters(), ptrain::SgdOptions{.lr = 0.1, .momentum = 0.9});
  ptrain::Trainer<ptrain::Sequential<float>> trainer(model, sgd, {.progress_bar = false, .print_epochs = false});
  const std::vector<ptrain::EpochResult> results = trainer.fit(train, &val, 5);
  const double val_loss = trainer.evaluate(val).loss();
  ptrain::Sequential<float>& own = trainer.model();  // the model as its own type
  std::printf("plain_trainer: train loss %.4f after epoch 1, %.4f after epoch %zu; validation loss %.4f; %zu layers\n",
              results.front().train_loss, results.back().train_loss, results.size(), val_loss, own.size());
  const bool learned = prebuilt_test::learned(results, 5, val_loss);
  if (!learned) std::fprintf(stderr, "plain_trainer: did not learn the two blobs\n");
  return learned ? 0 : 1;
}
