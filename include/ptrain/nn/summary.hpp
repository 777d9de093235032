#pragma once
// A model's summary, as torchinfo's summary() and Lightning's ModelSummary: one forward in eval
// mode without gradients, seen through a forward hook on every submodule, gives each layer's
// output shape, parameters (trainable and frozen apart), FLOPs per sample and activation bytes;
// print_summary writes it as a table.
//
// FLOPs count a multiply-add as 2. Conv2d: 2 * Cin/groups * kh * kw * Cout * Hout * Wout, plus
// Cout * Hout * Wout for the bias; ConvTranspose2d alike over its input's pixels; Linear: 2 * in *
// out per row, plus out for the bias; BatchNorm2d and LayerNorm: 2 per output element (one
// multiply-add once the statistics and the affine are folded); max and average pooling: the window
// per output element; Flatten, Dropout (eval) and Embedding: 0; any other leaf: 1 per output
// element. A container's FLOPs are its leaves' (what its own forward computes between its children,
// a residual add, is not counted); totals add leaves only, so nothing counts twice.
//
// A layer reached only through a forward with several arguments (MultiheadAttention's) or by a
// parent calling its forward() directly is not hooked: it still has its row, with its parameters
// and "-" for shape and FLOPs. Hooks set before (Grad-CAM's) are chained while the summary runs and
// put back after it, as are the modules' train/eval modes.
#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/prebuilt.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/nn/batch_norm.hpp"
#include "ptrain/nn/conv.hpp"
#include "ptrain/nn/embedding.hpp"
#include "ptrain/nn/layer_norm.hpp"
#include "ptrain/nn/layers.hpp"
#include "ptrain/nn/linear.hpp"
#include "ptrain/nn/module.hpp"

namespace ptrain {

struct LayerSummary {
  std::string name;  // dotted, as named_modules()
  std::string type;  // Module::type_name()
  int depth = 1;     // 1 for the model's children, 2 for theirs...
  bool leaf = true;  // no submodules: the rows the totals add
  std::optional<Shape> output_shape;  // the last call's output, batch included; empty if not reached
  std::int64_t calls = 0;             // forwards seen (a module used at several places: more than one)
  // This module's parameters with its submodules', each once (Lightning's "Params" column).
  std::int64_t trainable_parameters = 0;
  std::int64_t frozen_parameters = 0;
  std::optional<std::int64_t> flops;  // per sample, over all calls; empty if not reached
  std::int64_t activation_bytes = 0;  // the outputs' bytes at the summary's batch, over all calls

  std::int64_t parameters() const { return trainable_parameters + frozen_parameters; }
};

struct ModelSummary {
  std::string model_type;
  Shape input_shape;  // batch included
  std::vector<LayerSummary> layers;  // named_modules() order, the model itself left out
  std::int64_t trainable_parameters = 0;
  std::int64_t frozen_parameters = 0;
  std::int64_t flops = 0;             // per sample, leaves only
  std::int64_t activation_bytes = 0;  // leaves' outputs at the batch: what the forward keeps for backward
  std::int64_t input_bytes = 0;
  std::int64_t parameter_bytes = 0;

