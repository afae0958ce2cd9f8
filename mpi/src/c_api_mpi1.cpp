// C entry points: the MPI-1 functions MPI-3.0 removed, which old programs
// still call (Open MPI 4 exports them too). Each is the MPI-2 call it was
// renamed to, reached through its PMPI_ name so that a tool interposing on the
// MPI_ names sees the program's call once; errors are that call's.
#define OMPI_OMIT_MPI1_COMPAT_DECLS 0  // mpi.h then declares them, and MPI_Handler_function
#include <mpi.h>

int MPI_Address(void* location, MPI_Aint* address) { return PMPI_Get_address(location, address); }

int MPI_Type_extent(MPI_Datatype type, MPI_Aint* extent) {
  MPI_Aint lb = 0;
  return PMPI_Type_get_extent(type, &lb, extent);
}

int MPI_Type_lb(MPI_Datatype type, MPI_Aint* lb) {
  MPI_Aint extent = 0;
  return PMPI_Type_get_extent(type, lb, &extent);
}

// The upper bound: lower bound plus extent.
int MPI_Type_ub(MPI_Datatype type, MPI_Aint* ub) {
  MPI_Aint lb = 0, extent = 0;
  const int rc = PMPI_Type_get_extent(type, &lb, &extent);
  if (rc == MPI_SUCCESS && ub != nullptr) *ub = lb + extent;
  return rc;
}

int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}

int MPI_Type_hindexed(int count, int blocklengths[], MPI_Aint displacements[], MPI_Datatype oldtype,
                      MPI_Datatype* newtype) {
  return PMPI_Type_create_hindexed(count, blocklengths, displacements, oldtype, newtype);
}

int MPI_Type_struct(int count, int blocklengths[], MPI_Aint displacements[], MPI_Datatype types[],
                    MPI_Datatype* newtype) {
  return PMPI_Type_create_struct(count, blocklengths, displacements, types, newtype);
}

// MPI_Handler_function has the signature of MPI_Comm_errhandler_function.
int MPI_Errhandler_create(MPI_Handler_function* function, MPI_Errhandler* errhandler) {
  return PMPI_Comm_create_errhandler(function, errhandler);
}

int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler) {
  return PMPI_Comm_set_errhandler(comm, errhandler);
}

int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return PMPI_Comm_get_errhandler(comm, errhandler);
}
