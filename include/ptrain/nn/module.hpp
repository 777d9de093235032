#pragma once
// Module<T, D>: parameters, buffers and child modules under stable hierarchical names in
// torchvision's style (`layer1.0.conv1.weight`), train/eval mode and freezing. D is the device the
// parameters live on (Cpu unless named); layers draw their initial values on the host, from the
// same generator whatever the device, so a model built for Cuda starts with the CPU model's weights.
// A half or bfloat16 module keeps batch norm in float, as Apex O2's keep_batchnorm_fp32: its
// weight and bias in named_float_parameters(), beside named_parameters(), its running statistics
// in named_float_buffers(), beside named_buffers().
//
// As in PyTorch, a module may be a child more than once (ALBERT's one layer, applied at several
// places of a Sequential) and a parameter may belong to two modules (a decoder tied to an
// embedding): each is listed once, under the name it is first reached by.
#include <algorithm>
#include <functional>
#include <typeinfo>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ptrain/autograd/checkpoint.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/half.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/device/cpu.hpp"

#if __has_include(<cxxabi.h>)
#include <cxxabi.h>

#include <cstdlib>
#endif

namespace ptrain {

// The type a module of T keeps accumulated statistics in: float for half and bfloat16, T otherwise.
template <class T>
using statistics_t = std::conditional_t<is_reduced_float_v<T>, float, T>;

template <class T = float, class D = Cpu>
class Module {
 public:
  using scalar_type = T;
  using device_type = D;

  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  virtual ~Module() = default;

  virtual Var<T, D> forward(const Var<T, D>& x) = 0;
  // forward, then the forward hook if one is set. Sequential runs its children through here, so
  // any child of a Sequential can be hooked (or checkpointed); a block calling its own members'
  // forward cannot.
  Var<T, D> operator()(const Var<T, D>& x) {
    Var<T, D> y = checkpointed_ && training_ && GradMode::enabled() ? checkpointed_forward(x) : forward(x);
    return forward_hook_ ? forward_hook_(y) : y;
  }

  // Activation checkpointing, as torch.utils.checkpoint around this module: in training,
  // operator() keeps only the input and runs forward again in backward (autograd/checkpoint.hpp),
  // memory for compute. The recompute draws what the first run drew from global_rng(), from this
  // module's named_generators() and from `generators` (those it draws from but does not own, such
  // as TransformerLM's dropout generators, which the model holds), and leaves the buffers (batch
  // norm's running statistics, already updated by the first run) as they were.
  void checkpoint_activations(bool on = true, std::vector<Rng*> generators = {}) {
    checkpointed_ = on;
    replayed_generators_ = std::move(generators);
  }
  bool checkpoints_activations() const { return checkpointed_; }

  // As torch's register_forward_hook: called with this module's output each time operator() runs
  // it, and what it returns goes on in the output's place (Grad-CAM swaps in a leaf to read the
  // gradient there). An empty function removes the hook.
  using ForwardHook = std::function<Var<T, D>(const Var<T, D>& output)>;
  void set_forward_hook(ForwardHook hook) { forward_hook_ = std::move(hook); }
  bool has_forward_hook() const { return static_cast<bool>(forward_hook_); }
  // The hook now set (empty if none), for a tool that hooks a module for a while and puts it back.
  const ForwardHook& forward_hook() const { return forward_hook_; }

  // A readable name of the layer's kind, as PyTorch prints it ("Conv2d", "BatchNorm2d"): by
  // default the class's own name without namespace and template arguments; a layer whose class
  // serves several kinds (Convolution2d, Pool2d) says which it is.
  virtual std::string type_name() const {
    std::string name = typeid(*this).name();
#if __has_include(<cxxabi.h>)
    int status = 0;
    if (char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status)) {
      if (status == 0) name = demangled;
      std::free(demangled);
    }
#endif
    name = name.substr(0, name.find('<'));
    const auto scope = name.rfind("::");
    return scope == std::string::npos ? name : name.substr(scope + 2);
  }

