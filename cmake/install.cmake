# What `cmake --install` lays out, and the Debian packages CPack makes of it.
#
# Three components, split as Debian splits a library:
#   runtime  libzaris.so.0.3                        -> libzaris0.3
#   dev      headers, libzaris.so, libzaris.a,
#            the CMake package and zaris.pc         -> libzaris-dev
#   tools    zarisctl, its man page and completion,
#            the janitor's systemd unit             -> zaris-tools
include(CMakePackageConfigHelpers)

set(ZARIS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/zaris)

install(DIRECTORY include/zaris DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)

# find_package(zaris) gives zaris::zaris, the shared library when it was
# built, and zaris::zaris_static.
set_target_properties(zaris PROPERTIES EXPORT_NAME zaris_static)
install(TARGETS zaris EXPORT zarisTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
if(TARGET zaris_shared)
  set_target_properties(zaris_shared PROPERTIES EXPORT_NAME zaris)
  install(TARGETS zaris_shared EXPORT zarisTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
                  NAMELINK_COMPONENT dev)
endif()
install(EXPORT zarisTargets NAMESPACE zaris:: DESTINATION ${ZARIS_CMAKE_DIR} COMPONENT dev)

configure_package_config_file(cmake/zarisConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/zarisConfig.cmake
                              INSTALL_DESTINATION ${ZARIS_CMAKE_DIR})
# 0.x: a minor release may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zarisConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zarisConfig.cmake ${PROJECT_BINARY_DIR}/zarisConfigVersion.cmake
        DESTINATION ${ZARIS_CMAKE_DIR} COMPONENT dev)

# pkg-config: paths relative to the .pc file, so that the tree can move.
file(RELATIVE_PATH ZARIS_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig
     ${CMAKE_INSTALL_PREFIX})
configure_file(cmake/zaris.pc.in ${PROJECT_BINARY_DIR}/zaris.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/zaris.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)

# Debian packages: `cpack -G DEB` in the build directory.
set(CPACK_PACKAGE_NAME zaris)
set(CPACK_PACKAGE_VENDOR "zaris")
set(CPACK_PACKAGE_CONTACT "zaris maintainers <zaris@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "leases, locks and leader election for the processes of one host, in shared memory")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# zarisctl's dependency on libzaris.so.0.3, which this build made.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libzaris${ZARIS_SOVERSION})
# A shlibs file, so that packages built against libzaris-dev get their
# dependency on libzaris0.3 from dpkg-shlibdeps; exact while 0.x.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
# ldconfig runs after the library is installed or removed (Debian policy 8.1.1).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/debian/triggers)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libzaris-dev)
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME zaris-tools)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libzaris${ZARIS_SOVERSION} (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS
    "libzaris${ZARIS_SOVERSION} (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION "zaris shared library")
set(CPACK_COMPONENT_DEV_DESCRIPTION "zaris headers, static library, CMake package and pkg-config file")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "zarisctl and the janitor's systemd unit")
include(CPack)
