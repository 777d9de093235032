#pragma once
// Grad-CAM (Selvaraju et al. 2017, as pytorch-grad-cam computes it): for a layer of a convolutional
// network and a class, the gradient of the class's score (its logit) with respect to the layer's
// activations [N, K, h, w]; each channel weighted by that gradient's spatial mean; the ReLU of the
// weighted sum of the channels; upsampled bilinearly (align_corners=False) to the image's size and
// scaled to [0, 1] per image. A layer is named by its module path as in the state dict
// ("layer4.1", "features.12"): any module a Sequential runs, whose output a forward hook
// (nn/module.hpp) swaps for a leaf that collects the gradient. The model's parameters get no
// gradient; it is run in the mode it is in (eval(), as pytorch-grad-cam's users run it).
//
// A multi-head network (tasks/multi_head.hpp) concatenates its heads' outputs along dimension 1:
// grad_cam_per_head takes their widths and one class per head, and gives one map per head.
#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ptrain/autograd/backward.hpp"
#include "ptrain/autograd/ops/narrow.hpp"
#include "ptrain/autograd/ops/reduce.hpp"
#include "ptrain/core/error.hpp"
#include "ptrain/data/geometric_transforms.hpp"
#include "ptrain/nn/sequential.hpp"

namespace ptrain {

// The layers grad_cam can read, in named_modules() order: the modules a Sequential runs.
template <class T, class D>
std::vector<std::pair<std::string, Module<T, D>*>> grad_cam_layers(Module<T, D>& model) {
  const auto modules = model.named_modules();
  const std::unordered_map<std::string, Module<T, D>*> by_name(modules.begin(), modules.end());
  std::vector<std::pair<std::string, Module<T, D>*>> layers;
  for (const auto& [name, module] : modules) {
    if (name.empty()) continue;
    const auto dot = name.rfind('.');
    if (dynamic_cast<Sequential<T, D>*>(by_name.at(dot == std::string::npos ? "" : name.substr(0, dot))))
      layers.emplace_back(name, module);
  }
  return layers;
}

namespace detail {

inline std::string some_layer_names(const std::vector<std::string>& names) {
  // The last layers are the ones Grad-CAM is usually asked about.
  constexpr std::size_t first = 4, last = 12;
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names.size() > first + last && i == first) {
      out += ", ...";
      i = names.size() - last;
    }
    out += (out.empty() ? "" : ", ") + names[i];
  }
  return out + " (" + std::to_string(names.size()) + " in all)";
}

template <class T, class D>
Module<T, D>& grad_cam_layer(Module<T, D>& model, const std::string& layer) {
  std::vector<std::string> names;
  for (const auto& [name, module] : grad_cam_layers(model)) {
    if (name == layer) return *module;
    names.push_back(name);
  }
  for (const auto& [name, module] : model.named_modules())
    if (name == layer && !name.empty())
      fail("grad_cam: '", layer, "' is run by its parent through a member, not by a Sequential, so its output "
           "cannot be hooked; name its parent block or another layer: ", some_layer_names(names));
  fail("grad_cam: the model has no layer '", layer, "'; layers (module paths as in the state dict): ",
       some_layer_names(names));
}

// Every parameter's requires_grad off while it lives, then as it was: only the hooked activation
// gets a gradient, and the graph below it is not recorded.
template <class T, class D>
class ParametersFrozen {
 public:
  explicit ParametersFrozen(Module<T, D>& model)
      : parameters_(model.named_parameters()), float_parameters_(model.named_float_parameters()) {
    for (auto& [name, p] : parameters_) was_.push_back(p.requires_grad()), p.set_requires_grad(false);
    for (auto& [name, p] : float_parameters_) was_.push_back(p.requires_grad()), p.set_requires_grad(false);
  }
  ~ParametersFrozen() {
    std::size_t i = 0;
    for (auto& [name, p] : parameters_) p.set_requires_grad(was_[i++]);
    for (auto& [name, p] : float_parameters_) p.set_requires_grad(was_[i++]);
  }
  ParametersFrozen(const ParametersFrozen&) = delete;
  ParametersFrozen& operator=(const ParametersFrozen&) = delete;

 private:
  decltype(std::declval<Module<T, D>&>().named_parameters()) parameters_;
  decltype(std::declval<Module<T, D>&>().named_float_parameters()) float_parameters_;
  std::vector<bool> was_;
};

// The layer's output while the hook lives: the activation, as a leaf whose gradient backward fills.
template <class T, class D>
class ActivationCapture {
 public:
  ActivationCapture(Module<T, D>& layer, std::string name) : layer_(layer), name_(std::move(name)) {
    check(!layer.has_forward_hook(), "grad_cam: layer '", name_, "' already has a forward hook");
    layer.set_forward_hook([this](const Var<T, D>& output) {
      ++runs_;
      activation_ = Var<T, D>(output.value(), true);
      return activation_;
    });
  }
  ~ActivationCapture() { layer_.set_forward_hook({}); }
  ActivationCapture(const ActivationCapture&) = delete;
  ActivationCapture& operator=(const ActivationCapture&) = delete;

  const Var<T, D>& activation() const {
    check(runs_ == 1, "grad_cam: layer '", name_, "' ran ", runs_, " times in one forward; expected once");
    check(activation_.shape().rank() == 4, "grad_cam: layer '", name_, "' gives ", activation_.shape(),
          "; expected convolutional activations [N, C, H, W]");
    return activation_;
  }

