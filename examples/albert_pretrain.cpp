// ALBERT pre-training (Lan et al., 2019) as the project ptrain replaces ran it: a WordPiece
// vocabulary (a BERT/ALBERT vocab.txt, --vocab) or ALBERT's own SentencePiece model (spiece.model,
// --spm-model; data/sentencepiece.hpp, in a build with libsentencepiece), a WikiText raw file as
// the corpus (one article per document), sentence-order pairs packed to --max-seq-len and masked afresh each epoch
// (data/pretraining_batches.hpp), AlbertForPreTraining with HuggingFace's names (models/albert.hpp;
// one layer shared by --layers applications, a factorised embedding of --embedding), its two losses
// (tasks/albert_pretraining.hpp), LAMB with weight decay skipping LayerNorm and biases, the rate
// warmed up over --warmup-steps and decayed linearly to 0 at --steps. The run counts steps: every
// --log-every steps it prints the MLM loss, MLM accuracy and SOP accuracy of those steps (a
// "period", which the Trainer runs as an epoch: a --csv row and a checkpoint each), and at the end
// rank 0 writes the weights under HuggingFace's names (--out, safetensors), which --init reads
// back. The pairs are cut to whole batches (BERT's drop_remainder). One process, or data-parallel
// under mpiexec: rank r of R takes a contiguous 1/R of every batch's rows, so R ranks train on the
// serial run's batches with averaged gradients (--shard 1|2|3: ZeRO's sharded optimizer state, the
// gradients too, the parameters too). --stages S cuts the model into S pipeline stages
// (AlbertForPreTrainingSequential; with more ranks than stages, a data x pipeline grid): the stages
// the shared layer's applications fall on each hold a copy of it, as the first and last stages do
// of the word embedding (the MLM decoder is tied to it), and the copies' gradients are summed over
// them before each step; rank 0 gathers the stages' layers to write --out.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include <ptrain/data/pretraining_batches.hpp>
#ifdef PTRAIN_HAS_SENTENCEPIECE
#include <ptrain/data/sentencepiece.hpp>
#endif
#include <ptrain/data/wordpiece.hpp>
#include <ptrain/models/albert.hpp>
#include <ptrain/mpi.hpp>
#include <ptrain/nn/state_dict.hpp>
#include <ptrain/optim/lamb.hpp>
#include <ptrain/optim/schedule.hpp>
#include <ptrain/optim/scheduler.hpp>
#include <ptrain/tasks/albert_pretraining.hpp>

#include "common/cli.hpp"
#include "common/run.hpp"