  // Parameters in registration order, depth first: the order of torchvision's state_dict.
  std::vector<std::pair<std::string, Var<T, D>>> named_parameters() const {
    std::vector<std::pair<std::string, Var<T, D>>> out;
    std::unordered_set<const void*> seen;
    visit([&](const std::string& prefix, const Module& m) {
      for (const auto& [name, p] : m.parameters_)
        if (seen.insert(p.node().get()).second) out.emplace_back(prefix + name, p);
    });
    return out;
  }
  std::vector<Var<T, D>> parameters() const {
    std::vector<Var<T, D>> out;
    for (auto& [name, p] : named_parameters()) out.push_back(p);
    return out;
  }
  // Parameters a 16-bit module keeps in float (register_wide_parameter), in the same order; empty
  // for a float or double module, whose such parameters are among named_parameters().
  std::vector<std::pair<std::string, Var<float, D>>> named_float_parameters() const {
    std::vector<std::pair<std::string, Var<float, D>>> out;
    std::unordered_set<const void*> seen;
    visit([&](const std::string& prefix, const Module& m) {
      for (const auto& [name, p] : m.float_parameters_)
        if (seen.insert(p.node().get()).second) out.emplace_back(prefix + name, p);
    });
    return out;
  }
  std::vector<Var<float, D>> float_parameters() const {
    std::vector<Var<float, D>> out;
    for (auto& [name, p] : named_float_parameters()) out.push_back(p);
    return out;
  }
  // Buffers (running statistics): state that is saved and synchronised but not trained.
  std::vector<std::pair<std::string, Tensor<T, D>*>> named_buffers() {
    std::vector<std::pair<std::string, Tensor<T, D>*>> out;
    visit([&](const std::string& prefix, const Module& m) {
      for (auto& [name, b] : const_cast<Module&>(m).buffers_) out.emplace_back(prefix + name, &b);
    });
    return out;
  }
  // Buffers a 16-bit module keeps in float (register_statistics_buffer), in the same order; empty
  // for a float or double module, whose statistics are among named_buffers().
  std::vector<std::pair<std::string, Tensor<float, D>*>> named_float_buffers() {
    std::vector<std::pair<std::string, Tensor<float, D>*>> out;
    visit([&](const std::string& prefix, const Module& m) {
      for (auto& [name, b] : const_cast<Module&>(m).float_buffers_) out.emplace_back(prefix + name, &b);
    });
    return out;
  }
  // Random generators the module draws from itself (a model's dropout generators): a checkpoint
  // saves their states beside the global generator's, so that a resumed run draws what the straight
  // run would have drawn.
  std::vector<std::pair<std::string, Rng*>> named_generators() const {
    std::vector<std::pair<std::string, Rng*>> out;
    visit([&](const std::string& prefix, const Module& m) {
      for (const auto& [name, rng] : m.generators_) out.emplace_back(prefix + name, rng);
    });
    return out;
  }
  // Second names of parameters listed under their own name (a decoder tied to the embedding, as
  // HuggingFace ties them): {alias, the parameter's name}, both in full. Not in named_parameters(),
  // so nothing steps a tied parameter twice; state_dict.hpp accepts the alias in a file.
  std::vector<std::pair<std::string, std::string>> named_tied_parameters() const {
    std::vector<std::pair<std::string, std::string>> out;
    visit([&](const std::string& prefix, const Module& m) {
      for (const auto& [alias, of] : m.tied_) out.emplace_back(prefix + alias, prefix + of);
    });
    return out;
  }
  // Every registration, in order: a child registered at several places is here at each.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  // This module under "" and then every submodule under its dotted name ("layer1.0.conv1"),
  // depth first in registration order, each once: PyTorch's named_modules().
  std::vector<std::pair<std::string, Module*>> named_modules() {
    std::vector<std::pair<std::string, Module*>> out;
    visit([&](const std::string& prefix, const Module& m) {
      out.emplace_back(prefix.empty() ? prefix : prefix.substr(0, prefix.size() - 1), &const_cast<Module&>(m));
    });
    return out;
  }

  std::int64_t parameter_count() const {
    std::int64_t n = 0;
    for (const auto& [name, p] : named_parameters()) n += p.numel();
    for (const auto& [name, p] : named_float_parameters()) n += p.numel();
    return n;
  }

  void train(bool on = true) {
    visit([on](const std::string&, const Module& m) { const_cast<Module&>(m).training_ = on; });
  }
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Frozen parameters get no gradient and are left alone by the optimizers.
  void set_requires_grad(bool on) {
    for (auto& [name, p] : named_parameters()) p.set_requires_grad(on);
    for (auto& [name, p] : named_float_parameters()) p.set_requires_grad(on);
  }
  void zero_grad() {
    for (auto& [name, p] : named_parameters()) p.zero_grad();
    for (auto& [name, p] : named_float_parameters()) p.zero_grad();
  }

