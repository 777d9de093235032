// Metrics against hand-computed counts: top-k with ties, the confusion matrix with an ignored
// label and an absent class, IoU and Dice, scores of a device model (HostEmulated), and reduction
// over a world of one.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <ptrain/autograd/ops/accuracy.hpp>
#include <ptrain/autograd/variable.hpp>
#include <ptrain/comm/self_comm.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/tasks/metrics.hpp>

#include "../common/files.hpp"

using namespace ptrain;
using test::contains;
using test::error_of;

BOOST_AUTO_TEST_SUITE(metrics_test)

namespace {

// Rank of each target: 0; 1 (0.4 above); 2 (0.5 above, 0.2 tied at a smaller index); 2 (0.9
// above, 0.05 tied at a smaller index).
const Tensor<float> scores = Tensor<float>::from({4, 4}, {0.1f, 0.5f, 0.2f, 0.2f,  //
                                                          0.3f, 0.1f, 0.4f, 0.2f,  //
                                                          0.2f, 0.2f, 0.1f, 0.5f,  //
                                                          0.9f, 0.0f, 0.05f, 0.05f});
const std::vector<std::int64_t> targets{1, 0, 1, 3};

// 4 classes, class 3 in neither targets nor predictions, one void pixel (255). Rows target:
//   [[2, 1, 0, 0], [0, 1, 1, 0], [1, 0, 3, 0], [0, 0, 0, 0]]
const std::vector<std::int64_t> seg_targets{0, 0, 0, 1, 1, 2, 2, 2, 2, 255};
const std::vector<std::int64_t> seg_predicted{0, 0, 1, 1, 2, 2, 2, 0, 2, 1};

ConfusionMatrix example_matrix() {
  ConfusionMatrix m(4, 255);
  m.update(seg_predicted, seg_targets);
  return m;
}

}  // namespace

// torch.topk's order: NaN above every number, NaNs among themselves by class index, so top-1
// agrees with argmax (which NaN scores made count as correct for any target).
BOOST_AUTO_TEST_CASE(top_k_ranks_nan_above_every_score) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor<float> nan_scores = Tensor<float>::from({3, 3}, {nan, 1, 2,    //
                                                                nan, 1, 2,    //
                                                                nan, nan, 0});
  const std::vector<std::int64_t> nan_targets{0, 2, 1};  // ranks 0, 1 and 1
  TopKAccuracy acc({1, 2});
  acc.update(nan_scores, nan_targets);
  BOOST_TEST(acc.correct(1) == 1);
  BOOST_TEST(acc.correct(2) == 3);
  BOOST_TEST(acc.correct(1) == top1_correct(nan_scores, nan_targets));
}

BOOST_AUTO_TEST_CASE(top_k_counts_with_ties_broken_by_class_index) {
  TopKAccuracy acc({1, 2, 3, 5});
  acc.update(scores, targets);
  BOOST_TEST(acc.samples() == 4);
  BOOST_TEST(acc.correct(1) == 1);
  BOOST_TEST(acc.correct(2) == 2);
  BOOST_TEST(acc.correct(3) == 4);
  BOOST_TEST(acc.correct(5) == 4);  // k above the class count: every sample
  BOOST_TEST(acc.accuracy(2) == 0.5);
  BOOST_TEST(acc.correct(1) == top1_correct(scores, targets));  // the same tie rule as argmax
  acc.update(scores.slice(0, 2), std::vector<std::int64_t>{2, 2});  // ranks 1 and 0
  BOOST_TEST(acc.samples() == 6);
  BOOST_TEST(acc.correct(1) == 2);
  BOOST_TEST(acc.correct(2) == 4);
  BOOST_TEST(contains(error_of([&] { acc.correct(4); }), "k = 4 is not counted"));
  BOOST_TEST(contains(error_of([&] { acc.update(scores, std::vector<std::int64_t>{0, 1}); }), "2 targets"));
  BOOST_TEST(contains(error_of([] { TopKAccuracy bad({0}); }), "k must be at least 1"));
  acc.reset();
  BOOST_TEST(acc.samples() == 0);
  BOOST_TEST(std::isnan(acc.accuracy(1)));
}

BOOST_AUTO_TEST_CASE(top_k_over_pixels) {
  // [N=1, C=3, 2 pixels]: pixel 0 scores (1, 3, 2), pixel 1 scores (5, 4, 6).
  const auto s = Tensor<double>::from({1, 3, 2}, {1, 5, 3, 4, 2, 6});
  TopKAccuracy acc({1, 2});
  acc.update(s, std::vector<std::int64_t>{2, 1});  // ranks 1 and 2
  BOOST_TEST(acc.samples() == 2);
  BOOST_TEST(acc.correct(1) == 0);
  BOOST_TEST(acc.correct(2) == 1);
}

