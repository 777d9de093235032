#pragma once
// MultiHead<Tasks...>: a model with several heads, their outputs concatenated along dimension 1
// (a classifier's [N, 3] next to a segmenter's [N, 2, H, W] does not concatenate; heads of the
// same layout do). Each head has a name, its width along dimension 1, a weight and its own task;
// the targets are a tuple of the heads' targets. The loss is the weighted sum of the heads'
// losses; the metrics are each head's loss ("<name>_loss", the mean over its loss weight) and
// each head's metrics, named "<name>_<metric>". A loader's batch of several labels per example
// (targets [N, heads], ImageCsv's label_columns) gives head k column k when every head's targets
// are class indices.
//
//   MultiHead task(Head<Classification>{"kind", 3}, Head<Segmentation>{"mask", 2, 0.5});
//   Trainer<Net, decltype(task)> t(model, sgd, {}, task);
//
// A pipeline weighs micro-batches by their rows (the loss weight of a MultiHead is the batch's
// samples), so it equals the whole batch's loss when every head's loss is a mean over a fixed count
// per row (samples, pixels of equal-size images).
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ptrain/autograd/ops/arithmetic.hpp"
#include "ptrain/autograd/ops/narrow.hpp"
#include "ptrain/tasks/task.hpp"

namespace ptrain {

template <class HeadTask>
struct Head {
  std::string name;
  std::int64_t width = 0;  // the head's extent of dimension 1 of the model's output
  double weight = 1.0;
  HeadTask task{};
};

template <class... Tasks>
class MultiHead {
  static_assert(sizeof...(Tasks) >= 1, "MultiHead: give at least one Head");

 public:
  using target_type = std::tuple<typename Tasks::target_type...>;

  explicit MultiHead(Head<Tasks>... heads) : heads_(std::move(heads)...) {
    for_each_head([](auto, const auto& head, std::int64_t) {
      check(head.width >= 1, "MultiHead: head '", head.name, "' has width ", head.width, "; expected at least 1");
    });
  }

  std::int64_t rows(const target_type& targets) const {
    const std::int64_t n = std::get<0>(heads_).task.rows(std::get<0>(targets));
    for_each_head([&](auto i, const auto& head, std::int64_t) {
      check(head.task.rows(std::get<i>(targets)) == n, "MultiHead: head '", head.name, "' has targets for ",
            head.task.rows(std::get<i>(targets)), " rows, head '", std::get<0>(heads_).name, "' for ", n);
    });
    return n;
  }
  target_type slice(const target_type& targets, std::int64_t begin, std::int64_t end) const {
    return slice_each(targets, begin, end, std::index_sequence_for<Tasks...>{});
  }
  double loss_weight(const target_type& targets) const { return static_cast<double>(rows(targets)); }

  template <class Batch>
    requires(std::same_as<typename Tasks::target_type, std::vector<std::int64_t>> && ...) &&
            requires(const Batch& b) {
              { b.target_shape } -> std::convertible_to<Shape>;
              { b.targets } -> std::convertible_to<std::vector<std::int64_t>>;
            }
  target_type batch_targets(const Batch& batch) const {
    constexpr auto heads = static_cast<std::int64_t>(sizeof...(Tasks));
    const Shape& shape = batch.target_shape;
    check(shape.rank() == 2 && shape[1] == heads && static_cast<std::int64_t>(batch.targets.size()) == shape.numel(),
          "MultiHead: a batch's targets have shape ", shape, "; expected [N, ", heads,
          "], one label per head (e.g. ImageCsv's label_columns)");
    target_type targets;
    for_each_head([&](auto i, const auto&, std::int64_t) {
      auto& column = std::get<i>(targets);
      for (std::int64_t row = 0; row < shape[0]; ++row)
        column.push_back(batch.targets[static_cast<std::size_t>(row * heads + static_cast<std::int64_t>(i))]);
    });
    return targets;
  }

  template <class T, class D>
  Var<T, D> loss(const Var<T, D>& output, const target_type& targets, double grad_scale) const {
    check_width(output.shape());
    Var<T, D> total;
    for_each_head([&](auto i, const auto& head, std::int64_t offset) {
      // The head's loss takes grad_scale in float; its weight, a plain number, scales the value.
      const Var<T, D> weighted = scale(head.task.loss(narrow(output, 1, offset, head.width), std::get<i>(targets),
                                                      grad_scale),
                                       static_cast<T>(head.weight));
      total = total.defined() ? add(total, weighted) : weighted;
    });
    return total;
  }

  // Per head: [its loss times its loss weight, its loss weight, its task's state...]
  std::size_t state_size() const {
    std::size_t n = 0;
    for_each_head([&](auto, const auto& head, std::int64_t) { n += 2 + head.task.state_size(); });
    return n;
  }
  // Each head's loss is computed again here, without a graph, for its own loss and metrics.
  template <class T, class D>
  void accumulate(const Tensor<T, D>& scores, const target_type& targets, double, std::span<double> state) const {
    check_width(scores.shape());
    NoGradGuard no_grad;
    const Var<T, D> output(scores);
    std::size_t at = 0;
    for_each_head([&](auto i, const auto& head, std::int64_t offset) {
      const Var<T, D> head_output = narrow(output, 1, offset, head.width);
      const auto& head_targets = std::get<i>(targets);
      const double loss = static_cast<double>(head.task.loss(head_output, head_targets, 1.0).value().to_vector()[0]);
      const double weight = head.task.loss_weight(head_targets);
      if (weight > 0) state[at] += loss * weight, state[at + 1] += weight;
      head.task.accumulate(head_output.value(), head_targets, loss, state.subspan(at + 2, head.task.state_size()));
      at += 2 + head.task.state_size();
    });
  }

  std::vector<std::string> metric_names() const {
    std::vector<std::string> names;
    for_each_head([&](auto, const auto& head, std::int64_t) {
      names.push_back(head.name + "_loss");
      for (const auto& metric : head.task.metric_names()) names.push_back(head.name + "_" + metric);
    });
    return names;
  }
  std::vector<double> metric_values(std::span<const double> state) const {
    std::vector<double> values;
    std::size_t at = 0;
    for_each_head([&](auto, const auto& head, std::int64_t) {
      values.push_back(state[at + 1] > 0 ? state[at] / state[at + 1] : std::nan(""));
      const auto head_values = head.task.metric_values(state.subspan(at + 2, head.task.state_size()));
      values.insert(values.end(), head_values.begin(), head_values.end());
      at += 2 + head.task.state_size();
    });
    return values;
  }

  std::int64_t width() const {
    std::int64_t n = 0;
    for_each_head([&](auto, const auto& head, std::int64_t) { n += head.width; });
    return n;
  }

 private:
  // f(index as an integral_constant, head, its offset along dimension 1), head by head.
  template <class F>
  void for_each_head(F&& f) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      std::int64_t offset = 0;
      ((f(std::integral_constant<std::size_t, I>{}, std::get<I>(heads_), offset), offset += std::get<I>(heads_).width),
       ...);
    }(std::index_sequence_for<Tasks...>{});
  }
  template <std::size_t... I>
  target_type slice_each(const target_type& targets, std::int64_t begin, std::int64_t end,
                         std::index_sequence<I...>) const {
    return {std::get<I>(heads_).task.slice(std::get<I>(targets), begin, end)...};
  }
  void check_width(const Shape& output) const {
    check(output.rank() >= 2 && output[1] == width(), "MultiHead: output of shape ", output, "; the heads read ",
          width(), " along dimension 1");
  }

  std::tuple<Head<Tasks>...> heads_;
};

}  // namespace ptrain
