// The language model of PyTorch's transformer tutorial on WikiText-2, as the project ptrain replaces
// ran it: TransformerLM (embedding, sinusoidal positions, a causal TransformerEncoder, a linear
// decoder; sequence-first), the training split read in bptt windows of `--batch` columns, SGD at lr
// 5.0 with StepLR(1.0, gamma 0.95) stepped per epoch, perplexity on the validation split after each
// epoch and on the test split at the end, the gradients clipped to a global norm (--clip 0.5). One
// process, or data-parallel under mpiexec: rank r of R takes a contiguous 1/R of the columns of every
// window (data/bptt_batches.hpp), so R ranks train on the serial run's batches with averaged
// gradients; --shard 1|2|3 shards the optimizer state, the gradients too, the parameters too
// (Sharded<Zero1 | Zero2 | Zero3>). --stages S cuts the model into S pipeline stages (--chunks micro-batches per batch,
// --schedule gpipe|1f1b; with more ranks than stages, a data x pipeline grid): the model then runs
// batch-first, since the pipeline splits a batch's first dimension into micro-batches and a window's
// columns are its samples. --precision bf16 builds the model in bfloat16 and steps fp32 master
// weights (MixedPrecision<Bf16>), on one process or data-parallel; the token ids, numbers of the
// model's type, must then stay exact in bfloat16 (a vocabulary of at most 256).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>

#include <ptrain/data/bptt_batches.hpp>
#include <ptrain/data/wikitext.hpp>
#include <ptrain/models/transformer_lm.hpp>
#include <ptrain/mpi.hpp>
#include <ptrain/tasks/sequence_modelling.hpp>

#include "common/cli.hpp"
#include "common/precision.hpp"
#include "common/run.hpp"

