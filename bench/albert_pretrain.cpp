// Sequences/s of one ALBERT pre-training step of the small configuration (AlbertConfig::small:
// E 64, H 128, 4 applications of the shared layer, 4 heads, FFN 512) over ALBERT's vocabulary of
// 30,000, 8 sequences of 128 tokens, 15% of them labelled for MLM: forward, AlbertPreTraining's loss
// (MLM plus SOP cross entropy, as HuggingFace's), backward, a LAMB step with weight decay off
// LayerNorm and biases, as examples/albert_pretrain trains. Then bench/torch_albert_peer.py on the
// same work in the same run (HuggingFace's AlbertForPreTraining where transformers imports, the
// same architecture in the script otherwise; the Python of bench/torch_peer.hpp), and the ratio.
// One machine-readable line per figure:
//   bench=albert_pretrain impl=ptrain|pytorch_* threads=... median_ms=... sequences_per_sec=...
//   bench=albert_pretrain ratio_ptrain_over_pytorch_*=...
// and ptrain's median step by kernel family (core/op_profile.hpp; the rest is autograd and
// allocation): bench=albert_pretrain family=... ms_per_step=...
// usage: bench_albert_pretrain [threads=2] [steps=5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <ptrain/models/albert.hpp>
#include <ptrain/optim/lamb.hpp>
#include <ptrain/ptrain.hpp>
#include <ptrain/tasks/albert_pretraining.hpp>

#include "op_breakdown.hpp"
#include "torch_peer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t vocab = 30000, batch = 8, length = 128;
constexpr int warmup = 2;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ptrain;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  set_num_threads(threads);
  manual_seed(0);
  AlbertConfig config = AlbertConfig::small(vocab);
  AlbertForPreTraining<float> model(config);
  model.train();
  // Sequences without padding, segment B from the middle; each token labelled with probability 0.15.
  Rng rng(1);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(batch * length)), types(ids.size());
  AlbertTargets targets{Tensor<std::int64_t>::full({batch, length}, -100), {}};
  for (std::int64_t i = 0; i < batch * length; ++i) {
    ids[static_cast<std::size_t>(i)] = 5 + static_cast<std::int64_t>(rng.below(vocab - 5));
    types[static_cast<std::size_t>(i)] = i % length >= length / 2;
    if (rng.uniform() < 0.15) targets.mlm_labels[i] = ids[static_cast<std::size_t>(i)];
  }
  for (std::int64_t n = 0; n < batch; ++n) targets.sop_labels.push_back(static_cast<std::int64_t>(rng.below(2)));
  const Tensor<float> inputs = albert_inputs<float>(ids, types, {}, batch, length);
  const AlbertPreTraining task{.vocab_size = vocab};
  Lamb<float> lamb(model.named_parameters(), {.lr = 1e-3});

  std::vector<double> times;
  OpProfile profile;
  for (int i = 0; i < warmup + steps; ++i) {
    std::optional<OpProfileScope> profiling;
    if (i >= warmup) profiling.emplace(profile);
    const auto start = Clock::now();
    model.zero_grad();
    backward(task.loss(model(Var<float>(inputs)), targets, 1.0));
    {
      NoGradGuard no_grad;
      lamb.step();
    }
    if (i >= warmup) times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  const double ours = static_cast<double>(batch) / median(times);
  std::printf("bench=albert_pretrain impl=ptrain threads=%d vocab=%lld embedding=%lld hidden=%lld layers=%lld "
              "heads=%lld ffn=%lld batch=%lld length=%lld parameters=%lld median_ms=%.1f sequences_per_sec=%.2f\n",
              threads, static_cast<long long>(vocab), static_cast<long long>(config.embedding_size),
              static_cast<long long>(config.hidden_size), static_cast<long long>(config.num_hidden_layers),
              static_cast<long long>(config.num_attention_heads), static_cast<long long>(config.intermediate_size),
              static_cast<long long>(batch), static_cast<long long>(length),
              static_cast<long long>(model.parameter_count()), 1e3 * median(times), ours);
  bench::print_op_breakdown("albert_pretrain", profile, times);
  std::fflush(stdout);

  char args[256];
  std::snprintf(args, sizeof args, "%d %lld %lld %lld %lld %lld %lld %lld %lld %d %d", threads,
                static_cast<long long>(vocab), static_cast<long long>(config.embedding_size),
                static_cast<long long>(config.hidden_size), static_cast<long long>(config.num_hidden_layers),
                static_cast<long long>(config.num_attention_heads), static_cast<long long>(config.intermediate_size),
                static_cast<long long>(batch), static_cast<long long>(length), warmup, steps);
  for (const bench::TorchPeer& peer : bench::torch_peers()) {
    bool ran = false;
    for (const std::string& line : bench::peer_lines(peer, "torch_albert_peer.py", args)) {
      const double theirs = std::atof(bench::json_field(line, "sequences_per_sec").c_str());
      if (theirs <= 0) continue;
      std::printf("bench=albert_pretrain impl=pytorch_%s model=%s threads=%s torch=%s parameters=%s median_ms=%.1f "
                  "sequences_per_sec=%.2f\n",
                  peer.name.c_str(), bench::json_field(line, "impl").c_str(), bench::json_field(line, "threads").c_str(),
                  bench::json_field(line, "torch").c_str(), bench::json_field(line, "parameters").c_str(),
                  1e3 * std::atof(bench::json_field(line, "median_s").c_str()), theirs);
      std::printf("bench=albert_pretrain ratio_ptrain_over_pytorch_%s=%.3f\n", peer.name.c_str(), ours / theirs);
      ran = true;
    }
    if (!ran) bench::print_unavailable("albert_pretrain", peer);
  }
  return 0;
}
