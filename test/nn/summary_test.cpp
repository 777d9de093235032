#include <boost/test/unit_test.hpp>

#include <map>
#include <sstream>

#include <ptrain/models/resnet.hpp>
#include <ptrain/nn/summary.hpp>

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(summary_test)

namespace {

using Layers = std::initializer_list<std::pair<std::string, std::shared_ptr<Module<float>>>>;

std::map<std::string, LayerSummary> rows_by_name(const ModelSummary& s) {
  std::map<std::string, LayerSummary> rows;
  for (const auto& row : s.layers) rows.emplace(row.name, row);
  return rows;
}

// Runs its first child only: the second holds parameters no forward reaches.
class HalfUsed : public Module<float> {
 public:
  HalfUsed() {
    used_ = this->register_module("used", make<Linear<float>>(4, 2));
    this->register_module("unused", make<Linear<float>>(4, 3));
  }
  Var<float> forward(const Var<float>& x) override { return (*used_)(x); }

 private:
  std::shared_ptr<Linear<float>> used_;
};

}  // namespace

BOOST_AUTO_TEST_CASE(resnet18_totals_equal_parameter_count_and_every_layer_is_reached) {
  manual_seed(1);
  auto model = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  const ModelSummary s = summarize(*model, Shape{3, 32, 32}, 2);
  BOOST_TEST(s.total_parameters() == model->parameter_count());
  BOOST_TEST(s.trainable_parameters == model->parameter_count());
  BOOST_TEST(s.frozen_parameters == 0);
  BOOST_TEST(s.layers.size() == model->named_modules().size() - 1);
  std::int64_t leaf_flops = 0;
  for (const auto& row : s.layers) {
    BOOST_TEST_CONTEXT(row.name << " (" << row.type << ")") {
      BOOST_TEST(row.output_shape.has_value());  // the blocks run their layers through operator()
      BOOST_TEST(row.flops.has_value());
    }
    if (row.leaf) leaf_flops += row.flops.value_or(0);
  }
  BOOST_TEST(s.flops == leaf_flops);
  const auto rows = rows_by_name(s);
  std::int64_t layer1_leaves = 0;
  for (const auto& [name, row] : rows)
    if (row.leaf && name.rfind("layer1.", 0) == 0) layer1_leaves += *row.flops;
  BOOST_TEST(*rows.at("layer1").flops == layer1_leaves);
  BOOST_TEST(rows.at("layer1").parameters() == 4 * (64 * 64 * 9 + 2 * 64));
}

BOOST_AUTO_TEST_CASE(every_layer_of_resnet50_is_reached) {
  manual_seed(5);
  auto model = resnet50<float>({.num_classes = 10, .cifar_stem = true});
  const ModelSummary s = summarize(*model, Shape{3, 32, 32}, 1);
  BOOST_TEST(s.total_parameters() == model->parameter_count());
  for (const auto& row : s.layers)
    BOOST_TEST(row.output_shape.has_value(), row.name << " (" << row.type << ") has no output shape");
  const auto rows = rows_by_name(s);
  BOOST_TEST(rows.at("layer1.0").type == "Bottleneck");
  BOOST_TEST(rows.at("layer3.0.conv3").output_shape->str() == "[1, 1024, 8, 8]");
}

BOOST_AUTO_TEST_CASE(resnet18_cifar_stem_output_shapes) {
  manual_seed(2);
  auto model = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  const auto rows = rows_by_name(summarize(*model, Shape{3, 32, 32}, 2));
  const std::vector<std::pair<std::string, Shape>> expected{
      {"conv1", {2, 64, 32, 32}},          {"layer1.0.conv1", {2, 64, 32, 32}},
      {"layer2.0.conv1", {2, 128, 16, 16}}, {"layer2.0.downsample.0", {2, 128, 16, 16}},
      {"layer3.1.bn2", {2, 256, 8, 8}},    {"layer4.1", {2, 512, 4, 4}},
      {"avgpool", {2, 512, 1, 1}},         {"flatten", {2, 512}},
      {"fc", {2, 10}}};
  for (const auto& [name, shape] : expected) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_REQUIRE(rows.at(name).output_shape.has_value());
      BOOST_TEST(rows.at(name).output_shape->str() == shape.str());
    }
  }
  BOOST_TEST(rows.at("layer2.0.conv1").type == "Conv2d");
  BOOST_TEST(rows.at("layer2.0.bn1").type == "BatchNorm2d");
  BOOST_TEST(rows.at("layer2.0").type == "BasicBlock");
  BOOST_TEST(rows.at("layer2").type == "Sequential");
  BOOST_TEST(rows.at("fc").type == "Linear");
  BOOST_TEST(rows.at("fc").activation_bytes == 2 * 10 * 4);
}

