# `cmake --install` puts headers, libkolo, libkolo_training (kolo/gradient_sync.h),
# libkolo_kvstore (kolo/kvstore.h) and a CMake package in place, so that a user project does
# find_package(kolo) and links kolo::kolo, kolo::training and kolo::kvstore.
include(CMakePackageConfigHelpers)

install(TARGETS kolo kolo_training kolo_kvstore EXPORT koloTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# kolo/torch.h only with the library that implements it.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kolo DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        PATTERN torch.h EXCLUDE)
set(KOLO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kolo)
install(EXPORT koloTargets NAMESPACE kolo:: DESTINATION ${KOLO_CMAKE_DIR})
# Component torch: kolo::torch in its own export set, loaded by koloConfig.cmake only when a
# project asks for it (find_package(kolo COMPONENTS torch)), which then needs LibTorch.
if(TARGET kolo_torch)
  install(TARGETS kolo_torch EXPORT koloTorchTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/include/kolo/torch.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kolo)
  install(EXPORT koloTorchTargets NAMESPACE kolo:: DESTINATION ${KOLO_CMAKE_DIR})
endif()
set(KOLO_STATIC_DEPS "")
if(NOT BUILD_SHARED_LIBS)
  set(KOLO_STATIC_DEPS "find_dependency(MPI COMPONENTS C)")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/koloConfig.cmake.in
  ${PROJECT_BINARY_DIR}/koloConfig.cmake INSTALL_DESTINATION ${KOLO_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/koloConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/koloConfig.cmake ${PROJECT_BINARY_DIR}/koloConfigVersion.cmake
        DESTINATION ${KOLO_CMAKE_DIR})
