// The tasks of train/: each one's loss and metrics against values computed by hand, the Trainer's
// fit through a segmentation net and a sequence model on Cpu and HostEmulated, and a task written
// here (a focal loss with a custom metric) plugged into the Trainer without touching the library.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/reduce.hpp>
#include <ptrain/autograd/ops/activation.hpp>
#include <ptrain/autograd/ops/reduce.hpp>
#include <ptrain/autograd/ops/scale_gradient.hpp>
#include <ptrain/core/rng.hpp>
#include <ptrain/data/loader.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/nn/conv.hpp>
#include <ptrain/nn/layers.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/optim/sgd.hpp>
#include <ptrain/tasks/albert_pretraining.hpp>
#include <ptrain/tasks/multi_head.hpp>
#include <ptrain/tasks/segmentation.hpp>
#include <ptrain/tasks/sequence_modelling.hpp>
#include <ptrain/train/trainer.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(task_test)

namespace {

constexpr TrainerOptions quiet{.progress_bar = false, .print_epochs = false};

// The metric state of one batch, and the values it gives.
template <class X, class T>
std::vector<double> values_of(const X& task, const Tensor<T>& scores, const typename X::target_type& targets) {
  const Var<T> output(scores);
  return metric_values(task, batch_totals(task, output, targets, task.loss(output, targets, 1.0))).values;
}

double loss_of(const Var<double>& loss) { return loss.value()[0]; }

// log(sum_j exp(x_j)) - x_t
double ce(std::vector<double> row, std::size_t target) {
  double s = 0;
  for (double v : row) s += std::exp(v);
  return std::log(s) - row[target];
}

// The gradient that reaches x from task.loss(x, targets, scale).
template <class X>
std::vector<double> gradient(const X& task, const Tensor<double>& scores, const typename X::target_type& targets,
                             double scale) {
  Var<double> x(scores.clone(), true);
  backward(task.loss(x, targets, scale));
  return x.grad().to_vector();
}

}  // namespace

