#pragma once
// Finding image files in directories: by extension (.png, .jpg, .jpeg, any case), in a sorted
// order that does not depend on the file system's.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ptrain/core/error.hpp"

namespace ptrain::detail {

inline constexpr const char* image_extensions_text = ".png, .jpg or .jpeg";

inline std::string lower(std::string text) {
  for (char& ch : text) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return text;
}

inline bool is_image_file(const std::filesystem::path& path) {
  const std::string ext = lower(path.extension().string());
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

inline void require_directory(const std::filesystem::path& dir, const char* what, const char* expected) {
  check(std::filesystem::is_directory(dir), what, ": ", dir.string(), " is not a directory: expected ", expected);
}

// The image files of dir, sorted by name; with `recursive`, those of its subdirectories too,
// ordered as torchvision's sorted(os.walk(...)): by directory path, then by name.
inline std::vector<std::filesystem::path> list_image_files(const std::filesystem::path& dir, bool recursive) {
  std::vector<std::pair<std::string, std::string>> found;  // (directory, file name)
  const auto add = [&](const std::filesystem::directory_entry& entry) {
    if (entry.is_regular_file() && is_image_file(entry.path()))
      found.emplace_back(entry.path().parent_path().string(), entry.path().filename().string());
  };
  if (recursive)
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             dir, std::filesystem::directory_options::follow_directory_symlink))
      add(entry);
  else
    for (const auto& entry : std::filesystem::directory_iterator(dir)) add(entry);
  std::sort(found.begin(), found.end());
  std::vector<std::filesystem::path> paths;
  paths.reserve(found.size());
  for (const auto& [parent, name] : found) paths.push_back(std::filesystem::path(parent) / name);
  return paths;
}

}  // namespace ptrain::detail
