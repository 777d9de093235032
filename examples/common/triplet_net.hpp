#pragma once
// The triplet network of the tripnet study (CholecT50: instrument, verb, target): a torchvision
// trunk (ResNet-18/50 or SqueezeNet 1.1) without its classifier, then three linear heads on its
// pooled features whose logits are concatenated along dimension 1 in the order instrument, verb,
// target (what MultiHead<Head<Classification> x 3> reads). A Sequential of the trunk's children
// under torchvision's names ("conv1" ... "layer4", or "features"), then "avgpool" (SqueezeNet),
// "flatten" and "heads" ("heads.instrument.weight", ...): layer names a Grad-CAM can ask for, and
// the order the optimizer's parameter groups follow (trunk, then one group per head).
//
//   auto net = examples::make_triplet_net<float, ptrain::Cpu>("resnet18", {6, 10, 15});
//   examples::load_pretrained_trunk(*net, "resnet18.safetensors");  // torchvision's names
#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ptrain/ptrain.hpp>

namespace examples {

inline constexpr std::array<const char*, 3> triplet_head_names{"instrument", "verb", "target"};

// Each head's class count (CholecT50's by default).
struct TripletClasses {
  std::int64_t instrument = 6, verb = 10, target = 15;
  std::array<std::int64_t, 3> counts() const { return {instrument, verb, target}; }
};

// Three linear heads on the same features, their logits side by side.
template <class T, class D>
class TripletHeads : public ptrain::Module<T, D> {
 public:
  TripletHeads(std::int64_t features, const TripletClasses& classes) {
    for (std::size_t k = 0; k < heads_.size(); ++k)
      heads_[k] = this->register_module(triplet_head_names[k],
                                        ptrain::make<ptrain::Linear<T, D>>(features, classes.counts()[k]));
  }
  ptrain::Var<T, D> forward(const ptrain::Var<T, D>& x) override {
    return ptrain::concat<T, D>({(*heads_[0])(x), (*heads_[1])(x), (*heads_[2])(x)}, 1);
  }

 private:
  std::array<std::shared_ptr<ptrain::Linear<T, D>>, 3> heads_;
};

// arch: resnet18, resnet50 or squeezenet1_1.
template <class T, class D>
std::shared_ptr<ptrain::Sequential<T, D>> make_triplet_net(const std::string& arch, const TripletClasses& classes) {
  std::shared_ptr<ptrain::Sequential<T, D>> zoo;
  std::int64_t features = 0;
  if (arch == "resnet18") zoo = ptrain::resnet18<T, D>(), features = 512;
  else if (arch == "resnet50") zoo = ptrain::resnet50<T, D>(), features = 2048;
  else if (arch == "squeezenet1_1") zoo = ptrain::squeezenet1_1<T, D>(), features = 512;
  else ptrain::fail("triplet network: arch '", arch, "': expected resnet18, resnet50 or squeezenet1_1");
  auto net = std::make_shared<ptrain::Sequential<T, D>>();
  for (const auto& [name, child] : zoo->children()) {
    if (name == "fc" || name == "classifier" || name == "flatten") continue;
    net->push_back(name, child);
  }
  if (arch == "squeezenet1_1") net->push_back("avgpool", ptrain::make<ptrain::AdaptiveAvgPool2d<T, D>>(1));
  net->push_back("flatten", ptrain::make<ptrain::Flatten<T, D>>(1));
  net->push_back("heads", std::make_shared<TripletHeads<T, D>>(features, classes));
  return net;
}

// The trunk's parameters and each head's, in the model's order: the optimizer's four groups.
template <class T, class D>
std::vector<ptrain::Var<T, D>> triplet_parameters(const ptrain::Sequential<T, D>& net, const std::string& prefix,
                                                  bool trunk) {
  std::vector<ptrain::Var<T, D>> out;
  for (const auto& [name, p] : net.named_parameters())
    if (name.starts_with("heads.") != trunk && (trunk || name.starts_with("heads." + prefix + "."))) out.push_back(p);
  return out;
}

// Loads a torchvision checkpoint (safetensors) into the trunk: every trunk entry must be in the
// file with its shape; the checkpoint's own head (fc / classifier) is skipped, ours keep their
// initial values.
template <class T, class D>
void load_pretrained_trunk(ptrain::Sequential<T, D>& net, const std::filesystem::path& path) {
  const ptrain::LoadStateDictResult result = ptrain::load_state_dict(net, path, {.strict = false});
  std::string problems;
  for (const auto& name : result.missing)
    if (!name.starts_with("heads.")) problems += "\n  missing: " + name;
  for (const auto& name : result.unexpected)
    if (!name.starts_with("fc.") && !name.starts_with("classifier.")) problems += "\n  unexpected: " + name;
  for (const auto& what : result.mismatched) problems += "\n  shape: " + what;
  ptrain::check(problems.empty(), path.string(), ": not a torchvision checkpoint of this trunk:", problems);
}

}  // namespace examples
