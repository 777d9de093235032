# Runs ports/ptrain/portfile.cmake without vcpkg: the vcpkg helper functions it calls are given
# here as stand-ins doing the same configure and install steps with plain CMake (vcpkg's own add
# its toolchain, triplets, logs and post-build checks; a few of those checks are repeated below).
#   cmake -DPORT_DIR=<ports/ptrain> -DPACKAGES_DIR=<staging tree> -DBUILDTREES_DIR=<scratch>
#         -DFEATURES="core;mpi;..." -P run_portfile.cmake
cmake_minimum_required(VERSION 3.22)
foreach(var PORT_DIR PACKAGES_DIR BUILDTREES_DIR FEATURES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_portfile.cmake: -D${var}=... is required")
  endif()
endforeach()
file(READ "${PORT_DIR}/vcpkg.json" manifest)
string(JSON PORT GET "${manifest}" name)
string(JSON VERSION GET "${manifest}" version)
set(TARGET_TRIPLET x64-linux)
set(CURRENT_PACKAGES_DIR "${PACKAGES_DIR}")
set(CURRENT_BUILDTREES_DIR "${BUILDTREES_DIR}")

# vcpkg_check_features(OUT_FEATURE_OPTIONS <var> [FEATURES <feature> <option>...]
#                      [INVERTED_FEATURES <feature> <option>...]): -D<option>=ON/OFF by FEATURES.
function(vcpkg_check_features)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "OUT_FEATURE_OPTIONS" "FEATURES;INVERTED_FEATURES")
  set(options "")
  foreach(kind FEATURES INVERTED_FEATURES)
    list(LENGTH arg_${kind} count)
    math(EXPR odd "${count} % 2")
    if(odd)
      message(FATAL_ERROR "vcpkg_check_features: ${kind} takes <feature> <option> pairs")
    endif()
    while(arg_${kind})
      list(POP_FRONT arg_${kind} feature option)
      set(on OFF)
      if((feature IN_LIST FEATURES) STREQUAL (kind STREQUAL "FEATURES"))
        set(on ON)
      endif()
      list(APPEND options "-D${option}=${on}")
    endwhile()
  endforeach()
  set(${arg_OUT_FEATURE_OPTIONS} "${options}" PARENT_SCOPE)
endfunction()

# vcpkg_cmake_configure(SOURCE_PATH <dir> [OPTIONS ...]): the release configuration only, as the
# port's VCPKG_BUILD_TYPE asks.
function(vcpkg_cmake_configure)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "SOURCE_PATH" "OPTIONS")
  if(NOT VCPKG_BUILD_TYPE STREQUAL "release")
    message(FATAL_ERROR "run_portfile.cmake runs release-only ports; the portfile did not set VCPKG_BUILD_TYPE release")
  endif()
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${arg_SOURCE_PATH}" -B "${CURRENT_BUILDTREES_DIR}/${TARGET_TRIPLET}-rel"
                          -DCMAKE_BUILD_TYPE=Release "-DCMAKE_INSTALL_PREFIX=${CURRENT_PACKAGES_DIR}" ${arg_OPTIONS}
                  OUTPUT_FILE "${CURRENT_BUILDTREES_DIR}/config-${TARGET_TRIPLET}-rel-out.log"
                  ERROR_FILE "${CURRENT_BUILDTREES_DIR}/config-${TARGET_TRIPLET}-rel-err.log"
                  RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    file(READ "${CURRENT_BUILDTREES_DIR}/config-${TARGET_TRIPLET}-rel-err.log" errors)
    message(FATAL_ERROR "vcpkg_cmake_configure: configuring ${arg_SOURCE_PATH} failed (options ${arg_OPTIONS}):\n${errors}")
  endif()
  set_property(GLOBAL PROPERTY ptrain_vcpkg_build_dir "${CURRENT_BUILDTREES_DIR}/${TARGET_TRIPLET}-rel")
endfunction()

# vcpkg_cmake_install(): builds the install target (the prebuilt library, then the install).
function(vcpkg_cmake_install)
  get_property(build_dir GLOBAL PROPERTY ptrain_vcpkg_build_dir)
  cmake_host_system_information(RESULT jobs QUERY NUMBER_OF_LOGICAL_CORES)
  execute_process(COMMAND "${CMAKE_COMMAND}" --build "${build_dir}" --target install -j ${jobs}
                  OUTPUT_FILE "${CURRENT_BUILDTREES_DIR}/install-${TARGET_TRIPLET}-rel-out.log"
                  ERROR_FILE "${CURRENT_BUILDTREES_DIR}/install-${TARGET_TRIPLET}-rel-err.log"
                  RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    file(READ "${CURRENT_BUILDTREES_DIR}/install-${TARGET_TRIPLET}-rel-err.log" errors)
    message(FATAL_ERROR "vcpkg_cmake_install: building and installing ${build_dir} failed:\n${errors}")
  endif()
endfunction()

# vcpkg_cmake_config_fixup(): vcpkg moves the config to share/<port> and rewrites absolute
# paths; this port installs it there already, so the stand-in checks that nothing is left to fix.
function(vcpkg_cmake_config_fixup)
  set(config_dir "${CURRENT_PACKAGES_DIR}/share/${PORT}")
  if(NOT EXISTS "${config_dir}/${PORT}Config.cmake")
    message(FATAL_ERROR "vcpkg_cmake_config_fixup: no ${PORT}Config.cmake in ${config_dir}")
  endif()
  file(GLOB configs "${config_dir}/*.cmake")
  foreach(config IN LISTS configs)
    file(READ "${config}" text)
    string(FIND "${text}" "${CURRENT_PACKAGES_DIR}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "vcpkg_cmake_config_fixup: ${config} names the packages directory ${CURRENT_PACKAGES_DIR}")
    endif()
  endforeach()
endfunction()

file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}" "${CURRENT_BUILDTREES_DIR}")
file(MAKE_DIRECTORY "${CURRENT_BUILDTREES_DIR}")
include("${PORT_DIR}/portfile.cmake")

# Some of vcpkg's post-build checks: a copyright and usage file, headers, no empty directories.
foreach(required share/${PORT}/copyright share/${PORT}/usage include/ptrain/ptrain.hpp lib/libptrain_prebuilt.a)
  if(NOT EXISTS "${CURRENT_PACKAGES_DIR}/${required}")
    message(FATAL_ERROR "post-build check: the port installed no ${required}")
  endif()
endforeach()
file(GLOB_RECURSE entries LIST_DIRECTORIES true "${CURRENT_PACKAGES_DIR}/*")
foreach(entry IN LISTS entries)
  if(IS_DIRECTORY "${entry}")
    file(GLOB children "${entry}/*")
    if(NOT children)
      message(FATAL_ERROR "post-build check: empty directory ${entry} (vcpkg refuses ports that leave one)")
    endif()
  endif()
endforeach()
message(STATUS "portfile.cmake of ${PORT} ${VERSION} with features ${FEATURES} installed into ${CURRENT_PACKAGES_DIR}")
