# Open MPI 4.x's mpi.h, which viastack's MPI layer is compiled against and which
# its users compile against too (Debian's libopenmpi-dev). Used by mpi/ when
# building and by the installed CMake package, so both look in the same places:
# sets VIASTACK_OMPI_INCLUDE_DIR, or leaves it NOTFOUND.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(VIASTACK_OMPI_C QUIET ompi-c)
endif()
find_path(VIASTACK_OMPI_INCLUDE_DIR mpi.h
  HINTS ${VIASTACK_OMPI_C_INCLUDE_DIRS} /usr/lib/x86_64-linux-gnu/openmpi/include
  NO_DEFAULT_PATH)
