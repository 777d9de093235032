#pragma once
// Which algorithm computes a pass of a CPU convolution where Winograd applies (conv.hpp asks):
// im2col + GEMM, Winograd F(2x2, 3x3) or F(4x4, 3x3) (winograd.hpp).
// - `auto`, the default, decides from the layer's shape and the pass alone (default_conv_algorithm),
//   so the same command computes the same bits in every process, and a resumed run ends where the
//   straight run ends. It runs only algorithms whose float error on a real network stays within
//   4x PyTorch's own (test/nn/conv_accuracy_test).
// - `benchmark` (opt-in, as cuDNN's benchmark mode): the first call of a pass for a layer shape runs
//   every candidate (each once to warm its scratch buffers, once timed) and keeps the fastest for
//   that shape, scalar size and thread count; Winograd is never kept where it was slower. The
//   choice follows the timings, so two runs of the same command may round differently, and F(4x4)'s
//   weight gradient may be chosen although it fails that accuracy bound.
// Under `winograd_flops`, both run im2col + GEMM.
// PTRAIN_CONV_ALGO=auto|benchmark|gemm|winograd2|winograd4, or set_conv_algorithm(), picks the mode
// or forces one algorithm for every layer it applies to (tests, benches); the others run im2col + GEMM.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>

#include "ptrain/core/error.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/device/threads.hpp"
#include "ptrain/kernels/geometry/conv.hpp"

namespace ptrain::kernels {

enum class ConvAlgorithm { automatic, gemm, winograd2, winograd4, benchmark };
enum class ConvPass { forward, grad_input, grad_weight };

inline constexpr std::array<ConvAlgorithm, 3> conv_algorithm_candidates{ConvAlgorithm::gemm, ConvAlgorithm::winograd2,
                                                                        ConvAlgorithm::winograd4};

// `what` names where the text came from, for the error.
inline ConvAlgorithm parse_conv_algorithm(std::string_view text, const char* what = "PTRAIN_CONV_ALGO") {
  if (text == "auto") return ConvAlgorithm::automatic;
  if (text == "benchmark") return ConvAlgorithm::benchmark;
  if (text == "gemm") return ConvAlgorithm::gemm;
  if (text == "winograd2") return ConvAlgorithm::winograd2;
  if (text == "winograd4") return ConvAlgorithm::winograd4;
  fail(what, "='", text, "': expected auto (chosen by shape, reproducible), benchmark (timed, not reproducible), gemm, "
       "winograd2 (F(2x2, 3x3)) or winograd4 (F(4x4, 3x3))");
}

namespace detail {
// set_conv_algorithm's choice, -1 before any; atomic, as pipeline stages may run on threads.
inline std::atomic<int>& forced_conv_algorithm() {
  static std::atomic<int> forced{-1};
  return forced;
}
}  // namespace detail

// The algorithm asked for: set_conv_algorithm's, else PTRAIN_CONV_ALGO's (read once), else auto.
inline ConvAlgorithm conv_algorithm() {
  if (const int forced = detail::forced_conv_algorithm().load(std::memory_order_relaxed); forced >= 0)
    return static_cast<ConvAlgorithm>(forced);
  static const ConvAlgorithm from_environment = [] {
    const char* env = std::getenv("PTRAIN_CONV_ALGO");
    return env && *env ? parse_conv_algorithm(env) : ConvAlgorithm::automatic;
  }();
  return from_environment;
}
inline void set_conv_algorithm(ConvAlgorithm algorithm) {
  detail::forced_conv_algorithm().store(static_cast<int>(algorithm), std::memory_order_relaxed);
}

// Below this many flops a pass runs im2col + GEMM (and `benchmark` measures nothing).
inline constexpr double winograd_flops = 2e7;

// `auto`'s choice for a pass of g where Winograd applies. On this project's benchmark layers
// (bench_conv: ResNet-18 on CIFAR-10, VGG-16 and the UNet) F(2x2, 3x3) beats im2col + GEMM wherever
// both channel counts are 16 or more, and loses on RGB inputs (3 channels: a short GEMM depth).
// F(4x4, 3x3) is faster still (a third less time than F(2x2) on those layers), but its transforms
// (up to 5x in, 8x out, 1/6 and 1/24 inexact) cost a real network's float gradients up to 16x
// PyTorch's own float32 error against float64, in every pass (test/nn/conv_accuracy_test), so it
// runs only when asked for (winograd4, benchmark).
// What a pass's products run on (conv.hpp): float or double; bfloat16 on vdpbf16ps; bfloat16 on
// AMX tiles.
enum class ConvProducts { wide, bf16_dot, bf16_amx };

// bf16_dot: im2col + GEMM runs about twice float's speed and F(2x2, 3x3)'s float transforms weigh
// more: on ResNet-18 on CIFAR-10's layers (batch 64, one thread, CPU time) F(2x2) took 0.58-0.74x
// im2col's time in every pass on the 128- to 512-channel layers (0.94x for the 512-channel weight
// gradient) but 1.07-1.11x on the 64-channel ones (32x32), so it needs both channel counts 128 or
// more.
// bf16_amx: the GEMM on tiles, packed straight from the image, outruns F(2x2) wherever the output
// plane is 16x16 or more, and F(2x2) still wins below (2 threads, ms of forward / both gradients,
// F(2x2) against GEMM: VGG-16 at 128x128, batch 16, 128 channels at 64x64 27 / 59 against 12.5 / 35,
// 512 at 16x16 16.4 / 43 against 10.6 / 28, 512 at 8x8 3.3 / 7.9 against 4.6 / 15; ResNet-18 on
// CIFAR-10, batch 64, 128 at 16x16 6.0 / 14.3 against 3.3 / 8.3, 256 at 8x8 3.9 / 9.6 against 4.6 /
// 11.9, 512 at 4x4 3.1 / 7.4 against 9.0 / 28.6).
inline constexpr std::int64_t amx_gemm_min_out_plane = 16 * 16;
inline ConvAlgorithm default_conv_algorithm(const Conv2dGeometry& g, ConvPass /*pass*/,
                                            ConvProducts products = ConvProducts::wide) {
  const std::int64_t min_channels = products == ConvProducts::wide ? 16 : 128;
  if (g.flops() < winograd_flops || g.in_channels < min_channels || g.out_channels < min_channels)
    return ConvAlgorithm::gemm;
  if (products == ConvProducts::bf16_amx && g.out_plane() >= amx_gemm_min_out_plane) return ConvAlgorithm::gemm;
  return ConvAlgorithm::winograd2;
}

// The choices `benchmark` made, per layer shape, pass, scalar size and thread count.
class ConvAlgorithmCache {
 public:
  using Key = std::array<std::int64_t, 19>;
  static Key key(const Conv2dGeometry& g, ConvPass pass, std::size_t scalar_size, int threads) {
    return {g.batch,      g.in_channels, g.in_h,         g.in_w,       g.out_channels,
            g.kernel_h,   g.kernel_w,    g.stride_h,     g.stride_w,   g.pad_h,
            g.pad_w,      g.dilation_h,  g.dilation_w,   g.groups,     g.out_h,
            g.out_w,      static_cast<std::int64_t>(pass), static_cast<std::int64_t>(scalar_size), threads};
  }
  std::optional<ConvAlgorithm> find(const Key& k) const {
    std::lock_guard lock(mutex_);
    const auto it = choices_.find(k);
    return it == choices_.end() ? std::nullopt : std::optional(it->second);
  }
  void store(const Key& k, ConvAlgorithm a) {
    std::lock_guard lock(mutex_);
    choices_[k] = a;
    ++measurements_;
  }
  // How many passes were measured since the start (or clear()).
  std::int64_t measurements() const {
    std::lock_guard lock(mutex_);
    return measurements_;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    choices_.clear();
    measurements_ = 0;
  }

