#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <ptrain/io/csv_log.hpp>

#include "../common/files.hpp"

using namespace ptrain;
namespace fs = std::filesystem;
using test::contains;

BOOST_AUTO_TEST_SUITE(csv_log_test)

namespace {

std::string text_of(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

BOOST_AUTO_TEST_CASE(a_new_log_replaces_the_file_at_its_first_row) {
  const fs::path path = test::temp_dir("csv_log_new") / "log.csv";
  write_text(path, "epoch,loss\n1,9\n");
  io::CsvLog log(path, {"epoch", "loss"});
  BOOST_TEST(text_of(path) == "epoch,loss\n1,9\n");  // untouched until there is a row
  log.append({1, 0.5});
  log.append({2, 0.25});
  BOOST_TEST(text_of(path) == "epoch,loss\n1,0.5\n2,0.25\n");
}

BOOST_AUTO_TEST_CASE(a_continued_log_keeps_the_rows_up_to_the_epoch_and_drops_later_ones) {
  const fs::path path = test::temp_dir("csv_log_continued") / "log.csv";
  write_text(path, "epoch,loss\n1,0.5\n2,0.25\n3,0.125\n");
  io::CsvLog log(path, {"epoch", "loss"});
  log.continue_after(2);
  BOOST_TEST(text_of(path) == "epoch,loss\n1,0.5\n2,0.25\n");
  log.append({3, 0.2});
  BOOST_TEST(text_of(path) == "epoch,loss\n1,0.5\n2,0.25\n3,0.2\n");
}

BOOST_AUTO_TEST_CASE(continuing_without_a_file_starts_one) {
  const fs::path path = test::temp_dir("csv_log_missing") / "log.csv";
  io::CsvLog log(path, {"epoch", "loss"});
  log.continue_after(4);
  BOOST_TEST(text_of(path) == "epoch,loss\n");
  log.append({5, 1});
  BOOST_TEST(text_of(path) == "epoch,loss\n5,1\n");
}

BOOST_AUTO_TEST_CASE(another_header_or_a_row_without_an_epoch_is_refused_and_the_file_kept) {
  const fs::path path = test::temp_dir("csv_log_refused") / "log.csv";
  write_text(path, "epoch,accuracy\n1,0.5\n");
  const std::string header = test::error_of([&] { io::CsvLog(path, {"epoch", "loss"}).continue_after(1); });
  BOOST_TEST(contains(header, path.string() + ": cannot continue this log: its header is 'epoch,accuracy', this run "
                                              "writes 'epoch,loss'"),
             header);
  BOOST_TEST(text_of(path) == "epoch,accuracy\n1,0.5\n");
  write_text(path, "epoch,loss\n1,0.5\nfirst,0.25\n");
  const std::string row = test::error_of([&] { io::CsvLog(path, {"epoch", "loss"}).continue_after(1); });
  BOOST_TEST(contains(row, path.string() + ": line 3: expected an epoch number in the first column, got 'first,0.25'"),
             row);
  BOOST_TEST(text_of(path) == "epoch,loss\n1,0.5\nfirst,0.25\n");
}

BOOST_AUTO_TEST_SUITE_END()
