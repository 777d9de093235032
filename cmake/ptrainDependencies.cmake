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

# The image component, ptrain::image (PNG through libpng, JPEG through libjpeg-turbo, for the
# io/image.hpp readers and the image datasets): built only when both libraries are found.
find_package(PNG QUIET)
find_package(JPEG QUIET)
if(PNG_FOUND AND JPEG_FOUND)
  add_library(ptrain_image INTERFACE)
  add_library(ptrain::image ALIAS ptrain_image)
  set_target_properties(ptrain_image PROPERTIES EXPORT_NAME image)
  target_link_libraries(ptrain_image INTERFACE ptrain PNG::PNG JPEG::JPEG)
  target_compile_definitions(ptrain_image INTERFACE PTRAIN_HAS_IMAGE)
  message(STATUS "ptrain: image component with libpng ${PNG_VERSION_STRING} and libjpeg ${JPEG_VERSION}")
else()
  message(STATUS "ptrain: libpng or libjpeg not found (Debian: libpng-dev libjpeg62-turbo-dev); no ptrain::image")
endif()
