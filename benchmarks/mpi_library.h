/* Which MPI a benchmark built by Open MPI's mpicc runs on: the same binary
 * reports "viastack" under viarun (our libmpi.so.40 first on
 * LD_LIBRARY_PATH) and "openmpi" under mpirun, in its JSON's "library". */
#ifndef VIASTACK_BENCHMARKS_MPI_LIBRARY_H
#define VIASTACK_BENCHMARKS_MPI_LIBRARY_H

#include <mpi.h>
#include <string.h>

static const char *mpi_library_name(void) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  if (strstr(version, "viastack")) return "viastack";
  if (strstr(version, "Open MPI")) return "openmpi";
  return "other";
}

#endif
