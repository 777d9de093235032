// The examples' --init (examples/common/init_weights.hpp): the file's tensors are the model's after
// the load; the entries the file lacks and the example's own layers keep their initial values and
// are listed; another shape elsewhere is an error naming the tensor.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include <ptrain/core/rng.hpp>
#include <ptrain/io/safetensors.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/nn/state_dict.hpp>

#include "../../examples/common/init_weights.hpp"
#include "../common/files.hpp"

using namespace ptrain;

BOOST_AUTO_TEST_SUITE(init_weights_test)

namespace {

using Entries = std::vector<std::pair<std::string, std::vector<float>>>;

Entries values_of(Module<float>& model) {
  Entries out;
  for (auto& [name, t] : detail::state_entries(model)) out.emplace_back(name, t.to_vector());
  return out;
}

std::vector<float> value_of(const Entries& entries, const std::string& name) {
  for (const auto& [n, v] : entries)
    if (n == name) return v;
  BOOST_FAIL("no entry " << name);
  return {};
}

// A seeded ResNet-18 with `classes` outputs, saved; its values.
Entries saved_resnet(std::uint64_t seed, std::int64_t classes, const std::filesystem::path& path) {
  manual_seed(seed);
  auto net = resnet18<float>({.num_classes = classes});
  save_state_dict(*net, path);
  return values_of(*net);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_files_weights_are_the_models_after_the_load) {
  const auto path = test::test_dir() / "init_all.safetensors";
  const Entries file = saved_resnet(1, 3, path);
  manual_seed(2);
  auto net = resnet18<float>({.num_classes = 3});
  BOOST_TEST((values_of(*net) != file));
  const examples::InitWeights init = examples::load_init_weights(*net, path);
  BOOST_TEST(init.fresh.empty());
  BOOST_TEST(init.unused.empty());
  BOOST_TEST((values_of(*net) == file));
}

BOOST_AUTO_TEST_CASE(entries_the_file_lacks_start_fresh_and_are_listed) {
  const auto full = test::test_dir() / "init_full.safetensors";
  saved_resnet(1, 3, full);
  // The same file without fc: what a backbone-only checkpoint holds.
  std::vector<io::SafetensorsEntry<float>> backbone;
  for (auto& [name, tensor] : io::load_safetensors<float>(full))
    if (!name.starts_with("fc.")) backbone.push_back({name, tensor});
  const auto path = test::test_dir() / "init_backbone.safetensors";
  io::save_safetensors(path, std::move(backbone));
  manual_seed(2);
  auto net = resnet18<float>({.num_classes = 3});
  const Entries before = values_of(*net);
  const examples::InitWeights init = examples::load_init_weights(*net, path);
  BOOST_TEST(init.fresh == (std::vector<std::string>{"fc.weight", "fc.bias"}), boost::test_tools::per_element());
  const Entries after = values_of(*net);
  BOOST_TEST((value_of(after, "fc.weight") == value_of(before, "fc.weight")));
  BOOST_TEST((value_of(after, "conv1.weight") != value_of(before, "conv1.weight")));
}

BOOST_AUTO_TEST_CASE(another_shape_is_an_error_naming_the_tensor_unless_the_layer_is_the_examples_own) {
  const auto path = test::test_dir() / "init_five_classes.safetensors";
  const Entries file = saved_resnet(1, 5, path);
  manual_seed(2);
  auto net = resnet18<float>({.num_classes = 3});
  const std::string error = test::error_of([&] { examples::load_init_weights(*net, path); });
  BOOST_TEST(test::contains(error, "--init weights of another shape"), error);
  BOOST_TEST(test::contains(error, "fc.weight: file has [5, 512], model expects [3, 512]"), error);
  manual_seed(2);
  auto funnel = resnet18<float>({.num_classes = 3});
  const Entries before = values_of(*funnel);
  const examples::InitWeights init = examples::load_init_weights(*funnel, path, {"fc."});
  BOOST_TEST(init.fresh == (std::vector<std::string>{"fc.weight", "fc.bias"}), boost::test_tools::per_element());
  BOOST_TEST((value_of(values_of(*funnel), "fc.weight") == value_of(before, "fc.weight")));
  BOOST_TEST((value_of(values_of(*funnel), "layer4.1.conv2.weight") == value_of(file, "layer4.1.conv2.weight")));
}

BOOST_AUTO_TEST_SUITE_END()
