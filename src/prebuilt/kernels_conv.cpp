// The prebuilt library's convolution kernels: the float and double specialisations that
// kernels/cpu/conv.hpp, conv_transpose.hpp and gemm.hpp list (core/prebuilt.hpp says how).
#define PTRAIN_PREBUILT_DEFINE_KERNELS
#include "ptrain/kernels/cpu/conv.hpp"
#include "ptrain/kernels/cpu/conv_transpose.hpp"
#include "ptrain/kernels/cpu/gemm.hpp"
