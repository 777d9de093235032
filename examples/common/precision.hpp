#pragma once
// --precision: the model's scalar type. fp32 trains the float model as it is; bf16 and fp16 build
// the model in bfloat16 or half and step fp32 master copies of its weights (MixedPrecision, Apex
// O2's scheme; fp16 with dynamic loss scaling). An example lists the types it compiles in:
//   using Precisions = examples::PrecisionChoices<ptrain::Fp32, ptrain::Bf16>;
//   Precisions::add_option(cli);
//   Precisions::run<pipelined>(cli, [&]<class Precision>(Precision) { ... });
// and builds its optimizer and Trainer through with_master_weights<Precision, D>.
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ptrain/mpi.hpp>

#include "cli.hpp"

namespace examples {

template <class... Precisions>
struct PrecisionChoices {
  static_assert(std::is_same_v<std::tuple_element_t<0, std::tuple<Precisions...>>, ptrain::Fp32>,
                "PrecisionChoices<ptrain::Fp32, ...>: fp32 comes first, the flag's default");

  static void add_option(Cli& cli) {
    std::string help = "the model's type: fp32";
    const std::vector<std::string> names{Precisions::name...};
    for (std::size_t i = 1; i < names.size(); ++i) help += (i == 1 ? ", or " : " / ") + names[i];
    if (names.size() > 1) help += " with fp32 master weights";
    cli.choice_option("--precision", "fp32", names, help);
  }

  // Calls train(Precision{}) with the type --precision names and returns what it returns. Pipelines
  // (pipelined: the policies hold one) are compiled in for fp32 only.
  template <bool pipelined, class Train>
  static double run(const Cli& cli, Train&& train) {
    const std::string precision = cli.str("--precision");
    double result = 0;
    const bool known = ((precision == Precisions::name && (result = run_one<pipelined, Precisions>(cli, train), true)) ||
                        ...);
    if (!known) ptrain::fail("--precision '", precision, "': expected one of ", names());
    return result;
  }

 private:
  static std::string names() {
    std::string all;
    ((all += (all.empty() ? "" : ", ") + std::string(Precisions::name)), ...);
    return all;
  }

  template <bool pipelined, class Precision, class Train>
  static double run_one(const Cli& cli, Train& train) {
    if constexpr (pipelined && !std::is_same_v<Precision, ptrain::Fp32>)
      ptrain::fail("--precision ", Precision::name, " with --stages ", cli.integer("--stages"),
                   ": the pipelines are built for fp32 only; use --precision fp32 with --stages, or run ",
                   Precision::name, " without a pipeline");
    else
      return train(Precision{});
  }
};

// Calls build(parameters, policies...) with what the optimizer steps and the policies to append to
// the Trainer's: for fp32 the model's own parameters and none; for bf16 and fp16 MixedPrecision's
// fp32 masters and the policy, last, as it must come after DataParallel and Sharded.
template <class Precision, class D, class Model, class Build>
decltype(auto) with_master_weights(Model& model, Build&& build) {
  if constexpr (std::is_same_v<Precision, ptrain::Fp32>) {
    return build(model.parameters());
  } else {
    ptrain::MixedPrecision<Precision, D> amp(model);
    const std::vector<ptrain::Var<float, D>> masters = amp.master_parameters();  // amp moves into build
    return build(masters, std::move(amp));
  }
}

}  // namespace examples
