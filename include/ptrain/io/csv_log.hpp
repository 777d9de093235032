#pragma once
// A CSV log of one row per epoch. The whole file is rewritten atomically on every row, so a
// reader (or a crash) never sees a half-written line.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "ptrain/io/atomic_file.hpp"

namespace ptrain::io {

class CsvLog {
 public:
  CsvLog(std::filesystem::path path, std::vector<std::string> columns)
      : path_(std::move(path)), columns_(std::move(columns)) {
    contents_ = join(columns_);
    io::write_atomically(path_, [&](std::ostream& out) { out << contents_; });
  }

  void append(const std::vector<double>& values) {
    check(values.size() == columns_.size(), path_.string(), ": a row of ", values.size(), " values for ",
          columns_.size(), " columns");
    std::ostringstream row;
    row.precision(8);
    for (std::size_t i = 0; i < values.size(); ++i) row << (i ? "," : "") << values[i];
    contents_ += row.str() + "\n";
    io::write_atomically(path_, [&](std::ostream& out) { out << contents_; });
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  static std::string join(const std::vector<std::string>& columns) {
    std::string line;
    for (std::size_t i = 0; i < columns.size(); ++i) line += (i ? "," : "") + columns[i];
    return line + "\n";
  }

  std::filesystem::path path_;
  std::vector<std::string> columns_;
  std::string contents_;
};

}  // namespace ptrain::io
