// Trainer::fit through tasks other than classification: a per-pixel segmentation net and a
// next-token model, on Cpu and on HostEmulated (the GPU algorithms run on the host), the two
// devices giving the same epochs; and a task written here, outside the library (a focal loss and a
// recall metric), plugged into the Trainer.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <ptrain/autograd/gradcheck.hpp>
#include <ptrain/autograd/ops/shape.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/models/albert.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/tasks/albert_pretraining.hpp>
#include <ptrain/tasks/segmentation.hpp>
#include <ptrain/tasks/sequence_modelling.hpp>
#include <ptrain/train/trainer.hpp>

#include "../common/compare.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(task_fit_test)

namespace {

constexpr TrainerOptions quiet{.progress_bar = false, .print_epochs = false};

template <class Targets>
struct Batch {
  Tensor<float> inputs;
  Targets targets;
};
template <class Targets>
struct Loader {
  std::vector<Batch<Targets>> batches;
  void set_epoch(int) {}
  std::size_t size() const { return batches.size(); }
  auto begin() const { return batches.begin(); }
  auto end() const { return batches.end(); }
};

// Images [4, 1, 6, 6] of noise; the foreground is where a pixel is above 0.3.
Loader<Tensor<std::int64_t>> masks(int batches, std::uint64_t seed) {
  Rng rng(seed);
  Loader<Tensor<std::int64_t>> loader;
  for (int b = 0; b < batches; ++b) {
    Batch<Tensor<std::int64_t>> batch{Tensor<float>({4, 1, 6, 6}), Tensor<std::int64_t>({4, 6, 6})};
    for (std::int64_t i = 0; i < batch.inputs.numel(); ++i) {
      batch.inputs[i] = static_cast<float>(rng.normal());
      batch.targets[i] = batch.inputs[i] > 0.3f;
    }
    loader.batches.push_back(batch);
  }
  return loader;
}

// Sequences [4, 5] of one-hot tokens over a vocabulary of 4; the next token is the current one plus
// one. The last position has no next token: ignored.
constexpr std::int64_t vocabulary = 4, ignored = -1;
Loader<Tensor<std::int64_t>> sequences(int batches, std::uint64_t seed) {
  Rng rng(seed);
  Loader<Tensor<std::int64_t>> loader;
  for (int b = 0; b < batches; ++b) {
    Batch<Tensor<std::int64_t>> batch{Tensor<float>::zeros({4, 5, vocabulary}), Tensor<std::int64_t>({4, 5})};
    for (std::int64_t s = 0; s < 4; ++s) {
      auto token = static_cast<std::int64_t>(rng.below(vocabulary));
      for (std::int64_t p = 0; p < 5; ++p, token = (token + 1) % vocabulary) {
        batch.inputs[(s * 5 + p) * vocabulary + token] = 1;
        batch.targets[s * 5 + p] = p == 4 ? ignored : (token + 1) % vocabulary;
      }
    }
    loader.batches.push_back(batch);
  }
  return loader;
}

// [N, L, V] -> a Linear on every position -> [N, L, V].
template <class D>
struct TokenModel : Module<float, D> {
  std::shared_ptr<Linear<float, D>> project;
  TokenModel() { project = this->register_module("project", std::make_shared<Linear<float, D>>(vocabulary, vocabulary)); }
  Var<float, D> forward(const Var<float, D>& x) override {
    const Shape s = x.shape();
    return reshape(project->forward(reshape(x, {s[0] * s[1], s[2]})), s);
  }
};

template <class D, class Model, class TaskType, class Data>
std::vector<EpochResult> fit_on(std::shared_ptr<Model> model, TaskType task, Data& train, Data& val, double lr) {
  auto sgd = std::make_shared<Sgd<float, D>>(model->parameters(), SgdOptions{.lr = lr, .momentum = 0.9});
  Trainer<Model, TaskType> trainer(model, sgd, quiet, task);
  return trainer.fit(train, &val, 4);
}

// Segmentation on D, from the same initial weights on every device.
template <class D>
std::vector<EpochResult> fit_segmentation() {
  manual_seed(5);
  auto model = std::make_shared<Sequential<float, D>>();
  model->push_back("conv", std::make_shared<Conv2d<float, D>>(1, 2, 1));
  auto train = masks(8, 1), val = masks(2, 2);
  return fit_on<D>(model, Segmentation{.classes = 2}, train, val, 0.5);
}

template <class D>
std::vector<EpochResult> fit_sequences() {
  manual_seed(6);
  auto model = std::make_shared<TokenModel<D>>();
  auto train = sequences(8, 3), val = sequences(2, 4);
  return fit_on<D>(model, SequenceModelling{.ignore_index = ignored}, train, val, 1.0);
}

// ALBERT pre-training batches [4, 3, 8] over a vocabulary of 12 (0 pads, 1 is [MASK], 2..11 the
// words): each sequence counts up (SOP label 0) or down (1) from a random word, positions 2 and 5
// masked; the last sequence of a batch is padded after 6 tokens.
constexpr std::int64_t albert_vocabulary = 12, albert_length = 8;
Loader<AlbertTargets> albert_batches(int batches, std::uint64_t seed) {
  Rng rng(seed);
  Loader<AlbertTargets> loader;
  for (int b = 0; b < batches; ++b) {
    std::vector<std::int64_t> ids, types, mask;
    AlbertTargets targets{Tensor<std::int64_t>::full({4, albert_length}, -100), {}};
    for (std::int64_t s = 0; s < 4; ++s) {
      const auto start = static_cast<std::int64_t>(rng.below(10));
      const std::int64_t down = static_cast<std::int64_t>(rng.below(2));
      targets.sop_labels.push_back(down);
      for (std::int64_t p = 0; p < albert_length; ++p) {
        const bool padded = s == 3 && p >= 6;
        const std::int64_t word = 2 + ((start + (down ? 10 - p : p)) % 10);
        const bool masked = p == 2 || p == 5;
        ids.push_back(padded ? 0 : masked ? 1 : word);
        types.push_back(p < albert_length / 2 ? 0 : 1);
        mask.push_back(padded ? 0 : 1);
        if (masked) targets.mlm_labels[s * albert_length + p] = word;
      }
    }
    loader.batches.push_back({albert_inputs<float>(ids, types, mask, 4, albert_length), targets});
  }
  return loader;
}

template <class D>
std::vector<EpochResult> fit_albert() {
  manual_seed(7);
  AlbertConfig c = AlbertConfig::small(albert_vocabulary);
  c.embedding_size = 8;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 32;
  c.max_position_embeddings = albert_length;
  c.classifier_dropout_prob = 0.0;
  auto model = std::make_shared<AlbertForPreTraining<float, D>>(c);
  auto train = albert_batches(8, 5), val = albert_batches(2, 6);
  return fit_on<D>(model, AlbertPreTraining{.vocab_size = albert_vocabulary}, train, val, 0.1);
}

// Losses agree within 1e-4 relative (the devices' training runs part in their last bits) plus an
// absolute 2 * eps: a loss near 0 is -log of a float sum of exponentials near 1, so each side is
// only known to about eps (eps / 2 for that sum, as much for the log and the mean over batches)
// however small the loss: at a loss of 1e-3 that alone is 1e-4 relative, on any host.
bool same_loss(double x, double y) {
  return std::abs(x - y) <= 1e-4 * std::max(std::abs(x), std::abs(y)) + 2 * test::arithmetic_epsilon<float>;
}

void same_epochs(const std::vector<EpochResult>& a, const std::vector<EpochResult>& b) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  for (std::size_t e = 0; e < a.size(); ++e) {
    BOOST_TEST(same_loss(a[e].train_loss, b[e].train_loss),
               "epoch " << e << " train loss " << a[e].train_loss << " against " << b[e].train_loss);
    BOOST_TEST(same_loss(a[e].val_loss, b[e].val_loss),
               "epoch " << e << " validation loss " << a[e].val_loss << " against " << b[e].val_loss);
    BOOST_TEST(a[e].val.names == b[e].val.names);
    for (std::size_t i = 0; i < a[e].val.values.size(); ++i)
      BOOST_TEST(a[e].val.values[i] == b[e].val.values[i], boost::test_tools::tolerance(1e-4));
  }
}