namespace {

namespace fs = std::filesystem;

ptrain::AlbertConfig albert_config(const examples::Cli& cli, std::int64_t vocab_size) {
  ptrain::AlbertConfig c = ptrain::AlbertConfig::small(vocab_size);
  c.embedding_size = cli.integer("--embedding");
  c.hidden_size = cli.integer("--hidden");
  c.num_hidden_layers = cli.integer("--layers");
  c.num_attention_heads = cli.integer("--heads");
  c.intermediate_size = 4 * c.hidden_size;  // albert-base's ratio, 3072 / 768
  c.max_position_embeddings = std::max<std::int64_t>(512, cli.integer("--max-seq-len"));
  ptrain::check(c.hidden_size % c.num_attention_heads == 0, "--hidden ", c.hidden_size,
                " must divide by --heads ", c.num_attention_heads);
  return c;
}

// Returns the last logged MLM loss over the first (1 with a single period).
template <class P>
concept CutsTheModel = requires(P& p) { p.pipeline_grid(); };
template <class P>
concept MayShardTheParameters = requires { requires P::may_shard_parameters; };

struct TokenizedCorpus {
  std::vector<ptrain::SentenceOrderPair> pairs;
  ptrain::SpecialTokenIds special;
};

// --corpus's sentence-order pairs in the ids of --vocab's WordPiece or --spm-model's SentencePiece.
TokenizedCorpus tokenized_corpus(const examples::Cli& cli, const ptrain::SentenceOrderOptions& options) {
  const std::string vocab = cli.str("--vocab"), spm_model = cli.str("--spm-model");
  ptrain::check(!vocab.empty() || !spm_model.empty(),
                "no vocabulary: give --vocab FILE (a WordPiece vocab.txt) or --spm-model FILE (a SentencePiece "
                ".model such as ALBERT's spiece.model)");
  ptrain::check(vocab.empty() || spm_model.empty(), "--vocab ", vocab, " and --spm-model ", spm_model,
                " both given: expected one vocabulary, a WordPiece vocab.txt or a SentencePiece model");
  const fs::path corpus = cli.str("--corpus");
  const auto pairs_of = [&](const ptrain::PretrainingTokenizer auto& tokenizer) {
    return TokenizedCorpus{ptrain::sentence_order_pairs(corpus, tokenizer, options), tokenizer.special_ids()};
  };
  if (spm_model.empty()) return pairs_of(ptrain::WordPieceTokenizer(fs::path(vocab)));
#ifdef PTRAIN_HAS_SENTENCEPIECE
  return pairs_of(ptrain::SentencePieceTokenizer(fs::path(spm_model)));
#else
  ptrain::fail("--spm-model ", spm_model, ": this build has no SentencePiece library: install libsentencepiece-dev ",
               "and build again (ptrain::sentencepiece), or give a WordPiece --vocab");
#endif
}

template <class D, class... Policies>
double train(const examples::Cli& cli, ptrain::MpiComm& world, examples::DataShard shard, Policies... policies) {
  // A pipeline cuts a Sequential, and Zero3 gathers the parameters of one of its layers at a time.
  constexpr bool sequential = (... || (CutsTheModel<Policies> || MayShardTheParameters<Policies>));
  using Net = std::conditional_t<sequential, ptrain::AlbertForPreTrainingSequential<float, D>,
                                 ptrain::AlbertForPreTraining<float, D>>;
  const auto seed = static_cast<std::uint64_t>(cli.integer("--seed"));
  ptrain::manual_seed(seed);

  const long max_len = cli.integer("--max-seq-len"), batch = cli.integer("--batch");
  const long steps = cli.integer("--steps"), warmup = cli.integer("--warmup-steps");
  ptrain::check(warmup <= steps, "--warmup-steps ", warmup, " is more than --steps ", steps);
  ptrain::check(batch % shard.count == 0, "--batch ", batch, " (the global batch of sequences) must divide by the ",
                shard.count, " data-parallel replicas");
  auto [pairs, special] = tokenized_corpus(cli, {.max_seq_len = max_len, .seed = seed});
  const std::size_t pair_count = pairs.size();
  ptrain::check(pair_count >= static_cast<std::size_t>(batch), cli.str("--corpus"), ": ", pair_count,
                " sentence-order pairs, fewer than one --batch of ", batch);
  pairs.resize(pair_count / static_cast<std::size_t>(batch) * static_cast<std::size_t>(batch));
  ptrain::PretrainingSteps run(ptrain::PretrainingLoader(std::move(pairs), special,
                                                         {.batch_size = batch,
                                                          .max_seq_len = max_len,
                                                          .seed = seed,
                                                          .rank = shard.index,
                                                          .ranks = shard.count}),
                               steps, cli.integer("--log-every"));

  const ptrain::AlbertConfig config = albert_config(cli, special.vocab_size);
  auto model = std::make_shared<Net>(config);
  if (const std::string init = cli.str("--init"); !init.empty()) ptrain::load_state_dict(*model, init);
  const double lr = cli.real("--lr");
  auto lamb = std::make_shared<ptrain::Lamb<float, D>>(
      model->named_parameters(), ptrain::LambOptions{.lr = lr, .weight_decay = cli.real("--weight-decay")});
  ptrain::TrainerOptions options = examples::trainer_options(cli);
  options.print_epochs = false;  // the lines below, one per period
  ptrain::Trainer<Net, ptrain::AlbertPreTraining, Policies...> trainer(
      model, lamb, options, ptrain::AlbertPreTraining{.vocab_size = config.vocab_size}, policies...);
  ptrain::Scheduler schedule(*lamb,
                             ptrain::WarmupLinearDecay{.base_lr = lr, .warmup_steps = warmup, .total_steps = steps});
  trainer.checkpoint_scheduler(schedule);
  trainer.on_step_end([&](std::int64_t) { schedule.step(); });
  double first_loss = std::nan(""), last_loss = std::nan("");
  trainer.on_epoch_end([&](const ptrain::EpochResult& r) {
    last_loss = r.train.at("mlm_loss");
    if (std::isnan(first_loss)) first_loss = last_loss;
    if (trainer.is_main())
      std::printf("step %6lld | lr %.3g | mlm loss %.4f | mlm accuracy %.4f | sop accuracy %.4f | %.0f sequences/s\n",
                  static_cast<long long>(trainer.global_step()), r.lr, last_loss, r.train.at("mlm_accuracy"),
                  r.train.at("sop_accuracy"), r.images_per_second);
  });
  if (trainer.is_main())
    std::printf("albert_pretrain: vocabulary %lld, %zu sentence-order pairs (%zu in whole batches) of at most %ld "
                "tokens, E %lld H %lld, %lld layers, %lld heads, %lld parameters, batch %ld, %ld steps, %d rank(s) "
                "x %d thread(s) on %s\n",
                static_cast<long long>(config.vocab_size), pair_count, run.loader().pairs().size(), max_len,
                static_cast<long long>(config.embedding_size), static_cast<long long>(config.hidden_size),
                static_cast<long long>(config.num_hidden_layers), static_cast<long long>(config.num_attention_heads),
                static_cast<long long>(model->parameter_count()), batch, steps, world.size(), ptrain::num_threads(),
                D::name);
  examples::fit_with_checkpoints(cli, trainer, run, [&] { return trainer.fit(run, run.periods()); });
  if (examples::preempted_run()) return std::nan("");
  if (const std::string out = cli.str("--out"); !out.empty()) {
    const auto gather = [&]<class P>(P& policy) {
      if constexpr (CutsTheModel<P>) policy.gather_model(*model);
      if constexpr (MayShardTheParameters<P>)
        if (policy.shards_parameters()) policy.gather_parameters();
    };
    (gather(trainer.template policy<Policies>()), ...);
    if (trainer.is_main()) {
      ptrain::save_state_dict(*model, out);
      std::printf("wrote the weights under HuggingFace's names to %s\n", out.c_str());
    }
  }
  // A resumed run logs no first period of its own: its ratio is its own periods'.
  return last_loss / first_loss;
}

}  // namespace

