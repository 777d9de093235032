# cmake --install writes a relocatable package: headers, the prebuilt library, the ptrain::ptrain,
# ptrain::header_only and ptrain::prebuilt targets,
# ptrainConfig.cmake with its dependencies, and a version file.
include(CMakePackageConfigHelpers)

# vcpkg's port installs it under share/ptrain, where vcpkg looks for configs.
set(PTRAIN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/ptrain CACHE STRING
    "Where ptrainConfig.cmake is installed, relative to the prefix")
set(PTRAIN_CMAKE_DIR ${PTRAIN_INSTALL_CMAKEDIR})

install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET ptrain_prebuilt)
  install(TARGETS ptrain ptrain_header_only ptrain_prebuilt EXPORT ptrainTargets)
else()
  install(TARGETS ptrain ptrain_header_only EXPORT ptrainTargets)
endif()
install(EXPORT ptrainTargets NAMESPACE ptrain:: DESTINATION ${PTRAIN_CMAKE_DIR})
foreach(component IN LISTS PTRAIN_COMPONENT_TARGETS)
  install(TARGETS ptrain_${component} EXPORT ptrain_${component}Targets)
  install(EXPORT ptrain_${component}Targets NAMESPACE ptrain:: DESTINATION ${PTRAIN_CMAKE_DIR})
endforeach()

configure_package_config_file(cmake/ptrainConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ptrainConfig.cmake
  INSTALL_DESTINATION ${PTRAIN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ptrainConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ptrainConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/ptrainConfigVersion.cmake
              cmake/ptrainDependencies.cmake cmake/FindNCCL.cmake cmake/FindSentencePiece.cmake
        DESTINATION ${PTRAIN_CMAKE_DIR})
