#pragma once
// MPI has no 16-bit float: MpiWireTypes registers a 2-byte datatype for half and one for
// bfloat16, with sum operations that add in float and round once per pairwise sum. One set per
// MpiSession, created after MPI_Init and freed before MPI_Finalize.
#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

#include <mpi.h>

#include "ptrain/core/error.hpp"
#include "ptrain/core/half.hpp"

namespace ptrain {

namespace detail {

inline void mpi_check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail(call, " failed: ", std::string(text, static_cast<std::size_t>(length)));
}

// inout[i] = T(float(in[i]) + float(inout[i])), converted in blocks so that the casts vectorise.
template <class T>
void mpi_sum_in_float(void* in, void* inout, int* length, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  constexpr std::size_t block = 1024;
  alignas(64) float fa[block];
  alignas(64) float fb[block];
  const auto n = static_cast<std::size_t>(*length);
  for (std::size_t at = 0; at < n; at += block) {
    const std::size_t m = std::min(block, n - at);
    convert(std::span<const T>(a + at, m), std::span<float>(fa, m));
    convert(std::span<const T>(b + at, m), std::span<float>(fb, m));
    for (std::size_t i = 0; i < m; ++i) fb[i] += fa[i];
    convert(std::span<const float>(fb, m), std::span<T>(b + at, m));
  }
}

}  // namespace detail

class MpiWireTypes {
 public:
  // Needs MPI initialised.
  MpiWireTypes() {
    make_type(half_, "ptrain_float16");
    make_type(bfloat16_, "ptrain_bfloat16");
    detail::mpi_check(MPI_Op_create(&detail::mpi_sum_in_float<half>, 1, &sum_half_), "MPI_Op_create (float16 sum)");
    detail::mpi_check(MPI_Op_create(&detail::mpi_sum_in_float<bfloat16>, 1, &sum_bfloat16_),
                      "MPI_Op_create (bfloat16 sum)");
  }
  ~MpiWireTypes() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (sum_half_ != MPI_OP_NULL) MPI_Op_free(&sum_half_);
    if (sum_bfloat16_ != MPI_OP_NULL) MPI_Op_free(&sum_bfloat16_);
    if (half_ != MPI_DATATYPE_NULL) MPI_Type_free(&half_);
    if (bfloat16_ != MPI_DATATYPE_NULL) MPI_Type_free(&bfloat16_);
  }
  MpiWireTypes(const MpiWireTypes&) = delete;
  MpiWireTypes& operator=(const MpiWireTypes&) = delete;

  // The MPI datatype of T (float, double, half or bfloat16).
  template <class T>
  MPI_Datatype datatype() const {
    if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
    else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
    else if constexpr (std::is_same_v<T, half>) return half_;
    else if constexpr (std::is_same_v<T, bfloat16>) return bfloat16_;
    else static_assert(sizeof(T) == 0, "MpiWireTypes: no MPI datatype for this element type");
  }
  // The MPI operation that sums T.
  template <class T>
  MPI_Op sum() const {
    if constexpr (std::is_same_v<T, half>) return sum_half_;
    else if constexpr (std::is_same_v<T, bfloat16>) return sum_bfloat16_;
    else return MPI_SUM;
  }

 private:
  static void make_type(MPI_Datatype& type, const char* name) {
    detail::mpi_check(MPI_Type_contiguous(2, MPI_BYTE, &type), "MPI_Type_contiguous");
    detail::mpi_check(MPI_Type_commit(&type), "MPI_Type_commit");
    MPI_Type_set_name(type, name);
  }

  MPI_Datatype half_ = MPI_DATATYPE_NULL;
  MPI_Datatype bfloat16_ = MPI_DATATYPE_NULL;
  MPI_Op sum_half_ = MPI_OP_NULL;
  MPI_Op sum_bfloat16_ = MPI_OP_NULL;
};

}  // namespace ptrain
