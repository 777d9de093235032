#pragma once
// Marks functions that nvcc compiles for both host and device; plain C++ on a CPU-only build.
#if defined(__CUDACC__)
#define PTRAIN_HOST_DEVICE __host__ __device__
#else
#define PTRAIN_HOST_DEVICE
#endif
