#pragma once
// What gradients travel as: Fp32 (as computed), Fp16 or Bf16 (half the bytes; cast on the way
// out, summed in float by the backend, cast back on the way in), or RuntimeCompression.
#include <concepts>

#include "ptrain/core/half.hpp"

namespace ptrain {

// wire<T>: the type gradients of scalar type T travel as.
struct Fp32 {
  template <class T>
  using wire = T;
  static constexpr const char* name = "fp32";
};
struct Fp16 {
  template <class T>
  using wire = half;
  static constexpr const char* name = "fp16";
};
struct Bf16 {
  template <class T>
  using wire = bfloat16;
  static constexpr const char* name = "bf16";
};

// The format read when the program runs, from DataParallelOptions::compression: one policy type for
// the three, so a program that takes the format from a flag instantiates its Trainer once (the
// gradient buckets, the one part whose code differs, are made for the format asked).
struct RuntimeCompression {
  static constexpr const char* name = "chosen at run time";
};
enum class WireFormat { fp32, fp16, bf16 };

template <class C>
concept Compression = std::same_as<C, Fp32> || std::same_as<C, Fp16> || std::same_as<C, Bf16> ||
                      std::same_as<C, RuntimeCompression>;

}  // namespace ptrain
