#pragma once
// The umbrella header: the CPU library. CUDA comes in through ptrain/cuda.hpp, MPI through
// ptrain/mpi.hpp, so that a CPU-only user needs neither toolkit.
#include "ptrain/autograd/backward.hpp"
#include "ptrain/autograd/gradcheck.hpp"
#include "ptrain/autograd/ops/activation.hpp"
#include "ptrain/autograd/ops/linear.hpp"
#include "ptrain/autograd/variable.hpp"
#include "ptrain/core/error.hpp"
#include "ptrain/core/log.hpp"
#include "ptrain/core/rng.hpp"
#include "ptrain/core/shape.hpp"
#include "ptrain/device/cpu.hpp"
#include "ptrain/device/threads.hpp"
#include "ptrain/kernels/cpu/elementwise.hpp"
#include "ptrain/kernels/cpu/gemm.hpp"
#include "ptrain/kernels/functors.hpp"
#include "ptrain/tensor/tensor.hpp"
