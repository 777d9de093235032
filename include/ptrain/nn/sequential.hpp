#pragma once
// Sequential: children run in order (through their call operator, so their forward hooks run),
// named "0", "1", ... unless given names. Pipeline parallelism cuts a model at these children,
// and Sharded<Zero3> gathers and frees their parameters around each one's forward
// (run_children_through). A BatchNorm2d followed by a ReLU runs as one fused op
// (BatchNorm2d::forward_relu) unless either is hooked or a policy runs the children.
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptrain/core/prebuilt.hpp"
#include "ptrain/nn/batch_norm.hpp"
#include "ptrain/nn/layers.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

template <class T = float, class D = Cpu>
class Sequential : public Module<T, D> {
 public:
  using ModulePtr = std::shared_ptr<Module<T, D>>;

  Sequential() = default;
  Sequential(std::initializer_list<ModulePtr> layers) {
    for (const auto& layer : layers) push_back(layer);
  }
  Sequential(std::initializer_list<std::pair<std::string, ModulePtr>> layers) {
    for (const auto& [name, layer] : layers) push_back(name, layer);
  }

  void push_back(ModulePtr layer) { push_back(std::to_string(size()), std::move(layer)); }
  void push_back(const std::string& name, ModulePtr layer) {
    check(layer != nullptr, "Sequential: layer '", name, "' is null");
    this->register_module(name, std::move(layer));
  }

  Var<T, D> forward(const Var<T, D>& x) override {
    Var<T, D> h = x;
    const auto& layers = this->children();
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (auto* bn = batch_norm_before_relu(i)) {
        h = bn->forward_relu(h);
        ++i;  // the ReLU ran inside
        continue;
      }
      h = runner_ ? runner_(i, *layers[i].second, h) : (*layers[i].second)(h);
    }
    return h;
  }

  // What runs child i on its input in forward: child.forward(h), unless a policy wraps it (nullptr:
  // back to plain forward).
  using ChildRunner = std::function<Var<T, D>(std::size_t i, Module<T, D>& child, const Var<T, D>& h)>;
  void run_children_through(ChildRunner runner) { runner_ = std::move(runner); }

  // Puts a new module in place of the child `name`, at the same position (a new head for
  // transfer learning). forward runs the children as registered, so it uses the new one.
  void replace(const std::string& name, ModulePtr layer) {
    check(layer != nullptr, "Sequential::replace: the new module for '", name, "' is null");
    this->replace_module(name, std::move(layer));
  }

  std::size_t size() const { return this->children().size(); }
  const ModulePtr& operator[](std::size_t i) const { return this->children().at(i).second; }

 private:
  // Child i when it is a BatchNorm2d and child i + 1 a ReLU that may run as one op: neither hooked
  // (a hook sees its own module's output) nor checkpointed, and no runner (it wraps each child on
  // its own).
  BatchNorm2d<T, D>* batch_norm_before_relu(std::size_t i) const {
    const auto& layers = this->children();
    if (runner_ || i + 1 >= layers.size()) return nullptr;
    auto* bn = dynamic_cast<BatchNorm2d<T, D>*>(layers[i].second.get());
    const Module<T, D>& next = *layers[i + 1].second;
    if (!bn || bn->has_forward_hook() || next.has_forward_hook() || bn->checkpoints_activations() ||
        next.checkpoints_activations() || !dynamic_cast<const ReLU<T, D>*>(&next))
      return nullptr;
    return bn;
  }

  ChildRunner runner_;
};

// replace_child(*model, "fc", make<Linear<float>>(2048, 5)): replaces the child at a dotted path
// ("fc", "layer4.1"). Its parent must be a Sequential; other modules call their children through
// members of their own, which would go on running the old child.
template <class T, class D>
void replace_child(Module<T, D>& root, const std::string& path,
                   std::shared_ptr<Module<std::type_identity_t<T>, std::type_identity_t<D>>> module) {
  Module<T, D>* parent = &root;
  std::string parent_path, name = path;
  for (std::size_t dot; (dot = name.find('.')) != std::string::npos;) {
    const std::string step = name.substr(0, dot);
    Module<T, D>* next = nullptr;
    for (const auto& [child_name, child] : parent->children())
      if (child_name == step) next = child.get();
    check(next != nullptr, "replace_child('", path, "'): ", parent_path.empty() ? "the model" : "'" + parent_path + "'",
          " has no child named '", step, "'");
    parent = next;
    parent_path += (parent_path.empty() ? "" : ".") + step;
    name = name.substr(dot + 1);
  }
  auto* sequential = dynamic_cast<Sequential<T, D>*>(parent);
  check(sequential != nullptr, "replace_child('", path, "'): ",
        parent_path.empty() ? "the model" : "'" + parent_path + "'",
        " is not a Sequential; its forward calls its children through its own members, so a replaced child "
        "would not be used");
  sequential->replace(name, std::move(module));
}

template <class M, class... Args>
std::shared_ptr<M> make(Args&&... args) {
  return std::make_shared<M>(std::forward<Args>(args)...);
}

}  // namespace ptrain

PTRAIN_PREBUILT_CLASSES_FD(ptrain::Sequential)
