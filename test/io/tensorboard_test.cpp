// TensorBoard event files: CRC-32C against its published check value, and files written by
// EventWriter read back by an independent decoder (test/common/event_file_reader.hpp): framing,
// both CRCs of each record, the file version and every scalar's tag, step and value; a damaged
// record is caught and named.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <filesystem>
#include <string>

#include <ptrain/io/detail/crc32c.hpp>
#include <ptrain/io/tensorboard.hpp>

#include "../common/event_file_reader.hpp"
#include "../common/files.hpp"

using namespace ptrain;
using namespace ptrain::test;

BOOST_AUTO_TEST_SUITE(tensorboard_test)

namespace {

// The event file an EventWriter in run leaves once add(writer) has added its scalars.
template <class Add>
std::filesystem::path events_written(const std::filesystem::path& run, Add&& add) {
  io::EventWriter writer(run);
  add(writer);
  return writer.path();
}

}  // namespace

BOOST_AUTO_TEST_CASE(crc32c_matches_the_castagnoli_check_value) {
  const char text[] = "123456789";
  BOOST_TEST(io::detail::crc32c(text, 9) == 0xE3069283u);  // RFC 3720, B.4's check value
  BOOST_TEST(io::detail::crc32c(text, 0) == 0u);
  const std::uint32_t crc = 0xE3069283u;
  BOOST_TEST(io::detail::masked_crc32c(text, 9) == ((crc >> 15) | (crc << 17)) + 0xA282EAD8u);
}

BOOST_AUTO_TEST_CASE(scalars_read_back_with_their_framing_and_crcs) {
  const auto run = temp_dir("tensorboard") / "run_a";
  const std::filesystem::path path = events_written(run, [](io::EventWriter& writer) {
    writer.add_scalar("train/loss", 0.6931471805599453, 1);
    writer.add_scalar("train/loss", 0.25, 2);
    writer.add_scalar("lr", 1e-3, 2);
    writer.add_scalar("far", -3.5e20, std::int64_t{1} << 40);  // a step of six varint bytes
    writer.flush();
    // Flushed: a reader sees every record while the writer is still open.
    BOOST_TEST(read_event_file(writer.path()).scalars.size() == 4u);
  });
  BOOST_TEST(path.parent_path() == run);
  BOOST_TEST(path.filename().string().starts_with("events.out.tfevents."));
  BOOST_TEST(event_file_in(run) == path);
  const EventFile file = read_event_file(path);
  BOOST_TEST(file.file_version == "brain.Event:2");
  BOOST_TEST(file.records == 5u);
  BOOST_REQUIRE(file.scalars.size() == 4u);
  BOOST_TEST(file.scalars[0].tag == "train/loss");
  BOOST_TEST(file.scalars[0].step == 1);
  BOOST_TEST(file.scalars[0].value == 0.6931471805599453f);
  BOOST_TEST(file.scalars[1].value == 0.25f);
  BOOST_TEST(file.scalars[2].tag == "lr");
  BOOST_TEST(file.scalars[2].value == 1e-3f);
  BOOST_TEST(file.scalars[3].step == std::int64_t{1} << 40);
  BOOST_TEST(file.scalars[3].value == -3.5e20f);
  for (const auto& s : file.scalars) BOOST_TEST(s.wall_time > 1.6e9);  // seconds since 1970, after 2020
}

BOOST_AUTO_TEST_CASE(a_damaged_record_is_named) {
  const std::filesystem::path path =
      events_written(temp_dir("tensorboard") / "run_b", [](io::EventWriter& writer) { writer.add_scalar("x", 1.0, 1); });
  const Bytes good = read_bytes(path);
  const std::size_t second = 12 + [&] {
    std::uint64_t length;
    std::memcpy(&length, good.data(), 8);
    return static_cast<std::size_t>(length) + 4;
  }();
  Bytes bad = good;
  bad[second + 12 + 3] ^= 0x10;  // in the second record's data
  write_bytes(path, bad);
  std::string message = error_of([&] { read_event_file(path); });
  BOOST_TEST(contains(message, "record 1: the data's CRC does not match"), message);
  bad = good;
  bad[second] ^= 0x01;  // its length
  write_bytes(path, bad);
  message = error_of([&] { read_event_file(path); });
  BOOST_TEST(contains(message, "record 1: the length's CRC does not match"), message);
  bad = Bytes(good.begin(), good.end() - 2);  // cut short
  write_bytes(path, bad);
  message = error_of([&] { read_event_file(path); });
  BOOST_TEST((contains(message, "record 1:") && contains(message, "run past the file's end")), message);
}

BOOST_AUTO_TEST_CASE(an_unwritable_run_directory_is_named) {
  const auto blocker = temp_dir("tensorboard") / "a_file";
  write_bytes(blocker, Bytes{1});
  const std::string message = error_of([&] { io::EventWriter writer(blocker / "run"); });
  BOOST_TEST(contains(message, (blocker / "run").string()), message);
}

BOOST_AUTO_TEST_SUITE_END()
