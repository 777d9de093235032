// kernels/indexed/optim.hpp under the HostExecutor against the real optimizers (Sgd, Adam, AdamW)
// over several steps, and the unscale-and-check pass against MixedPrecision's.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/kernels/executor.hpp>
#include <ptrain/kernels/indexed/optim.hpp>
#include <ptrain/kernels/optim.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/optim/adam.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/mixed_precision.hpp>

using namespace ptrain;
namespace ki = ptrain::kernels::indexed;

BOOST_AUTO_TEST_SUITE(optim_kernels_test)

namespace {

const kernels::HostExecutor ex;
const std::vector<std::int64_t> sizes{37, 5, 1};
constexpr int steps = 6;

template <class T>
Tensor<T> values(std::int64_t n, std::uint64_t seed, double lo = -1, double hi = 1) {
  return tensor_cast<T>(random_tensor(Shape{n}, seed, lo, hi));
}

// Parameter k's gradient at step s; parameter 1 has none on odd steps (the optimizer skips it).
template <class T>
Tensor<T> gradient(std::size_t k, int s) {
  if (k == 1 && s % 2 == 1) return {};
  return values<T>(sizes[k], 1000 + 10 * static_cast<std::uint64_t>(s) + k, -2, 2);
}

template <class T>
std::vector<Var<T>> make_params() {
  std::vector<Var<T>> ps;
  for (std::size_t k = 0; k < sizes.size(); ++k) ps.emplace_back(values<T>(sizes[k], 7 + k), true);
  return ps;
}

template <class T>
void require_close(const Tensor<T>& got, const Tensor<T>& want, double tol, const char* what, int step) {
  for (std::int64_t i = 0; i < want.numel(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    BOOST_TEST(std::abs(g - w) <= tol * std::max(1.0, std::abs(w)),
               what << " step " << step << " element " << i << ": got " << g << ", expected " << w);
  }
}

// Runs `Optimizer` and the kernel step side by side; step_kernel(k, t, p, g) updates copy k.
template <class T, class Optimizer, class StepKernel>
void compare(Optimizer& optimizer, std::vector<Var<T>>& params, std::vector<Tensor<T>>& copies, StepKernel step_kernel,
             double tol) {
  std::vector<std::int64_t> taken(params.size(), 0);
  for (int s = 0; s < steps; ++s) {
    optimizer.zero_grad();
    for (std::size_t k = 0; k < params.size(); ++k) {
      Tensor<T> g = gradient<T>(k, s);
      if (!g.defined()) continue;
      params[k].grad() = g.clone();
      step_kernel(k, ++taken[k], copies[k].data(), g.data());
    }
    optimizer.step();
    for (std::size_t k = 0; k < params.size(); ++k) require_close(copies[k], params[k].value(), tol, "parameter", s);
  }
}

template <class T>
std::vector<Tensor<T>> clones(const std::vector<Var<T>>& params) {
  std::vector<Tensor<T>> out;
  for (const auto& p : params) out.push_back(p.value().clone());
  return out;
}

template <class T>
void check_sgd(const SgdOptions& options, double tol) {
  auto params = make_params<T>();
  auto copies = clones(params);
  std::vector<Tensor<T>> buffers;
  for (auto n : sizes) buffers.emplace_back(Shape{n});
  Sgd<T> sgd(params, options);
  compare<T>(sgd, params, copies,
             [&](std::size_t k, std::int64_t t, T* p, const T* g) {
               ki::sgd_step(ex, options, p, g, buffers[k].data(), t == 1, sizes[k]);
             },
             tol);
}

template <class T, class Optimizer, class Options>
void check_adam(const Options& options, double tol) {
  constexpr bool decoupled = std::is_same_v<Options, AdamWOptions>;
  auto params = make_params<T>();
  auto copies = clones(params);
  std::vector<Tensor<T>> m, v, vmax;
  for (auto n : sizes) {
    m.push_back(Tensor<T>::zeros(Shape{n}));
    v.push_back(Tensor<T>::zeros(Shape{n}));
    vmax.push_back(Tensor<T>::zeros(Shape{n}));
  }
  Optimizer adam(params, options);
  compare<T>(adam, params, copies,
             [&](std::size_t k, std::int64_t t, T* p, const T* g) {
               const ki::AdamBuffers<T> state{m[k].data(), v[k].data(), options.amsgrad ? vmax[k].data() : nullptr};
               if constexpr (decoupled)
                 ki::adamw_step(ex, options, t, p, g, state, sizes[k]);
               else
                 ki::adam_step(ex, options, t, p, g, state, sizes[k]);
             },
             tol);
}

const std::vector<SgdOptions> sgd_variants{
    {.lr = 0.1},
    {.lr = 0.05, .weight_decay = 0.01},
    {.lr = 0.1, .momentum = 0.9},
    {.lr = 0.1, .momentum = 0.8, .dampening = 0.3, .weight_decay = 0.02},
    {.lr = 0.07, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true},
    {.lr = 0.03, .momentum = 0.5, .nesterov = true},
};
const std::vector<AdamOptions> adam_variants{
    {},
    {.lr = 0.01, .weight_decay = 0.05},
    {.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .amsgrad = true},
    {.lr = 0.01, .eps = 1e-6, .weight_decay = 0.1, .amsgrad = true},
};
const std::vector<AdamWOptions> adamw_variants{
    {},
    {.lr = 0.01, .weight_decay = 0},
    {.lr = 0.02, .beta1 = 0.85, .weight_decay = 0.1, .amsgrad = true},
};

}  // namespace

BOOST_AUTO_TEST_CASE(sgd_matches_the_optimizer) {
  for (const auto& o : sgd_variants) {
    BOOST_TEST_CONTEXT("lr " << o.lr << " momentum " << o.momentum << " dampening " << o.dampening << " decay "
                             << o.weight_decay << " nesterov " << o.nesterov) {
      check_sgd<double>(o, 1e-12);
      check_sgd<float>(o, 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(adam_matches_the_optimizer) {
  for (const auto& o : adam_variants) {
    BOOST_TEST_CONTEXT("lr " << o.lr << " decay " << o.weight_decay << " amsgrad " << o.amsgrad) {
      check_adam<double, Adam<double>>(o, 1e-12);
      check_adam<float, Adam<float>>(o, 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(adamw_matches_the_optimizer) {
  for (const auto& o : adamw_variants) {
    BOOST_TEST_CONTEXT("lr " << o.lr << " decay " << o.weight_decay << " amsgrad " << o.amsgrad) {
      check_adam<double, AdamW<double>>(o, 1e-12);
      check_adam<float, AdamW<float>>(o, 1e-6);
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_refused) {
  Tensor<double> p = values<double>(4, 1), g = values<double>(4, 2);
  BOOST_CHECK_THROW(ki::sgd_step(ex, SgdOptions{.lr = 0.1, .momentum = 0.9}, p.data(), g.data(),
                                 static_cast<double*>(nullptr), true, 4),
                    Error);
  Tensor<double> m = Tensor<double>::zeros({4}), v = Tensor<double>::zeros({4});
  BOOST_CHECK_THROW(ki::adam_step(ex, AdamOptions{}, 0, p.data(), g.data(), {m.data(), v.data()}, 4), Error);
  BOOST_CHECK_THROW(ki::adam_step(ex, AdamOptions{.amsgrad = true}, 1, p.data(), g.data(), {m.data(), v.data()}, 4),
                    Error);
}

// MixedPrecision's before_optimizer_step on a 16-bit model: the masters' gradients it makes equal
// unscale_gradients' output bit for bit, and the step is skipped exactly when the flag is raised.
template <class Precision>
void check_unscale(double scale, double poison) {
  using T = typename MixedPrecision<Precision>::scalar_type;
  Linear<T> model(6, 5);
  MixedPrecision<Precision> amp(model, LossScalerOptions{.initial_scale = scale});
  amp.setup(model);
  auto params = model.parameters();
  for (std::size_t k = 0; k < params.size(); ++k)
    params[k].grad() = values<T>(params[k].value().numel(), 50 + k, -3e3, 3e3).reshape(params[k].shape());
  if (!std::isfinite(poison)) params[1].grad()[3] = static_cast<T>(poison);

  std::int32_t found_inf = 0;
  std::vector<Tensor<float>> unscaled;
  for (const auto& p : params) {
    unscaled.emplace_back(p.shape());
    ki::unscale_gradients(ex, p.grad().data(), unscaled.back().data(), p.value().numel(), scale, &found_inf);
  }
  const bool stepped = amp.before_optimizer_step(model);
  BOOST_TEST(stepped == (found_inf == 0));
  BOOST_TEST(found_inf == (std::isfinite(poison) ? 0 : 1));
  if (!stepped) return;
  for (std::size_t k = 0; k < params.size(); ++k) {
    const Tensor<float>& want = amp.master_parameters()[k].grad();
    for (std::int64_t i = 0; i < want.numel(); ++i) BOOST_TEST(unscaled[k][i] == want[i], "parameter " << k << " element " << i);
  }
}

BOOST_AUTO_TEST_CASE(unscale_matches_mixed_precision_and_finds_inf_and_nan) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (double poison : {1.0, inf, -inf, nan}) {
    BOOST_TEST_CONTEXT("injected " << poison) {
      check_unscale<Fp16>(1024.0, poison);
      check_unscale<Fp16>(1.0, poison);
      check_unscale<Bf16>(1.0, poison);
    }
  }
}

BOOST_AUTO_TEST_CASE(unscale_in_place_over_several_rows) {
  // Over three rows of the reduction: the flag comes from a row other than the first, and the
  // flag is never cleared by a later clean call.
  const std::int64_t n = 2 * ki::unscale_row + 17;
  Tensor<float> g = values<float>(n, 3, -1e4, 1e4), want = g.clone();
  want.array() *= 1.0f / 256;
  std::int32_t found_inf = 0;
  ki::unscale_gradients(ex, g.data(), g.data(), n, 256.0, &found_inf);
  BOOST_TEST(found_inf == 0);
  for (std::int64_t i = 0; i < n; ++i) BOOST_REQUIRE_EQUAL(g[i], want[i]);
  g[n - 2] = std::numeric_limits<float>::infinity();
  ki::unscale_gradients(ex, g.data(), g.data(), n, 256.0, &found_inf);
  BOOST_TEST(found_inf == 1);
  Tensor<float> clean = values<float>(8, 4);
  ki::unscale_gradients(ex, clean.data(), clean.data(), 8, 2.0, &found_inf);
  BOOST_TEST(found_inf == 1);
  // A product that overflows float is found too (1e38 * 4).
  std::int32_t overflow = 0;
  Tensor<float> big = Tensor<float>::full({3}, 1e38f);
  ki::unscale_gradients(ex, big.data(), big.data(), 3, 0.25, &overflow);
  BOOST_TEST(overflow == 1);
}

// An update that also writes the stepped parameter rounded to 16 bits (MixedPrecision's model
// weights) writes the bits a cast after it writes, over several chunks and the threads on the CPU,
// in a cast after the update elsewhere; the update itself is the same.
template <class Ex, class Sixteen>
void check_rounded_copy(const Ex& executor) {
  const std::int64_t n = kernels::cpu::update_parallel_threshold + 2 * kernels::cpu::update_chunk + 9;
  const Tensor<float> g = values<float>(n, 21, -2, 2);
  const auto copy_into = [](Tensor<Sixteen>& t) {
    kernels::SixteenBitCopy copy;
    if constexpr (std::is_same_v<Sixteen, half>) copy.to_half = t.data();
    else copy.to_bfloat16 = t.data();
    return copy;
  };
  const auto expect_rounded = [&](const Tensor<float>& stepped, const Tensor<float>& alone, const Tensor<Sixteen>& got,
                                  const char* what) {
    const Tensor<Sixteen> want = tensor_cast<Sixteen>(stepped);
    for (std::int64_t i = 0; i < n; ++i) {
      BOOST_REQUIRE_MESSAGE(stepped[i] == alone[i], what << ": the update differs at " << i);
      BOOST_REQUIRE_MESSAGE(static_cast<float>(got[i]) == static_cast<float>(want[i]), what << ": element " << i);
    }
  };
  {
    Tensor<float> p = values<float>(n, 22), alone = p.clone(), m({n}), m_alone({n});
    Tensor<Sixteen> rounded = Tensor<Sixteen>::zeros({n});
    const SgdOptions options{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2};
    kernels::sgd_step(executor, options, p.data(), g.data(), m.data(), true, n, copy_into(rounded));
    kernels::sgd_step(executor, options, alone.data(), g.data(), m_alone.data(), true, n);
    expect_rounded(p, alone, rounded, "sgd");
    const SgdOptions plain{.lr = 0.1};
    kernels::sgd_step(executor, plain, p.data(), g.data(), static_cast<float*>(nullptr), false, n, copy_into(rounded));
    kernels::sgd_step(executor, plain, alone.data(), g.data(), static_cast<float*>(nullptr), false, n);
    expect_rounded(p, alone, rounded, "sgd without momentum");
  }
  for (bool decoupled : {false, true}) {
    Tensor<float> p = values<float>(n, 23), alone = p.clone();
    Tensor<float> m = Tensor<float>::zeros({n}), v = Tensor<float>::zeros({n});
    Tensor<float> m_alone = m.clone(), v_alone = v.clone();
    Tensor<Sixteen> rounded = Tensor<Sixteen>::zeros({n});
    if (decoupled) {
      const AdamWOptions options{.lr = 1e-2, .weight_decay = 1e-2};
      kernels::adamw_step(executor, options, 1, p.data(), g.data(), {m.data(), v.data()}, n, copy_into(rounded));
      kernels::adamw_step(executor, options, 1, alone.data(), g.data(), {m_alone.data(), v_alone.data()}, n);
    } else {
      const AdamOptions options{.lr = 1e-2, .weight_decay = 1e-2};
      kernels::adam_step(executor, options, 1, p.data(), g.data(), {m.data(), v.data()}, n, copy_into(rounded));
      kernels::adam_step(executor, options, 1, alone.data(), g.data(), {m_alone.data(), v_alone.data()}, n);
    }
    expect_rounded(p, alone, rounded, decoupled ? "adamw" : "adam");
  }
}

BOOST_AUTO_TEST_CASE(updates_write_their_rounded_copy) {
  check_rounded_copy<kernels::CpuExecutor, ptrain::bfloat16>(kernels::CpuExecutor{});
  check_rounded_copy<kernels::CpuExecutor, half>(kernels::CpuExecutor{});
  check_rounded_copy<kernels::HostExecutor, ptrain::bfloat16>(ex);
  check_rounded_copy<kernels::HostExecutor, half>(ex);
}

// The CPU's unscale runs a chunk at a time over the threads: the same bits as the indexed pass,
// and a flag raised by an inf or a NaN in any chunk, the last one's too.
BOOST_AUTO_TEST_CASE(cpu_unscale_over_several_chunks_matches_the_indexed_one) {
  const std::int64_t n = kernels::cpu::update_parallel_threshold + 3 * kernels::cpu::update_chunk + 17;
  for (double scale : {1.0, 256.0}) {
    for (double poison : {1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
      BOOST_TEST_CONTEXT("scale " << scale << ", injected " << poison) {
        Tensor<ptrain::bfloat16> g = values<ptrain::bfloat16>(n, 7, -3e3, 3e3);
        if (!std::isfinite(poison)) g[n - 5] = static_cast<ptrain::bfloat16>(poison);
        Tensor<float> want({n}), got({n});
        std::int32_t want_inf = 0, got_inf = 0;
        ki::unscale_gradients(ex, g.data(), want.data(), n, scale, &want_inf);
        kernels::unscale_gradients(kernels::CpuExecutor{}, g.data(), got.data(), n, scale, &got_inf);
        BOOST_TEST(got_inf == (std::isfinite(poison) ? 0 : 1));
        BOOST_TEST(got_inf == want_inf);
        for (std::int64_t i = 0; i < n; ++i)
          if (!std::isnan(want[i])) BOOST_REQUIRE_MESSAGE(got[i] == want[i], "element " << i);
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
