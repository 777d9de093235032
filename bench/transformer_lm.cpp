// Tokens/s of one training step of the transformer tutorial's model (TransformerLM, emsize 256,
// nhid 1024, 4 layers, 8 heads, dropout 0.2, vocabulary 28,782, bptt 35, batch 20), as the
// tutorial's train(): forward, cross entropy over the vocabulary, backward, clip_grad_norm 0.5, SGD
// at lr 5.0. Then bench/torch_lm_peer.py on the same work in the same run (the Python of
// bench/torch_peer.hpp), and the ratio. One machine-readable line per figure:
//   bench=transformer_lm impl=ptrain|pytorch threads=... median_ms=... tokens_per_sec=...
//   bench=transformer_lm ratio_ptrain_over_pytorch=...
// ptrain's line also splits its median step into forward, backward and clip + step, and its timed
// steps' mean by kernel family follows (core/op_profile.hpp; the rest is autograd and allocation):
//   bench=transformer_lm family=... ms_per_step=...
// usage: bench_transformer_lm [threads=2] [steps=10]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <ptrain/models/transformer_lm.hpp>
#include <ptrain/ptrain.hpp>
#include <ptrain/train/clip_grad_norm.hpp>

#include "op_breakdown.hpp"
#include "torch_peer.hpp"

// OpenBLAS names the kernels it chose for this CPU (OPENBLAS_CORETYPE overrides its choice).
extern "C" char* openblas_get_corename(void) __attribute__((weak));

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t ntoken = 28782, emsize = 256, nhid = 1024, nlayers = 4, nhead = 8, bptt = 35, batch = 20;
constexpr int warmup = 2;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  using namespace ptrain;
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int steps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 10;
  set_num_threads(threads);
  manual_seed(0);
  TransformerLM<float> model(
      {.ntoken = ntoken, .ninp = emsize, .nhead = nhead, .nhid = nhid, .nlayers = nlayers, .dropout = 0.2});
  model.train();
  Rng rng(1);
  Tensor<float> tokens({bptt, batch});
  for (std::int64_t i = 0; i < tokens.numel(); ++i) tokens[i] = static_cast<float>(rng.below(ntoken));
  std::vector<std::int64_t> targets(static_cast<std::size_t>(bptt * batch));
  for (auto& t : targets) t = static_cast<std::int64_t>(rng.below(ntoken));
  Sgd<float> sgd(model.parameters(), {.lr = 5.0});

  std::vector<double> total, forward, backward_pass, step;
  OpProfile profile;
  for (int i = 0; i < warmup + steps; ++i) {
    std::optional<OpProfileScope> profiling;
    if (i >= warmup) profiling.emplace(profile);
    const auto start = Clock::now();
    model.zero_grad();
    const Var<float> loss = cross_entropy(reshape(model(Var<float>(tokens)), {-1, ntoken}), targets);
    const double forward_s = seconds_since(start);
    backward(loss);
    const double backward_s = seconds_since(start) - forward_s;
    {
      NoGradGuard no_grad;
      clip_grad_norm(model.parameters(), 0.5);
      sgd.step();
    }
    if (i < warmup) continue;
    total.push_back(seconds_since(start));
    forward.push_back(forward_s);
    backward_pass.push_back(backward_s);
    step.push_back(total.back() - forward_s - backward_s);
  }
  const double ours = static_cast<double>(bptt * batch) / median(total);
  std::printf("bench=transformer_lm impl=ptrain threads=%d ntoken=%lld emsize=%lld nhid=%lld nlayers=%lld nhead=%lld "
              "bptt=%lld batch=%lld median_ms=%.1f tokens_per_sec=%.1f forward_ms=%.1f backward_ms=%.1f "
              "clip_step_ms=%.1f\n",
              threads, static_cast<long long>(ntoken), static_cast<long long>(emsize), static_cast<long long>(nhid),
              static_cast<long long>(nlayers), static_cast<long long>(nhead), static_cast<long long>(bptt),
              static_cast<long long>(batch), 1e3 * median(total), ours, 1e3 * median(forward),
              1e3 * median(backward_pass), 1e3 * median(step));
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("bench=transformer_lm blas_core=%s OPENBLAS_CORETYPE=%s\n",
              openblas_get_corename ? openblas_get_corename() : "not_openblas", coretype ? coretype : "unset");
  bench::print_op_breakdown("transformer_lm", profile, total);
  std::fflush(stdout);

  char args[256];
  std::snprintf(args, sizeof args, "%d %lld %lld %lld %lld %lld %lld %lld %d %d", threads,
                static_cast<long long>(ntoken), static_cast<long long>(emsize), static_cast<long long>(nhid),
                static_cast<long long>(nlayers), static_cast<long long>(nhead), static_cast<long long>(bptt),
                static_cast<long long>(batch), warmup, steps);
  for (const bench::TorchPeer& peer : bench::torch_peers()) {
    bool ran = false;
    for (const std::string& line : bench::peer_lines(peer, "torch_lm_peer.py", args)) {
      const double theirs = std::atof(bench::json_field(line, "tokens_per_sec").c_str());
      if (theirs <= 0) continue;
      std::printf("bench=transformer_lm impl=pytorch_%s threads=%s torch=%s median_ms=%.1f tokens_per_sec=%.1f\n",
                  peer.name.c_str(), bench::json_field(line, "threads").c_str(), bench::json_field(line, "torch").c_str(),
                  1e3 * std::atof(bench::json_field(line, "median_s").c_str()), theirs);
      std::printf("bench=transformer_lm ratio_ptrain_over_pytorch_%s=%.3f\n", peer.name.c_str(), ours / theirs);
      ran = true;
    }
    if (!ran) bench::print_unavailable("transformer_lm", peer);
  }
  return 0;
}