  std::int64_t total_parameters() const { return trainable_parameters + frozen_parameters; }
};

namespace detail {

struct ParameterCounts {
  std::int64_t trainable = 0, frozen = 0;
};

template <class T, class D>
ParameterCounts count_parameters(const Module<T, D>& m) {
  ParameterCounts c;
  const auto add = [&c](const auto& named) {
    for (const auto& [name, p] : named) (p.requires_grad() ? c.trainable : c.frozen) += p.numel();
  };
  add(m.named_parameters());
  add(m.named_float_parameters());
  return c;
}

// FLOPs of one sample through leaf m, whose output (batch first) has shape out; the header's table.
template <class T, class D>
std::int64_t leaf_flops(Module<T, D>& m, const Shape& out) {
  const std::int64_t batch = out.rank() > 0 ? std::max<std::int64_t>(out[0], 1) : 1;
  const std::int64_t per_sample = out.numel() / batch;
  if (auto* conv = dynamic_cast<Conv2d<T, D>*>(&m)) {
    const Shape& w = conv->weight.shape();  // [Cout, Cin/groups, kh, kw]
    return per_sample * (2 * w[1] * w[2] * w[3] + (conv->bias.defined() ? 1 : 0));
  }
  if (auto* conv = dynamic_cast<ConvTranspose2d<T, D>*>(&m)) {
    const Shape& w = conv->weight.shape();  // [Cin, Cout/groups, kh, kw]
    const auto& o = conv->options();
    const auto in_extent = [](std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                              std::int64_t out_pad, std::int64_t dilation) {
      return (out - 1 - out_pad - dilation * (kernel - 1) + 2 * pad) / stride + 1;
    };
    const std::int64_t in_pixels = in_extent(out[2], w[2], o.stride_h, o.pad_h, o.output_pad_h, o.dilation_h) *
                                   in_extent(out[3], w[3], o.stride_w, o.pad_w, o.output_pad_w, o.dilation_w);
    return 2 * w[0] * in_pixels * w[1] * w[2] * w[3] + (conv->bias.defined() ? per_sample : 0);
  }
  if (auto* fc = dynamic_cast<Linear<T, D>*>(&m)) {
    const Shape& w = fc->weight.shape();  // [out, in]
    return per_sample * (2 * w[1] + (fc->bias.defined() ? 1 : 0));
  }
  if (dynamic_cast<BatchNorm2d<T, D>*>(&m) || dynamic_cast<LayerNorm<T, D>*>(&m)) return 2 * per_sample;
  if (auto* pool = dynamic_cast<MaxPool2d<T, D>*>(&m)) return per_sample * pool->options().kernel_h * pool->options().kernel_w;
  if (auto* pool = dynamic_cast<AvgPool2d<T, D>*>(&m)) return per_sample * pool->options().kernel_h * pool->options().kernel_w;
  if (dynamic_cast<Flatten<T, D>*>(&m) || dynamic_cast<Dropout<T, D>*>(&m) || dynamic_cast<Embedding<T, D>*>(&m))
    return 0;
  return per_sample;
}

// Sets a recording hook on each module (chained to the hook it had) and puts every hook and
// train/eval mode back when it goes, an exception included.
template <class T, class D>
class SummaryHooks {
 public:
  SummaryHooks(std::vector<std::pair<std::string, Module<T, D>*>> modules, std::vector<LayerSummary>& rows)
      : modules_(std::move(modules)) {
    std::size_t next_row = 0;  // rows are modules_ without the model itself, in the same order
    for (auto& [name, m] : modules_) {
      saved_.push_back({m->forward_hook(), m->is_training()});
      if (name.empty()) continue;
      LayerSummary* row = &rows.at(next_row++);
      Module<T, D>* module = m;
      m->set_forward_hook([row, module, previous = m->forward_hook()](const Var<T, D>& y) {
        row->output_shape = y.shape();
        ++row->calls;
        if (row->leaf) *row->flops += leaf_flops(*module, y.shape());
        row->activation_bytes += y.numel() * static_cast<std::int64_t>(sizeof(T));
        return previous ? previous(y) : y;
      });
    }
  }
  SummaryHooks(const SummaryHooks&) = delete;
  SummaryHooks& operator=(const SummaryHooks&) = delete;
  ~SummaryHooks() {
    // Parents come before their children in named_modules(), and train() reaches down: set in
    // that order, each module ends in its own former mode.
    for (std::size_t i = 0; i < modules_.size(); ++i) {
      modules_[i].second->set_forward_hook(saved_[i].hook);
      modules_[i].second->train(saved_[i].training);
    }
  }

