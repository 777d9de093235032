// The safetensors reader and writer against files written by Python's safetensors package
// (0.8.0, its Rust serializer), round trips in F32/F16/BF16, and corrupt files.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <ptrain/core/rng.hpp>
#include <ptrain/io/safetensors.hpp>

#include "../common/files.hpp"

using namespace ptrain;
using io::Dtype;
using test::Bytes;
using test::contains;
using test::error_of;

BOOST_AUTO_TEST_SUITE(safetensors_test)

namespace {

// Written by safetensors.serialize (Python safetensors 0.8.0) with metadata {"format": "pt"} from
//   fc.weight F32 [2, 3] = [[1, -2.5, 3.25], [0.5, 1e-3, -7]]
//   fc.bias F16 [2] = [0.1, -0.2] (bits 0x2e66, 0xb266)
//   emb BF16 [2, 2] = [[1, -2], [0.5, 3]]
//   bn.num_batches_tracked I64 [] = 7
//   'odd "name"\ é<tab>' F32 [0, 3]
const Bytes python_file = {
    0x70, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7b, 0x22, 0x5f, 0x5f, 0x6d, 0x65, 0x74, 0x61,
    0x64, 0x61, 0x74, 0x61, 0x5f, 0x5f, 0x22, 0x3a, 0x7b, 0x22, 0x66, 0x6f, 0x72, 0x6d, 0x61, 0x74,
    0x22, 0x3a, 0x22, 0x70, 0x74, 0x22, 0x7d, 0x2c, 0x22, 0x62, 0x6e, 0x2e, 0x6e, 0x75, 0x6d, 0x5f,
    0x62, 0x61, 0x74, 0x63, 0x68, 0x65, 0x73, 0x5f, 0x74, 0x72, 0x61, 0x63, 0x6b, 0x65, 0x64, 0x22,
    0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x49, 0x36, 0x34, 0x22, 0x2c,
    0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61,
    0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x30, 0x2c, 0x38, 0x5d, 0x7d,
    0x2c, 0x22, 0x66, 0x63, 0x2e, 0x77, 0x65, 0x69, 0x67, 0x68, 0x74, 0x22, 0x3a, 0x7b, 0x22, 0x64,
    0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46, 0x33, 0x32, 0x22, 0x2c, 0x22, 0x73, 0x68, 0x61,
    0x70, 0x65, 0x22, 0x3a, 0x5b, 0x32, 0x2c, 0x33, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f,
    0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x38, 0x2c, 0x33, 0x32, 0x5d, 0x7d,
    0x2c, 0x22, 0x6f, 0x64, 0x64, 0x20, 0x5c, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x5c, 0x22, 0x5c, 0x5c,
    0x20, 0xc3, 0xa9, 0x5c, 0x74, 0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a,
    0x22, 0x46, 0x33, 0x32, 0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x30,
    0x2c, 0x33, 0x5d, 0x2c, 0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74,
    0x73, 0x22, 0x3a, 0x5b, 0x33, 0x32, 0x2c, 0x33, 0x32, 0x5d, 0x7d, 0x2c, 0x22, 0x65, 0x6d, 0x62,
    0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x42, 0x46, 0x31, 0x36,
    0x22, 0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x32, 0x2c, 0x32, 0x5d, 0x2c,
    0x22, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b,
    0x33, 0x32, 0x2c, 0x34, 0x30, 0x5d, 0x7d, 0x2c, 0x22, 0x66, 0x63, 0x2e, 0x62, 0x69, 0x61, 0x73,
    0x22, 0x3a, 0x7b, 0x22, 0x64, 0x74, 0x79, 0x70, 0x65, 0x22, 0x3a, 0x22, 0x46, 0x31, 0x36, 0x22,
    0x2c, 0x22, 0x73, 0x68, 0x61, 0x70, 0x65, 0x22, 0x3a, 0x5b, 0x32, 0x5d, 0x2c, 0x22, 0x64, 0x61,
    0x74, 0x61, 0x5f, 0x6f, 0x66, 0x66, 0x73, 0x65, 0x74, 0x73, 0x22, 0x3a, 0x5b, 0x34, 0x30, 0x2c,
    0x34, 0x34, 0x5d, 0x7d, 0x7d, 0x20, 0x20, 0x20, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x20, 0xc0, 0x00, 0x00, 0x50, 0x40, 0x00, 0x00, 0x00, 0x3f,
    0x6f, 0x12, 0x83, 0x3a, 0x00, 0x00, 0xe0, 0xc0, 0x80, 0x3f, 0x00, 0xc0, 0x00, 0x3f, 0x40, 0x40,
    0x66, 0x2e, 0x66, 0xb2
};

const std::string odd_name = "odd \"name\"\\ \xc3\xa9\t";

// The tensors of python_file as a float model holds them, with the dtypes they were saved in.
std::vector<io::SafetensorsEntry<float>> python_file_entries() {
  return {{"fc.weight", Tensor<float>::from({2, 3}, {1.0f, -2.5f, 3.25f, 0.5f, 1e-3f, -7.0f}), Dtype::F32},
          {"fc.bias", Tensor<float>::from({2}, {0.1f, -0.2f}), Dtype::F16},
          {"emb", Tensor<float>::from({2, 2}, {1.0f, -2.0f, 0.5f, 3.0f}), Dtype::BF16},
          {"bn.num_batches_tracked", Tensor<float>::from({}, {7.0f}), Dtype::I64},
          {odd_name, Tensor<float>({0, 3}), Dtype::F32}};
}

std::filesystem::path file_path(const std::string& name) { return test::test_dir() / name; }

// A file made of a header (padded to 8 bytes) and data_bytes zero bytes.
std::filesystem::path file_with_header(const std::string& name, std::string header, std::size_t data_bytes) {
  header.append((8 - header.size() % 8) % 8, ' ');
  Bytes bytes(8 + header.size() + data_bytes, 0);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(header.size() >> (8 * i));
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return test::write_bytes(file_path(name), bytes);
}

template <class T>
Tensor<T> random_tensor(const Shape& shape, std::uint64_t seed) {
  Rng rng(seed);
  Tensor<T> t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<T>(rng.normal() * 3.0);
  return t;
}

// What a value stored as S reads back as, in T.
template <class S, class T>
T rounded_through(T x) {
  return static_cast<T>(static_cast<float>(static_cast<S>(static_cast<float>(x))));
}

}  // namespace