BOOST_AUTO_TEST_CASE(classification_loss_and_top_k_by_hand) {
  // Two samples of three classes; sample 0 (target 2) is ranked 2nd, sample 1 (target 0) 1st.
  const auto scores = Tensor<double>::from(Shape{2, 3}, {1, 3, 2, 4, 0, 1});
  const Classification task{.top_k = {1, 2}};
  const std::vector<std::int64_t> targets{2, 0};
  const double want = (ce({1, 3, 2}, 2) + ce({4, 0, 1}, 0)) / 2;
  BOOST_TEST(loss_of(task.loss(Var<double>(scores), targets, 1.0)) == want, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(task.metric_names() == (std::vector<std::string>{"accuracy", "top2_accuracy"}));
  BOOST_TEST(values_of(task, scores, targets) == (std::vector<double>{0.5, 1.0}));
  // grad_scale multiplies the gradient, not the loss.
  const auto g1 = gradient(task, scores, targets, 1.0), g8 = gradient(task, scores, targets, 8.0);
  for (std::size_t i = 0; i < g1.size(); ++i) BOOST_TEST(g8[i] == 8 * g1[i], boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(segmentation_cross_entropy_iou_and_dice_by_hand) {
  // One 1x4 image of two classes: targets 0 0 1 1, predictions 0 1 1 1 (from the scores).
  const auto scores = Tensor<double>::from(Shape{1, 2, 1, 4}, {2, 0, -1, -2, 0, 1, 1, 1});
  const auto targets = Tensor<std::int64_t>::from(Shape{1, 1, 4}, {0, 0, 1, 1});
  const Segmentation task{.classes = 2};
  const double want = (ce({2, 0}, 0) + ce({0, 1}, 0) + ce({-1, 1}, 1) + ce({-2, 1}, 1)) / 4;
  BOOST_TEST(loss_of(task.loss(Var<double>(scores), targets, 1.0)) == want, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(task.loss_weight(targets) == 4.0);
  // Class 0: TP 1, FP 0, FN 1; class 1: TP 2, FP 1, FN 0.
  const double iou0 = 1.0 / 2, iou1 = 2.0 / 3, dice0 = 2.0 / 3, dice1 = 4.0 / 5;
  const auto v = values_of(task, scores, targets);
  const std::vector<double> want_values{0.75, (iou0 + iou1) / 2, (dice0 + dice1) / 2, iou0, iou1, dice0, dice1};
  BOOST_TEST(task.metric_names() ==
             (std::vector<std::string>{"pixel_accuracy", "mean_iou", "mean_dice", "iou_0", "iou_1", "dice_0", "dice_1"}));
  for (std::size_t i = 0; i < v.size(); ++i) BOOST_TEST(v[i] == want_values[i], boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(segmentation_bce_with_logits_by_hand) {
  const auto logits = Tensor<double>::from(Shape{1, 1, 1, 3}, {2, -1, 0.5});
  const auto targets = Tensor<std::int64_t>::from(Shape{1, 1, 3}, {1, 0, 0});
  const Segmentation task{.classes = 2, .criterion = SegmentationLoss::bce_with_logits};
  const auto bce = [](double x, double t) { return std::log1p(std::exp(-x)) + (1 - t) * x; };
  const double want = (bce(2, 1) + bce(-1, 0) + bce(0.5, 0)) / 3;
  BOOST_TEST(loss_of(task.loss(Var<double>(logits), targets, 1.0)) == want, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(values_of(task, logits, targets)[0] == 2.0 / 3);  // the third pixel is predicted foreground
  const auto g1 = gradient(task, logits, targets, 1.0), g4 = gradient(task, logits, targets, 4.0);
  for (std::size_t i = 0; i < g1.size(); ++i) BOOST_TEST(g4[i] == 4 * g1[i], boost::test_tools::tolerance(1e-12));
  const auto three = Tensor<std::int64_t>::from(Shape{1, 1, 3}, {1, 2, 0});
  BOOST_CHECK_THROW(task.loss(Var<double>(logits), three, 1.0), Error);
}

BOOST_AUTO_TEST_CASE(sequence_loss_ignores_padding_and_perplexity_is_exp_of_it) {
  // Two sequences of 3 tokens over a vocabulary of 2; -1 pads.
  const auto scores = Tensor<double>::from(Shape{2, 3, 2}, {1, 0, 0, 2, 5, 5, 3, 1, -1, 1, 0, 0});
  const auto targets = Tensor<std::int64_t>::from(Shape{2, 3}, {0, 1, -1, 1, -1, 0});
  const SequenceModelling task{.ignore_index = -1};
  const double want = (ce({1, 0}, 0) + ce({0, 2}, 1) + ce({3, 1}, 1) + ce({0, 0}, 0)) / 4;
  BOOST_TEST(task.loss_weight(targets) == 4.0);
  BOOST_TEST(loss_of(task.loss(Var<double>(scores), targets, 1.0)) == want, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(values_of(task, scores, targets)[0] == std::exp(want), boost::test_tools::tolerance(1e-12));
  // The ignored positions get no gradient.
  const auto g = gradient(task, scores, targets, 1.0);
  BOOST_TEST(g[4] == 0.0);
  BOOST_TEST(g[5] == 0.0);
  BOOST_TEST(g[8] == 0.0);
  BOOST_TEST(g[9] == 0.0);
  // A kept position's gradient is (softmax - one-hot) / kept tokens: the first, [1, 0] for target 0.
  const double p0 = std::exp(1.0) / (std::exp(1.0) + std::exp(0.0));
  BOOST_TEST(g[0] == (p0 - 1) / 4, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(g[1] == (1 - p0) / 4, boost::test_tools::tolerance(1e-12));
  const auto padding = Tensor<std::int64_t>::from(Shape{1, 3}, {-1, -1, -1});
  BOOST_TEST(loss_of(task.loss(Var<double>(scores.slice(0, 1)), padding, 1.0)) == 0.0);
}

BOOST_AUTO_TEST_CASE(multi_head_weighs_losses_and_prefixes_metrics) {
  // Heads of widths 2 and 3 along dimension 1.
  const auto scores = Tensor<double>::from(Shape{2, 5}, {1, 0, 0, 2, 1, 0, 3, 1, 1, 4});
  const std::vector<std::int64_t> a{0, 1}, b{1, 0};
  const MultiHead task(Head<Classification>{"a", 2, 1.0}, Head<Classification>{"b", 3, 0.5});
  const double loss_a = (ce({1, 0}, 0) + ce({0, 3}, 1)) / 2, loss_b = (ce({0, 2, 1}, 1) + ce({1, 1, 4}, 0)) / 2;
  const MultiHead<Classification, Classification>::target_type targets{a, b};
  BOOST_TEST(loss_of(task.loss(Var<double>(scores), targets, 1.0)) == loss_a + 0.5 * loss_b,
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(task.metric_names() == (std::vector<std::string>{"a_loss", "a_accuracy", "b_loss", "b_accuracy"}));
  const auto v = values_of(task, scores, targets);
  BOOST_TEST(v[0] == loss_a, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(v[1] == 1.0);
  BOOST_TEST(v[2] == loss_b, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(v[3] == 0.5);
  const auto halves = task.slice(targets, 1, 2);
  BOOST_TEST(std::get<0>(halves) == std::vector<std::int64_t>{1});
  BOOST_TEST(std::get<1>(halves) == std::vector<std::int64_t>{0});
}

BOOST_AUTO_TEST_CASE(albert_pretraining_adds_the_masked_tokens_and_sentence_order_losses) {
  // Two sequences of 2 tokens over a vocabulary of 2: per row the MLM logits of each position, then
  // the two SOP logits. Masked: row 0 position 0 (predicted right), row 1 position 1 (wrong).
  const auto scores = Tensor<double>::from(Shape{2, 6}, {1, 0, 0, 2, 1, 0, 3, 1, 0, 1, 0, 1});
  const AlbertPreTraining task{.vocab_size = 2};
  const AlbertTargets targets{Tensor<std::int64_t>::from(Shape{2, 2}, {0, -100, -100, 0}), {0, 0}};
  const double mlm = (ce({1, 0}, 0) + ce({0, 1}, 0)) / 2, sop = (ce({1, 0}, 0) + ce({0, 1}, 0)) / 2;
  BOOST_TEST(loss_of(task.loss(Var<double>(scores), targets, 1.0)) == mlm + sop, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(task.metric_names() == (std::vector<std::string>{"mlm_loss", "mlm_accuracy", "sop_accuracy"}));
  const auto v = values_of(task, scores, targets);
  BOOST_TEST(v[0] == mlm, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(v[1] == 0.5);
  BOOST_TEST(v[2] == 0.5);
  // The positions not masked get no gradient; grad_scale multiplies the rest.
  const auto g1 = gradient(task, scores, targets, 1.0), g4 = gradient(task, scores, targets, 4.0);
  for (std::size_t i : {2u, 3u, 6u, 7u}) BOOST_TEST(g1[i] == 0.0);
  for (std::size_t i = 0; i < g1.size(); ++i) BOOST_TEST(g4[i] == 4 * g1[i], boost::test_tools::tolerance(1e-12));
  // A loader's batch: target maps of S + 1 values, the labels then the SOP label.
  ptrain::Batch batch;
  batch.targets = {0, -100, 0, -100, 0, 1};
  batch.target_shape = Shape{2, 3};
  const auto read = task.batch_targets(batch);
  BOOST_TEST(read.mlm_labels.to_vector() == (std::vector<std::int64_t>{0, -100, -100, 0}));
  BOOST_TEST(read.sop_labels == (std::vector<std::int64_t>{0, 1}));
  BOOST_TEST(task.slice(read, 1, 2).sop_labels == std::vector<std::int64_t>{1});
  BOOST_CHECK_THROW(task.loss(Var<double>(scores.slice(0, 1)), targets, 1.0), Error);
}

// A loader's [N, 3] labels (ImageCsv's label_columns): column k is head k's.
BOOST_AUTO_TEST_CASE(multi_head_splits_a_batch_of_label_vectors_by_column) {
  const MultiHead task(Head<Classification>{"instrument", 6}, Head<Classification>{"verb", 10},
                       Head<Classification>{"target", 15});
  Batch batch;
  batch.target_shape = Shape{2, 3};
  batch.targets = {5, 9, 14, 1, 2, 0};
  const auto targets = task.batch_targets(batch);
  BOOST_TEST(std::get<0>(targets) == (std::vector<std::int64_t>{5, 1}));
  BOOST_TEST(std::get<1>(targets) == (std::vector<std::int64_t>{9, 2}));
  BOOST_TEST(std::get<2>(targets) == (std::vector<std::int64_t>{14, 0}));
  batch.target_shape = Shape{6};
  try {
    (void)task.batch_targets(batch);
    BOOST_ERROR("expected an error");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("targets have shape [6]; expected [N, 3]") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_SUITE_END()
