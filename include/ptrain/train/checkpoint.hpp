#pragma once
// Training checkpoints on disk: one directory per checkpoint, <dir>/step-<N>, holding
//   manifest.txt                       where training stands (written last, by the main rank)
//   model[.part-I-of-P].safetensors    the weights under the model's names (a pipeline: one part
//                                      per stage, each under the whole model's names)
//   optimizer[.part...].safetensors    the optimizer's per-parameter tensors, its scalars as metadata
//   policies[.part...].safetensors     the policies' state (MixedPrecision: fp32 masters, loss scale)
//   callbacks[.part...].safetensors    the stateful callbacks' state (train/callback.hpp)
//   rank-<R>.txt                       each rank's own: its RNG and the epoch's running sums
// A checkpoint is written as <dir>/.tmp-step-<N>, every file fsync'd (io::write_atomically), the
// directory fsync'd, then renamed to step-<N> and <dir> fsync'd: a save killed half-way leaves a
// .tmp-step-* that nothing reads (the next save of that step removes it) and the earlier
// checkpoints whole; pruning renames a checkpoint to .pruned-step-<N> before removing its files. The Trainer (train/trainer.hpp) decides when to save and what goes in.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/io/atomic_file.hpp"
#include "ptrain/io/safetensors.hpp"
#include "ptrain/optim/optimizer.hpp"
#include "ptrain/parallel/checkpoint_part.hpp"
#include "ptrain/tasks/epoch_totals.hpp"
#include "ptrain/core/prebuilt.hpp"

