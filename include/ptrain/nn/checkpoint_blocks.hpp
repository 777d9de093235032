#pragma once
// checkpoint_blocks(model): activation checkpointing (Module::checkpoint_activations) on a model's
// blocks, what an --activation-checkpointing flag asks for. A block is a child of the model's top
// Sequential that has children and parameters of its own (a TransformerLM's encoder layers); a
// child that is itself a Sequential is looked into once, for its children are the blocks (ResNet's
// layer1..4 hold the residual blocks). Single layers (a stem convolution, the classifier) stay as
// they are: their input is what checkpointing would keep anyway. Every block replays all of the
// model's generators (the model, not the block, holds TransformerLM's dropout generators).
#include <algorithm>
#include <cstddef>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain {

namespace detail {
template <class T, class D>
bool is_block(const Module<T, D>& m) {
  return !m.children().empty() && !m.parameters().empty();
}
}  // namespace detail

// Returns how many blocks it checkpointed (a module used at several places counts once).
template <class T, class D>
std::size_t checkpoint_blocks(Sequential<T, D>& model, bool on = true) {
  std::vector<Rng*> generators;
  for (const auto& [name, rng] : model.named_generators()) generators.push_back(rng);
  std::vector<Module<T, D>*> blocks;
  const auto add = [&](Module<T, D>& m) {
    if (detail::is_block(m) && std::find(blocks.begin(), blocks.end(), &m) == blocks.end()) blocks.push_back(&m);
  };
  for (const auto& [name, child] : model.children()) {
    if (dynamic_cast<Sequential<T, D>*>(child.get()))
      for (const auto& [inner_name, inner] : child->children()) add(*inner);
    else
      add(*child);
  }
  for (Module<T, D>* block : blocks) block->checkpoint_activations(on, generators);
  return blocks.size();
}

}  // namespace ptrain
