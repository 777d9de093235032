#pragma once
// A module's parameters and buffers saved to and loaded from a safetensors file under their
// torchvision names (`layer1.0.conv1.weight`), as torch's state_dict()/load_state_dict() do. A
// module on a device is read back to the host to be saved, and loaded through the host. The
// float parameters and buffers of a 16-bit module (batch norm's weight, bias and running
// statistics) are saved as F32 whatever the dtype asked for, as an Apex O2 model's state_dict
// holds them, so that no save rounds them.
#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ptrain/io/safetensors.hpp"
#include "ptrain/nn/module.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

namespace detail {

// BatchNorm's step counter: torch stores it as int64 and older checkpoints (and models without
// it) lack it, so it is loaded when both sides have it and otherwise never reported.
inline bool is_batch_counter(std::string_view name) {
  constexpr std::string_view counter = "num_batches_tracked";
  return name == counter || (name.size() > counter.size() && name.ends_with(counter) &&
                             name[name.size() - counter.size() - 1] == '.');
}

// Every parameter and buffer: the state dict's entries, in torchvision's order.
template <class T, class D>
std::vector<std::pair<std::string, Tensor<T, D>>> state_entries(Module<T, D>& module) {
  std::vector<std::pair<std::string, Tensor<T, D>>> out;
  for (auto& [name, p] : module.named_parameters()) out.emplace_back(name, p.value());
  for (auto& [name, b] : module.named_buffers()) out.emplace_back(name, *b);
  return out;
}

// A 16-bit module's float entries: its float parameters, then its float buffers.
template <class T, class D>
std::vector<std::pair<std::string, Tensor<float, D>*>> float_state_entries(Module<T, D>& module) {
  std::vector<std::pair<std::string, Tensor<float, D>*>> out;
  for (auto& [name, p] : module.named_float_parameters()) out.emplace_back(name, &p.value());
  for (auto& entry : module.named_float_buffers()) out.push_back(entry);
  return out;
}

// How many entries the state dict has: parameters, buffers and the float ones.
template <class T, class D>
std::size_t state_entry_count(Module<T, D>& module) {
  return state_entries(module).size() + float_state_entries(module).size();
}

inline std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace detail

// Writes every parameter and buffer as dtype (F32, F16 or BF16; F64 for double models), and
// the BatchNorm counters as I64 as torch does, so that
// `model.load_state_dict(safetensors.torch.load_file(path))` reads the file in Python. A tied
// parameter is written once, under its own name, as HuggingFace's save_pretrained writes it (its
// from_pretrained ties the other name again).
template <class T, class D>
void save_state_dict(Module<T, D>& module, const std::filesystem::path& path, io::Dtype dtype = io::Dtype::F32,
                     std::map<std::string, std::string> metadata = {{"format", "pt"}}) {
  check(dtype != io::Dtype::I64, path.string(), ": save_state_dict stores weights as F16, BF16, F32 or F64, not I64");
  const auto dtype_of = [&](const std::string& name, io::Dtype wanted) {
    return detail::is_batch_counter(name) ? io::Dtype::I64 : wanted;
  };
  const auto float_entries = detail::float_state_entries(module);
  if (float_entries.empty()) {
    std::vector<io::SafetensorsEntry<T>> entries;
    for (auto& [name, tensor] : detail::state_entries(module))
      entries.push_back({name, tensor.template to<Cpu>(), dtype_of(name, dtype)});
    io::save_safetensors(path, std::move(entries), metadata);
    return;
  }
  // A 16-bit module's entries widened to float (exactly), written as dtype; its float ones as F32.
  const io::Dtype kept = dtype == io::Dtype::F64 ? dtype : io::Dtype::F32;
  std::vector<io::SafetensorsEntry<float>> entries;
  for (auto& [name, tensor] : detail::state_entries(module))
    entries.push_back({name, tensor_cast<float>(tensor.template to<Cpu>()), dtype_of(name, dtype)});
  for (auto& [name, tensor] : float_entries) entries.push_back({name, tensor->template to<Cpu>(), dtype_of(name, kept)});
  io::save_safetensors(path, std::move(entries), metadata);
}

struct LoadStateDictOptions {
  // Strict: every name and shape of the file and the model must match, or nothing is loaded.
  // Otherwise the matching entries are loaded and the rest reported in the result.
  bool strict = true;
};

// What did not match; empty lists after a strict load.
struct LoadStateDictResult {
  std::vector<std::string> missing;     // in the model, not in the file
  std::vector<std::string> unexpected;  // in the file, not in the model (sorted)
  std::vector<std::string> mismatched;  // "name: file has [..], model expects [..]" (not loaded)
  bool all_matched() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
};

// Loads a safetensors file into the module's parameters and buffers, converting the file's dtype
// to T. Every name and shape is checked first and all differences are reported in one error;
// nothing is changed when loading fails. Unlike torch, a non-strict load also skips (and reports)
// shape mismatches, which is what loading a backbone under a different classifier head needs.
template <class T, class D>
LoadStateDictResult load_state_dict(Module<T, D>& module, const std::filesystem::path& path,
                                    LoadStateDictOptions options = {}) {
  const io::SafetensorsFile file(path);
  auto entries = detail::state_entries(module);
  const auto float_entries = detail::float_state_entries(module);
  LoadStateDictResult result;
  std::unordered_set<std::string> known;
  // The file's entry for a model's entry of that name and shape; null (and reported) otherwise.
  const auto match = [&](const std::string& name, const Shape& shape) -> const io::TensorInfo* {
    known.insert(name);
    const io::TensorInfo* info = file.find(name);
    if (!info) {
      if (!detail::is_batch_counter(name)) result.missing.push_back(name);
      return nullptr;
    }
    if (info->shape != shape) {
      result.mismatched.push_back(name + ": file has " + info->shape.str() + ", model expects " + shape.str());
      return nullptr;
    }
    return info;
  };
  std::vector<std::pair<Tensor<T, D>, const io::TensorInfo*>> matched;
  for (auto& [name, target] : entries)
    if (const io::TensorInfo* info = match(name, target.shape())) matched.emplace_back(target, info);
  std::vector<std::pair<Tensor<float, D>*, const io::TensorInfo*>> matched_float;
  for (auto& [name, target] : float_entries)
    if (const io::TensorInfo* info = match(name, target->shape())) matched_float.emplace_back(target, info);
  // A tied parameter's second name (HuggingFace's state_dict() lists predictions.decoder.weight
  // beside the embedding it is) is read as that parameter's: its shape checked, its value taken from
  // the parameter's own entry.
  for (const auto& [alias, of] : module.named_tied_parameters()) {
    const io::TensorInfo* info = file.find(alias);
    if (!info) continue;
    known.insert(alias);
    for (const auto& [name, target] : entries)
      if (name == of && info->shape != target.shape())
        result.mismatched.push_back(alias + ": file has " + info->shape.str() + ", model expects " +
                                    target.shape().str() + " (it is " + of + ")");
  }
  for (const auto& info : file.tensors())
    if (!known.count(info.name) && !detail::is_batch_counter(info.name)) result.unexpected.push_back(info.name);
  std::sort(result.unexpected.begin(), result.unexpected.end());
  if (options.strict && !result.all_matched()) {
    std::string message = path.string() + ": the state dict does not match the model";
    if (!result.missing.empty())
      message += "\n  missing keys (in the model, not in the file): " + detail::join_names(result.missing);
    if (!result.unexpected.empty())
      message += "\n  unexpected keys (in the file, not in the model): " + detail::join_names(result.unexpected);
    for (const auto& m : result.mismatched) message += "\n  shape mismatch: " + m;
    fail(message);
  }
  // Read everything before writing anything: a read error leaves the module as it was.
  std::vector<Tensor<T>> values;
  for (const auto& [target, info] : matched) values.push_back(file.read<T>(*info));
  std::vector<Tensor<float>> float_values;
  for (const auto& [target, info] : matched_float) float_values.push_back(file.read<float>(*info));
  for (std::size_t i = 0; i < matched.size(); ++i) matched[i].first.copy_from(values[i].template to<D>());
  for (std::size_t i = 0; i < matched_float.size(); ++i)
    matched_float[i].first->copy_from(float_values[i].template to<D>());
  return result;
}

}  // namespace ptrain

PTRAIN_PREBUILT_STATE(ptrain::save_state_dict<float, ::ptrain::Cpu>)
PTRAIN_PREBUILT_STATE(ptrain::save_state_dict<double, ::ptrain::Cpu>)
PTRAIN_PREBUILT_STATE(ptrain::load_state_dict<float, ::ptrain::Cpu>)
PTRAIN_PREBUILT_STATE(ptrain::load_state_dict<double, ::ptrain::Cpu>)
