# ptrain as a vcpkg overlay port of the source tree it sits in (ports/ptrain/ in ptrain's
# repository): `vcpkg install ptrain --overlay-ports=<ptrain>/ports`, or a manifest whose
# vcpkg-configuration.json lists that directory in "overlay-ports". The port is ptrain's CMake
# install: the headers, the prebuilt library (built for the triplet's CPU, not with -march=native)
# and ptrainConfig.cmake under share/ptrain.
get_filename_component(SOURCE_PATH "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
set(VCPKG_BUILD_TYPE release)

# A feature on requires its CMake dependencies (the configure fails without them); off keeps
# CMake from using them even when the system has them.
vcpkg_check_features(OUT_FEATURE_OPTIONS feature_options
  FEATURES
    blas CMAKE_REQUIRE_FIND_PACKAGE_BLAS
    image CMAKE_REQUIRE_FIND_PACKAGE_PNG
    image CMAKE_REQUIRE_FIND_PACKAGE_JPEG
    mpi CMAKE_REQUIRE_FIND_PACKAGE_MPI
    cuda PTRAIN_CUDA
  INVERTED_FEATURES
    blas CMAKE_DISABLE_FIND_PACKAGE_BLAS
    image CMAKE_DISABLE_FIND_PACKAGE_PNG
    image CMAKE_DISABLE_FIND_PACKAGE_JPEG
    mpi CMAKE_DISABLE_FIND_PACKAGE_MPI
)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    ${feature_options}
    # No feature brings libsentencepiece yet: the port must not pick up the system's.
    -DCMAKE_DISABLE_FIND_PACKAGE_SentencePiece=ON
    -DPTRAIN_BUILD_TESTS=OFF
    -DPTRAIN_BUILD_EXAMPLES=OFF
    -DPTRAIN_BUILD_BENCH=OFF
    -DPTRAIN_BUILD_TOOLS=OFF
    -DPTRAIN_NATIVE_ARCH=OFF
    -DPTRAIN_INSTALL_CMAKEDIR=share/ptrain
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup()

file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
# vcpkg's copyright file is the license (Apache-2.0); plain CMake, as vcpkg_install_copyright does.
file(INSTALL "${SOURCE_PATH}/LICENSE" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}" RENAME copyright)
