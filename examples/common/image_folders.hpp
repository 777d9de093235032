#pragma once
// A training and a validation ImageFolder under one root, as the projects lay them out
// (TrainData/ValidationData, train/val), checked before any model is built: a wrong root, or
// class folders that differ between the two, fail with a sentence naming the flag.
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <ptrain/ptrain.hpp>

namespace examples {

struct SplitFolders {
  ptrain::ImageFolder train, validation;
};

inline SplitFolders open_split_folders(const std::string& flag, const std::filesystem::path& root,
                                       const std::string& train_dir, const std::string& validation_dir) {
  for (const auto& split : {train_dir, validation_dir})
    ptrain::check(std::filesystem::is_directory(root / split), flag, " ", root.string(), ": ",
                  (root / split).string(), " is not a directory; expected ", (root / train_dir).string(), " and ",
                  (root / validation_dir).string(), ", each with one folder of images per class");
  SplitFolders folders{ptrain::ImageFolder(root / train_dir), ptrain::ImageFolder(root / validation_dir)};
  const auto& names = folders.train.class_names();
  const auto& val_names = folders.validation.class_names();
  // A class's index is its folder's rank in sorted order: the same folders give the same labels.
  for (std::size_t k = 0; k < std::max(names.size(), val_names.size()); ++k) {
    const auto name = [k](const std::vector<std::string>& list) { return k < list.size() ? list[k] : "(none)"; };
    ptrain::check(name(names) == name(val_names), flag, " ", root.string(), ": class folder ", k + 1,
                  " in sorted order is '", name(names), "' in ", train_dir, " but '", name(val_names), "' in ",
                  validation_dir, "; expected the same class folders in both");
  }
  return folders;
}

}  // namespace examples