BOOST_AUTO_TEST_CASE(conv2d_and_linear_flops_are_the_hand_formula) {
  manual_seed(3);
  // Conv2d(3, 8, 3, stride 2, pad 1) on 9x9: 5x5 out; grouped Conv2d(8, 6, 3, pad 1, groups 2)
  // without bias; Linear(6 * 25, 7).
  auto conv = make<Conv2d<float>>(3, 8, 3, Conv2dOptions::square(2, 1));
  auto grouped = make<Conv2d<float>>(8, 6, 3, Conv2dOptions::square(1, 1, 1, 2), false);
  Sequential<float> net(Layers{{"conv", conv},
                               {"grouped", grouped},
                               {"flatten", make<Flatten<float>>(1)},
                               {"fc", make<Linear<float>>(6 * 25, 7)}});
  const ModelSummary s = summarize(net, Shape{3, 9, 9}, 4);
  const auto rows = rows_by_name(s);
  const std::int64_t conv_flops = 2 * 3 * 3 * 3 * 8 * 5 * 5 + 8 * 5 * 5;
  const std::int64_t grouped_flops = 2 * (8 / 2) * 3 * 3 * 6 * 5 * 5;
  const std::int64_t fc_flops = 2 * 150 * 7 + 7;
  BOOST_TEST(*rows.at("conv").flops == conv_flops);
  BOOST_TEST(*rows.at("grouped").flops == grouped_flops);
  BOOST_TEST(*rows.at("fc").flops == fc_flops);
  BOOST_TEST(*rows.at("flatten").flops == 0);
  BOOST_TEST(s.flops == conv_flops + grouped_flops + fc_flops);
  BOOST_TEST(rows.at("conv").activation_bytes == 4 * 8 * 25 * 4);  // batch 4, float
}

BOOST_AUTO_TEST_CASE(linear_on_a_sequence_counts_every_row_of_a_sample) {
  Sequential<float> net(Layers{{"fc", make<Linear<float>>(5, 3, false)}});
  const ModelSummary s = summarize(net, Shape{6, 5}, 2);
  BOOST_TEST(*s.layers.at(0).flops == 6 * 2 * 5 * 3);
}

BOOST_AUTO_TEST_CASE(frozen_parameters_are_counted_apart) {
  auto trunk = make<Sequential<float>>(Layers{{"fc", make<Linear<float>>(4, 8)}, {"bn", make<BatchNorm2d<float>>(8)}});
  Sequential<float> net(Layers{{"trunk", trunk}, {"relu", make<ReLU<float>>()}, {"head", make<Linear<float>>(8, 3)}});
  trunk->set_requires_grad(false);
  const ModelSummary s = summarize(net, Shape{4}, 3);
  BOOST_TEST(s.total_parameters() == net.parameter_count());
  BOOST_TEST(s.frozen_parameters == 4 * 8 + 8 + 2 * 8);
  BOOST_TEST(s.trainable_parameters == 8 * 3 + 3);
  const auto rows = rows_by_name(s);
  BOOST_TEST(rows.at("trunk").frozen_parameters == 4 * 8 + 8 + 2 * 8);
  BOOST_TEST(rows.at("trunk").trainable_parameters == 0);
  BOOST_TEST(rows.at("head").frozen_parameters == 0);
  BOOST_TEST(rows.at("head").trainable_parameters == 27);
}

BOOST_AUTO_TEST_CASE(a_layer_no_forward_reaches_keeps_its_parameters_without_shape_or_flops) {
  HalfUsed net;
  const ModelSummary s = summarize(net, Shape{4}, 1);
  const auto rows = rows_by_name(s);
  BOOST_TEST(!rows.at("unused").output_shape.has_value());
  BOOST_TEST(!rows.at("unused").flops.has_value());
  BOOST_TEST(rows.at("unused").parameters() == 4 * 3 + 3);
  BOOST_TEST(s.total_parameters() == net.parameter_count());
  BOOST_TEST(s.flops == 2 * 4 * 2 + 2);
  std::ostringstream table;
  print_summary(s, table);
  BOOST_TEST(table.str().find("unused (Linear)") != std::string::npos);
  BOOST_TEST(table.str().find("Total params: 25") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(hooks_and_modes_set_before_are_put_back) {
  auto fc = make<Linear<float>>(4, 2);
  Sequential<float> net(Layers{{"fc", fc}});
  int seen = 0;
  fc->set_forward_hook([&seen](const Var<float>& y) {
    ++seen;
    return y;
  });
  net.train();
  const ModelSummary s = summarize(net, Shape{4}, 1);
  BOOST_TEST(seen == 1);  // chained while the summary ran
  BOOST_TEST(fc->has_forward_hook());
  BOOST_TEST(!net.has_forward_hook());
  BOOST_TEST(net.is_training());
  BOOST_TEST(fc->is_training());
  net(Var<float>(Tensor<float>::zeros({1, 4})));
  BOOST_TEST(seen == 2);
  BOOST_TEST(s.layers.at(0).calls == 1);
}

BOOST_AUTO_TEST_CASE(the_table_has_a_row_per_layer_and_the_totals) {
  manual_seed(4);
  auto model = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  const ModelSummary s = summarize(*model, Shape{3, 32, 32}, 1);
  std::ostringstream table;
  print_summary(s, table);
  const std::string text = table.str();
  BOOST_TEST(text.find("    layer2.0.downsample.0 (Conv2d)") != std::string::npos);
  BOOST_TEST(text.find("[1, 128, 16, 16]") != std::string::npos);
  BOOST_TEST(text.find("Total params: 11,173,962") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
