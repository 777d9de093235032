#pragma once
// Sequential: children run in order, named "0", "1", ... unless given names. Pipeline
// parallelism cuts a model at these children.
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/nn/module.hpp"

namespace ptrain {

template <class T = float>
class Sequential : public Module<T> {
 public:
  using ModulePtr = std::shared_ptr<Module<T>>;

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

  Var<T> forward(const Var<T>& x) override {
    Var<T> h = x;
    for (const auto& [name, layer] : this->children()) h = layer->forward(h);
    return h;
  }

  std::size_t size() const { return this->children().size(); }
  const ModulePtr& operator[](std::size_t i) const { return this->children().at(i).second; }
};

template <class M, class... Args>
std::shared_ptr<M> make(Args&&... args) {
  return std::make_shared<M>(std::forward<Args>(args)...);
}

}  // namespace ptrain
