#pragma once
// What the op tests run on every device (Devices: Cpu, and HostEmulated, which runs the GPU
// algorithms on the host): a finite-difference gradcheck in double on device D, and off the CPU the
// same values, gradients and errors as the CPU op. The comparisons with the CPU are skipped for D
// = Cpu, where they would compare the CPU op with itself.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <functional>
#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/core/half.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "compare.hpp"
#include "device_compare.hpp"

namespace ptrain::test {

using Devices = std::tuple<Cpu, HostEmulated>;

template <class D>
inline constexpr bool is_cpu = std::is_same_v<D, Cpu>;

using Emulated = Var<double, HostEmulated>;
using EmulatedVars = std::vector<Emulated>;
using CpuVars = std::vector<Var<double>>;

template <class D>
void expect_gradcheck_on(const DeviceGradcheckFn<D>& f, std::vector<Tensor<double>> inputs) {
  const auto result = gradcheck_on<D>(f, std::move(inputs));
  BOOST_TEST(result.ok, D::name << ": " << result.report);
}

// check_matches_cpu when D is not the CPU.
template <class D>
void check_matches_cpu_on(const std::function<Var<double>(const std::vector<Var<double>>&)>& cpu,
                          const DeviceGradcheckFn<HostEmulated>& emulated, const std::vector<Tensor<double>>& inputs,
                          double tol = 1e-12) {
  if constexpr (!is_cpu<D>) check_matches_cpu(cpu, emulated, inputs, tol);
}

// op, a generic lambda of the input variables: its gradcheck on D in double; off the CPU, its
// values and gradients against the CPU's in double and in float.
template <class D, class Op>
void check_op(const Op& op, const std::vector<Tensor<double>>& inputs, double float_tol = 1e-5) {
  expect_gradcheck_on<D>([&](const std::vector<Var<double, D>>& v) { return op(v); }, inputs);
  if constexpr (!is_cpu<D>) {
    check_matches_cpu([&](const CpuVars& v) { return op(v); }, [&](const EmulatedVars& v) { return op(v); }, inputs);
    check_matches_cpu_in<float>([&](const std::vector<Var<float>>& v) { return op(v); },
                                [&](const std::vector<Var<float, HostEmulated>>& v) { return op(v); }, inputs,
                                float_tol);
  }
}

// Off the CPU, the device op fails with the CPU op's message.
template <class D>
void expect_same_error(const std::function<void()>& cpu, const std::function<void()>& device) {
  if constexpr (!is_cpu<D>) {
    const std::string want = error_message(cpu);
    BOOST_TEST(want != "no error");
    BOOST_TEST(error_message(device) == want);
  }
}

inline Emulated emulated(const Tensor<double>& t) { return Emulated(t.to<HostEmulated>()); }

// A constant argument (pos_weight) as the scalar type and on the device of the variable type V.
template <class V>
auto constant_like(const Tensor<double>& t) {
  using Value = std::decay_t<decltype(std::declval<V>().value())>;
  return on_device<typename Value::device_type>(tensor_cast<typename Value::value_type>(t).clone());
}

}  // namespace ptrain::test
