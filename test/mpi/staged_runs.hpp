#pragma once
// What the pipeline tests of whole models compare: a few steps of a Trainer on each step's batch
// (this replica's rows of it), each step's loss brought to every rank and its gradient norm, and
// the weights of this rank's stage; then each against the serial run's.
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/tensor/tensor.hpp>
#include <ptrain/tasks/epoch_totals.hpp>

#include "../common/compare.hpp"

namespace ptrain::test {

using Weights = std::map<std::string, Tensor<float>>;

struct StagedRun {
  std::vector<double> losses;          // each step's batch loss
  std::vector<double> gradient_norms;  // each step's, before clipping (with clip_grad_norm)
  Weights weights;                     // this rank's stage, under the names it holds them by
};

// Steps the trainer on rows [begin, begin + rows) of each batch; the policies `Reducers` bring
// each step's sums to every rank (a pipeline's from the last stage, a grid's over the replicas too).
template <class... Reducers, class Trainer, class Inputs, class Targets>
StagedRun train_rows(Trainer& trainer, const std::vector<Inputs>& inputs, const std::vector<Targets>& targets,
                     std::int64_t begin, std::int64_t rows) {
  const auto& task = trainer.task();
  StagedRun run;
  for (std::size_t s = 0; s < inputs.size(); ++s) {
    std::vector<double> sums =
        trainer.train_step(inputs[s].slice(begin, begin + rows).clone(), task.slice(targets[s], begin, begin + rows))
            .flat();
    sums.resize(3 + task.state_size(), 0.0);
    (trainer.template policy<Reducers>().reduce(std::span<double>(sums)), ...);
    run.losses.push_back(EpochTotals::from_flat(sums).loss());
    run.gradient_norms.push_back(trainer.last_gradient_norm());
  }
  for (auto& [name, p] : trainer.local_model().named_parameters()) run.weights[name] = p.value().clone();
  return run;
}

// Losses and gradient norms within 1e-5 relative, every weight of the stage within weight_tolerance
// of the reference's of that name (fp32 sums in another order).
inline void check_run(const StagedRun& run, const StagedRun& reference, const std::string& what,
                      double weight_tolerance = 1e-5) {
  BOOST_REQUIRE_EQUAL(run.losses.size(), reference.losses.size());
  for (std::size_t s = 0; s < run.losses.size(); ++s) {
    BOOST_TEST(std::abs(run.losses[s] - reference.losses[s]) <= 1e-5 * std::abs(reference.losses[s]),
               what << ": step " << s << " loss " << run.losses[s] << ", reference " << reference.losses[s]);
    BOOST_TEST((std::isnan(run.gradient_norms[s]) ? std::isnan(reference.gradient_norms[s])
                                                  : std::abs(run.gradient_norms[s] - reference.gradient_norms[s]) <=
                                                        1e-5 * reference.gradient_norms[s]),
               what << ": step " << s << " gradient norm " << run.gradient_norms[s] << ", reference "
                    << reference.gradient_norms[s]);
  }
  BOOST_TEST(!run.weights.empty(), what << ": the stage has no parameters");
  for (const auto& [name, w] : run.weights)
    BOOST_TEST(worst_error(w, reference.weights.at(name)) <= weight_tolerance, what << ": " << name);
}

}  // namespace ptrain::test
