#pragma once
// triplet_transfer's --augment, the tripnet study's augmentation of endoscopic frames, which have
// no up, down, left or right: a horizontal and a vertical flip (each with probability 1/2), a
// contrast jitter (ColorJitter(contrast=0.2): on images in [0, 1], before normalisation) and a
// quarter turn by 0-3 (square images keep their shape).
#include <ptrain/data/color_transforms.hpp>
#include <ptrain/data/geometric_transforms.hpp>
#include <ptrain/data/transforms.hpp>

namespace examples {

inline constexpr double frame_contrast_strength = 0.2;

inline ptrain::AnyTransform frame_augmentation() {
  return ptrain::Compose(ptrain::RandomHorizontalFlip(), ptrain::RandomVerticalFlip(),
                         ptrain::RandomContrast(frame_contrast_strength), ptrain::RandomRotation90());
}

}  // namespace examples
