#pragma once
// The device-op tests' two checks on HostEmulated: an op equal to its CPU twin (outputs and every
// input's gradient, backward seeded with the same weights) and a finite-difference gradcheck.
#include <cstdint>
#include <functional>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/autograd/backward.hpp>
#include <ptrain/autograd/gradcheck.hpp>

#include "device_mlp.hpp"  // relative_difference

namespace ptrain::test {

using EmulatedVar = Var<double, HostEmulated>;

inline void check_matches_cpu(const std::function<Var<double>(const std::vector<Var<double>>&)>& cpu,
                              const DeviceGradcheckFn<HostEmulated>& emulated,
                              const std::vector<Tensor<double>>& inputs, double tol = 1e-12) {
  std::vector<Var<double>> cpu_vars;
  std::vector<EmulatedVar> emulated_vars;
  for (const auto& t : inputs) {
    cpu_vars.emplace_back(t.clone(), true);
    emulated_vars.emplace_back(t.to<HostEmulated>(), true);
  }
  const Var<double> y = cpu(cpu_vars);
  const EmulatedVar ye = emulated(emulated_vars);
  BOOST_TEST(relative_difference(ye.value().to<Cpu>(), y.value()) <= tol);
  const Tensor<double> w = random_tensor(y.shape(), 11);
  backward(y, w.clone());
  backward(ye, w.to<HostEmulated>());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    BOOST_REQUIRE(emulated_vars[i].grad().defined());
    BOOST_TEST(relative_difference(emulated_vars[i].grad().to<Cpu>(), cpu_vars[i].grad()) <= tol,
               "gradient of input " << i);
  }
}

inline void expect_gradcheck(const DeviceGradcheckFn<HostEmulated>& f, std::vector<Tensor<double>> inputs) {
  const auto result = gradcheck_on<HostEmulated>(f, std::move(inputs));
  BOOST_TEST(result.ok, result.report);
}

}  // namespace ptrain::test