int main(int argc, char** argv) {
  examples::Cli cli("albert_pretrain", "Pre-trains ALBERT (masked language modelling and sentence-order prediction) "
                                       "on a WikiText raw file with a WordPiece vocab.txt or a SentencePiece model; "
                                       "data-parallel under mpiexec, sharded (--shard) or in pipeline stages "
                                       "(--stages).");
  cli.option("--vocab", "", "a BERT/ALBERT WordPiece vocabulary, one token per line ([PAD] [UNK] [CLS] [SEP] "
                            "[MASK] among them); give it or --spm-model")
      .option("--spm-model", "", "a SentencePiece model (ALBERT's spiece.model: <pad> <unk> [CLS] [SEP] [MASK]), "
                                 "text lower-cased and accents stripped first as ALBERT's tokenizer does; "
                                 "instead of --vocab (needs a build with libsentencepiece)")
      .option("--corpus", "wikitext-2-raw/wiki.train.raw", "a WikiText raw file: each article one document")
      .integer_option("--max-seq-len", 128, "tokens of a sequence: [CLS] A [SEP] B [SEP], padded", 5, 1 << 20)
      .integer_option("--batch", 8, "sequences per step (split over the data-parallel replicas)")
      .real_option("--lr", "0.00176", "LAMB's peak learning rate (ALBERT's for a batch of 4096)", 0)
      .real_option("--weight-decay", "0.01", "LAMB's decoupled weight decay (not on LayerNorm or biases)", 0)
      .integer_option("--warmup-steps", 100, "steps over which the rate climbs linearly from 0 to --lr", 0)
      .integer_option("--steps", 1000, "optimizer steps; the rate falls linearly to 0 at the last")
      .integer_option("--layers", 4, "applications of the one shared transformer layer")
      .integer_option("--hidden", 128, "hidden size H (the feed-forward size is 4 H)")
      .integer_option("--embedding", 64, "embedding size E (factorised: vocabulary -> E -> H)")
      .integer_option("--heads", 4, "attention heads (must divide --hidden)")
      .integer_option("--seed", 0, "seed for the pairs, the masking, initialisation and dropout", 0, LONG_MAX)
      .integer_option("--log-every", 100, "steps per logged line (and --csv row, and checkpoint)")
      .option("--init", "", "a safetensors file of HuggingFace's AlbertForPreTraining names to start from "
                            "(an earlier run's --out, say; empty: initialise as HuggingFace does)")
      .output_option("--out", "albert_pretrain.safetensors",
                     "where rank 0 writes the trained weights under HuggingFace's names (empty: nowhere)")
      .output_option("--csv", "", "CSV log written by rank 0, one row per --log-every steps (empty: none)");
  const examples::FinalMetric metric{"--max-mlm-loss-ratio", "ratio of the last logged MLM loss to the first", "",
                                     true, {.name = "train_mlm_loss"}};
  return examples::run_example<examples::Pipelines::with, examples::Sharding::with>(
      cli, metric, argc, argv, [&]<class D>(D, ptrain::MpiComm& world, examples::DataShard shard, auto... policies) {
        return train<D>(cli, world, shard, policies...);
      });
}