 private:
  Module<T, D>& layer_;
  std::string name_;
  Var<T, D> activation_;
  int runs_ = 0;
};

// relu(sum_k mean_ij(grad[n, k]) * activation[n, k]) per image n: [N, h, w].
template <class T>
Tensor<float> weighted_activation_map(const Tensor<T>& activation, const Tensor<T>& grad) {
  const std::int64_t n = activation.size(0), channels = activation.size(1);
  const std::int64_t plane = activation.size(2) * activation.size(3);
  Tensor<float> cam(Shape{n, activation.size(2), activation.size(3)});
  std::vector<double> sum(static_cast<std::size_t>(plane));
  for (std::int64_t image = 0; image < n; ++image) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (std::int64_t k = 0; k < channels; ++k) {
      const std::int64_t at = (image * channels + k) * plane;
      double weight = 0;
      if (grad.defined())
        for (std::int64_t i = 0; i < plane; ++i) weight += static_cast<double>(grad[at + i]);
      weight /= static_cast<double>(plane);
      for (std::int64_t i = 0; i < plane; ++i)
        sum[static_cast<std::size_t>(i)] += weight * static_cast<double>(activation[at + i]);
    }
    for (std::int64_t i = 0; i < plane; ++i)
      cam[image * plane + i] = static_cast<float>(std::max(sum[static_cast<std::size_t>(i)], 0.0));
  }
  return cam;
}

// Each map [h, w] of maps [N, h, w] scaled to [0, 1]; a constant map becomes 0.
inline void scale_to_unit_range(Tensor<float>& maps) {
  const std::int64_t plane = maps.size(1) * maps.size(2);
  for (std::int64_t image = 0; image < maps.size(0); ++image) {
    float* m = maps.data() + image * plane;
    const auto [low, high] = std::minmax_element(m, m + plane);
    const float min = *low, range = *high - *low;
    for (std::int64_t i = 0; i < plane; ++i) m[i] = range > 0 ? (m[i] - min) / range : 0.0f;
  }
}

// The maps of output column `column`; `what` names it in errors. The scores are summed over the
// batch for one backward: in eval mode each image's score depends on its own activations only.
// With `output_width` > 0 the output must have that many columns.
template <class T, class D>
Tensor<float> grad_cam_column(Module<T, D>& model, const Tensor<T, D>& images, const std::string& layer,
                              std::int64_t column, std::int64_t output_width, const std::string& what) {
  check(images.rank() == 4, "grad_cam: expected images [N, C, H, W], got ", images.shape());
  ParametersFrozen<T, D> frozen(model);
  ActivationCapture<T, D> capture(grad_cam_layer(model, layer), layer);
  GradModeGuard recording(true);  // a caller under NoGradGuard still gets its map
  const Var<T, D> output = model(Var<T, D>(images));
  const Var<T, D>& activation = capture.activation();
  check(output.shape().rank() == 2, "grad_cam: the model's output is ", output.shape(),
        "; expected scores [N, classes]");
  check(output_width <= 0 || output.size(1) == output_width, "grad_cam: the heads' widths add up to ", output_width,
        " but the model gives ", output.size(1), " output columns");
  check(column >= 0 && column < output.size(1), "grad_cam: ", what, " is outside the model's ", output.size(1),
        " output columns");
  backward(sum(narrow(output, 1, column, 1)));
  Tensor<float> maps = resize_bilinear(weighted_activation_map(on_host(activation.value()), on_host(activation.grad())),
                                       images.size(2), images.size(3));
  scale_to_unit_range(maps);
  return maps;
}

}  // namespace detail

// Grad-CAM of `layer` for class `class_index` (a column of the model's output [N, classes]) on
// images [N, C, H, W]: maps [N, H, W] in [0, 1].
template <class T, class D>
Tensor<float> grad_cam(Module<T, D>& model, const Tensor<T, D>& images, const std::string& layer,
                       std::int64_t class_index) {
  return detail::grad_cam_column(model, images, layer, class_index, 0, "class " + std::to_string(class_index));
}

// One map per head: the output's columns are the heads' in order, head_widths[h] each; classes[h]
// is a class of head h. Every head's map is one forward and one backward.
template <class T, class D>
std::vector<Tensor<float>> grad_cam_per_head(Module<T, D>& model, const Tensor<T, D>& images, const std::string& layer,
                                             const std::vector<std::int64_t>& head_widths,
                                             const std::vector<std::int64_t>& classes) {
  check(!head_widths.empty() && classes.size() == head_widths.size(), "grad_cam: ", head_widths.size(),
        " heads and ", classes.size(), " classes; expected one class per head");
  std::int64_t total = 0;
  for (std::size_t h = 0; h < head_widths.size(); ++h) {
    check(head_widths[h] >= 1, "grad_cam: head ", h, " has width ", head_widths[h], "; expected at least 1");
    check(classes[h] >= 0 && classes[h] < head_widths[h], "grad_cam: class ", classes[h], " of head ", h,
          " is out of range: the head has ", head_widths[h], " classes");
    total += head_widths[h];
  }
  std::vector<Tensor<float>> maps;
  std::int64_t offset = 0;
  for (std::size_t h = 0; h < head_widths.size(); ++h) {
    maps.push_back(detail::grad_cam_column(model, images, layer, offset + classes[h], total,
                                           "class " + std::to_string(classes[h]) + " of head " + std::to_string(h)));
    offset += head_widths[h];
  }
  return maps;
}

}  // namespace ptrain