BOOST_AUTO_TEST_CASE(reads_a_file_written_by_python_safetensors) {
  const auto path = test::write_bytes(file_path("python.safetensors"), python_file);
  const io::SafetensorsFile file(path);
  BOOST_TEST(file.metadata().size() == 1u);
  BOOST_TEST(file.metadata().at("format") == "pt");
  BOOST_REQUIRE(file.tensors().size() == 5u);
  BOOST_TEST(file.at("fc.weight").dtype == Dtype::F32);
  BOOST_TEST(file.at("fc.bias").dtype == Dtype::F16);
  BOOST_TEST(file.at("emb").dtype == Dtype::BF16);
  BOOST_TEST(file.at("bn.num_batches_tracked").dtype == Dtype::I64);
  BOOST_TEST(file.at(odd_name).shape == (Shape{0, 3}));

  const auto w = file.read<float>("fc.weight");
  BOOST_TEST(w.shape() == (Shape{2, 3}));
  BOOST_TEST(w.to_vector() == (std::vector<float>{1.0f, -2.5f, 3.25f, 0.5f, 1e-3f, -7.0f}),
             boost::test_tools::per_element());
  const auto b = file.read<float>("fc.bias");
  BOOST_TEST(b[0] == static_cast<float>(Eigen::numext::bit_cast<half>(std::uint16_t{0x2e66})));
  BOOST_TEST(b[1] == static_cast<float>(Eigen::numext::bit_cast<half>(std::uint16_t{0xb266})));
  BOOST_TEST(std::abs(b[0] - 0.1f) < 1e-4f);
  const auto emb = file.read<double>("emb");
  BOOST_TEST(emb.to_vector() == (std::vector<double>{1.0, -2.0, 0.5, 3.0}), boost::test_tools::per_element());
  const auto count = file.read<float>("bn.num_batches_tracked");
  BOOST_TEST(count.rank() == 0);
  BOOST_TEST(count[0] == 7.0f);
  BOOST_TEST(file.read<float>(odd_name).numel() == 0);
  BOOST_TEST(io::load_safetensors<float>(path).size() == 5u);
}