namespace ptrain {

enum class BestIs { lower, higher };

// When and where the Trainer saves (Trainer::save_checkpoints).
struct CheckpointOptions {
  std::filesystem::path directory;  // required
  std::int64_t every_steps = 0;     // a checkpoint every N optimizer steps; 0: none by steps
  int every_epochs = 1;             // and at the end of every N-th epoch; 0: none by epochs
  int keep_last = 2;                // the newest N are kept, with the best; older ones are removed
  // An epoch's metric whose best checkpoint is kept beside the last ones: "val_loss", "train_loss",
  // "val_<metric>" or "train_<metric>" of the task (val_accuracy); empty: none.
  std::string best_metric;
  BestIs best_is = BestIs::lower;
  // SIGTERM or SIGUSR1 on any rank: every rank ends its step, saves, and fit returns (preempted()).
  bool save_on_preemption = true;
  int keep_best = 1;  // the best N by best_metric kept beside the newest keep_last (Lightning's save_top_k)
};

namespace checkpoint {

inline constexpr const char* manifest_name = "manifest.txt";
inline constexpr const char* format_line = "ptrain-checkpoint 1";

// Exact text of a double (the shortest that reads back to the same bits) and back.
inline std::string exact(double v) {
  if (std::isnan(v)) return "nan";
  char buffer[64];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, v).ptr);
}
inline std::optional<double> parse_exact(std::string_view text) {
  if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
  double v = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

inline std::filesystem::path step_directory(const std::filesystem::path& dir, std::int64_t step) {
  return dir / ("step-" + std::to_string(step));
}
inline std::filesystem::path staging_directory(const std::filesystem::path& dir, std::int64_t step) {
  return dir / (".tmp-step-" + std::to_string(step));
}
// stem.safetensors, or stem.part-I-of-P.safetensors for one of several parts.
std::string part_file(const std::string& stem, const CheckpointPart& part);
inline std::string rank_file(int rank) { return "rank-" + std::to_string(rank) + ".txt"; }

// Where training stood when the checkpoint was written.
struct Manifest {
  std::int64_t step = 0;            // optimizer steps done
  std::int64_t epoch = 0;           // the epoch in progress (0-based), or the next one
  std::int64_t batch_in_epoch = 0;  // batches of that epoch already trained
  std::int64_t scheduler_step = -1; // the learning-rate scheduler's step count; -1: none saved
  int world_size = 1;
  int parts = 1;                    // model parts (pipeline stages)
  std::int64_t model_tensors = 0;   // parameters and buffers of the whole model
  bool optimizer = false;           // optimizer*.safetensors written
  bool policies = false;            // policies*.safetensors written
  std::string metric_name;          // the epoch's metric this checkpoint is ranked by (none mid-epoch)
  double metric = std::numeric_limits<double>::quiet_NaN();
  double best = std::numeric_limits<double>::quiet_NaN();  // the best value seen so far in the run

  std::string text() const;

  // Every field is checked: a message names the file, the line and what was expected.
  static Manifest read(const std::filesystem::path& path);
};

// The checkpoints under dir whose manifest exists, by step, oldest first.
std::vector<std::pair<std::int64_t, std::filesystem::path>> list(const std::filesystem::path& dir);

// The newest checkpoint under dir, if any.
inline std::optional<std::filesystem::path> latest(const std::filesystem::path& dir) {
  const auto all = list(dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

// A fresh, empty staging directory for step (one left by a killed save is removed).
std::filesystem::path begin_staging(const std::filesystem::path& dir, std::int64_t step);

// The staging directory, complete with its manifest, becomes step-<N>.
std::filesystem::path publish(const std::filesystem::path& dir, std::int64_t step, const Manifest& manifest);

// Removes all but the newest keep_last checkpoints and the best keep_best by their manifests'
// metric (lower or higher; a checkpoint without one is not ranked). A checkpoint leaves its step-N
// name by one rename before its files go, so one cut short by a kill is never read as a checkpoint
// (the next prune finishes it).
void prune(const std::filesystem::path& dir, int keep_last, BestIs best_is, int keep_best = 1);

// An optimizer's or a policy's state as a safetensors file: tensors stored exactly as T, scalars
// as metadata "scalar.<name>".
template <class T>
void save_state(const std::filesystem::path& path, const OptimizerState<T>& state) {
  std::vector<io::SafetensorsEntry<T>> entries;
  for (const auto& [name, tensor] : state.tensors) entries.push_back({name, tensor, io::dtype_of<T>()});
  std::map<std::string, std::string> metadata;
  for (const auto& [name, value] : state.scalars) metadata["scalar." + name] = exact(value);
  io::save_safetensors(path, std::move(entries), metadata);
}
template <class T>
OptimizerState<T> read_state(const std::filesystem::path& path) {
  const io::SafetensorsFile file(path);
  OptimizerState<T> state;
  for (const auto& [key, text] : file.metadata()) {
    if (key.rfind("scalar.", 0) != 0) continue;
    const auto v = parse_exact(text);
    check(v.has_value(), path.string(), ": metadata '", key, "' is '", text, "', expected a number");
    state.scalars.emplace_back(key.substr(7), *v);
  }
  state.tensors = file.read_all<T>();
  return state;
}

// One rank's own state: its RNG engine (dropout) and the running sums of the epoch in progress.
struct RankState {
  std::mt19937_64 rng;
  EpochTotals totals;
  std::vector<std::pair<std::string, std::mt19937_64>> generators;  // the model's own (Module::named_generators)
};
void save_rank_state(const std::filesystem::path& path, const RankState& s);
RankState read_rank_state(const std::filesystem::path& path);

#if PTRAIN_PREBUILT_FUNCTION_BODIES
PTRAIN_PREBUILT_INLINE std::string Manifest::text() const {
  std::ostringstream out;
  out << format_line << "\nstep " << step << "\nepoch " << epoch << "\nbatch_in_epoch " << batch_in_epoch
      << "\nscheduler_step " << scheduler_step << "\nworld_size " << world_size << "\nparts " << parts
      << "\nmodel_tensors " << model_tensors << "\noptimizer " << optimizer << "\npolicies " << policies
      << "\nmetric_name " << (metric_name.empty() ? "-" : metric_name) << "\nmetric " << exact(metric)
      << "\nbest " << exact(best) << "\n";
  return out.str();
}

PTRAIN_PREBUILT_INLINE Manifest Manifest::read(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::ifstream in(path);
  check(in.good(), file, ": cannot open the checkpoint manifest");
  std::string line;
  check(std::getline(in, line) && line == format_line, file, ": not a ptrain checkpoint manifest: the first line is '",
        line, "', expected '", format_line, "'");
  std::map<std::string, std::string> fields;
  for (int number = 2; std::getline(in, line); ++number) {
    const auto space = line.find(' ');
    check(space != std::string::npos && space > 0, file, ": line ", number, " '", line, "' is not 'key value'");
    const std::string key = line.substr(0, space);
    check(fields.emplace(key, line.substr(space + 1)).second, file, ": line ", number, ": '", key, "' given twice");
  }
  const auto field = [&](const char* key) -> const std::string& {
    const auto it = fields.find(key);
    check(it != fields.end(), file, ": the manifest has no '", key, "' line (truncated or corrupt?)");
    return it->second;
  };
  const auto integer = [&](const char* key, std::int64_t min,
                           std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
    const std::string& text = field(key);
    std::int64_t v = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
    check(error == std::errc{} && end == text.data() + text.size() && v >= min && v <= max, file, ": '", key,
          "' is '", text, "', expected an integer from ", min, " to ", max);
    return v;
  };
  constexpr std::int64_t int_max = std::numeric_limits<int>::max();
  const auto real = [&](const char* key) {
    const auto v = parse_exact(field(key));
    check(v.has_value(), file, ": '", key, "' is '", field(key), "', expected a number or nan");
    return *v;
  };
  Manifest m;
  m.step = integer("step", 0);
  m.epoch = integer("epoch", 0);
  m.batch_in_epoch = integer("batch_in_epoch", 0);
  m.scheduler_step = integer("scheduler_step", -1);
  m.world_size = static_cast<int>(integer("world_size", 1, int_max));
  m.parts = static_cast<int>(integer("parts", 1, int_max));
  m.model_tensors = integer("model_tensors", 0);
  m.optimizer = integer("optimizer", 0, 1) != 0;
  m.policies = integer("policies", 0, 1) != 0;
  m.metric_name = field("metric_name") == "-" ? "" : field("metric_name");
  m.metric = real("metric");
  m.best = real("best");
  for (const auto& entry : fields) {
    const std::string& key = entry.first;  // a name, not a binding: clang before 16 cannot capture those
    static const char* known[] = {"step",  "epoch",       "batch_in_epoch", "scheduler_step", "world_size",
                                  "parts", "model_tensors", "optimizer",    "policies",       "metric_name",
                                  "metric", "best"};
    check(std::find_if(std::begin(known), std::end(known), [&](const char* k) { return key == k; }) != std::end(known),
          file, ": unknown field '", key, "'");
  }
  return m;
}

PTRAIN_PREBUILT_INLINE std::string part_file(const std::string& stem, const CheckpointPart& part) {
  if (part.count == 1) return stem + ".safetensors";
  return stem + ".part-" + std::to_string(part.index) + "-of-" + std::to_string(part.count) + ".safetensors";
}

PTRAIN_PREBUILT_INLINE std::vector<std::pair<std::int64_t, std::filesystem::path>> list(const std::filesystem::path& dir) {
  std::vector<std::pair<std::int64_t, std::filesystem::path>> out;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) return out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0 || !std::filesystem::exists(entry.path() / manifest_name)) continue;
    std::int64_t step = 0;
    const char* digits = name.c_str() + 5;
    const auto [end, parse_error] = std::from_chars(digits, name.c_str() + name.size(), step);
    if (parse_error == std::errc{} && end == name.c_str() + name.size()) out.emplace_back(step, entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

PTRAIN_PREBUILT_INLINE std::filesystem::path begin_staging(const std::filesystem::path& dir, std::int64_t step) {
  const auto staging = staging_directory(dir, step);
  std::error_code error;
  std::filesystem::remove_all(staging, error);
  check(!error, staging.string(), ": cannot remove a stale checkpoint: ", error.message());
  std::filesystem::create_directories(staging, error);
  check(!error, staging.string(), ": cannot create the checkpoint directory: ", error.message());
  return staging;
}

PTRAIN_PREBUILT_INLINE std::filesystem::path publish(const std::filesystem::path& dir, std::int64_t step, const Manifest& manifest) {
  const auto staging = staging_directory(dir, step), target = step_directory(dir, step);
  io::write_atomically(staging / manifest_name, [&](std::ostream& out) { out << manifest.text(); });
  io::sync_directory(staging, staging.string() + ": ");
  std::error_code error;
  if (std::filesystem::exists(target)) {  // a checkpoint of the same step (saved again): replace it
    std::filesystem::remove(target / manifest_name, error);
    std::filesystem::remove_all(target, error);
    check(!error, target.string(), ": cannot replace the older checkpoint: ", error.message());
  }
  std::filesystem::rename(staging, target, error);
  check(!error, staging.string(), ": cannot rename it to ", target.string(), ": ", error.message());
  io::sync_directory(dir, target.string() + ": ");
  return target;
}

PTRAIN_PREBUILT_INLINE void prune(const std::filesystem::path& dir, int keep_last, BestIs best_is, int keep_best) {
  const auto all = list(dir);
  std::vector<std::pair<double, std::size_t>> ranked;
  for (std::size_t i = 0; i < all.size(); ++i) {
    double m = std::numeric_limits<double>::quiet_NaN();
    try {
      m = Manifest::read(all[i].second / manifest_name).metric;
    } catch (const Error&) {  // an unreadable older checkpoint ranks last; it is not this save's concern
    }
    if (!std::isnan(m)) ranked.emplace_back(best_is == BestIs::lower ? m : -m, i);
  }
  std::sort(ranked.begin(), ranked.end());  // best first; of equal metrics the older
  std::vector<bool> keep(all.size(), false);
  for (std::size_t r = 0; r < ranked.size() && r < static_cast<std::size_t>(std::max(keep_best, 0)); ++r)
    keep[ranked[r].second] = true;
  for (std::size_t i = all.size() > static_cast<std::size_t>(keep_last) ? all.size() - keep_last : 0; i < all.size(); ++i)
    keep[i] = true;
  std::error_code error;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (keep[i]) continue;
    const auto doomed = dir / (".pruned-" + all[i].second.filename().string());
    std::filesystem::remove_all(doomed, error);
    std::filesystem::rename(all[i].second, doomed, error);
    if (!error) std::filesystem::remove_all(doomed, error);
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir, error))  // left by a prune cut short
    if (entry.path().filename().string().rfind(".pruned-", 0) == 0) std::filesystem::remove_all(entry.path(), error);
}

PTRAIN_PREBUILT_INLINE void save_rank_state(const std::filesystem::path& path, const RankState& s) {
  io::write_atomically(path, [&](std::ostream& out) {
    out << "rng " << s.rng << '\n';
    for (const auto& [name, engine] : s.generators) out << "generator " << name << ' ' << engine << '\n';
    out << "totals";
    for (double v : s.totals.flat()) out << ' ' << exact(v);
    out << '\n';
  });
}

PTRAIN_PREBUILT_INLINE RankState read_rank_state(const std::filesystem::path& path) {
  std::ifstream in(path);
  check(in.good(), path.string(), ": cannot open the rank's checkpoint state");
  RankState s;
  std::string word;
  in >> word >> s.rng;
  check(in.good() && word == "rng", path.string(), ": expected 'rng <engine state>' first");
  for (in >> word; in.good() && word == "generator"; in >> word) {
    std::string name;
    std::mt19937_64 engine;
    in >> name >> engine;
    check(in.good(), path.string(), ": expected 'generator <name> <engine state>'");
    s.generators.emplace_back(std::move(name), engine);
  }
  check(word == "totals", path.string(), ": expected 'totals <sums>' after the RNG states");
  std::vector<double> sums;
  while (in >> word) {
    const auto v = parse_exact(word);
    check(v.has_value(), path.string(), ": totals: '", word, "' is not a number");
    sums.push_back(*v);
  }
  s.totals = EpochTotals::from_flat(sums);
  return s;
}
#endif

}  // namespace checkpoint
}  // namespace ptrain

PTRAIN_PREBUILT_STATE_FD(ptrain::checkpoint::save_state)
PTRAIN_PREBUILT_STATE_FD(ptrain::checkpoint::read_state)
