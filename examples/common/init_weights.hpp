#pragma once
// --init FILE: starting weights in torchvision's names (a safetensors state dict;
// tools/torch_to_safetensors.py turns torch's .pth into one) for a model whose layers may differ
// from the file's model. Each of the file's tensors loads into the model's entry of that name; the
// model's entries the file lacks start fresh (as initialised), and so do the layers the example
// names as its own (VGG-F's funnel classifier), whatever the file holds there. Any other shape
// mismatch is an error naming the tensor: a file of another model is never half-loaded silently.
//
//   const auto init = examples::load_init_weights(*model, cli.str("--init"), {"classifier.6."});
//   if (rank == 0) examples::print_init_weights(init, "vggf_coil100");
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/nn/state_dict.hpp>

namespace examples {

struct InitWeights {
  std::filesystem::path file;
  std::vector<std::string> fresh;   // the model's entries that kept their initial values
  std::vector<std::string> unused;  // the file's entries the model has no place for
};

// fresh_layers: name prefixes ("classifier.6.") of the example's own layers, never loaded.
template <class T, class D>
InitWeights load_init_weights(ptrain::Module<T, D>& model, const std::filesystem::path& file,
                              const std::vector<std::string>& fresh_layers = {}) {
  const auto own_layer = [&](const std::string& name) {
    for (const auto& prefix : fresh_layers)
      if (name.starts_with(prefix)) return true;
    return false;
  };
  const ptrain::LoadStateDictResult result = ptrain::load_state_dict(model, file, {.strict = false});
  std::string mismatched;
  InitWeights init{.file = file, .fresh = result.missing, .unused = result.unexpected};
  for (const auto& what : result.mismatched) {
    const std::string name = what.substr(0, what.find(':'));
    if (own_layer(name))
      init.fresh.push_back(name);
    else
      mismatched += "\n  " + what;
  }
  ptrain::check(mismatched.empty(), file.string(),
                ": --init weights of another shape than the model's (a file of another model?):", mismatched);
  return init;
}

// What rank 0 says of the load: which of the model's entries start fresh, which of the file's went unused.
inline void print_init_weights(const InitWeights& init, const char* program) {
  std::printf("%s: --init %s loaded; %zu of the model's entries start fresh%s", program, init.file.string().c_str(),
              init.fresh.size(), init.fresh.empty() ? "" : ":");
  for (const auto& name : init.fresh) std::printf(" %s", name.c_str());
  std::printf("\n");
  if (!init.unused.empty()) {
    std::printf("%s: %zu of the file's entries have no place in the model:", program, init.unused.size());
    for (const auto& name : init.unused) std::printf(" %s", name.c_str());
    std::printf("\n");
  }
}

}  // namespace examples
