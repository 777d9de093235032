#pragma once
// A CSV log of one row per epoch. The whole file is rewritten atomically on every row, so a
// reader (or a crash) never sees a half-written line. A resumed run continues the log it finds:
// continue_after(epoch) keeps the rows of the epochs up to the checkpoint's, so that the log ends
// as the uninterrupted run's would. The file is first written at the first row or continuation:
// a run that fails before (a refused resume) leaves the earlier log as it was.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/io/atomic_file.hpp"

namespace ptrain::io {

class CsvLog {
 public:
  // A log of these columns, empty but for its header; what the file holds now is read for continue_after.
  CsvLog(std::filesystem::path path, std::vector<std::string> columns)
      : path_(std::move(path)), columns_(std::move(columns)), contents_(join(columns_)) {
    if (std::ifstream in{path_, std::ios::binary})
      previous_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // After the header, the rows the file held before this log started whose epoch (the first
  // column) is at most `epoch`; later ones are dropped. A file with another header, or a row that
  // does not start with an epoch number, is an error naming the file and the line.
  void continue_after(std::int64_t epoch) {
    const std::string header = join(columns_);
    std::string kept = header;
    std::istringstream lines(previous_);
    std::string line;
    for (std::int64_t number = 1; std::getline(lines, line); ++number) {
      if (number == 1) {
        check(line + "\n" == header, path_.string(), ": cannot continue this log: its header is '", line,
              "', this run writes '", header.substr(0, header.size() - 1), "'");
        continue;
      }
      const std::size_t comma = std::min(line.find(','), line.size());
      std::int64_t row_epoch = 0;
      const auto [at, error] = std::from_chars(line.data(), line.data() + comma, row_epoch);
      check(comma < line.size() && error == std::errc{} && at == line.data() + comma, path_.string(), ": line ",
            number, ": expected an epoch number in the first column, got '", line, "'");
      if (row_epoch <= epoch) kept += line + "\n";
    }
    contents_ = std::move(kept);
    write();
  }

  void append(const std::vector<double>& values) {
    check(values.size() == columns_.size(), path_.string(), ": a row of ", values.size(), " values for ",
          columns_.size(), " columns");
    std::ostringstream row;
    row.precision(8);
    for (std::size_t i = 0; i < values.size(); ++i) row << (i ? "," : "") << values[i];
    contents_ += row.str() + "\n";
    write();
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  void write() {
    io::write_atomically(path_, [&](std::ostream& out) { out << contents_; });
  }
  static std::string join(const std::vector<std::string>& columns) {
    std::string line;
    for (std::size_t i = 0; i < columns.size(); ++i) line += (i ? "," : "") + columns[i];
    return line + "\n";
  }

  std::filesystem::path path_;
  std::vector<std::string> columns_;
  std::string contents_;
  std::string previous_;  // the file before this log started
};

}  // namespace ptrain::io
