#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/data/cifar10.hpp>

#include "../common/files.hpp"

using namespace ptrain;
namespace fs = std::filesystem;
BOOST_AUTO_TEST_SUITE(cifar10_test)

using Bytes = std::vector<std::uint8_t>;
using test::contains;
using test::error_of;

namespace {

const fs::path& dir() { return test::temp_dir("cifar10_test"); }

// Record `id`: its label, then pixel (c, y, x) = (id * 13 + c * 101 + y * 32 + x) mod 256.
void append_record(Bytes& out, int id, std::uint8_t label) {
  out.push_back(label);
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 1024; ++p) out.push_back(static_cast<std::uint8_t>((id * 13 + c * 101 + p) % 256));
}

// A CIFAR-10 binary directory: data_batch_k.bin holds records 10k .. 10k + k - 1 (k records),
// test_batch.bin records 100..103; record id's label is id mod 10.
fs::path write_cifar(const fs::path& root) {
  for (int k = 1; k <= 5; ++k) {
    Bytes bytes;
    for (int i = 0; i < k; ++i) append_record(bytes, 10 * k + i, static_cast<std::uint8_t>((10 * k + i) % 10));
    test::write_bytes(root / ("data_batch_" + std::to_string(k) + ".bin"), bytes);
  }
  Bytes test_bytes;
  for (int id = 100; id < 104; ++id) append_record(test_bytes, id, static_cast<std::uint8_t>(id % 10));
  test::write_bytes(root / "test_batch.bin", test_bytes);
  return root;
}

void check_record(const Cifar10& data, std::int64_t index, int id) {
  const Example e = data.get(index);
  BOOST_TEST(e.target == id % 10);
  BOOST_REQUIRE(e.input.shape() == (Shape{3, 32, 32}));
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 1024; p += 97)
      BOOST_TEST(e.input[c * 1024 + p] == static_cast<float>((id * 13 + c * 101 + p) % 256) / 255.0f);
}

}  // namespace

BOOST_AUTO_TEST_CASE(reads_the_train_batches_in_order_and_the_test_batch) {
  const fs::path root = write_cifar(dir() / "good");
  const Cifar10 train(root);
  BOOST_TEST(train.size() == 15);  // 1 + 2 + 3 + 4 + 5
  std::int64_t index = 0;
  for (int k = 1; k <= 5; ++k)
    for (int i = 0; i < k; ++i) check_record(train, index++, 10 * k + i);
  const Cifar10 test_split(root, Split::test);
  BOOST_TEST(test_split.size() == 4);
  for (int i = 0; i < 4; ++i) check_record(test_split, i, 100 + i);
  BOOST_TEST(std::string(Cifar10::class_names[3]) == "cat");
}

BOOST_AUTO_TEST_CASE(truncated_file_names_the_file_record_and_size) {
  const fs::path root = write_cifar(dir() / "truncated");
  Bytes bytes;
  append_record(bytes, 30, 0);
  append_record(bytes, 31, 1);
  bytes.resize(bytes.size() + 100, 7);  // record 2 has only 100 bytes
  const fs::path bad = test::write_bytes(root / "data_batch_3.bin", bytes);
  const std::string message = error_of([&] { Cifar10 data(root); });
  BOOST_TEST(contains(message, bad.string() + ": record 2 at offset 6146 is truncated: expected 3073 bytes"), message);
  BOOST_TEST(contains(message, "got 100"), message);
}

BOOST_AUTO_TEST_CASE(bad_label_missing_and_empty_files_are_errors) {
  const fs::path root = write_cifar(dir() / "bad");
  Bytes bytes;
  append_record(bytes, 100, 3);
  append_record(bytes, 101, 10);
  test::write_bytes(root / "test_batch.bin", bytes);
  std::string message = error_of([&] { Cifar10 data(root, Split::test); });
  BOOST_TEST(contains(message, (root / "test_batch.bin").string() +
                                   ": record 1 at offset 3073: label 10 out of range: expected 0..9"),
             message);
  test::write_bytes(root / "test_batch.bin", Bytes{});
  message = error_of([&] { Cifar10 data(root, Split::test); });
  BOOST_TEST(contains(message, (root / "test_batch.bin").string() + ": empty: expected 3073-byte CIFAR-10 records"),
             message);
  fs::remove(root / "data_batch_4.bin");
  message = error_of([&] { Cifar10 data(root); });
  BOOST_TEST(contains(message, (root / "data_batch_4.bin").string() + " not found"), message);
}

BOOST_AUTO_TEST_SUITE_END()
