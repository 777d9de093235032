#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include <ptrain/autograd/ops/accuracy.hpp>

#include "../common/typed_devices.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(accuracy_test)

BOOST_AUTO_TEST_CASE_TEMPLATE(argmax_takes_the_first_of_equal_scores, D, test::Devices) {
  const auto scores = on_device<D>(Tensor<float>::from({3, 4}, {0, 3, 1, 3,   //
                                                   5, -1, 2, 4,  //
                                                   -2, -3, -1, -1}));
  BOOST_TEST(argmax_classes(scores) == (std::vector<std::int64_t>{1, 0, 2}));
  BOOST_TEST(top1_correct(scores, std::vector<std::int64_t>{1, 0, 3}) == 2);
  BOOST_TEST(top1_correct(Var<float, D>(scores), std::vector<std::int64_t>{3, 3, 3}) == 0);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(per_position_classes, D, test::Devices) {
  // [N=1, C=2, 3]: classes on dimension 1, one prediction per position.
  const auto scores = on_device<D>(Tensor<double>::from({1, 2, 3}, {0.1, 0.9, 0.5,  //
                                                                    0.2, 0.1, 0.4}));
  BOOST_TEST(argmax_classes(scores) == (std::vector<std::int64_t>{1, 0, 0}));
  BOOST_TEST(top1_correct(scores, std::vector<std::int64_t>{1, 0, 1}) == 2);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(bad_targets_are_errors, D, test::Devices) {
  const auto scores = on_device<D>(Tensor<double>::zeros({2, 3}));
  BOOST_CHECK_EXCEPTION(top1_correct(scores, std::vector<std::int64_t>{0, 3}), Error, [](const Error& e) {
    return std::string(e.what()).find("top1_correct: target 3 at index 1 is out of range for 3 classes") !=
           std::string::npos;
  });
  BOOST_CHECK_THROW(top1_correct(scores, std::vector<std::int64_t>{0}), Error);
}

BOOST_AUTO_TEST_SUITE_END()
