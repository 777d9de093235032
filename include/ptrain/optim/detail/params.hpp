#pragma once
// What the optimizers share: checking the parameter list, finding the gradient a step uses,
// writing mixed precision's rounded copies as they step, and naming per-parameter state.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/error.hpp"
#include "ptrain/kernels/indexed/optim.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::detail {

template <class T, class D>
void check_params(const char* optimizer, const std::vector<Var<T, D>>& params) {
  check(!params.empty(), optimizer, ": got an empty parameter list");
  std::unordered_set<const void*> seen;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    check(p.defined(), optimizer, ": parameter ", i, " is an undefined Var");
    check(p.is_leaf(), optimizer, ": parameter ", i, " is not a leaf (it was computed by '", p.node()->op,
          "'); optimizers update leaf Vars only");
    check(seen.insert(p.node().get()).second, optimizer, ": parameter ", i,
          " appears more than once in the parameter list; it would be updated twice per step");
  }
}

// The gradient step() uses for parameter i, or nullptr when the parameter is skipped this step
// (no gradient, or requires_grad off), as PyTorch skips parameters whose .grad is None.
template <class T, class D>
const Tensor<T, D>* step_grad(const char* optimizer, const std::vector<Var<T, D>>& params, std::size_t i) {
  const auto& p = params[i];
  if (!p.requires_grad() || !p.grad().defined()) return nullptr;
  check(p.grad().shape() == p.shape(), optimizer, ": gradient of parameter ", i, " has shape ", p.grad().shape(),
        ", expected the parameter's shape ", p.shape());
  return &p.grad();
}

template <class T, class D>
void zero_grads(std::vector<Var<T, D>>& params, bool set_to_none) {
  for (auto& p : params) {
    if (set_to_none)
      p.zero_grad();
    else if (p.grad().defined())
      p.grad().zero();
  }
}

// The optimizers that round as they step (Sgd, Adam, AdamW) derive from it: round_into gives them,
// per parameter, the model parameter their step writes rounded (optimizer.hpp's RoundedParameter).
template <class D>
class RoundsAsItSteps {
 public:
  void round_into(std::vector<RoundedParameter<D>> rounded) { rounded_ = std::move(rounded); }

 protected:
  // Where the step of parameter i (of `count`, numel elements) writes its rounded copy: its model
  // parameter's storage, where round_into named one whose storage is here (Zero3 lets the other
  // ranks' go); else nowhere.
  kernels::indexed::SixteenBitCopy rounded_copy(const char* optimizer, std::size_t i, std::size_t count,
                                                std::int64_t numel) {
    kernels::indexed::SixteenBitCopy copy;
    if (rounded_.empty()) return copy;
    check(rounded_.size() == count, optimizer, ": round_into was given ", rounded_.size(),
          " parameters to round into, expected one per parameter (", count, ")");
    const auto target = [&](auto& var) -> decltype(var.value().data()) {
      if (!var.value().defined()) return nullptr;
      check(var.value().numel() == numel, optimizer, ": parameter ", i, " has ", numel,
            " elements, but the 16-bit parameter it rounds into has ", var.value().numel());
      return var.value().data();
    };
    if (auto* p = std::get_if<Var<half, D>>(&rounded_[i])) copy.to_half = target(*p);
    if (auto* p = std::get_if<Var<bfloat16, D>>(&rounded_[i])) copy.to_bfloat16 = target(*p);
    return copy;
  }

 private:
  std::vector<RoundedParameter<D>> rounded_;
};

inline void check_hyper(bool ok, const char* optimizer, const char* name, double value, const char* expected) {
  check(ok, optimizer, ": invalid ", name, " ", value, ", expected ", expected);
}

// "12.exp_avg" -> {12, "exp_avg"}, checked against the parameter count and the known names.
inline std::pair<std::size_t, std::string> parse_state_key(const char* optimizer, const std::string& key,
                                                           std::size_t param_count,
                                                           std::initializer_list<const char*> names) {
  const auto dot = key.find('.');
  std::size_t index = 0;
  bool ok = dot != std::string::npos && dot > 0;
  for (std::size_t k = 0; ok && k < dot; ++k) {
    ok = key[k] >= '0' && key[k] <= '9' && index < param_count;
    index = index * 10 + static_cast<std::size_t>(key[k] - '0');
  }
  check(ok && index < param_count, optimizer, ": state entry '", key,
        "' does not name a parameter; expected '<index>.<name>' with index below ", param_count);
  std::string name = key.substr(dot + 1);
  bool known = false;
  std::string expected;
  for (const char* n : names) {
    known = known || name == n;
    expected += expected.empty() ? n : std::string(", ") + n;
  }
  check(known, optimizer, ": state entry '", key, "' has unknown name '", name, "', expected one of ", expected);
  return {index, std::move(name)};
}

// A copy of a loaded state tensor, checked against the shape it must have.
template <class T>
Tensor<T> loaded_tensor(const char* optimizer, const std::string& key, const Tensor<T>& t, const Shape& expected) {
  check(t.defined() && t.shape() == expected, optimizer, ": state entry '", key, "' has shape ",
        t.defined() ? t.shape().str() : std::string("(undefined)"), ", expected ", expected);
  return t.clone();
}

}  // namespace ptrain::detail
