// The pipeline's failure drill: `pipeline_abort R` runs a pipeline with one stage per rank and
// makes rank R's stage throw in the middle of the second step's schedule, while its neighbours
// wait for its messages. run_main must end every rank with rank R's message and a non-zero exit;
// `pipeline_abort -1` must finish on every rank. Checked by expect_abort.cmake.
#include <cstdlib>
#include <string>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/core/log.hpp>
#include <ptrain/launch/mpi_main.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/pipeline.hpp>
#include <ptrain/train/trainer.hpp>

namespace {
// Passes its input on, and throws at its `fail_at`-th call.
class Tripwire : public ptrain::Module<float> {
 public:
  Tripwire(int fail_at, std::string message) : fail_at_(fail_at), message_(std::move(message)) {}
  ptrain::Var<float> forward(const ptrain::Var<float>& x) override {
    if (++calls_ == fail_at_) throw ptrain::Error(message_);
    return x;
  }

 private:
  int calls_ = 0, fail_at_;
  std::string message_;
};
}  // namespace

int main(int argc, char** argv) {
  const int thrower = argc > 1 ? std::atoi(argv[1]) : -1;
  return ptrain::run_main(argc, argv, [&](ptrain::MpiSession& session) {
    ptrain::MpiComm world(session);
    const int rank = world.rank();
    auto net = std::make_shared<ptrain::Sequential<float>>();
    for (int s = 0; s < world.size(); ++s) {
      // The 7th forward is micro-batch 2 of step 2 (4 micro-batches a step).
      const int fail_at = s == thrower ? 7 : -1;
      net->push_back(std::make_shared<Tripwire>(fail_at, "deliberate failure on rank " + std::to_string(s)));
      net->push_back(std::make_shared<ptrain::Linear<float>>(4, 4));
    }
    auto sgd = std::make_shared<ptrain::Sgd<float>>(net->parameters(), ptrain::SgdOptions{.lr = 0.1});
    std::vector<std::size_t> cuts;  // each stage: its tripwire and a linear layer
    for (int s = 1; s < world.size(); ++s) cuts.push_back(2 * static_cast<std::size_t>(s));
    using P = ptrain::Pipeline<4, ptrain::OneFOneB>;
    ptrain::Trainer<ptrain::Sequential<float>, P> trainer(net, sgd, {.progress_bar = false, .print_epochs = false},
                                                          P(world, {.cut_points = cuts}));
    const auto inputs = ptrain::Tensor<float>::ones({8, 4});
    const std::vector<std::int64_t> targets(8, 1);
    for (int step = 0; step < 3; ++step) trainer.train_step(inputs, targets);
    ptrain::log_line("rank " + std::to_string(rank) + ": finished");
  });
}
