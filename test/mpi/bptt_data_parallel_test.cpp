// The language model's data parallelism under mpiexec -n 2 and -n 3: each rank training on its
// contiguous share of the columns of every bptt window (rank_columns, data/bptt_batches.hpp) ends
// an epoch with the weights and the loss of one process training on all columns, and validation
// perplexity over uneven column shares equals the serial one.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <ptrain/comm/mpi_comm.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/data/bptt_batches.hpp>
#include <ptrain/models/transformer_lm.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/parallel/data_parallel.hpp>
#include <ptrain/parallel/mpi_allreduce.hpp>
#include <ptrain/tasks/sequence_modelling.hpp>
#include <ptrain/train/trainer.hpp>

#include "mpi_test_main.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(bptt_data_parallel_test)

namespace {

using Net = TransformerLM<double>;
constexpr std::int64_t vocabulary = 13, columns = 6, bptt = 4;  // 6 columns: 3 or 2 per rank

std::vector<std::int64_t> token_stream(std::int64_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < n; ++i) ids.push_back(static_cast<std::int64_t>(rng.below(vocabulary)));
  return ids;
}

std::shared_ptr<Net> make_net() {
  manual_seed(7);
  // Dropout off: its masks are drawn per rank.
  return std::make_shared<Net>(TransformerLMOptions{.ntoken = vocabulary, .ninp = 8, .nhead = 2, .nhid = 16,
                                                    .nlayers = 2, .dropout = 0.0});
}

std::shared_ptr<Sgd<double>> make_sgd(Net& net) {
  return std::make_shared<Sgd<double>>(net.parameters(), SgdOptions{.lr = 0.5});
}

struct Run {
  std::vector<Tensor<double>> weights;
  double train_loss, valid_perplexity;
};

template <class Trainer>
Run finish(Trainer& trainer, Net& net, BpttLoader& train, BpttLoader& valid) {
  const EpochTotals t = trainer.train_epoch(train, 0);
  const EpochTotals v = trainer.evaluate(valid);
  Run run{{}, t.loss(), trainer.metrics(v).at("perplexity")};
  for (auto& p : net.parameters()) run.weights.push_back(p.value().clone());
  return run;
}

const TrainerOptions quiet{.progress_bar = false, .print_epochs = false};

Run serial_run(const Tensor<std::int64_t>& train_source, const Tensor<std::int64_t>& valid_source) {
  auto net = make_net();
  Trainer<Net, SequenceModelling> trainer(net, make_sgd(*net), quiet, SequenceModelling{});
  BpttLoader train(train_source, bptt), valid(valid_source, bptt);
  return finish(trainer, *net, train, valid);
}

Run parallel_run(MpiComm& comm, const Tensor<std::int64_t>& train_source, const Tensor<std::int64_t>& valid_source) {
  auto net = make_net();
  using DP = DataParallel<MpiAllreduce, Fp32>;
  Trainer<Net, SequenceModelling, DP> trainer(net, make_sgd(*net), quiet, SequenceModelling{}, DP(comm));
  BpttLoader train(rank_columns(train_source, comm.rank(), comm.size()), bptt);
  BpttLoader valid(rank_columns(valid_source, comm.rank(), comm.size()), bptt);
  return finish(trainer, *net, train, valid);
}

}  // namespace

BOOST_AUTO_TEST_CASE(column_shares_train_as_the_serial_run) {
  MpiComm comm(test::session());
  BOOST_REQUIRE(columns % comm.size() == 0);
  // 6 x 15 rows: windows of 4, 4, 4 and 2 rows. Validation: 5 columns, uneven over 2 or 3 ranks.
  const Tensor<std::int64_t> train = batchify(token_stream(93, 1), columns);
  const Tensor<std::int64_t> valid = batchify(token_stream(47, 2), 5);
  const Run serial = serial_run(train, valid);
  const Run parallel = parallel_run(comm, train, valid);
  BOOST_TEST(std::abs(parallel.train_loss - serial.train_loss) < 1e-12 * serial.train_loss);
  BOOST_TEST(std::abs(parallel.valid_perplexity - serial.valid_perplexity) < 1e-10 * serial.valid_perplexity);
  double worst = 0, moved = 0;
  const auto start = make_net()->parameters();
  for (std::size_t i = 0; i < serial.weights.size(); ++i) {
    worst = std::max(worst, (parallel.weights[i].array() - serial.weights[i].array()).abs().maxCoeff());
    moved = std::max(moved, (serial.weights[i].array() - start[i].value().array()).abs().maxCoeff());
  }
  BOOST_TEST(moved > 1e-3);  // the epoch trained
  BOOST_TEST(worst < 1e-12);
}

BOOST_AUTO_TEST_SUITE_END()