// A focal loss (Lin et al. 2017) on one logit per sample, written outside the library as an
// autograd op on the CPU: -(1 - p_t)^gamma log p_t, p_t = sigmoid(z), z = x for target 1, -x for 0.
template <class T>
Var<T> focal_loss(const Var<T>& logits, const std::vector<std::int64_t>& targets, double gamma, double grad_scale) {
  const auto n = static_cast<std::int64_t>(targets.size());
  check(logits.numel() == n, "focal_loss: ", logits.numel(), " logits for ", n, " targets");
  const auto sign = [targets](std::int64_t i) { return targets[static_cast<std::size_t>(i)] == 1 ? 1.0 : -1.0; };
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double p = 1 / (1 + std::exp(-sign(i) * static_cast<double>(logits.value()[i])));
    total -= std::pow(1 - p, gamma) * std::log(p);
  }
  return make_var<T>(Tensor<T>::full(Shape{}, static_cast<T>(total / n)), {logits}, "focal_loss",
                     [sign, n, gamma, grad_scale](Node<T>& self) {
                       const Tensor<T>& x = self.inputs[0]->value;
                       Tensor<T> gx(x.shape());
                       for (std::int64_t i = 0; i < n; ++i) {
                         const double p = 1 / (1 + std::exp(-sign(i) * static_cast<double>(x[i])));
                         const double dz = gamma * p * std::pow(1 - p, gamma) * std::log(p) - std::pow(1 - p, gamma + 1);
                         gx[i] = static_cast<T>(dz * sign(i) * self.grad[0] * grad_scale / n);
                       }
                       self.inputs[0]->accumulate(std::move(gx));
                     });
}