BOOST_AUTO_TEST_CASE(writes_the_bytes_python_safetensors_writes) {
  const auto path = file_path("ours.safetensors");
  io::save_safetensors(path, python_file_entries(), {{"format", "pt"}});
  const Bytes ours = test::read_bytes(path);
  BOOST_TEST(ours == python_file, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(round_trips_f32_f16_bf16_and_f64) {
  const auto path = file_path("round_trip.safetensors");
  const auto a = random_tensor<float>({3, 5, 7}, 1), b = random_tensor<float>({1000}, 2);
  const auto scalar = Tensor<float>::from({}, {-1.5f});
  for (Dtype dtype : {Dtype::F32, Dtype::F16, Dtype::BF16, Dtype::F64}) {
    BOOST_TEST_CONTEXT(io::dtype_name(dtype)) {
      io::save_safetensors<float>(path, {{"a", a, dtype}, {"b", b, dtype}, {"scalar", scalar, dtype}});
      const io::SafetensorsFile file(path);
      BOOST_TEST(file.metadata().empty());
      for (const auto* name : {"a", "b", "scalar"}) BOOST_TEST(file.at(name).dtype == dtype);
      for (const auto& [name, original] : {std::pair{"a", a}, std::pair{"b", b}, std::pair{"scalar", scalar}}) {
        const auto back = file.read<float>(name);
        BOOST_REQUIRE(back.shape() == original.shape());
        for (std::int64_t i = 0; i < back.numel(); ++i) {
          float expected = original[i];
          if (dtype == Dtype::F16) expected = rounded_through<half>(expected);
          if (dtype == Dtype::BF16) expected = rounded_through<ptrain::bfloat16>(expected);
          BOOST_TEST(back[i] == expected);
        }
      }
    }
  }
  // A double model keeps its values exactly in F64, and reads F32 files.
  const auto d = random_tensor<double>({4, 4}, 3);
  io::save_safetensors<double>(path, {{"d", d, Dtype::F64}, {"f", d, Dtype::F32}});
  const io::SafetensorsFile file(path);
  const auto exact = file.read<double>("d"), through_float = file.read<double>("f");
  for (std::int64_t i = 0; i < d.numel(); ++i) {
    BOOST_TEST(exact[i] == d[i]);
    BOOST_TEST(through_float[i] == static_cast<double>(static_cast<float>(d[i])));
  }
}

BOOST_AUTO_TEST_CASE(truncated_files_are_reported_with_the_file_and_the_tensor) {
  for (std::size_t size : {0, 5}) {
    const auto path = test::write_bytes(file_path("short.safetensors"), Bytes(python_file.begin(), python_file.begin() + size));
    const auto message = error_of([&] { io::SafetensorsFile f(path); });
    BOOST_TEST(contains(message, path.string()));
    BOOST_TEST(contains(message, "truncated"), message);
  }
  // The header cut short.
  auto path = test::write_bytes(file_path("cut_header.safetensors"), Bytes(python_file.begin(), python_file.begin() + 100));
  auto message = error_of([&] { io::SafetensorsFile f(path); });
  BOOST_TEST(contains(message, "truncated: the header is 368 bytes but only 92 follow"), message);
  // The data cut short: 24 of its 44 bytes remain, fc.weight [8, 32) is the first that does not fit.
  path = test::write_bytes(file_path("cut_data.safetensors"), Bytes(python_file.begin(), python_file.end() - 20));
  message = error_of([&] { io::SafetensorsFile f(path); });
  BOOST_TEST(contains(message, path.string() + ": tensor 'fc.weight': data_offsets [8, 32] are out of range"), message);
  BOOST_TEST(contains(message, "truncated"), message);
}

BOOST_AUTO_TEST_CASE(bad_headers_are_reported) {
  struct Case {
    std::string header;
    std::size_t data_bytes;
    std::string expected;
  };
  const Case cases[] = {
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]", 8, "invalid JSON"},
      {"[1, 2]", 0, "bad header: expected a JSON object, found an array"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{}}", 8, "key \"a\" appears twice"},
      {"{\"a\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 'a': unsupported dtype I32"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "tensor 'a': the header entry has no \"data_offsets\""},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "tensor 'a': shape must hold non-negative"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 12,
       "tensor 'a': data_offsets [0, 8] hold 8 bytes, but F32 [3] takes 12"},
      {"{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F16\",\"shape\":[2],"
       "\"data_offsets\":[6,10]}}",
       10, "the bytes of tensor 'b' [6, 10) overlap those of 'a' [0, 8)"},
      {"{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},\"z\":{\"dtype\":\"F16\",\"shape\":[0],"
       "\"data_offsets\":[4,4]},\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[6,10]}}",
       10, "the bytes of tensor 'b' [6, 10) overlap those of 'a' [0, 8)"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 8, "tensor 'a': data_offsets [8, 16] are out of range"},
      // A huge tensor is refused from the file's size before anything is allocated.
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[100000,100000],\"data_offsets\":[0,40000000000]}}", 8,
       "tensor 'a': data_offsets [0, 40000000000] are out of range: the data after the header is 8 bytes"},
      {"{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
       "tensor 'a': shape extent 4294967296 is too large"},
      {"{\"__metadata__\":{\"n\":3}}", 0, "__metadata__ \"n\" is a number, expected a string"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "rank 9 exceeds"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.header) {
      const auto path = file_with_header("bad.safetensors", c.header, c.data_bytes);
      const auto message = error_of([&] { io::SafetensorsFile f(path); });
      BOOST_TEST(contains(message, path.string()), message);
      BOOST_TEST(contains(message, c.expected), message);
    }
  }
  // A length field that cannot be a header's.
  Bytes huge(16, 0xff);
  const auto path = test::write_bytes(file_path("huge.safetensors"), huge);
  BOOST_TEST(contains(error_of([&] { io::SafetensorsFile f(path); }), "bad header: its length field says"));
}

