// save_state_dict / load_state_dict: every parameter and buffer under its torchvision name,
// dtype conversion, and one error listing every mismatch.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <ptrain/core/rng.hpp>
#include <ptrain/device/host_emulated.hpp>
#include <ptrain/models/resnet.hpp>
#include <ptrain/nn/batch_norm.hpp>
#include <ptrain/nn/linear.hpp>
#include <ptrain/nn/sequential.hpp>
#include <ptrain/nn/state_dict.hpp>

#include "../common/files.hpp"

using namespace ptrain;
using test::contains;
using test::error_of;

BOOST_AUTO_TEST_SUITE(state_dict_test)

namespace {

using Named = std::initializer_list<std::pair<std::string, std::shared_ptr<Module<float>>>>;

std::filesystem::path file_path(const std::string& name) { return test::test_dir() / name; }

// Every parameter and buffer value, in state-dict order.
template <class D = Cpu>
std::vector<std::vector<float>> snapshot(Module<float, D>& m) {
  std::vector<std::vector<float>> out;
  for (auto& [name, t] : detail::state_entries(m)) out.push_back(t.to_vector());
  return out;
}

bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// Distinct buffer values, so that a buffer left unloaded shows; BatchNorm counters get whole
// numbers (they are stored as int64).
void fill_buffers(Module<float>& m, float start) {
  for (auto& [name, b] : m.named_buffers())
    for (std::int64_t i = 0; i < b->numel(); ++i)
      (*b)[i] = detail::is_batch_counter(name) ? 40.0f : start + static_cast<float>(i % 5);
}

// The file: layer [10, 5], bn(10), head [3, 2048], extra [2, 2].
std::shared_ptr<Sequential<float>> file_model() {
  return make<Sequential<float>>(Named{{"layer", make<Linear<float>>(5, 10)},
                                       {"bn", make<BatchNorm2d<float>>(10)},
                                       {"head", make<Linear<float>>(2048, 3)},
                                       {"extra", make<Linear<float>>(2, 2)}});
}
// The model: layer [2048, 5], bn(2048), head [3, 2048], tail [3, 3].
std::shared_ptr<Sequential<float>> target_model() {
  return make<Sequential<float>>(Named{{"layer", make<Linear<float>>(5, 2048)},
                                       {"bn", make<BatchNorm2d<float>>(2048)},
                                       {"head", make<Linear<float>>(2048, 3)},
                                       {"tail", make<Linear<float>>(3, 3)}});
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trips_every_parameter_and_buffer_of_a_resnet) {
  manual_seed(1);
  auto saved = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  fill_buffers(*saved, 2.0f);
  const auto path = file_path("resnet18.safetensors");
  save_state_dict(*saved, path);

  const io::SafetensorsFile file(path);
  BOOST_TEST(file.metadata().at("format") == "pt");
  BOOST_TEST(file.tensors().size() == 122u);  // torchvision's resnet18 state_dict: 62 parameters, 60 buffers
  BOOST_TEST(file.at("layer2.0.downsample.0.weight").shape == (Shape{128, 64, 1, 1}));
  BOOST_TEST(file.at("bn1.num_batches_tracked").dtype == io::Dtype::I64);  // as torch stores it
  BOOST_TEST(file.at("fc.weight").dtype == io::Dtype::F32);

  manual_seed(2);
  auto loaded = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  BOOST_TEST(!same_bits(snapshot(*saved), snapshot(*loaded)));
  const auto result = load_state_dict(*loaded, path);
  BOOST_TEST(result.all_matched());
  BOOST_TEST(same_bits(snapshot(*saved), snapshot(*loaded)));
}

// A model on a device (HostEmulated: device memory that is host memory) saves what a CPU model
// loads, and loads what a CPU model saved, bit for bit; a failed load leaves it unchanged.
BOOST_AUTO_TEST_CASE(a_device_model_saves_and_loads_through_the_host) {
  manual_seed(5);
  auto on_device = resnet18<float, HostEmulated>({.num_classes = 10, .cifar_stem = true});
  const auto device_path = file_path("device_resnet18.safetensors");
  save_state_dict(*on_device, device_path);
  auto on_cpu = resnet18<float>({.num_classes = 10, .cifar_stem = true});
  fill_buffers(*on_cpu, 3.0f);
  BOOST_TEST(!same_bits(snapshot(*on_device), snapshot(*on_cpu)));
  BOOST_TEST(load_state_dict(*on_cpu, device_path).all_matched());
  BOOST_TEST(same_bits(snapshot(*on_device), snapshot(*on_cpu)));

  fill_buffers(*on_cpu, 9.0f);
  const auto cpu_path = file_path("cpu_resnet18.safetensors");
  save_state_dict(*on_cpu, cpu_path);
  BOOST_TEST(load_state_dict(*on_device, cpu_path).all_matched());
  BOOST_TEST(same_bits(snapshot(*on_cpu), snapshot(*on_device)));

  const auto before = snapshot(*on_device);
  save_state_dict(*file_model(), file_path("other_for_device.safetensors"));
  BOOST_TEST(!error_of([&] { load_state_dict(*on_device, file_path("other_for_device.safetensors")); }).empty());
  BOOST_TEST(same_bits(before, snapshot(*on_device)));
}

BOOST_AUTO_TEST_CASE(sixteen_bit_files_load_rounded) {
  manual_seed(3);
  auto saved = file_model();
  fill_buffers(*saved, 0.3f);
  for (auto dtype : {io::Dtype::F16, io::Dtype::BF16}) {
    BOOST_TEST_CONTEXT(dtype) {
      const auto path = file_path("sixteen.safetensors");
      save_state_dict(*saved, path, dtype);
      auto loaded = file_model();
      load_state_dict(*loaded, path);
      const auto a = snapshot(*saved), b = snapshot(*loaded);
      for (std::size_t t = 0; t < a.size(); ++t)
        for (std::size_t i = 0; i < a[t].size(); ++i) {
          const float x = a[t][i];
          const float expected = dtype == io::Dtype::F16 ? static_cast<float>(static_cast<ptrain::half>(x))
                                                         : static_cast<float>(static_cast<ptrain::bfloat16>(x));
          BOOST_TEST(b[t][i] == expected);
        }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_strict_load_reports_every_mismatch_at_once_and_changes_nothing) {
  const auto path = file_path("other.safetensors");
  save_state_dict(*file_model(), path);
  auto model = target_model();
  const auto before = snapshot(*model);
  const std::string message = error_of([&] { load_state_dict(*model, path); });
  BOOST_TEST(contains(message, path.string() + ": the state dict does not match the model"), message);
  BOOST_TEST(contains(message, "missing keys (in the model, not in the file): tail.weight, tail.bias"), message);
  BOOST_TEST(contains(message, "unexpected keys (in the file, not in the model): extra.bias, extra.weight"), message);
  BOOST_TEST(contains(message, "layer.weight: file has [10, 5], model expects [2048, 5]"), message);
  BOOST_TEST(contains(message, "layer.bias: file has [10], model expects [2048]"), message);
  for (const char* bn : {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"})
    BOOST_TEST(contains(message, std::string(bn) + ": file has [10], model expects [2048]"), message);
  BOOST_TEST(!contains(message, "head"), message);
  BOOST_TEST(same_bits(before, snapshot(*model)));
}

BOOST_AUTO_TEST_CASE(a_non_strict_load_takes_what_matches_and_lists_the_rest) {
  manual_seed(4);
  auto source = file_model();
  fill_buffers(*source, 7.0f);
  const auto path = file_path("partial.safetensors");
  save_state_dict(*source, path);
  auto model = target_model();
  const auto before = snapshot(*model);
  const auto result = load_state_dict(*model, path, {.strict = false});
  BOOST_TEST(result.missing == (std::vector<std::string>{"tail.weight", "tail.bias"}), boost::test_tools::per_element());
  BOOST_TEST(result.unexpected == (std::vector<std::string>{"extra.bias", "extra.weight"}),
             boost::test_tools::per_element());
  BOOST_TEST(result.mismatched.size() == 6u);
  BOOST_TEST(result.mismatched.front() == "layer.weight: file has [10, 5], model expects [2048, 5]");
  // head and the BatchNorm counter matched and were loaded; nothing else changed.
  auto file_head = std::dynamic_pointer_cast<Linear<float>>((*source)[2]);
  auto head = std::dynamic_pointer_cast<Linear<float>>((*model)[2]);
  BOOST_TEST(head->weight.value().to_vector() == file_head->weight.value().to_vector(), boost::test_tools::per_element());
  BOOST_TEST(std::dynamic_pointer_cast<BatchNorm2d<float>>((*model)[1])->num_batches_tracked[0] == 40.0f);
  const auto after = snapshot(*model);
  const auto entries = detail::state_entries(*model);
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (!entries[i].first.starts_with("head.") && entries[i].first != "bn.num_batches_tracked")
      BOOST_TEST(after[i] == before[i], entries[i].first << " changed");
}

BOOST_AUTO_TEST_CASE(batch_norm_counters_are_int64_and_optional) {
  auto model = make<Sequential<float>>(Named{{"fc", make<Linear<float>>(2, 2)}, {"bn", make<BatchNorm2d<float>>(2)}});
  auto bn = std::dynamic_pointer_cast<BatchNorm2d<float>>((*model)[1]);
  std::vector<io::SafetensorsEntry<float>> entries;
  for (auto& [name, t] : detail::state_entries(*model))
    if (name != "bn.num_batches_tracked") entries.push_back({name, t, io::Dtype::F32});
  // A torchvision counter the model does not have, as int64.
  entries.push_back({"other.num_batches_tracked", Tensor<float>::from({}, {5.0f}), io::Dtype::I64});
  const auto path = file_path("counters.safetensors");
  io::save_safetensors(path, entries);
  bn->num_batches_tracked[0] = 3.0f;
  BOOST_TEST(load_state_dict(*model, path).all_matched());
  BOOST_TEST(bn->num_batches_tracked[0] == 3.0f);  // not in the file: left as it was

  entries.push_back({"bn.num_batches_tracked", Tensor<float>::from({}, {11.0f}), io::Dtype::I64});
  io::save_safetensors(path, entries);
  BOOST_TEST(load_state_dict(*model, path).all_matched());
  BOOST_TEST(bn->num_batches_tracked[0] == 11.0f);
}

// A half model's batch norm weight, bias and statistics are float (BatchNorm2d): saved as F32
// whatever the dtype asked for (and the counter as I64), under the same names, and loaded back bit
// for bit.
BOOST_AUTO_TEST_CASE(a_half_model_saves_its_float_batch_norm_as_f32) {
  using HalfNamed = std::initializer_list<std::pair<std::string, std::shared_ptr<Module<half>>>>;
  const auto make_model = [] {
    return make<Sequential<half>>(HalfNamed{{"fc", make<Linear<half>>(2, 3)}, {"bn", make<BatchNorm2d<half>>(3)}});
  };
  auto saved = make_model();
  auto bn = std::dynamic_pointer_cast<BatchNorm2d<half>>((*saved)[1]);
  static_assert(std::is_same_v<decltype(bn->running_mean), Tensor<float>>);
  BOOST_TEST(saved->named_buffers().empty());
  BOOST_TEST(saved->named_float_buffers().size() == 3u);
  static_assert(std::is_same_v<decltype(bn->weight), Var<float>>);
  BOOST_TEST(saved->named_parameters().size() == 2u);  // fc's
  BOOST_TEST(saved->named_float_parameters().size() == 2u);
  const std::vector<float> mean{0.1f, 1.0f / 3, -2.0009765625f}, var{1.0001f, 0.5f, 3.25f};
  const std::vector<float> weight{1.0001f, 0.3f, -1.7f}, bias{1e-5f, -0.1f, 2.0f / 3};
  for (int c = 0; c < 3; ++c) {
    bn->running_mean[c] = mean[c], bn->running_var[c] = var[c];
    bn->weight.value()[c] = weight[c], bn->bias.value()[c] = bias[c];
  }
  bn->num_batches_tracked[0] = 4097.0f;  // past where half counts by one
  const auto path = file_path("half_bn.safetensors");
  save_state_dict(*saved, path, io::Dtype::F16);
  const io::SafetensorsFile file(path);
  BOOST_TEST(file.tensors().size() == 7u);
  BOOST_TEST(file.at("fc.weight").dtype == io::Dtype::F16);
  BOOST_TEST(file.at("bn.weight").dtype == io::Dtype::F32);
  BOOST_TEST(file.at("bn.bias").dtype == io::Dtype::F32);
  BOOST_TEST(file.at("bn.running_mean").dtype == io::Dtype::F32);
  BOOST_TEST(file.at("bn.running_var").dtype == io::Dtype::F32);
  BOOST_TEST(file.at("bn.num_batches_tracked").dtype == io::Dtype::I64);

  auto loaded = make_model();
  BOOST_TEST(load_state_dict(*loaded, path).all_matched());
  auto loaded_bn = std::dynamic_pointer_cast<BatchNorm2d<half>>((*loaded)[1]);
  BOOST_TEST(loaded_bn->running_mean.to_vector() == mean, boost::test_tools::per_element());
  BOOST_TEST(loaded_bn->running_var.to_vector() == var, boost::test_tools::per_element());
  BOOST_TEST(loaded_bn->num_batches_tracked[0] == 4097.0f);
  BOOST_TEST(loaded_bn->weight.value().to_vector() == weight, boost::test_tools::per_element());
  BOOST_TEST(loaded_bn->bias.value().to_vector() == bias, boost::test_tools::per_element());
  const auto fc = std::dynamic_pointer_cast<Linear<half>>((*saved)[0]), loaded_fc = std::dynamic_pointer_cast<Linear<half>>((*loaded)[0]);
  BOOST_TEST(tensor_cast<float>(loaded_fc->weight.value()).to_vector() == tensor_cast<float>(fc->weight.value()).to_vector(),
             boost::test_tools::per_element());
  // A mismatch among the float statistics is reported with the rest, and nothing is loaded.
  auto wider = make<Sequential<half>>(HalfNamed{{"fc", make<Linear<half>>(2, 4)}, {"bn", make<BatchNorm2d<half>>(4)}});
  const std::string error = error_of([&] { load_state_dict(*wider, path); });
  BOOST_TEST(contains(error, "shape mismatch: bn.running_mean: file has [3], model expects [4]"), error);
  BOOST_TEST(contains(error, "shape mismatch: fc.weight"), error);
}

BOOST_AUTO_TEST_CASE(a_double_model_reads_float_weights) {
  manual_seed(5);
  Linear<float> f(3, 4);
  const auto path = file_path("double.safetensors");
  save_state_dict(f, path);
  Linear<double> d(3, 4);
  load_state_dict(d, path);
  for (std::int64_t i = 0; i < 12; ++i) BOOST_TEST(d.weight.value()[i] == static_cast<double>(f.weight.value()[i]));
  BOOST_TEST(contains(error_of([&] { save_state_dict(f, path, io::Dtype::I64); }), "not I64"));
  BOOST_TEST(contains(error_of([&] { load_state_dict(f, file_path("absent.safetensors")); }), "absent.safetensors"));
}

BOOST_AUTO_TEST_SUITE_END()
