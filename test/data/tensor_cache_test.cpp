#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>

#include <ptrain/data/geometric_transforms.hpp>
#include <ptrain/data/tensor_cache.hpp>

#include "../common/child_process.hpp"
#include "../common/files.hpp"

using namespace ptrain;
namespace fs = std::filesystem;
using test::contains;
using test::error_of;

BOOST_AUTO_TEST_SUITE(tensor_cache_test)

namespace {

const fs::path& dir() { return test::temp_dir("tensor_cache_test"); }

// n examples [c, h, w]; element j of example i is i * 100 + j; target 7 + i.
TensorDataset ramp_dataset(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  Tensor<float> inputs(Shape{n, c, h, w});
  for (std::int64_t i = 0; i < inputs.numel(); ++i)
    inputs[i] = static_cast<float>(i / (c * h * w) * 100 + i % (c * h * w));
  std::vector<std::int64_t> targets;
  for (std::int64_t i = 0; i < n; ++i) targets.push_back(7 + i);
  return TensorDataset(inputs, targets);
}

// Segmentation examples: image [1, 4, 4] = i + pixel index, target map = (i + pixel) mod 3.
struct MapDataset {
  std::int64_t n;
  std::int64_t size() const { return n; }
  Example get(std::int64_t i) const {
    Tensor<float> x(Shape{1, 4, 4});
    Tensor<std::int64_t> map(Shape{4, 4});
    for (std::int64_t p = 0; p < 16; ++p) {
      x[p] = static_cast<float>(i + p);
      map[p] = (i + p) % 3;
    }
    return {x, 0, map};
  }
};

// Shapes differ from example 3 on.
struct RaggedDataset {
  std::int64_t size() const { return 6; }
  Example get(std::int64_t i) const { return {Tensor<float>::zeros(Shape{1, 2, i < 3 ? 2 : 3}), 0}; }
};

// 3 x 32 x 32 examples (12 KiB each) that stall from example 64 on, after calling reached_stall():
// a cache writer to interrupt once it has written part of its file.
struct StallingDataset {
  std::function<void()> reached_stall;
  std::shared_ptr<std::once_flag> once = std::make_shared<std::once_flag>();
  std::int64_t size() const { return 1000; }
  Example get(std::int64_t i) const {
    if (i >= 64) {
      std::call_once(*once, reached_stall);
      std::this_thread::sleep_for(std::chrono::seconds(60));
    }
    return {Tensor<float>::zeros(Shape{3, 32, 32}), 0};
  }
};

std::vector<char> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_of_transformed_examples) {
  const TensorDataset data = ramp_dataset(10, 2, 4, 6);
  const fs::path path = dir() / "resized.cache";
  write_tensor_cache(path, data, Resize(2, 3), {.batch_size = 3, .num_workers = 2});
  const TensorCache cache(path);
  BOOST_TEST(cache.size() == 10);
  BOOST_TEST(cache.example_shape() == (Shape{2, 2, 3}));
  BOOST_TEST(cache.target_map_shape().rank() == 0);
  Rng rng;
  for (std::int64_t i = 0; i < 10; ++i) {
    Tensor<float> expected = data.get(i).input.clone();
    Resize(2, 3)(expected, rng);
    const Example e = cache.get(i);
    BOOST_TEST(e.target == 7 + i);
    BOOST_TEST(e.input.to_vector() == expected.to_vector(), boost::test_tools::per_element());
  }
  // The file is exactly header + records: 8 + 3 * 4 + 8 + 3 * 8 bytes, then 10 x (12 floats + 1 int64).
  BOOST_TEST(fs::file_size(path) == 52u + 10u * (12u * 4u + 8u));
  // It serves a loader like any dataset.
  DataLoader loader(cache, {.batch_size = 4});
  std::int64_t rows = 0;
  for (const Batch& b : loader) {
    BOOST_TEST(b.inputs.shape() == (Shape{b.size(), 2, 2, 3}));
    rows += b.size();
  }
  BOOST_TEST(rows == 10);
  // A transform-free cache holds the examples as they are.
  write_tensor_cache(dir() / "plain.cache", data);
  BOOST_TEST(TensorCache(dir() / "plain.cache").inputs().to_vector() == data.inputs().to_vector(),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(target_maps_round_trip) {
  const fs::path path = dir() / "maps.cache";
  write_tensor_cache(path, MapDataset{5}, RandomVerticalFlip(1.0));
  const TensorCache cache(path);
  BOOST_TEST(cache.target_map_shape() == (Shape{4, 4}));
  for (std::int64_t i = 0; i < 5; ++i) {
    Example expected = MapDataset{5}.get(i);
    vflip(expected.input);
    Tensor<std::int64_t> map = expected.target_map.reshape(Shape{1, 4, 4});
    vflip(map);
    const Example e = cache.get(i);
    BOOST_TEST(e.input.to_vector() == expected.input.to_vector(), boost::test_tools::per_element());
    BOOST_TEST(e.target_map.to_vector() == expected.target_map.to_vector(), boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(truncated_cache_names_the_file_and_the_expected_size) {
  const fs::path path = dir() / "truncated.cache";
  write_tensor_cache(path, ramp_dataset(4, 1, 2, 2), AnyTransform{});
  const std::vector<char> bytes = file_bytes(path);
  BOOST_REQUIRE(bytes.size() == 52u + 4u * 24u);
  test::write_bytes(path, std::vector<char>(bytes.begin(), bytes.end() - 10));
  std::string message = error_of([&] { TensorCache cache(path); });
  BOOST_TEST(
      contains(message, path.string() + ": truncated: expected 148 bytes (a 52-byte header and 4 examples of "
                                        "input [1, 2, 2] float32 and one int64 target, 24 bytes each), found 138"),
      message);
  test::write_bytes(path, std::vector<char>(bytes.begin(), bytes.begin() + 20));
  message = error_of([&] { TensorCache cache(path); });
  BOOST_TEST(contains(message, path.string() + ": truncated at offset 20: expected a 28-byte tensor cache header"),
             message);
  std::vector<char> longer = bytes;
  longer.push_back(0);
  test::write_bytes(path, longer);
  message = error_of([&] { TensorCache cache(path); });
  BOOST_TEST(contains(message, path.string() + ": longer than its header says: expected 148 bytes"), message);
}

// A header claiming a huge cache is checked against the file's size (or a cap on the extents)
// before the examples are allocated.
BOOST_AUTO_TEST_CASE(huge_claims_are_refused_before_allocating) {
  const fs::path path = dir() / "claims.cache";
  write_tensor_cache(path, ramp_dataset(4, 1, 2, 2), AnyTransform{});
  const std::vector<char> bytes = file_bytes(path);
  std::vector<char> many = bytes;
  const std::uint64_t count = std::uint64_t{1} << 40;
  std::memcpy(many.data() + 20, &count, sizeof count);
  test::write_bytes(path, many);
  std::string message = error_of([&] { TensorCache cache(path); });
  BOOST_TEST(contains(message, path.string() + ": truncated: expected 26388279066676 bytes (a 52-byte header and "
                                               "1099511627776 examples of input [1, 2, 2] float32"),
             message);
  std::vector<char> wide = bytes;
  const std::int64_t extent = std::int64_t{1} << 32;
  std::memcpy(wide.data() + 36, &extent, sizeof extent);
  std::memcpy(wide.data() + 44, &extent, sizeof extent);
  test::write_bytes(path, wide);
  message = error_of([&] { TensorCache cache(path); });
  BOOST_TEST(contains(message, path.string() + ": offset 28: expected a input shape of at most 2^40 elements"), message);
}

BOOST_AUTO_TEST_CASE(wrong_shape_magic_or_version_is_an_error) {
  const fs::path path = dir() / "shape.cache";
  write_tensor_cache(path, ramp_dataset(3, 3, 2, 2));
  BOOST_TEST(TensorCache(path, Shape{3, 2, 2}).size() == 3);
  std::string message = error_of([&] { TensorCache cache(path, Shape{3, 4, 4}); });
  BOOST_TEST(contains(message, path.string() + ": holds inputs of shape [3, 2, 2], expected [3, 4, 4]"), message);
  std::vector<char> bytes = file_bytes(path);
  bytes[8] = 2;  // version 2
  test::write_bytes(path, bytes);
  message = error_of([&] { TensorCache cache(path); });
  BOOST_TEST(contains(message, path.string() + ": offset 8: expected tensor cache version 1, found 2"), message);
  bytes[0] = 'X';
  test::write_bytes(path, bytes);
  message = error_of([&] { TensorCache cache(path); });
  BOOST_TEST(
      contains(message, path.string() + ": offset 0: expected the magic PTRCACHE of a tensor cache, found 'XTRCACHE'"),
      message);
}

BOOST_AUTO_TEST_CASE(examples_of_several_shapes_leave_no_file) {
  const fs::path path = dir() / "ragged.cache";
  const std::string message =
      error_of([&] { write_tensor_cache(path, RaggedDataset{}, AnyTransform{}, {.batch_size = 3}); });
  BOOST_TEST(contains(message, path.string() + ": example 3 transforms to input [1, 2, 3]"), message);
  BOOST_TEST(contains(message, "expected [1, 2, 2]"), message);
  BOOST_TEST(!fs::exists(path));
  std::int64_t left = 0;
  for (const auto& entry : fs::directory_iterator(dir())) left += contains(entry.path().string(), "ragged");
  BOOST_TEST(left == 0);  // no temporary file either
  // Within one batch the loader reports the difference.
  BOOST_CHECK_THROW(write_tensor_cache(path, RaggedDataset{}, AnyTransform{}, {.batch_size = 6}), Error);
}

// A cache is written as batches come, so a writer killed half-way has a large temporary on disk:
// SIGTERM must remove it and leave the previous cache as it was.
BOOST_AUTO_TEST_CASE(a_writer_ended_by_sigterm_leaves_no_temporary_and_the_old_cache) {
  const fs::path path = dir() / "interrupted.cache";
  write_tensor_cache(path, ramp_dataset(3, 1, 2, 2));
  const std::vector<char> old = file_bytes(path);
  test::ChildProcess writer([&](auto ready) {
    write_tensor_cache(path, StallingDataset{ready}, AnyTransform{}, {.batch_size = 16, .num_workers = 2});
  });
  BOOST_REQUIRE(writer.wait_ready(std::chrono::seconds(60)));
  // The four batches before the stall (768 KiB) reach the file, less what the stream still buffers.
  std::uintmax_t written = 0;
  for (int wait = 0; wait < 600 && written < (512u << 10); ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto partial = test::temporaries_beside(path);
    BOOST_REQUIRE_EQUAL(partial.size(), 1u);
    written = fs::file_size(partial.front());
  }
  BOOST_TEST(written >= (512u << 10));
  const int status = writer.end_with(SIGTERM);
  BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM));
  BOOST_TEST(test::temporaries_beside(path).empty());
  BOOST_TEST((file_bytes(path) == old));
  BOOST_TEST(TensorCache(path).size() == 3);
}

BOOST_AUTO_TEST_SUITE_END()
