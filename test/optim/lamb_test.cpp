#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/optim/lamb.hpp>

#include "optim_test_util.hpp"

using namespace ptrain;
using namespace optim_test;

BOOST_AUTO_TEST_SUITE(lamb_test)

namespace {

// Expected values: the LAMB algorithm in float64 on the quadratic run, printed by
// test/optim/make_references.py; there p is a weight and q a bias (no weight decay).
template <class D>
void check_lamb(LambOptions options, const Rows& p, const Rows& q) {
  auto t = run_quadratic<D>([&](std::vector<Var<double, D>> ps) {
    return Lamb<double, D>({{"encoder.weight", ps[0]}, {"encoder.bias", ps[1]}}, options);
  });
  check_rows(t.p, p, 1e-5);
  check_rows(t.q, q, 1e-5);
  // Within 1e-5 relative is what was asked; the double run is much closer.
  check_rows(t.p, p, 1e-12);
  check_rows(t.q, q, 1e-12);
}

template <class D>
Var<double, D> param(std::vector<double> values) {
  const auto n = static_cast<std::int64_t>(values.size());
  return Var<double, D>(Tensor<double>::from({n}, values).template to<D>(), true);
}

}  // namespace

static_assert(MomentumOptimizer<Lamb<float>> && MomentumOptimizer<Lamb<double, HostEmulated>>);

