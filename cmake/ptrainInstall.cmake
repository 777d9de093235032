# cmake --install writes a relocatable package: headers, the ptrain::ptrain target,
# ptrainConfig.cmake with its dependencies, and a version file.
include(CMakePackageConfigHelpers)

set(PTRAIN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ptrain)

install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ptrain EXPORT ptrainTargets)
install(EXPORT ptrainTargets NAMESPACE ptrain:: DESTINATION ${PTRAIN_CMAKE_DIR})
if(TARGET ptrain_image)  # defined with the dependencies, before the component list starts
  list(APPEND PTRAIN_COMPONENT_TARGETS image)
endif()
foreach(component IN LISTS PTRAIN_COMPONENT_TARGETS)
  install(TARGETS ptrain_${component} EXPORT ptrain_${component}Targets)
  install(EXPORT ptrain_${component}Targets NAMESPACE ptrain:: DESTINATION ${PTRAIN_CMAKE_DIR})
endforeach()

set(PTRAIN_WITH_CBLAS OFF)
if(BLAS_FOUND AND PTRAIN_CBLAS_INCLUDE_DIR)
  set(PTRAIN_WITH_CBLAS ON)
endif()
configure_package_config_file(cmake/ptrainConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ptrainConfig.cmake
  INSTALL_DESTINATION ${PTRAIN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ptrainConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ptrainConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/ptrainConfigVersion.cmake
        DESTINATION ${PTRAIN_CMAKE_DIR})
