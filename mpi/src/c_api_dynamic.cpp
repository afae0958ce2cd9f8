// Dynamic processes (MPI-3.1 chapter 10) are outside what viastack can do: a
// job is the fixed set of processes its launcher started (viarun, or mpirun,
// Hydra, Slurm through their PMI), every pair of them connected at MPI_Init,
// and there is no server through which separately started jobs could find each
// other. So these calls fail as the standard lets them, with an error class the
// program can test under MPI_ERRORS_RETURN (and a message that says why under
// MPI_ERRORS_ARE_FATAL): MPI_ERR_SPAWN for the spawning calls (their error
// codes too), MPI_ERR_UNSUPPORTED_OPERATION for ports, names and joins.
#include "c_api.hpp"

using namespace viastack::mpi;

namespace {

constexpr const char* kNoSpawn =
    "viastack's MPI cannot start processes: a job is the fixed set of processes its launcher started "
    "(run more with viarun -n)";
constexpr const char* kNoConnect =
    "viastack's MPI cannot connect separately started jobs (no ports, name service or joins): "
    "start the processes as one job";

// Fails on comm after filling the error codes of the processes that were not started.
void refuse_spawn(int processes, int array_of_errcodes[]) {
  if (array_of_errcodes != MPI_ERRCODES_IGNORE)
    for (int i = 0; i < processes; ++i) array_of_errcodes[i] = MPI_ERR_SPAWN;
  fail(MPI_ERR_SPAWN, kNoSpawn);
}

int refuse_connection(const char* function, MPI_Comm comm) {
  return guarded(function, comm, [] {
    runtime();
    fail(MPI_ERR_UNSUPPORTED_OPERATION, kNoConnect);
  });
}

}  // namespace

int MPI_Comm_spawn(const char*, char*[], int maxprocs, MPI_Info, int, MPI_Comm comm, MPI_Comm* intercomm,
                   int array_of_errcodes[]) {
  return guarded("MPI_Comm_spawn", comm, [&] {
    runtime();
    communicator_of(comm);
    if (intercomm) *intercomm = MPI_COMM_NULL;
    refuse_spawn(maxprocs > 0 ? maxprocs : 0, array_of_errcodes);
  });
}

int MPI_Comm_spawn_multiple(int count, char*[], char**[], const int array_of_maxprocs[], const MPI_Info[], int,
                            MPI_Comm comm, MPI_Comm* intercomm, int array_of_errcodes[]) {
  return guarded("MPI_Comm_spawn_multiple", comm, [&] {
    runtime();
    communicator_of(comm);
    if (intercomm) *intercomm = MPI_COMM_NULL;
    int processes = 0;
    for (int i = 0; array_of_maxprocs && i < count; ++i) processes += array_of_maxprocs[i] > 0 ? array_of_maxprocs[i] : 0;
    refuse_spawn(processes, array_of_errcodes);
  });
}

int MPI_Open_port(MPI_Info, char*) { return refuse_connection("MPI_Open_port", MPI_COMM_WORLD); }
int MPI_Close_port(const char*) { return refuse_connection("MPI_Close_port", MPI_COMM_WORLD); }
int MPI_Comm_accept(const char*, MPI_Info, int, MPI_Comm comm, MPI_Comm* newcomm) {
  if (newcomm) *newcomm = MPI_COMM_NULL;
  return refuse_connection("MPI_Comm_accept", comm);
}
int MPI_Comm_connect(const char*, MPI_Info, int, MPI_Comm comm, MPI_Comm* newcomm) {
  if (newcomm) *newcomm = MPI_COMM_NULL;
  return refuse_connection("MPI_Comm_connect", comm);
}
int MPI_Publish_name(const char*, MPI_Info, const char*) {
  return refuse_connection("MPI_Publish_name", MPI_COMM_WORLD);
}
int MPI_Unpublish_name(const char*, MPI_Info, const char*) {
  return refuse_connection("MPI_Unpublish_name", MPI_COMM_WORLD);
}
int MPI_Lookup_name(const char*, MPI_Info, char*) { return refuse_connection("MPI_Lookup_name", MPI_COMM_WORLD); }
int MPI_Comm_join(int, MPI_Comm* intercomm) {
  if (intercomm) *intercomm = MPI_COMM_NULL;
  return refuse_connection("MPI_Comm_join", MPI_COMM_WORLD);
}
