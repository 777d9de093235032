# What ptrain's targets need, written once. CMakeLists.txt includes this file to find the
# dependencies for the build; the installed ptrainConfig.cmake (this file and FindNCCL.cmake are
# installed next to it) includes it to find the same ones for a consumer. In the build an optional
# dependency that is missing switches its feature off; in the installed config only what the
# build found is looked for, and then it is required.
include(CMakeFindDependencyMacro)

# ptrain_find(REQUIRED|OPTIONAL <Package> [<find_package arguments>...])
# A macro: find_dependency must return from the config file that includes this one.
macro(ptrain_find need package)
  if(PTRAIN_INSTALLED_CONFIG)
    if("${need}" STREQUAL "REQUIRED" OR "${package}" IN_LIST PTRAIN_FOUND_DEPENDENCIES)
      find_dependency(${package} ${ARGN})
    endif()
  elseif("${need}" STREQUAL "REQUIRED")
    find_package(${package} ${ARGN} REQUIRED)
  else()
    find_package(${package} ${ARGN} QUIET)
    if(${package}_FOUND)
      list(APPEND PTRAIN_FOUND_DEPENDENCIES ${package})
    endif()
  endif()
endmacro()

# ptrain_find_dependencies(core|mpi|image|sentencepiece|cuda): the dependencies of ptrain::ptrain or of one
# component target.
macro(ptrain_find_dependencies component)
  if("${component}" STREQUAL "core")
    ptrain_find(REQUIRED Eigen3 3.3 NO_MODULE)
    ptrain_find(REQUIRED ZLIB)
    ptrain_find(REQUIRED Threads)
    ptrain_find(OPTIONAL OpenMP COMPONENTS CXX)
    set(BLA_VENDOR OpenBLAS)
    ptrain_find(OPTIONAL BLAS)
    unset(BLA_VENDOR)
    if(NOT PTRAIN_INSTALLED_CONFIG AND BLAS_FOUND)
      # kernels::gemm calls cblas_sgemm: OpenBLAS without its cblas.h is of no use.
      find_path(PTRAIN_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas)
      if(NOT PTRAIN_CBLAS_INCLUDE_DIR)
        list(REMOVE_ITEM PTRAIN_FOUND_DEPENDENCIES BLAS)
      endif()
    endif()
  elseif("${component}" STREQUAL "mpi")
    ptrain_find(OPTIONAL MPI COMPONENTS CXX)
  elseif("${component}" STREQUAL "image")
    ptrain_find(OPTIONAL PNG)
    ptrain_find(OPTIONAL JPEG)
  elseif("${component}" STREQUAL "sentencepiece")
    ptrain_find(OPTIONAL SentencePiece)  # cmake/FindSentencePiece.cmake: SentencePiece::SentencePiece, by pkg-config
  elseif("${component}" STREQUAL "cuda")
    ptrain_find(OPTIONAL CUDAToolkit)
    ptrain_find(OPTIONAL NCCL)  # cmake/FindNCCL.cmake: NCCL::NCCL, looked for next to the toolkit
  else()
    message(FATAL_ERROR "ptrain_find_dependencies(${component}): expected core, mpi, image, sentencepiece or cuda")
  endif()
endmacro()