// The task: the focal loss, and the recall of class 1 (a metric the library does not have).
struct FocalRecall {
  using target_type = std::vector<std::int64_t>;
  double gamma = 2;
  std::int64_t rows(const target_type& t) const { return static_cast<std::int64_t>(t.size()); }
  target_type slice(const target_type& t, std::int64_t begin, std::int64_t end) const {
    return {t.begin() + begin, t.begin() + end};
  }
  double loss_weight(const target_type& t) const { return static_cast<double>(t.size()); }
  template <class T>
  Var<T> loss(const Var<T>& output, const target_type& t, double grad_scale) const {
    return focal_loss(output, t, gamma, grad_scale);
  }
  std::size_t state_size() const { return 2; }  // [true positives, positives]
  template <class T>
  void accumulate(const Tensor<T>& logits, const target_type& t, double, std::span<double> state) const {
    for (std::size_t i = 0; i < t.size(); ++i)
      if (t[i] == 1) state[0] += logits[static_cast<std::int64_t>(i)] > 0, state[1] += 1;
  }
  std::vector<std::string> metric_names() const { return {"recall"}; }
  std::vector<double> metric_values(std::span<const double> state) const {
    return {state[1] > 0 ? state[0] / state[1] : std::nan("")};
  }
};
static_assert(Task<FocalRecall, double, Cpu>);

// Blobs of two classes: class 1 where the first coordinate is positive.
Loader<std::vector<std::int64_t>> blobs(int batches, std::uint64_t seed) {
  Rng rng(seed);
  Loader<std::vector<std::int64_t>> loader;
  for (int b = 0; b < batches; ++b) {
    Batch<std::vector<std::int64_t>> batch{Tensor<float>({16, 2}), {}};
    for (std::int64_t i = 0; i < 16; ++i) {
      const auto label = static_cast<std::int64_t>(rng.below(2));
      batch.inputs[2 * i] = static_cast<float>((label ? 2.0 : -2.0) + rng.normal(0, 0.5));
      batch.inputs[2 * i + 1] = static_cast<float>(rng.normal());
      batch.targets.push_back(label);
    }
    loader.batches.push_back(batch);
  }
  return loader;
}

}  // namespace