BOOST_AUTO_TEST_CASE_TEMPLATE(lamb_matches_reference, D, Devices) {
  check_lamb<D>({.lr = 0.1},
                {{0.867932860502973, -1.8666253051348163, 0.3685866771035297},
                 {0.7466758178906174, -1.743749484054958, 0.25054940164639516},
                 {0.6341131374572698, -1.6289316857408551, 0.14683760582614513},
                 {0.5281321359209837, -1.5196645369662845, 0.05966244069321544}},
                {{0.19409829417374436, -0.6940983069512668}, {0.19409829417374436, -0.6940983069512668},
                 {0.14307303326065607, -0.6431975326556927}, {0.14307303326065607, -0.6431975326556927}});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(lamb_weight_decay_matches_reference, D, Devices) {
  check_lamb<D>({.lr = 0.05, .beta1 = 0.8, .beta2 = 0.9, .eps = 1e-4, .weight_decay = 0.3},
                {{0.936908460601333, -1.9223491706464682, 0.4441895497508294},
                 {0.8767308798891075, -1.848220990291354, 0.3911801917023522},
                 {0.8192773761591039, -1.7773405601138765, 0.34098996312432484},
                 {0.7643584409658096, -1.7094336543074469, 0.2936757443028078}},
                {{0.22204883086669808, -0.7220494696994574}, {0.22204883086669808, -0.7220494696994574},
                 {0.19532834367392116, -0.6953536205064277}, {0.19532834367392116, -0.6953536205064277}});
}

BOOST_AUTO_TEST_CASE(weight_decay_skips_layer_norm_and_biases_by_name) {
  BOOST_TEST(decays_weight("albert.encoder.embedding_hidden_mapping_in.weight"));
  BOOST_TEST(decays_weight("predictions.decoder.weight"));
  BOOST_TEST(!decays_weight("albert.embeddings.LayerNorm.weight"));
  BOOST_TEST(!decays_weight("encoder.layers.0.self_attn_layer_norm.weight"));
  BOOST_TEST(!decays_weight("sop_classifier.classifier.bias"));
  BOOST_TEST(!decays_weight("bias"));
  BOOST_TEST(decays_weight("biased.weight"));
  std::vector<std::pair<std::string, Var<double>>> named{{"a.weight", param<Cpu>({1})},
                                                         {"a.LayerNorm.weight", param<Cpu>({1})},
                                                         {"a.bias", param<Cpu>({1})}};
  Lamb<double> opt(named);
  BOOST_TEST(opt.decays(0));
  BOOST_TEST(!opt.decays(1));
  BOOST_TEST(!opt.decays(2));
  Lamb<double> unnamed(std::vector<Var<double>>{param<Cpu>({1}), param<Cpu>({2})});
  BOOST_TEST((unnamed.decays(0) && unnamed.decays(1)));
}

// A zero parameter (||p|| = 0) and a zero update (||update|| = 0) both take trust ratio 1.
BOOST_AUTO_TEST_CASE_TEMPLATE(trust_ratio_is_one_when_a_norm_is_zero, D, Devices) {
  auto zero = param<D>({0, 0});
  auto still = param<D>({3, 4});
  Lamb<double, D> opt({{"zero.bias", zero}, {"still.bias", still}}, {.lr = 0.5});
  zero.grad() = on_device<D>(Tensor<double>::from({2}, {2, -8}));
  still.grad() = Tensor<double, D>::zeros({2});
  opt.step();
  // First step: update = g / (|g| + eps) elementwise, times lr, unscaled.
  const auto moved = on_host(zero.value()).to_vector();
  BOOST_TEST(moved[0] == -0.5, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(moved[1] == 0.5, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(on_host(still.value()).to_vector() == std::vector<double>({3, 4}));  // 0 / 0 would be a NaN
}

// The trust ratio scales the step to the parameter's norm: a parameter 1000 times larger moves
// 1000 times further on the same gradient.
BOOST_AUTO_TEST_CASE_TEMPLATE(step_scales_with_parameter_norm, D, Devices) {
  auto small = param<D>({0.003, -0.004});
  auto large = param<D>({3, -4});
  Lamb<double, D> opt({{"s.bias", small}, {"l.bias", large}}, {.lr = 0.1});
  small.grad() = on_device<D>(Tensor<double>::from({2}, {1, 2}));
  large.grad() = on_device<D>(Tensor<double>::from({2}, {1, 2}));
  opt.step();
  const auto s = on_host(small.value()).to_vector(), l = on_host(large.value()).to_vector();
  for (int i = 0; i < 2; ++i) BOOST_TEST((l[i] - (i ? -4 : 3)) == 1000 * (s[i] - (i ? -0.004 : 0.003)),
                                         boost::test_tools::tolerance(1e-9));
  // ||step|| = lr * ||p||: 0.1 * 5.
  BOOST_TEST(std::hypot(l[0] - 3, l[1] + 4) == 0.5, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(state_round_trip_resumes_exactly, D, Devices) {
  const LambOptions options{.lr = 0.05, .beta2 = 0.9, .weight_decay = 0.1};
  const auto make = [&](std::vector<Var<double, D>> ps) { return Lamb<double, D>(ps, options); };
  const auto straight = run_quadratic<D>(make);
  auto p = initial_p<D>();
  auto q = initial_q<D>();
  OptimizerState<double> saved;
  {
    auto first = make({p, q});
    for (int k = 0; k < 3; ++k) {
      quadratic_grads(p, q, k);
      first.step();
    }
    saved = first.state();
    for (auto& [name, t] : saved.tensors) t = t.clone();
  }
  std::vector<std::string> names;
  for (const auto& [name, t] : saved.tensors) names.push_back(name);
  BOOST_TEST(names == std::vector<std::string>({"0.step", "0.exp_avg", "0.exp_avg_sq", "1.step", "1.exp_avg",
                                                "1.exp_avg_sq"}));
  auto second = make({p, q});
  second.load_state(saved);
  quadratic_grads(p, q, 3);
  second.step();
  BOOST_TEST(on_host(p.value()).to_vector() == straight.p[3]);
  BOOST_TEST(on_host(q.value()).to_vector() == straight.q[3]);
}

BOOST_AUTO_TEST_CASE(state_moves_between_devices) {
  const LambOptions options{.lr = 0.05, .beta2 = 0.9, .weight_decay = 0.1};
  check_state_moves_between_devices<Lamb<double>, Lamb<double, HostEmulated>>(options, 3, 6);
  check_state_moves_between_devices<Lamb<double, HostEmulated>, Lamb<double>>(options, 2, 5);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(load_state_and_options_refuse_bad_values, D, Devices) {
  auto p = param<D>({0, 0, 0});
  Lamb<double, D> opt({p});
  const auto z = Tensor<double>::zeros({3});
  check_throws_with([&] { opt.load_state({{}, {{"0.step", Tensor<double>::ones({1})}, {"0.exp_avg", z}}}); },
                    "Lamb: saved state of parameter 0 is incomplete");
  check_throws_with([&] { opt.load_state({{}, {{"0.max_exp_avg_sq", z}}}); }, "has unknown name 'max_exp_avg_sq'");
  check_throws_with([&] { opt.load_state({{}, {{"0.exp_avg", Tensor<double>::zeros({2})}}}); },
                    "'0.exp_avg' has shape [2], expected [3]");
  check_throws_with([&] { opt.load_state({{{"momentum", 0.9}}, {}}); }, "state scalar 'momentum' is unknown");
  BOOST_TEST(opt.state().tensors.empty());
  check_throws_with([&] { Lamb<double, D>({p}, {.lr = -1}); }, "Lamb: invalid learning rate -1");
  check_throws_with([&] { Lamb<double, D>({p}, {.beta2 = 1}); }, "Lamb: invalid beta2 1");
  check_throws_with([&] { Lamb<double, D>({p}, {.weight_decay = -0.1}); }, "Lamb: invalid weight_decay -0.1");
}

// Float parameters of several shapes over five steps, one frozen, one skipped on odd steps: the
// GPU's algorithm (HostEmulated) against the CPU's (which sums the norms with Eigen).
BOOST_AUTO_TEST_CASE(float_on_host_emulated_matches_cpu) {
  const std::vector<Shape> shapes{{4, 3}, {5}, {2, 2, 3}, {7}};
  const auto make_params = [&]<class D>(D) {
    std::vector<std::pair<std::string, Var<float, D>>> named;
    for (std::size_t i = 0; i < shapes.size(); ++i)
      named.emplace_back(i == 1 ? "x.bias" : "x.weight" + std::to_string(i),
                         Var<float, D>(tensor_cast<float>(random_tensor(shapes[i], 40 + i)).to<D>(), i != 2));
    return named;
  };
  auto cpu = make_params(Cpu{});
  auto dev = make_params(HostEmulated{});
  const LambOptions options{.lr = 0.02, .weight_decay = 0.1};
  Lamb<float> cpu_opt(cpu, options);
  Lamb<float, HostEmulated> dev_opt(dev, options);
  const auto frozen = cpu[2].second.value().to_vector();
  for (int s = 0; s < 5; ++s) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      cpu[i].second.zero_grad();
      dev[i].second.zero_grad();
      if (i == 3 && s % 2 == 1) continue;
      const auto g = tensor_cast<float>(random_tensor(shapes[i], 100 * s + i));
      cpu[i].second.grad() = g.clone();
      dev[i].second.grad() = g.to<HostEmulated>();
    }
    cpu_opt.step();
    dev_opt.step();
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      const auto got = dev[i].second.value().to<Cpu>().to_vector(), want = cpu[i].second.value().to_vector();
      for (std::size_t k = 0; k < want.size(); ++k)
        BOOST_TEST(std::abs(got[k] - want[k]) <= 1e-6 * (1 + std::abs(want[k])),
                   "step " << s << " parameter " << i << " element " << k);
    }
  }
  BOOST_TEST(dev[2].second.value().to_vector() == frozen);
  BOOST_TEST(cpu[2].second.value().to_vector() == frozen);
}

BOOST_AUTO_TEST_SUITE_END()