 private:
  struct Saved {
    typename Module<T, D>::ForwardHook hook;
    bool training;
  };
  std::vector<std::pair<std::string, Module<T, D>*>> modules_;
  std::vector<Saved> saved_;
};

}  // namespace detail

// The summary of one forward of input (batch first, on the host; moved to D) through model.
template <class T, class D>
ModelSummary summarize(Module<T, D>& model, const Tensor<T>& input) {
  ModelSummary s;
  s.model_type = model.type_name();
  s.input_shape = input.shape();
  const auto modules = model.named_modules();
  for (const auto& [name, m] : modules) {
    if (name.empty()) continue;
    LayerSummary row;
    row.name = name;
    row.type = m->type_name();
    row.depth = 1 + static_cast<int>(std::count(name.begin(), name.end(), '.'));
    row.leaf = m->children().empty();
    if (row.leaf) row.flops = 0;
    const detail::ParameterCounts c = detail::count_parameters(*m);
    row.trainable_parameters = c.trainable;
    row.frozen_parameters = c.frozen;
    s.layers.push_back(std::move(row));
  }
  {
    detail::SummaryHooks<T, D> hooks(modules, s.layers);
    model.eval();
    NoGradGuard no_grad;
    model(Var<T, D>(on_device<D>(input)));
  }
  // A leaf never called keeps no FLOPs; a container's are its called leaves', when any was.
  for (auto& row : s.layers) {
    if (row.leaf) {
      if (row.calls == 0) row.flops.reset();
      continue;
    }
    const std::string prefix = row.name + ".";
    for (const auto& below : s.layers)
      if (below.leaf && below.flops && below.name.compare(0, prefix.size(), prefix) == 0)
        row.flops = row.flops.value_or(0) + *below.flops;
  }
  for (const auto& row : s.layers)
    if (row.leaf) {
      s.flops += row.flops.value_or(0);
      s.activation_bytes += row.activation_bytes;
    }
  const detail::ParameterCounts c = detail::count_parameters(model);
  s.trainable_parameters = c.trainable;
  s.frozen_parameters = c.frozen;
  for (const auto& [name, p] : model.named_parameters()) s.parameter_bytes += p.numel() * std::int64_t(sizeof(T));
  for (const auto& [name, p] : model.named_float_parameters()) s.parameter_bytes += p.numel() * std::int64_t(sizeof(float));
  s.input_bytes = input.numel() * static_cast<std::int64_t>(sizeof(T));
  return s;
}

// The summary for a batch of batch_size samples of shape sample_shape ({3, 32, 32}), drawn from a
// normal distribution by a generator of its own (the global one is left alone).
template <class T, class D>
ModelSummary summarize(Module<T, D>& model, const Shape& sample_shape, std::int64_t batch_size = 1) {
  check(batch_size > 0, "summarize: batch_size must be positive, got ", batch_size);
  std::vector<std::int64_t> extents{batch_size};
  for (int i = 0; i < sample_shape.rank(); ++i) extents.push_back(sample_shape[i]);
  Tensor<T> input(Shape(extents.begin(), extents.end()));
  Rng rng(0);
  T* x = input.data();
  for (std::int64_t i = 0; i < input.numel(); ++i) x[i] = T(rng.normal());
  return summarize(model, input);
}

namespace detail {
inline std::string with_thousands(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}
inline std::string megabytes(std::int64_t bytes) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << static_cast<double>(bytes) / (1024.0 * 1024.0);
  return s.str();
}
}  // namespace detail

// The summary as torchinfo prints it: a row per layer (indented by depth), then the totals.
void print_summary(const ModelSummary& s, std::ostream& out = std::cout);

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE void print_summary(const ModelSummary& s, std::ostream& out) {
  struct Cells {
    std::string layer, shape, params, frozen, flops, activations;
  };
  std::vector<Cells> rows;
  rows.push_back({"Layer (type)", "Output Shape", "Param #", "Frozen #", "FLOPs/sample", "Activations"});
  for (const auto& r : s.layers)
    rows.push_back({std::string(2 * (r.depth - 1), ' ') + r.name + " (" + r.type + ")",
                    r.output_shape ? r.output_shape->str() : "-", detail::with_thousands(r.parameters()),
                    detail::with_thousands(r.frozen_parameters),
                    r.flops ? detail::with_thousands(*r.flops) : "-",
                    r.calls > 0 ? detail::megabytes(r.activation_bytes) + " MB" : "-"});
  std::size_t w[6] = {};
  for (const auto& c : rows) {
    const std::string* cells[] = {&c.layer, &c.shape, &c.params, &c.frozen, &c.flops, &c.activations};
    for (int i = 0; i < 6; ++i) w[i] = std::max(w[i], cells[i]->size());
  }
  std::size_t width = 0;
  for (std::size_t x : w) width += x + 2;
  const std::string rule(width, '=');
  out << s.model_type << ", input " << s.input_shape.str() << "\n" << rule << "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Cells& c = rows[i];
    out << std::left << std::setw(int(w[0]) + 2) << c.layer << std::setw(int(w[1]) + 2) << c.shape << std::right
        << std::setw(int(w[2])) << c.params << "  " << std::setw(int(w[3])) << c.frozen << "  " << std::setw(int(w[4]))
        << c.flops << "  " << std::setw(int(w[5])) << c.activations << "\n";
    if (i == 0) out << rule << "\n";
  }
  out << rule << "\n"
      << "Total params: " << detail::with_thousands(s.total_parameters()) << "\n"
      << "Trainable params: " << detail::with_thousands(s.trainable_parameters) << "\n"
      << "Non-trainable params: " << detail::with_thousands(s.frozen_parameters) << "\n"
      << "FLOPs per sample (a multiply-add is 2): " << detail::with_thousands(s.flops) << "\n"
      << rule << "\n"
      << "Input size (MB): " << detail::megabytes(s.input_bytes) << "\n"
      << "Forward pass size (MB): " << detail::megabytes(s.activation_bytes) << "\n"
      << "Params size (MB): " << detail::megabytes(s.parameter_bytes) << "\n"
      << "Estimated total size (MB): " << detail::megabytes(s.input_bytes + s.activation_bytes + s.parameter_bytes)
      << "\n"
      << rule << "\n";
}
#endif

}  // namespace ptrain
