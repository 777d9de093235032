#pragma once
// Integer indices an op reads on its device (cross_entropy's targets, embedding's rows), given as
// int64 on the host and copied over once per call.
#include <cstdint>
#include <span>

#include "ptrain/device/device.hpp"
#include "ptrain/tensor/tensor.hpp"

namespace ptrain::detail {

template <Device D>
Tensor<std::int64_t, D> indices_on(std::span<const std::int64_t> indices) {
  Tensor<std::int64_t, D> out(Shape{static_cast<std::int64_t>(indices.size())});
  if (!indices.empty()) D::copy_from_host(out.data(), indices.data(), indices.size());
  return out;
}

}  // namespace ptrain::detail