 protected:
  // Both take the initial value on the host (copied to D, shared on the CPU) and return handles
  // that share the registered storage: keep them as members.
  Var<T, D> register_parameter(std::string name, Tensor<T> value) {
    return register_parameter(std::move(name), Var<T, D>(ptrain::on_device<D>(value), true));
  }
  // A parameter another module holds too (a decoder's weight that is the word embedding): the
  // same storage, listed once by the modules above both, and stepped once.
  Var<T, D> register_parameter(std::string name, Var<T, D> shared) {
    check(!has_name(name), "register_parameter: '", name, "' is already registered");
    parameters_.emplace_back(std::move(name), std::move(shared));
    return parameters_.back().second;
  }
  Tensor<T, D> register_buffer(std::string name, Tensor<T> value) {
    check(!has_name(name), "register_buffer: '", name, "' is already registered");
    buffers_.emplace_back(std::move(name), ptrain::on_device<D>(value));
    return buffers_.back().second;
  }
  // A parameter in statistics_t<T> (batch norm's weight and bias): among named_parameters() for
  // float and double modules, among named_float_parameters() for 16-bit ones.
  Var<statistics_t<T>, D> register_wide_parameter(std::string name, Tensor<statistics_t<T>> value) {
    if constexpr (std::is_same_v<statistics_t<T>, T>) {
      return register_parameter(std::move(name), std::move(value));
    } else {
      check(!has_name(name), "register_parameter: '", name, "' is already registered");
      float_parameters_.emplace_back(std::move(name), Var<float, D>(ptrain::on_device<D>(value), true));
      return float_parameters_.back().second;
    }
  }
  // A buffer of accumulated statistics, in statistics_t<T>: among named_buffers() for float and
  // double modules, among named_float_buffers() for 16-bit ones.
  Tensor<statistics_t<T>, D> register_statistics_buffer(std::string name, Tensor<statistics_t<T>> value) {
    if constexpr (std::is_same_v<statistics_t<T>, T>) {
      return register_buffer(std::move(name), std::move(value));
    } else {
      check(!has_name(name), "register_buffer: '", name, "' is already registered");
      float_buffers_.emplace_back(std::move(name), ptrain::on_device<D>(value));
      return float_buffers_.back().second;
    }
  }
  // A generator this module owns (it outlives the module's use): listed by named_generators().
  void register_generator(std::string name, Rng* rng) { generators_.emplace_back(std::move(name), rng); }
  // `alias` (a dotted name below this module) names the parameter registered as `of` (also
  // relative to this module) a second time.
  void register_tied_parameter(std::string alias, std::string of) {
    tied_.emplace_back(std::move(alias), std::move(of));
  }
  // The same module again under the same name is one module used at two places (a Sequential
  // runs it at both).
  template <class M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    const bool again = std::any_of(children_.begin(), children_.end(), [&](const auto& child) {
      return child.first == name && child.second == std::static_pointer_cast<Module>(module);
    });
    check(again || !has_name(name), "register_module: '", name, "' is already registered");
    children_.emplace_back(std::move(name), module);
    return module;
  }
  // Replaces a registered child (a new classifier head for transfer learning), keeping its place
  // (each of its places, for a child registered at several).
  void replace_module(const std::string& name, const std::shared_ptr<Module>& module) {
    bool found = false;
    for (auto& [child_name, child] : children_)
      if (child_name == name) {
        child = module;
        found = true;
      }
    check(found, "replace_module: no child named '", name, "'");
  }

 private:
  // f(prefix, module) for this module and each submodule, once each (a module registered at
  // several places is visited at the first).
  template <class F>
  void visit(F&& f) const {
    std::unordered_set<const Module*> seen;
    visit(f, "", seen);
  }
  template <class F>
  void visit(F& f, const std::string& prefix, std::unordered_set<const Module*>& seen) const {
    if (!seen.insert(this).second) return;
    f(prefix, *this);
    for (const auto& [name, child] : children_) child->visit(f, prefix + name + ".", seen);
  }

  Var<T, D> checkpointed_forward(const Var<T, D>& x) {
    std::vector<Rng*> generators = replayed_generators_;
    for (const auto& [name, rng] : named_generators()) generators.push_back(rng);
    return run_checkpointed<T, D>({.forward = [this](const Var<T, D>& in) { return forward(in); },
                             .recompute = [this](const Var<T, D>& in) { return forward_keeping_buffers(in); },
                             .parameters = parameters(),
                             .generators = std::move(generators)},
                            x);
  }
  // The first run already updated the running statistics; the recompute puts them back, so each
  // batch counts once.
  Var<T, D> forward_keeping_buffers(const Var<T, D>& x) {
    std::vector<std::pair<Tensor<T, D>*, Tensor<T, D>>> kept;
    for (auto& [name, b] : named_buffers()) kept.emplace_back(b, b->clone());
    std::vector<std::pair<Tensor<float, D>*, Tensor<float, D>>> kept_float;
    for (auto& [name, b] : named_float_buffers()) kept_float.emplace_back(b, b->clone());
    Var<T, D> y = forward(x);
    for (auto& [b, value] : kept) b->copy_from(value);
    for (auto& [b, value] : kept_float) b->copy_from(value);
    return y;
  }

  bool has_name(const std::string& name) const {
    for (const auto& [n, p] : parameters_) if (n == name) return true;
    for (const auto& [n, p] : float_parameters_) if (n == name) return true;
    for (const auto& [n, b] : buffers_) if (n == name) return true;
    for (const auto& [n, b] : float_buffers_) if (n == name) return true;
    for (const auto& [n, c] : children_) if (n == name) return true;
    return false;
  }

  std::vector<std::pair<std::string, Var<T, D>>> parameters_;
  std::vector<std::pair<std::string, Var<float, D>>> float_parameters_;
  std::vector<std::pair<std::string, Tensor<T, D>>> buffers_;
  std::vector<std::pair<std::string, Tensor<float, D>>> float_buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<std::string, std::string>> tied_;
  std::vector<std::pair<std::string, Rng*>> generators_;
  ForwardHook forward_hook_;
  bool training_ = true;
  bool checkpointed_ = false;
  std::vector<Rng*> replayed_generators_;
};

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::Module)
