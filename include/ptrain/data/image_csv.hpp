#pragma once
// Images listed in a CSV file with a header, one row per image: a column naming the image (its
// file name in the image directory without the extension, e.g. Kaggle's trainLabels.csv
// `image,level` with images/<image>.jpeg) and a column holding its integer class, or several
// (label_columns: a triplet's instrument, verb and target), whose labels get() gives as the
// example's target_map [K], so that the loader stacks them into targets [B, K] (MultiHead takes
// column k as head k's). Every image is checked to exist when the dataset opens; each get()
// decodes one to [C, H, W] in [0, 1].
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/data/dataset.hpp"
#include "ptrain/data/detail/image_files.hpp"
#include "ptrain/io/image.hpp"

namespace ptrain {

struct ImageCsvOptions {
  std::string image_column = "image";
  std::string label_column = "level";
  std::vector<std::string> label_columns;  // when given, these (in order) instead of label_column
  std::string extension = ".jpeg";  // appended to the image column's value
  io::ColorMode mode = io::ColorMode::rgb;
};

namespace detail {
// The fields of one CSV line: comma-separated, optionally double-quoted with "" for a quote.
inline std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"')
        fields.back() += line[++i];
      else if (ch == '"')
        quoted = false;
      else
        fields.back() += ch;
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      fields.emplace_back();
    } else {
      fields.back() += ch;
    }
  }
  return fields;
}

inline std::size_t csv_column(const std::vector<std::string>& header, const std::string& name,
                              const std::filesystem::path& csv, const std::string& header_line) {
  for (std::size_t c = 0; c < header.size(); ++c)
    if (header[c] == name) return c;
  fail(csv.string(), ": line 1: expected a column '", name, "' in the header, found: ", header_line);
}
}  // namespace detail

class ImageCsv {
 public:
  ImageCsv(const std::filesystem::path& csv, const std::filesystem::path& image_dir, ImageCsvOptions options = {})
      : csv_(csv), options_(std::move(options)) {
    if (options_.label_columns.empty()) options_.label_columns = {options_.label_column};
    std::string label_names;
    for (const auto& name : options_.label_columns) label_names += (label_names.empty() ? "'" : ", '") + name + "'";
    detail::require_directory(image_dir, "ImageCsv", "the directory of the images the CSV lists");
    std::ifstream in(csv);
    check(in.good(), csv.string(), ": cannot open for reading");
    std::string line;
    check(static_cast<bool>(std::getline(in, line)), csv.string(),
          ": empty: expected a header line naming the columns '", options_.image_column, "' and ", label_names);
    strip_cr(line);
    if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // the UTF-8 byte-order mark spreadsheets write
    const auto header = detail::split_csv_line(line);
    const std::size_t image_col = detail::csv_column(header, options_.image_column, csv, line);
    std::vector<std::size_t> label_cols;
    for (const auto& name : options_.label_columns) label_cols.push_back(detail::csv_column(header, name, csv, line));
    std::int64_t row = 0;
    for (std::int64_t number = 2; std::getline(in, line); ++number) {
      strip_cr(line);
      if (line.empty()) continue;
      ++row;
      const auto fields = detail::split_csv_line(line);
      const std::string where =
          csv.string() + ": row " + std::to_string(row) + " (line " + std::to_string(number) + ")";
      check(fields.size() == header.size(), where, ": expected ", header.size(), " fields as the header, found ",
            fields.size());
      for (std::size_t k = 0; k < label_cols.size(); ++k) {
        const std::string& label = fields[label_cols[k]];
        std::int64_t value = -1;
        const auto [end, error] = std::from_chars(label.data(), label.data() + label.size(), value);
        check(error == std::errc() && end == label.data() + label.size() && value >= 0, where, ": column '",
              options_.label_columns[k], "' holds '", label, "': expected a non-negative integer class");
        targets_.push_back(value);
      }
      const std::filesystem::path file = image_dir / (fields[image_col] + options_.extension);
      std::error_code unreadable;  // a name too long for the file system: an Error here, not a filesystem_error
      check(std::filesystem::is_regular_file(file, unreadable), where, ": image '", fields[image_col],
            "' is missing: expected ", file.string(), unreadable ? " (" + unreadable.message() + ")" : std::string());
      files_.push_back(file);
    }
    check(!files_.empty(), csv.string(), ": no rows after the header: expected one line per image with its '",
          options_.image_column, "' and ", label_names);
  }

  std::int64_t size() const { return static_cast<std::int64_t>(files_.size()); }
  Example get(std::int64_t i) const {
    check(i >= 0 && i < size(), "ImageCsv: index ", i, " out of range for the ", size(), " rows of ", csv_.string());
    const auto k = static_cast<std::size_t>(i);
    Tensor<float> image = io::read_image_tensor(files_[k], options_.mode);
    const std::int64_t labels = label_count();
    if (labels == 1) return {std::move(image), targets_[k]};
    Tensor<std::int64_t> map({labels});
    for (std::int64_t c = 0; c < labels; ++c) map[c] = targets_[k * static_cast<std::size_t>(labels) + static_cast<std::size_t>(c)];
    return {std::move(image), 0, std::move(map)};
  }

  const std::vector<std::filesystem::path>& files() const { return files_; }
  // label_count() per row, row after row.
  const std::vector<std::int64_t>& targets() const { return targets_; }
  std::int64_t label_count() const { return static_cast<std::int64_t>(options_.label_columns.size()); }

 private:
  static void strip_cr(std::string& line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
  }

  std::filesystem::path csv_;
  ImageCsvOptions options_;
  std::vector<std::filesystem::path> files_;
  std::vector<std::int64_t> targets_;
};

}  // namespace ptrain
