#pragma once
// Where a pipeline cuts a Sequential: the first layer of each stage. By default the cut that
// minimises the largest stage's parameter count (each layer weighs its parameters plus one, so
// parameter-free layers spread too); explicit cut points when given.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ptrain/core/error.hpp"

namespace ptrain::detail {

// Layer indices [begin, end) of each stage.
struct StageRange {
  std::size_t begin = 0, end = 0;
  bool operator==(const StageRange&) const = default;
};

inline std::vector<StageRange> balanced_stages(const std::vector<std::int64_t>& layer_parameters, int stages) {
  const auto layers = layer_parameters.size();
  check(stages >= 1, "Pipeline: the number of stages must be at least 1, got ", stages);
  check(layers >= static_cast<std::size_t>(stages), "Pipeline: the model has ", layers, " layer(s) for ", stages,
        " stages; every stage needs at least one layer (use fewer stages or a model with more top-level layers)");
  std::vector<std::int64_t> prefix(layers + 1, 0);
  for (std::size_t i = 0; i < layers; ++i) prefix[i + 1] = prefix[i] + layer_parameters[i] + 1;
  const auto weight = [&](std::size_t b, std::size_t e) { return prefix[e] - prefix[b]; };

  // worst[s][e]: the smallest possible largest stage when layers [0, e) form s + 1 stages.
  constexpr auto none = std::numeric_limits<std::int64_t>::max();
  const auto S = static_cast<std::size_t>(stages);
  std::vector<std::vector<std::int64_t>> worst(S, std::vector<std::int64_t>(layers + 1, none));
  std::vector<std::vector<std::size_t>> cut(S, std::vector<std::size_t>(layers + 1, 0));
  for (std::size_t e = 1; e <= layers; ++e) worst[0][e] = weight(0, e);
  for (std::size_t s = 1; s < S; ++s)
    for (std::size_t e = s + 1; e <= layers; ++e)
      for (std::size_t b = s; b < e; ++b) {
        if (worst[s - 1][b] == none) continue;
        const std::int64_t w = std::max(worst[s - 1][b], weight(b, e));
        if (w < worst[s][e]) {
          worst[s][e] = w;
          cut[s][e] = b;
        }
      }
  std::vector<StageRange> ranges(S);
  std::size_t end = layers;
  for (std::size_t s = S; s-- > 0;) {
    const std::size_t begin = s == 0 ? 0 : cut[s][end];
    ranges[s] = {begin, end};
    end = begin;
  }
  return ranges;
}

// cut_points: the first layer of stages 1 .. S-1, increasing.
inline std::vector<StageRange> stages_at(const std::vector<std::size_t>& cut_points, std::size_t layers, int stages) {
  check(cut_points.size() + 1 == static_cast<std::size_t>(stages), "Pipeline: ", cut_points.size(),
        " cut point(s) given for ", stages, " stages; expected ", stages - 1, " (the first layer of stages 1..",
        stages - 1, ")");
  std::vector<StageRange> ranges;
  std::size_t begin = 0;
  for (std::size_t cut : cut_points) {
    check(cut > begin && cut < layers, "Pipeline: cut point ", cut, " must lie in (", begin, ", ", layers,
          ") so that every stage of the ", layers, "-layer model gets at least one layer");
    ranges.push_back({begin, cut});
    begin = cut;
  }
  ranges.push_back({begin, layers});
  return ranges;
}

}  // namespace ptrain::detail
