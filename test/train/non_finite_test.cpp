// train/non_finite.hpp: which parameter's gradient holds inf or NaN, counted on each device (the
// CPU's Eigen pass and the indexed reduction a GPU runs), and the sentence the Trainer stops with.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include <ptrain/device/host_emulated.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/train/non_finite.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(non_finite_test)

namespace {
using Devices = std::tuple<Cpu, HostEmulated>;

template <class T, class D>
std::shared_ptr<Sequential<T, D>> two_layers() {
  return make<Sequential<T, D>>(std::initializer_list<std::shared_ptr<Module<T, D>>>{make<Linear<T, D>>(3, 4),
                                                                                     make<Linear<T, D>>(4, 2)});
}

// Every trained parameter's gradient set to ones, with `bad` at the given elements of parameter k.
template <class T, class D>
void set_gradients(Module<T, D>& model, std::size_t k, std::initializer_list<std::int64_t> at, float bad) {
  auto params = model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor<T> g = Tensor<T>::ones(params[i].shape());
    if (i == k)
      for (std::int64_t j : at) g[j] = T(bad);
    params[i].grad() = on_device<D>(g);
  }
}
}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(the_first_non_finite_gradient_is_named_and_counted, D, Devices) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto model = two_layers<float, D>();
  set_gradients(*model, 2, {}, 0);
  BOOST_TEST(!first_non_finite_gradient(*model).has_value());
  set_gradients(*model, 2, {0, 5, 7}, nan);  // 1.weight, [2, 4]
  auto found = first_non_finite_gradient(*model);
  BOOST_REQUIRE(found.has_value());
  BOOST_TEST(found->name == "1.weight");
  BOOST_TEST(found->count == 3);
  BOOST_TEST(found->numel == 8);
  set_gradients(*model, 1, {3}, -inf);  // 0.bias comes first
  found = first_non_finite_gradient(*model);
  BOOST_REQUIRE(found.has_value());
  BOOST_TEST(found->name == "0.bias");
  BOOST_TEST(found->count == 1);
  // A frozen parameter's stale gradient is not stepped, so not checked.
  model->parameters()[1].set_requires_grad(false);
  BOOST_TEST(!first_non_finite_gradient(*model).has_value());

  auto half_model = two_layers<ptrain::half, D>();
  set_gradients(*half_model, 0, {1}, inf);
  found = first_non_finite_gradient(*half_model);
  BOOST_REQUIRE(found.has_value());
  BOOST_TEST(found->name == "0.weight");
  BOOST_TEST(found->count == 1);

  // A half model's batch norm weights are float parameters, checked after the half ones.
  auto with_batch_norm = make<Sequential<ptrain::half, D>>(std::initializer_list<std::shared_ptr<Module<ptrain::half, D>>>{
      make<Linear<ptrain::half, D>>(3, 4), make<BatchNorm2d<ptrain::half, D>>(4)});
  set_gradients(*with_batch_norm, 0, {}, 0);
  Tensor<float> g = Tensor<float>::ones({4});
  g[2] = nan;
  with_batch_norm->float_parameters()[1].grad() = on_device<D>(g);
  found = first_non_finite_gradient(*with_batch_norm);
  BOOST_REQUIRE(found.has_value());
  BOOST_TEST(found->name == "1.bias");
  BOOST_TEST(found->count == 1);
  BOOST_TEST(found->numel == 4);
}

// The sentence for a rank with the loss, and for a pipeline stage before the last, which has none.
BOOST_AUTO_TEST_CASE(non_finite_step_text_says_what_where_and_which_parameter) {
  const NonFiniteGradient gradient{"conv1.weight", 3, 288};
  const StepPlace place{.step = 4, .epoch = 2, .batch = 7, .rank = 1};
  BOOST_TEST(non_finite_step_text(-std::numeric_limits<double>::infinity(), gradient, place) ==
             "the loss is -inf at step 4 (epoch 2, batch 7) on rank 1, and the gradient of 'conv1.weight' holds 3 inf "
             "or NaN values of 288 (the first parameter, in named_parameters() order, whose gradient does)");
  BOOST_TEST(non_finite_step_text(std::nullopt, gradient, {.step = 4, .rank = 1}) ==
             "at a pipeline stage without the loss, step 4 on rank 1, the gradient of 'conv1.weight' holds 3 inf or "
             "NaN values of 288 (the first parameter, in named_parameters() order, whose gradient does)");
  BOOST_TEST(non_finite_step_text(std::nan(""), std::nullopt, place) ==
             "the loss is nan at step 4 (epoch 2, batch 7) on rank 1, and every gradient is finite");
}

BOOST_AUTO_TEST_SUITE_END()
