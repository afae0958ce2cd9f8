/* A profiling tool as MPI's profiling interface intends one: it defines
 * MPI_Send and MPI_Recv, counts the calls, and hands each on to the library
 * through PMPI_Send / PMPI_Recv. pmpi_test.c reads the counts through
 * pmpi_counter_counts, found with dlsym whether the tool was linked in or
 * preloaded. */
#include <mpi.h>

static long sends, receives;

__attribute__((visibility("default"))) void pmpi_counter_counts(long* sent, long* received) {
  *sent = sends;
  *received = receives;
}

int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  ++sends;
  return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  ++receives;
  return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
}
