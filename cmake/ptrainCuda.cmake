# The CUDA component. PTRAIN_CUDA=AUTO compiles the CUDA translation units when nvcc is found;
# no GPU is needed to compile, only to run.
ptrain_find_dependencies(cuda)  # the toolkit, and NCCL next to it
if(PTRAIN_CUDA STREQUAL "AUTO")
  set(PTRAIN_CUDA_ENABLED ${CUDAToolkit_FOUND})
elseif(PTRAIN_CUDA)
  if(NOT CUDAToolkit_FOUND)
    message(FATAL_ERROR "PTRAIN_CUDA=ON but no CUDA toolkit was found (set CUDAToolkit_ROOT)")
  endif()
  set(PTRAIN_CUDA_ENABLED ON)
else()
  set(PTRAIN_CUDA_ENABLED OFF)
endif()

if(PTRAIN_CUDA_ENABLED)
  if(NOT DEFINED CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  add_library(ptrain_cuda INTERFACE)
  add_library(ptrain::cuda ALIAS ptrain_cuda)
  set_target_properties(ptrain_cuda PROPERTIES EXPORT_NAME cuda)
  target_link_libraries(ptrain_cuda INTERFACE ptrain CUDA::cudart CUDA::cublas)
  # NCCL (comm/nccl_comm.hpp) sits in the toolkit here; elsewhere it may be missing.
  if(TARGET NCCL::NCCL)
    target_link_libraries(ptrain_cuda INTERFACE NCCL::NCCL)
  else()
    message(STATUS "ptrain: no NCCL library found; NcclComm is not available")
  endif()
  # A .cu file of a ptrain user needs C++20 for the CUDA language, Eigen kept host-only
  # (EIGEN_NO_CUDA: otherwise Eigen marks its functions __host__ __device__ and nvcc warns about
  # each constexpr std call in them), and OpenMP in the host code nvcc hands to the host compiler.
  # A flag, not the cuda_std_20 feature: CMake before 3.26 does not know nvcc's C++20.
  # --expt-relaxed-constexpr: kernels copy Eigen's half/bfloat16, whose constexpr constructors
  # are host functions under EIGEN_NO_CUDA.
  target_compile_options(ptrain_cuda INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --expt-relaxed-constexpr>)
  target_compile_definitions(ptrain_cuda INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:EIGEN_NO_CUDA>)
  if(OpenMP_CXX_FOUND)
    target_compile_options(ptrain_cuda INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-fopenmp>)
  endif()
  list(APPEND PTRAIN_COMPONENT_TARGETS cuda)
  message(STATUS "ptrain: CUDA translation units compile with ${CMAKE_CUDA_COMPILER} for ${CMAKE_CUDA_ARCHITECTURES}")
else()
  message(STATUS "ptrain: no CUDA toolkit; the CUDA checks are not built")
endif()
