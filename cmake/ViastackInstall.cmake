# Installing viastack: where each part goes under the prefix, the RPATHs that
# find the libraries from there, the CMake package, the pkg-config files and
# the Debian packages (cpack -G DEB). The top-level CMakeLists.txt includes
# this before the layers; each layer calls viastack_install_library() and
# viastack_install_programs() for what it builds, and the top level calls
# viastack_install_package() after them.
#
# The installed tree is relocatable: programs and libraries find the libraries
# through $ORIGIN-relative RPATHs, the pkg-config files find the prefix from
# ${pcfiledir}, the CMake package from its own folder, and viampicc/viampicxx
# from theirs. Nothing of the build tree is written into it.
#
# The parts go to three install components, which are also the Debian packages:
#   runtime  the shared libraries and the documentation      (viastack)
#   dev      headers, namelinks, CMake package, pkg-config
#            files, viampicc/viampicxx                        (viastack-dev)
#   bin      viarun and the benchmarks                        (viastack-bin)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

foreach(dir BINDIR LIBDIR INCLUDEDIR DATAROOTDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    message(FATAL_ERROR "CMAKE_INSTALL_${dir}=${CMAKE_INSTALL_${dir}}: viastack installs relocatably, "
                        "so it needs a folder relative to the prefix")
  endif()
endforeach()

set(VIASTACK_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/viastack)
set(VIASTACK_PKGCONFIG_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
set(VIASTACK_DOC_INSTALL_DIR ${CMAKE_INSTALL_DATAROOTDIR}/doc/viastack)
# libmpi.so.40 goes to a folder of its own, off the loader's and the linker's
# default paths: on a system that also has Open MPI, Open MPI's programs keep
# Open MPI's libmpi.so.40 unless pointed at ours (LD_LIBRARY_PATH), and `-lmpi`
# means ours only through viampicc, the pkg-config file or the CMake package.
set(VIASTACK_MPI_INSTALL_LIBDIR ${CMAKE_INSTALL_LIBDIR}/viastack-mpi)
# Generated files that are installed, apart from the build tree's own.
set(VIASTACK_INSTALL_STAGING_DIR ${CMAKE_BINARY_DIR}/install-files)
set(VIASTACK_CMAKE_MODULE_DIR ${CMAKE_CURRENT_LIST_DIR})

# viastack_relative_path(OUT FROM TO): the folder TO as seen from the folder
# FROM, both relative to the same root; "." when they are the same.
function(viastack_relative_path out from to)
  file(RELATIVE_PATH path /${from} /${to})
  string(REGEX REPLACE "/$" "" path "${path}")
  if(path STREQUAL "")
    set(path .)
  endif()
  set(${out} ${path} PARENT_SCOPE)
endfunction()

# viastack_origin_rpath(OUT FROM TO): the RPATH entry with which a file
# installed in FROM finds the libraries installed in TO.
function(viastack_origin_rpath out from to)
  viastack_relative_path(path ${from} ${to})
  if(path STREQUAL ".")
    set(${out} "$ORIGIN" PARENT_SCOPE)
  else()
    set(${out} "$ORIGIN/${path}" PARENT_SCOPE)
  endif()
endfunction()

# Every executable made from here on finds the libraries from its own folder.
viastack_origin_rpath(CMAKE_INSTALL_RPATH ${CMAKE_INSTALL_BINDIR} ${CMAKE_INSTALL_LIBDIR})

# viastack_install_library(TARGET NAME component DESCRIPTION text
#                          [HEADERS folder] [LIBDIR folder]
#                          [REQUIRES components...]
#                          [CFLAGS flags...] [LIBS flags...] [BUILD_TREE_PKGCONFIG])
# Installs a layer's shared library as the component NAME of the CMake package
# (imported target viastack::NAME) and writes its pkg-config file
# viastack-NAME.pc. HEADERS: the layer's include folder, installed as it is
# under <prefix>/include; its C++ headers need C++20, which the imported
# target asks of its users. LIBDIR: where the library goes (default: the
# libraries' folder). REQUIRES: the other components its pkg-config file
# requires (its headers include theirs). Only shared libraries are built, so
# what a library links privately needs no Requires.private: the loader finds
# it through the library's own RUNPATH.
# BUILD_TREE_PKGCONFIG: also write the pkg-config file into the build tree's
# library folder, for programs built against the build tree (only for a
# library without headers of its own, whose include folder is absolute).
function(viastack_install_library target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "BUILD_TREE_PKGCONFIG" "NAME;DESCRIPTION;HEADERS;LIBDIR"
                        "REQUIRES;CFLAGS;LIBS")
  if(NOT arg_NAME OR NOT arg_DESCRIPTION)
    message(FATAL_ERROR "viastack_install_library(${target}): NAME and DESCRIPTION are required")
  endif()
  if(arg_HEADERS AND arg_BUILD_TREE_PKGCONFIG)
    message(FATAL_ERROR "viastack_install_library(${target}): BUILD_TREE_PKGCONFIG is for a library without HEADERS")
  endif()
  if(NOT arg_LIBDIR)
    set(arg_LIBDIR ${CMAKE_INSTALL_LIBDIR})
  endif()

  viastack_origin_rpath(rpath ${arg_LIBDIR} ${CMAKE_INSTALL_LIBDIR})
  set_target_properties(${target} PROPERTIES
    EXPORT_NAME ${arg_NAME}
    INSTALL_RPATH "${rpath}"
    VIASTACK_INSTALL_LIBDIR ${arg_LIBDIR})
  install(TARGETS ${target} EXPORT viastack-targets
          LIBRARY DESTINATION ${arg_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
  if(arg_HEADERS)
    target_include_directories(${target} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_compile_features(${target} INTERFACE cxx_std_20)
    install(DIRECTORY ${arg_HEADERS}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
    list(PREPEND arg_CFLAGS "-I\${includedir}")
  endif()
  set_property(GLOBAL APPEND PROPERTY VIASTACK_COMPONENTS ${arg_NAME})

  # The pkg-config file: the same template for the installed tree and the build tree.
  set(pc_name viastack-${arg_NAME})
  set(pc_description ${arg_DESCRIPTION})
  get_target_property(pc_library ${target} OUTPUT_NAME)
  list(TRANSFORM arg_REQUIRES REPLACE "(.+)" "viastack-\\1 = ${PROJECT_VERSION}")
  list(JOIN arg_REQUIRES ", " pc_requires)
  list(JOIN arg_CFLAGS " " pc_cflags)
  list(JOIN arg_LIBS " " pc_libs)

  # Installed, the prefix is found from the file's own folder, so the tree can move.
  viastack_relative_path(pc_to_prefix ${VIASTACK_PKGCONFIG_INSTALL_DIR} .)
  set(pc_prefix "\${pcfiledir}/${pc_to_prefix}")
  set(pc_libdir ${arg_LIBDIR})
  configure_file(${VIASTACK_CMAKE_MODULE_DIR}/viastack.pc.in ${VIASTACK_INSTALL_STAGING_DIR}/${pc_name}.pc @ONLY)
  install(FILES ${VIASTACK_INSTALL_STAGING_DIR}/${pc_name}.pc DESTINATION ${VIASTACK_PKGCONFIG_INSTALL_DIR}
          COMPONENT dev)
  if(arg_BUILD_TREE_PKGCONFIG)
    set(pc_prefix ${CMAKE_BINARY_DIR})
    file(RELATIVE_PATH pc_libdir ${CMAKE_BINARY_DIR} ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
    configure_file(${VIASTACK_CMAKE_MODULE_DIR}/viastack.pc.in ${CMAKE_LIBRARY_OUTPUT_DIRECTORY}/pkgconfig/${pc_name}.pc
                   @ONLY)
  endif()
endfunction()

# viastack_install_programs(TARGETS...): installs programs users run (component
# bin). A program linked to a library installed outside the libraries' folder
# (libmpi.so.40) finds that one through its RPATH too.
function(viastack_install_programs)
  foreach(target IN LISTS ARGN)
    get_target_property(libraries ${target} LINK_LIBRARIES)
    foreach(library IN LISTS libraries)
      if(TARGET ${library})
        get_target_property(libdir ${library} VIASTACK_INSTALL_LIBDIR)
        if(libdir AND NOT libdir STREQUAL CMAKE_INSTALL_LIBDIR)
          viastack_origin_rpath(rpath ${CMAKE_INSTALL_BINDIR} ${libdir})
          set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH "${rpath}")
        endif()
      endif()
    endforeach()
  endforeach()
  install(TARGETS ${ARGN} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT bin)
endfunction()

# viastack_mpi_wrappers(): viampicc and viampicxx, in the build tree's bin
# folder (for the build tree's libmpi.so.40) and installed (for the installed
# one). Both find the library from their own folder. Needs
# VIASTACK_OMPI_INCLUDE_DIR, the folder of Open MPI's mpi.h.
function(viastack_mpi_wrappers)
  get_target_property(installed_libdir viastack_mpi VIASTACK_INSTALL_LIBDIR)
  foreach(wrapper viampicc viampicxx)
    if(wrapper STREQUAL viampicc)
      set(VIASTACK_MPI_COMPILER ${CMAKE_C_COMPILER})
      set(VIASTACK_MPI_EXTRA_FLAGS "")
    else()
      set(VIASTACK_MPI_COMPILER ${CMAKE_CXX_COMPILER})
      set(VIASTACK_MPI_EXTRA_FLAGS "-DOMPI_SKIP_MPICXX")
    endif()
    file(RELATIVE_PATH wrapper_to_libdir ${CMAKE_RUNTIME_OUTPUT_DIRECTORY} ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
    configure_file(${VIASTACK_CMAKE_MODULE_DIR}/viampi-wrapper.in ${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/${wrapper} @ONLY
                   FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
    viastack_relative_path(wrapper_to_libdir ${CMAKE_INSTALL_BINDIR} ${installed_libdir})
    configure_file(${VIASTACK_CMAKE_MODULE_DIR}/viampi-wrapper.in ${VIASTACK_INSTALL_STAGING_DIR}/${wrapper} @ONLY)
    install(PROGRAMS ${VIASTACK_INSTALL_STAGING_DIR}/${wrapper} DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dev)
  endforeach()
endfunction()

# viastack_install_package(): after the layers. The CMake package (targets,
# config and version files), the documentation, and the Debian packages.
function(viastack_install_package)
  get_property(components GLOBAL PROPERTY VIASTACK_COMPONENTS)
  install(EXPORT viastack-targets NAMESPACE viastack:: DESTINATION ${VIASTACK_CMAKE_INSTALL_DIR}
          FILE viastack-targets.cmake COMPONENT dev)
  set(VIASTACK_PACKAGE_COMPONENTS ${components})
  configure_package_config_file(${VIASTACK_CMAKE_MODULE_DIR}/viastack-config.cmake.in
                                ${VIASTACK_INSTALL_STAGING_DIR}/viastack-config.cmake
                                INSTALL_DESTINATION ${VIASTACK_CMAKE_INSTALL_DIR})
  # 0.x: a minor release may change the API and ABI, so 0.2 accepts 0.2.x only.
  write_basic_package_version_file(${VIASTACK_INSTALL_STAGING_DIR}/viastack-config-version.cmake
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${VIASTACK_INSTALL_STAGING_DIR}/viastack-config.cmake
                ${VIASTACK_INSTALL_STAGING_DIR}/viastack-config-version.cmake
                ${VIASTACK_CMAKE_MODULE_DIR}/ViastackOpenMPIHeader.cmake
          DESTINATION ${VIASTACK_CMAKE_INSTALL_DIR} COMPONENT dev)

  install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${VIASTACK_DOC_INSTALL_DIR} COMPONENT runtime)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${VIASTACK_DOC_INSTALL_DIR}/docs COMPONENT runtime)
  # The Wireshark dissector of VIASTACK_TRACE=via:FILE's pcaps, for
  # `wireshark -X lua_script:PREFIX/share/viastack/wireshark/viastack.lua` or
  # a copy in Wireshark's plugin folder (a prefix install cannot know where
  # that is, and a system one should not be written by a package of ours).
  install(FILES ${PROJECT_SOURCE_DIR}/tools/wireshark/viastack.lua
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/viastack/wireshark COMPONENT runtime)
  # The examples' sources, for users to copy from.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${VIASTACK_DOC_INSTALL_DIR}/examples COMPONENT runtime
          FILES_MATCHING PATTERN "*.c" PATTERN "*.cpp" PATTERN "*.h" PATTERN "*.hpp" PATTERN "*.md")

  set(CPACK_PACKAGE_NAME viastack)
  set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
  set(CPACK_PACKAGE_CONTACT "viastack developers")
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
      "User-level networking: a VIA engine, Active Messages, Split-C, an MPI subset and TCP/IP")
  set(CPACK_DEB_COMPONENT_INSTALL ON)
  set(CPACK_COMPONENTS_ALL runtime dev bin)
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_SECTION net)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME viastack)
  set(CPACK_DEBIAN_DEV_PACKAGE_NAME viastack-dev)
  set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
  set(CPACK_DEBIAN_BIN_PACKAGE_NAME viastack-bin)
  # The libraries' Debian dependencies (libc6, libstdc++6, libssl3, libpmix2)
  # come from dpkg-shlibdeps. Not the programs': the bin package's staging
  # tree has no libmpi.so.40, so dpkg-shlibdeps would take Open MPI's for
  # mpi_pingpong's and make viastack-bin depend on libopenmpi3. The programs
  # need only viastack's libraries and what those need, so the runtime
  # package's dependencies are theirs.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_BIN_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
  set(CPACK_COMPONENT_DEV_DEPENDS runtime)
  set(CPACK_COMPONENT_BIN_DEPENDS runtime)
  if("mpi" IN_LIST components)
    # viastack::mpi, viastack-mpi.pc and viampicc compile against Open MPI's mpi.h.
    set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS libopenmpi-dev)
  endif()
  include(CPack)
endfunction()
