# What the ptrain target needs, found the same way here and in the installed package's config
# (cmake/ptrainConfig.cmake.in includes this file).
include(CMakeFindDependencyMacro)

macro(ptrain_find_dependencies)
  find_package(Eigen3 3.3 REQUIRED NO_MODULE)
  find_package(ZLIB REQUIRED)
  find_package(Threads REQUIRED)
  find_package(OpenMP COMPONENTS CXX)
  set(BLA_VENDOR OpenBLAS)
  find_package(BLAS QUIET)
  unset(BLA_VENDOR)
  find_path(PTRAIN_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas)
endmacro()

ptrain_find_dependencies()

function(ptrain_link_dependencies target)
  target_link_libraries(${target} INTERFACE Eigen3::Eigen ZLIB::ZLIB Threads::Threads)
  if(OpenMP_CXX_FOUND)
    target_link_libraries(${target} INTERFACE OpenMP::OpenMP_CXX)
  endif()
  if(BLAS_FOUND AND PTRAIN_CBLAS_INCLUDE_DIR)
    target_link_libraries(${target} INTERFACE BLAS::BLAS)
    target_compile_definitions(${target} INTERFACE PTRAIN_HAS_CBLAS)
  endif()
endfunction()