namespace {

using Precisions = examples::PrecisionChoices<ptrain::Fp32, ptrain::Bf16>;

// The validation perplexity of a unigram model of the training split (each token at its training
// frequency, <unk> standing for the rest): what a model must beat to have learned any context.
double unigram_perplexity(const ptrain::WikiText& data) {
  std::unordered_map<std::int64_t, double> counts;
  for (const std::int64_t id : data.train()) ++counts[id];
  const auto n = static_cast<double>(data.train().size());
  double log_sum = 0;
  for (const std::int64_t id : data.valid()) {
    const auto it = counts.find(id);
    log_sum -= std::log((it == counts.end() ? 0.5 : it->second) / n);  // an unseen id: half a count
  }
  return std::exp(log_sum / static_cast<double>(data.valid().size()));
}

// Precision: Fp32, or Bf16 for a bfloat16 model with fp32 masters. Returns the last epoch's
// validation perplexity.
template <class Precision, class D, class... Policies>
double train(const examples::Cli& cli, ptrain::MpiComm& world, examples::DataShard shard, Policies... policies) {
  using T = typename Precision::template wire<float>;
  using Net = ptrain::TransformerLM<T, D>;
  constexpr bool pipelined = (requires { Policies::micro_batches; } || ...);
  const auto layout = pipelined ? ptrain::BpttLoader::Layout::batch_first : ptrain::BpttLoader::Layout::sequence_first;
  const auto seed = static_cast<std::uint64_t>(cli.integer("--seed"));
  ptrain::manual_seed(seed);

  const ptrain::WikiText data(cli.str("--data"), {.format = cli.str("--format") == "raw" ? ptrain::WikiTextFormat::raw
                                                                                         : ptrain::WikiTextFormat::tokens});
  const long batch = cli.integer("--batch"), eval_batch = cli.integer("--eval-batch"), bptt = cli.integer("--bptt");
  ptrain::check(batch % shard.count == 0, "--batch ", batch, " (the global batch of columns) must divide by the ",
                shard.count, " data-parallel replicas");
  ptrain::check(eval_batch >= shard.count, "--eval-batch ", eval_batch, " must give each of the ", shard.count,
                " data-parallel replicas a column");
  const auto loader = [&](const std::vector<std::int64_t>& ids, long columns, const char* split) {
    const ptrain::Tensor<std::int64_t> source = ptrain::batchify(ids, columns);
    ptrain::check(source.size(0) >= 2, "the ", split, " split's ", ids.size(), " tokens make ", source.size(0),
                  " row(s) of ", columns, " columns: expected at least 2 (an input and its next token)");
    return ptrain::BpttLoader(ptrain::rank_columns(source, shard.index, shard.count), bptt, layout);
  };
  ptrain::BpttLoader train_loader = loader(data.train(), batch, "training");
  ptrain::BpttLoader valid_loader = loader(data.valid(), eval_batch, "validation");
  ptrain::BpttLoader test_loader = loader(data.test(), eval_batch, "test");
  const auto vocabulary = static_cast<double>(data.vocab().size());
  ptrain::check(vocabulary <= ptrain::max_exact_whole_number<T>(), "--precision ", Precision::name, ": the model takes ",
                "its token ids as numbers of its type, exact in ", Precision::name, " up to ",
                ptrain::max_exact_whole_number<T>(), ", and the vocabulary has ", data.vocab().size(),
                " tokens; use --precision fp32");

  auto model = std::make_shared<Net>(ptrain::TransformerLMOptions{.ntoken = data.vocab().size(),
                                                                  .ninp = cli.integer("--emsize"),
                                                                  .nhead = cli.integer("--nhead"),
                                                                  .nhid = cli.integer("--nhid"),
                                                                  .nlayers = cli.integer("--nlayers"),
                                                                  .dropout = cli.real("--dropout"),
                                                                  .batch_first = pipelined});
  const double lr = cli.real("--lr");
  ptrain::TrainerOptions options = examples::trainer_options(cli);
  options.print_epochs = false;  // the tutorial's line below
  options.clip_grad_norm = cli.real("--clip");
  const std::int64_t parameters = model->parameter_count();  // before Sharded<Zero3> lets the others' go
  // SGD steps the model's parameters, or in bf16 their fp32 masters (MixedPrecision, the last policy).
  return examples::with_master_weights<Precision, D>(*model, [&](const auto& weights, auto... amp) {
    auto sgd = std::make_shared<ptrain::Sgd<float, D>>(weights, ptrain::SgdOptions{.lr = lr});
    // The targets [S, N] are laid out as the sequence-first logits [S, N, vocabulary] (batch-first:
    // [N, S] and [N, S, vocabulary]): one target per row of scores, which is all SequenceModelling asks.
    ptrain::Trainer<Net, ptrain::SequenceModelling, Policies..., decltype(amp)...> trainer(
        model, sgd, options, ptrain::SequenceModelling{}, policies..., std::move(amp)...);
    ptrain::Scheduler schedule(*sgd, ptrain::StepLR{.base_lr = lr, .step_size = 1, .gamma = cli.real("--gamma")});
    trainer.checkpoint_scheduler(schedule);
    // Every rank trains the same number of tokens: (rows - 1) x its columns.
    const double tokens_per_epoch = static_cast<double>(train_loader.tokens()) * shard.count;
    trainer.on_epoch_end([&](const ptrain::EpochResult& r) {
      if (trainer.is_main())
        std::printf("epoch %3d | lr %.3g | train loss %.3f valid loss %.3f | train ppl %.2f valid ppl %.2f | %.0f "
                    "tokens/s | %.1f s\n",
                    r.epoch, r.lr, r.train_loss, r.val_loss, r.train.at("perplexity"), r.val.at("perplexity"),
                    r.seconds > 0 ? tokens_per_epoch / r.seconds : 0.0, r.seconds);
      schedule.step();
    });
    if (trainer.is_main()) {
      std::printf("transformer_lm: vocabulary %lld, %zu / %zu / %zu train / valid / test tokens, %lld parameters in "
                  "%s, batch %ld x bptt %ld, %d rank(s) x %d thread(s) on %s\n",
                  static_cast<long long>(data.vocab().size()), data.train().size(), data.valid().size(),
                  data.test().size(), static_cast<long long>(parameters), Precision::name, batch, bptt, world.size(),
                  ptrain::num_threads(), D::name);
      std::printf("a unigram model of the training split: valid ppl %.2f\n", unigram_perplexity(data));
    }
    const int epochs = static_cast<int>(cli.integer("--epochs"));
    const auto results = examples::fit_with_checkpoints(
        cli, trainer, train_loader, [&] { return trainer.fit(train_loader, &valid_loader, epochs); });
    if (examples::preempted_run()) return std::nan("");
    const ptrain::EpochTotals test = trainer.evaluate(test_loader);
    if (trainer.is_main())
      std::printf("test loss %.3f test ppl %.2f\n", test.loss(), trainer.metrics(test).at("perplexity"));
    return results.empty() ? std::nan("") : results.back().val.at("perplexity");
  });
}

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("transformer_lm", "Trains the transformer language model of PyTorch's tutorial on WikiText-2 "
                                      "(wiki.{train,valid,test}.tokens); data-parallel under mpiexec (--shard 1|2|3: ZeRO stages).");
  cli.option("--data", "wikitext-2", "directory holding wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens")
      .choice_option("--format", "tokens", {"tokens", "raw"}, "which files: wiki.*.tokens or wiki.*.raw")
      .integer_option("--emsize", 200, "embedding dimension (d_model)")
      .integer_option("--nhid", 200, "feed-forward dimension of each encoder layer")
      .integer_option("--nlayers", 2, "encoder layers")
      .integer_option("--nhead", 2, "attention heads (must divide --emsize)")
      .real_option("--dropout", "0.2", "dropout probability", 0, 1)
      .integer_option("--bptt", 35, "sequence length of a training window")
      .integer_option("--batch", 20, "columns of the training stream (split over the data-parallel replicas)")
      .integer_option("--eval-batch", 10, "columns of the validation and test streams")
      .real_option("--lr", "5.0", "SGD learning rate (the tutorial's 5.0 relies on --clip 0.5 to stay finite)", 0)
      .real_option("--gamma", "0.95", "StepLR decay of the learning rate after each epoch", 0, 1)
      .real_option("--clip", "0.5", "clip the gradients to this global L2 norm before each step (0: none)", 0)
      .integer_option("--epochs", 3, "training epochs")
      .integer_option("--seed", 0, "seed for initialisation and dropout", 0, LONG_MAX)
      .output_option("--csv", "", "per-epoch CSV log written by rank 0 (empty: none)");
  Precisions::add_option(cli);
  return examples::run_example<examples::Pipelines::with, examples::Sharding::with>(
      cli, examples::perplexity("validation perplexity"), argc, argv,
      [&]<class D>(D, ptrain::MpiComm& world, examples::DataShard shard, auto... policies) {
        constexpr bool pipelined = (requires { decltype(policies)::micro_batches; } || ...);
        return Precisions::run<pipelined>(cli, [&]<class Precision>(Precision) {
          return train<Precision, D>(cli, world, shard, policies...);
        });
      });
}
