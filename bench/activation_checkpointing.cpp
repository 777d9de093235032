// Peak memory and time of one training step (forward, loss, backward) with and without activation
// checkpointing of the model's blocks (checkpoint_blocks: ResNet-50's 16 residual blocks, the
// transformer LM's layers). The peak is the Cpu device's high-water mark of live bytes over the step
// (parameters and their gradients included), reset before it; the step runs once before to warm up.
// One machine-readable line per model:
//   bench=activation_checkpointing model=resnet50|transformer_lm batch=... peak_mb_plain=...
//   peak_mb_checkpointed=... ratio=... seconds_plain=... seconds_checkpointed=...
// usage: bench_activation_checkpointing [resnet_batch=8] [image_size=224] [lm_batch=8]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <ptrain/models/resnet.hpp>
#include <ptrain/models/transformer_lm.hpp>
#include <ptrain/ptrain.hpp>

namespace {

using namespace ptrain;
using Clock = std::chrono::steady_clock;

struct StepFigures {
  double peak_mb = 0;
  double seconds = 0;
};

StepFigures measure(Module<float>& model, const std::function<Var<float>()>& loss) {
  const auto step = [&] {
    model.zero_grad();
    backward(loss());
  };
  step();
  model.zero_grad();
  Cpu::reset_peak_live_bytes();
  const auto start = Clock::now();
  step();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return {static_cast<double>(Cpu::peak_live_bytes()) / (1 << 20), seconds};
}

void report(const char* model, std::int64_t batch, const std::string& shape, const StepFigures& plain,
            const StepFigures& checkpointed) {
  std::printf(
      "bench=activation_checkpointing model=%s batch=%lld %s peak_mb_plain=%.1f peak_mb_checkpointed=%.1f "
      "ratio=%.3f seconds_plain=%.3f seconds_checkpointed=%.3f\n",
      model, static_cast<long long>(batch), shape.c_str(), plain.peak_mb, checkpointed.peak_mb,
      checkpointed.peak_mb / plain.peak_mb, plain.seconds, checkpointed.seconds);
  std::fflush(stdout);
}

template <class Model>
void compare(const char* name, std::int64_t batch, const std::string& shape, Model& model,
             const std::function<Var<float>()>& loss) {
  const StepFigures plain = measure(model, loss);
  checkpoint_blocks(model);
  const StepFigures checkpointed = measure(model, loss);
  checkpoint_blocks(model, false);
  report(name, batch, shape, plain, checkpointed);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t resnet_batch = argc > 1 ? std::atoll(argv[1]) : 8;
  const std::int64_t image = argc > 2 ? std::atoll(argv[2]) : 224;
  const std::int64_t lm_batch = argc > 3 ? std::atoll(argv[3]) : 8;
  manual_seed(1);
  {
    auto model = resnet50<float>();
    const Tensor<float> x = Tensor<float>::full({resnet_batch, 3, image, image}, 0.5f);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(resnet_batch));
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i * 37 % 1000);
    compare("resnet50", resnet_batch, "image=" + std::to_string(image), *model,
            [&] { return cross_entropy((*model)(Var<float>(x)), labels); });
  }
  {
    const TransformerLMOptions o{.ntoken = 10000, .ninp = 256, .nhead = 8, .nhid = 1024, .nlayers = 6, .dropout = 0.2};
    const std::int64_t seq = 128;
    TransformerLM<float> model(o);
    Tensor<float> tokens({seq, lm_batch});
    std::vector<std::int64_t> targets(static_cast<std::size_t>(seq * lm_batch));
    for (std::int64_t i = 0; i < tokens.numel(); ++i) {
      tokens[i] = static_cast<float>(i * 7919 % o.ntoken);
      targets[static_cast<std::size_t>(i)] = (i * 104729 + 1) % o.ntoken;
    }
    compare("transformer_lm", lm_batch,
            "seq=" + std::to_string(seq) + " layers=" + std::to_string(o.nlayers) + " d_model=" +
                std::to_string(o.ninp),
            model, [&] { return cross_entropy(reshape(model(Var<float>(tokens)), {-1, o.ntoken}), targets); });
  }
  return 0;
}