BOOST_AUTO_TEST_CASE(json_strings_and_escapes) {
  const auto v = io::detail::parse_json(R"( {"a\"b": ["\u00e9\ud83d\ude00\n", 12, -1.5e3, true, null]} )", "test");
  BOOST_REQUIRE(v.members.size() == 1u);
  BOOST_TEST(v.members[0].key == "a\"b");
  const auto& items = v.members[0].value.items;
  BOOST_REQUIRE(items.size() == 5u);
  BOOST_TEST(items[0].text == "\xc3\xa9\xf0\x9f\x98\x80\n");
  BOOST_TEST(items[1].text == "12");
  BOOST_TEST(items[2].text == "-1.5e3");
  BOOST_TEST(items[3].boolean);
  BOOST_TEST((items[4].kind == io::detail::JsonValue::Kind::Null));
  BOOST_TEST(io::detail::json_quote("a\"\\\x01\t") == "\"a\\\"\\\\\\u0001\\t\"");
  for (const char* bad : {"{\"a\":01}", "{\"a\":\"\\ud800\"}", "{\"a\":tru}", "{\"a\":1,}", "\"a\" x"})
    BOOST_TEST(contains(error_of([&] { io::detail::parse_json(bad, "test"); }), "test: invalid JSON at byte"), bad);
  std::string deep(100, '[');
  BOOST_TEST(contains(error_of([&] { io::detail::parse_json(deep, "test"); }), "nested deeper than 64"));
}

BOOST_AUTO_TEST_CASE(writing_checks_names_and_leaves_no_partial_file) {
  const auto path = file_path("names.safetensors");
  const auto t = Tensor<float>::zeros({2});
  BOOST_TEST(contains(error_of([&] { io::save_safetensors<float>(path, {{"x", t}, {"x", t}}); }),
                      "two tensors are named 'x'"));
  BOOST_TEST(contains(error_of([&] { io::save_safetensors<float>(path, {{"__metadata__", t}}); }),
                      "cannot save a tensor named '__metadata__'"));
  BOOST_TEST(!std::filesystem::exists(path));
}

BOOST_AUTO_TEST_SUITE_END()