 private:
  mutable std::mutex mutex_;
  std::map<Key, ConvAlgorithm> choices_;
  std::int64_t measurements_ = 0;
};

inline ConvAlgorithmCache& conv_algorithm_cache() {
  static ConvAlgorithmCache cache;
  return cache;
}

// Runs one pass of g where Winograd applies: run(algorithm) computes it with that algorithm
// (any of them writes the same outputs), chosen as the top of the file says; products as
// default_conv_algorithm's.
template <class Run>
void run_conv_pass(const Conv2dGeometry& g, ConvPass pass, std::size_t scalar_size, Run&& run,
                   ConvProducts products = ConvProducts::wide) {
  const ConvAlgorithm asked = conv_algorithm();
  if (asked == ConvAlgorithm::automatic) {
    run(default_conv_algorithm(g, pass, products));
    return;
  }
  if (asked != ConvAlgorithm::benchmark) {
    run(asked);
    return;
  }
  if (g.flops() < winograd_flops) {
    run(ConvAlgorithm::gemm);
    return;
  }
  static std::once_flag said;
  std::call_once(said, [] {
    log_line("ptrain: PTRAIN_CONV_ALGO=benchmark: each convolution's algorithm is the fastest of a timing at its "
             "first call, so runs may round differently and F(4x4, 3x3) may be chosen; auto (the default) is "
             "reproducible",
             stderr);
  });
  ConvAlgorithmCache& cache = conv_algorithm_cache();
  const ConvAlgorithmCache::Key key = ConvAlgorithmCache::key(g, pass, scalar_size, num_threads());
  if (const auto known = cache.find(key)) {
    run(*known);
    return;
  }
  using Clock = std::chrono::steady_clock;
  ConvAlgorithm best = ConvAlgorithm::gemm;
  double best_seconds = 0;
  for (const ConvAlgorithm a : conv_algorithm_candidates) {
    run(a);
    const auto start = Clock::now();
    run(a);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (a == ConvAlgorithm::gemm || seconds < best_seconds) {
      best = a;
      best_seconds = seconds;
    }
  }
  cache.store(key, best);
}

}  // namespace ptrain::kernels