BOOST_AUTO_TEST_CASE(segmentation_net_learns_through_fit_on_cpu_and_host_emulated) {
  const auto cpu = fit_segmentation<Cpu>();
  BOOST_TEST(cpu.back().train_loss < cpu.front().train_loss);
  BOOST_TEST(cpu.back().val.at("pixel_accuracy") > 0.95);
  BOOST_TEST(cpu.back().val.at("iou_1") > 0.8);
  same_epochs(fit_segmentation<HostEmulated>(), cpu);
}

BOOST_AUTO_TEST_CASE(sequence_model_learns_through_fit_on_cpu_and_host_emulated) {
  const auto cpu = fit_sequences<Cpu>();
  BOOST_TEST(cpu.back().train_loss < cpu.front().train_loss);
  // exp of the mean token loss over the 16 predicted tokens per batch.
  BOOST_TEST(cpu.back().val.at("perplexity") == std::exp(cpu.back().val_loss), boost::test_tools::tolerance(1e-9));
  BOOST_TEST(cpu.back().val.at("perplexity") < 1.5);
  same_epochs(fit_sequences<HostEmulated>(), cpu);
}

BOOST_AUTO_TEST_CASE(albert_pretrains_through_fit_on_cpu_and_host_emulated) {
  const auto cpu = fit_albert<Cpu>();
  for (const auto& e : cpu)
    BOOST_TEST_MESSAGE("epoch " << e.epoch << " loss " << e.train_loss << " val mlm_loss " << e.val.at("mlm_loss")
                                << " mlm_accuracy " << e.val.at("mlm_accuracy") << " sop_accuracy "
                                << e.val.at("sop_accuracy"));
  BOOST_TEST(cpu.back().train_loss < cpu.front().train_loss);
  BOOST_TEST(cpu.back().val.at("mlm_loss") < cpu.front().val.at("mlm_loss"));
  same_epochs(fit_albert<HostEmulated>(), cpu);
}

BOOST_AUTO_TEST_CASE(custom_focal_loss_gradient_matches_finite_differences) {
  const std::vector<std::int64_t> targets{1, 0, 1, 0, 1};
  const auto r = gradcheck([&](const auto& v) { return focal_loss(v[0], targets, 2.0, 1.0); }, {random_tensor({5, 1}, 4, -3, 3)});
  BOOST_TEST(r.ok, r.report);
}

BOOST_AUTO_TEST_CASE(custom_task_trains_and_logs_its_metric) {
  manual_seed(7);
  auto model = std::make_shared<Sequential<double>>();
  model->push_back("linear", std::make_shared<Linear<double>>(2, 1));
  auto sgd = std::make_shared<Sgd<double>>(model->parameters(), SgdOptions{.lr = 0.5});
  const auto csv = std::filesystem::temp_directory_path() / "ptrain_task_fit_test.csv";
  Trainer<Sequential<double>, FocalRecall> trainer(model, sgd, {.csv_log = csv.string(), .progress_bar = false,
                                                                .print_epochs = false},
                                                   FocalRecall{.gamma = 2});
  auto train = blobs(10, 1), val = blobs(3, 2);
  const auto results = trainer.fit(train, &val, 3);
  BOOST_TEST(results.back().train_loss < results.front().train_loss);
  BOOST_TEST(results.back().val.at("recall") > 0.95);
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  BOOST_TEST(header == "epoch,train_loss,train_recall,val_loss,val_recall,images_per_second,seconds,lr");
  std::filesystem::remove(csv);
}

BOOST_AUTO_TEST_SUITE_END()