BOOST_AUTO_TEST_CASE(confusion_matrix_iou_and_dice) {
  const auto m = example_matrix();
  const std::vector<std::int64_t> expected{2, 1, 0, 0, 0, 1, 1, 0, 1, 0, 3, 0, 0, 0, 0, 0};
  BOOST_TEST(m.counts() == expected, boost::test_tools::per_element());
  BOOST_TEST(m(2, 0) == 1);
  BOOST_TEST(m.total() == 9);
  BOOST_TEST(m.accuracy() == 6.0 / 9.0);
  // IoU = TP / (TP + FP + FN): 2/4, 1/3, 3/5; Dice = 2TP / (2TP + FP + FN): 4/6, 2/4, 6/8.
  const auto iou = m.iou(), dice = m.dice();
  BOOST_TEST(iou[0] == 0.5);
  BOOST_TEST(iou[1] == 1.0 / 3.0);
  BOOST_TEST(iou[2] == 0.6);
  BOOST_TEST(std::isnan(iou[3]));
  BOOST_TEST(dice[0] == 4.0 / 6.0);
  BOOST_TEST(dice[1] == 0.5);
  BOOST_TEST(dice[2] == 0.75);
  BOOST_TEST(std::isnan(dice[3]));
  BOOST_TEST(std::abs(m.mean_iou() - (0.5 + 1.0 / 3.0 + 0.6) / 3) < 1e-15);
  BOOST_TEST(std::abs(m.mean_dice() - (4.0 / 6.0 + 0.5 + 0.75) / 3) < 1e-15);
  BOOST_TEST(std::isnan(ConfusionMatrix(3).mean_iou()));
}

BOOST_AUTO_TEST_CASE(confusion_matrix_from_segmentation_scores) {
  // [N=1, C=3, 2x2]: argmax per pixel is 2, 0, 1, 1.
  const auto s = Tensor<float>::from({1, 3, 2, 2}, {0, 9, 0, 1, 0, 0, 5, 5, 7, 1, 2, 3});
  ConfusionMatrix m(3, 255);
  m.update(s, std::vector<std::int64_t>{2, 1, 255, 1});
  BOOST_TEST(m(2, 2) == 1);
  BOOST_TEST(m(1, 0) == 1);
  BOOST_TEST(m(1, 1) == 1);
  BOOST_TEST(m.total() == 3);
  BOOST_TEST(contains(error_of([&] { m.update(s, std::vector<std::int64_t>{0, 1, 3, 1}); }),
                      "target 3 at index 2 is out of range for 3 classes"));
  BOOST_TEST(contains(error_of([&] { m.update(std::vector<std::int64_t>{0, 7}, std::vector<std::int64_t>{0, 1}); }),
                      "prediction 7 at index 1"));
  BOOST_TEST(contains(error_of([&] { m.update(s, std::vector<std::int64_t>{0}); }), "1 targets"));
  BOOST_TEST(contains(error_of([&] { ConfusionMatrix(4).update(s, std::vector<std::int64_t>{0, 0, 0, 0}); }),
                      "for 4 classes"));
  m.reset();
  BOOST_TEST(m.total() == 0);
}

BOOST_AUTO_TEST_CASE(scores_on_a_device_count_as_on_the_cpu) {
  const auto s = Tensor<float>::from({1, 3, 2, 2}, {0, 9, 0, 1, 0, 0, 5, 5, 7, 1, 2, 3});
  const std::vector<std::int64_t> pixel_targets{2, 1, 255, 0};
  ConfusionMatrix on_cpu(3, 255), on_device(3, 255);
  on_cpu.update(Var<float>(s), pixel_targets);
  on_device.update(Var<float, HostEmulated>(s.to<HostEmulated>()), pixel_targets);
  BOOST_TEST(on_device.total() == 3);
  BOOST_TEST(on_device.counts() == on_cpu.counts(), boost::test_tools::per_element());
  BOOST_TEST(on_device.iou() == on_cpu.iou(), boost::test_tools::per_element());

  TopKAccuracy top_cpu({1, 2}), top_device({1, 2});
  top_cpu.update(scores, targets);
  top_device.update(Var<float, HostEmulated>(scores.to<HostEmulated>()), targets);
  BOOST_TEST(top_device.correct(1) == top_cpu.correct(1));
  BOOST_TEST(top_device.correct(2) == top_cpu.correct(2));
  BOOST_TEST(top_device.samples() == 4);
}

BOOST_AUTO_TEST_CASE(reduced_over_a_world_of_one_is_a_copy) {
  SelfComm self;
  const auto m = example_matrix();
  const auto r = m.reduced(self);
  BOOST_TEST(r.counts() == m.counts(), boost::test_tools::per_element());
  BOOST_TEST(self.bytes_sent() == 16u * sizeof(double));
  TopKAccuracy acc({1, 3});
  acc.update(scores, targets);
  const auto ra = acc.reduced(self);
  BOOST_TEST(ra.correct(3) == 4);
  BOOST_TEST(ra.samples() == 4);
}

BOOST_AUTO_TEST_SUITE_END()
