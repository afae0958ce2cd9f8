// Open MPI 4's persistent collectives (mpi-ext.h, MPI-4's MPI_*_init under
// the MPIX_ prefix): an inactive persistent request that MPI_Start (or
// MPI_Startall) starts as the non-blocking collective with the arguments given
// here, through its profiling name (a tool sees the program's MPI_Start, not a
// call the program did not make). Wait and Test complete it as any request and
// leave it inactive; MPI_Request_free frees it when inactive. The arguments
// are checked, and errors reported, by that non-blocking call at each start;
// buffers and arrays are read then, so they must stay valid until the request
// is freed (as MPI-4 requires).
#include <mpi.h>
#include <mpi-ext.h>

#include <utility>

#include "c_api.hpp"
#include "info.hpp"

using namespace viastack::mpi;

namespace {

int persistent_init(const char* function, MPI_Comm comm, MPI_Info info, MPI_Request* request,
                    std::function<int(MPI_Request*)> start) {
  return guarded(function, comm, [&] {
    runtime();
    const Communicator& c = communicator_of(comm);
    hints_of(info);  // checked, and no hint changes what is done
    check_pointer(request, "null request pointer");
    auto* r = new Request(Request::Type::collective, &c);
    r->persistent = Request::Persistent{MPI_PROC_NULL};
    r->persistent->start_collective = std::move(start);
    r->complete = true;  // inactive
    *request = r;
  });
}

}  // namespace

int MPIX_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Allgather_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, started);
  });
}

int MPIX_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                         const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                         MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Allgatherv_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, started);
  });
}

int MPIX_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                        MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Allreduce_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, started);
  });
}

int MPIX_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Alltoall_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, started);
  });
}

int MPIX_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                        void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Alltoallv_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                           started);
  });
}

int MPIX_Alltoallw_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                        const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                        const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Alltoallw_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                           started);
  });
}

int MPIX_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Barrier_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ibarrier(comm, started);
  });
}

int MPIX_Bcast_init(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                    MPI_Request* request) {
  return persistent_init("MPIX_Bcast_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ibcast(buffer, count, datatype, root, comm, started);
  });
}

int MPIX_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Exscan_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm, started);
  });
}

int MPIX_Gather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                     MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Gather_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, started);
  });
}

int MPIX_Gatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                      const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                      MPI_Request* request) {
  return persistent_init("MPIX_Gatherv_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, started);
  });
}

int MPIX_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                     MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Reduce_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, started);
  });
}

int MPIX_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Reduce_scatter_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, started);
  });
}

int MPIX_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Reduce_scatter_block_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, started);
  });
}

int MPIX_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Scan_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm, started);
  });
}

int MPIX_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                      MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Scatter_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, started);
  });
}

int MPIX_Scatterv_init(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                       void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  return persistent_init("MPIX_Scatterv_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, started);
  });
}

int MPIX_Neighbor_allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                 MPI_Request* request) {
  return persistent_init("MPIX_Neighbor_allgather_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ineighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, started);
  });
}

int MPIX_Neighbor_allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                  const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                                  MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Neighbor_allgatherv_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ineighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                                     started);
  });
}

int MPIX_Neighbor_alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                                MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Neighbor_alltoall_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, started);
  });
}

int MPIX_Neighbor_alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                 MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                                 MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return persistent_init("MPIX_Neighbor_alltoallv_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ineighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype,
                                    comm, started);
  });
}

int MPIX_Neighbor_alltoallw_init(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                                 const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                                 const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info,
                                 MPI_Request* request) {
  return persistent_init("MPIX_Neighbor_alltoallw_init", comm, info, request, [=](MPI_Request* started) {
    return PMPI_Ineighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                                    comm, started);
  });
}
