// check and fail: the message is the parts written one after the other exactly as an std::ostream
// writes them (numbers, characters, paths quoted, a type's own operator<<), a Hex part in
// hexadecimal, and nothing is built or thrown where the condition holds.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>

#include <ptrain/core/error.hpp>
#include <ptrain/core/shape.hpp>

#include "../common/files.hpp"

using namespace ptrain;
using ptrain::test::error_of;

BOOST_AUTO_TEST_SUITE(error_test)

namespace {

enum class Colour { red };
std::ostream& operator<<(std::ostream& out, Colour) { return out << "<red>"; }

// Counts the times a message wrote it.
struct Probe {
  int* count;
};
std::ostream& operator<<(std::ostream& out, const Probe& p) {
  ++*p.count;
  return out << "probe";
}

template <class... Parts>
std::string streamed(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_failed_check_says_its_parts_as_a_stream_writes_them) {
  const std::string name = "layer";
  const std::string_view view = "view";
  const char* pointer = "pointer";
  const std::filesystem::path file = "runs/a b.csv";
  const Shape shape{2, 3};
  const auto expected = streamed("text ", name, ' ', view, ' ', pointer, ' ', -7, ' ', 7u, ' ', std::int64_t{-1} << 40,
                                 ' ', std::uint64_t{1} << 63, ' ', std::size_t{42}, ' ', true, false, ' ',
                                 static_cast<signed char>('s'), static_cast<unsigned char>('u'), ' ', 0.1, ' ', 1e-7,
                                 ' ', 1234567.0, ' ', 2.5f, ' ', file, ' ', shape, ' ', Colour::red);
  const auto message = error_of([&] {
    check(false, "text ", name, ' ', view, ' ', pointer, ' ', -7, ' ', 7u, ' ', std::int64_t{-1} << 40, ' ',
          std::uint64_t{1} << 63, ' ', std::size_t{42}, ' ', true, false, ' ', static_cast<signed char>('s'),
          static_cast<unsigned char>('u'), ' ', 0.1, ' ', 1e-7, ' ', 1234567.0, ' ', 2.5f, ' ', file, ' ', shape, ' ',
          Colour::red);
  });
  BOOST_TEST(message == expected);
  BOOST_TEST(message ==
             "text layer view pointer -7 7 -1099511627776 9223372036854775808 42 10 su 0.1 1e-07 1.23457e+06 2.5 "
             "\"runs/a b.csv\" [2, 3] <red>");
}

BOOST_AUTO_TEST_CASE(hex_parts_are_written_in_hexadecimal_and_the_numbers_after_them_in_decimal) {
  BOOST_TEST(error_of([] { fail("byte 0x", detail::Hex{0xff}, " at ", 10); }) == "byte 0xff at 10");
  BOOST_TEST(detail::concat(detail::Hex{0x5}, '/', 16) == "5/16");
}

BOOST_AUTO_TEST_CASE(a_check_that_holds_throws_nothing_and_formats_nothing) {
  int formatted = 0;
  BOOST_CHECK_NO_THROW(check(true, "never ", Probe{&formatted}));
  BOOST_TEST(formatted == 0);
  BOOST_TEST(error_of([&] { check(false, "once ", Probe{&formatted}); }) == "once probe");
  BOOST_TEST(formatted == 1);
}

BOOST_AUTO_TEST_CASE(concat_joins_the_parts_without_throwing) {
  BOOST_TEST(detail::concat("loss scale ", 65536.0, ", step ", std::int64_t{3}) == "loss scale 65536, step 3");
  BOOST_TEST(detail::concat() == "");
}

BOOST_AUTO_TEST_SUITE_END()
