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

// The same in scalar type T (inputs rounded from double): check_matches_cpu_in<float>(f, f, inputs,
// tol) with a generic lambda f serving both devices.
template <class T>
void check_matches_cpu_in(const std::function<Var<T>(const std::vector<Var<T>>&)>& cpu,
                          const std::function<Var<T, HostEmulated>(const std::vector<Var<T, HostEmulated>>&)>& emulated,
                          const std::vector<Tensor<double>>& inputs, double tol) {
  std::vector<Var<T>> cpu_vars;
  std::vector<Var<T, HostEmulated>> emulated_vars;
  for (const auto& t : inputs) {
    const Tensor<T> cast = tensor_cast<T>(t);
    cpu_vars.emplace_back(cast.clone(), true);
    emulated_vars.emplace_back(cast.template to<HostEmulated>(), true);
  }
  const Var<T> y = cpu(cpu_vars);
  const Var<T, HostEmulated> ye = emulated(emulated_vars);
  BOOST_TEST(relative_difference(ye.value().template to<Cpu>(), y.value()) <= tol);
  const Tensor<T> w = tensor_cast<T>(random_tensor(y.shape(), 11));
  backward(y, w.clone());
  backward(ye, w.template to<HostEmulated>());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    BOOST_REQUIRE(emulated_vars[i].grad().defined());
    BOOST_TEST(relative_difference(emulated_vars[i].grad().template to<Cpu>(), cpu_vars[i].grad()) <= tol,
               "gradient of input " << i);
  }
}

inline void check_matches_cpu(const std::function<Var<double>(const std::vector<Var<double>>&)>& cpu,
                              const DeviceGradcheckFn<HostEmulated>& emulated,
                              const std::vector<Tensor<double>>& inputs, double tol = 1e-12) {
  check_matches_cpu_in<double>(cpu, emulated, inputs, tol);
}

inline void expect_gradcheck(const DeviceGradcheckFn<HostEmulated>& f, std::vector<Tensor<double>> inputs) {
  const auto result = gradcheck_on<HostEmulated>(f, std::move(inputs));
  BOOST_TEST(result.ok, result.report);
}

}  // namespace ptrain::test
