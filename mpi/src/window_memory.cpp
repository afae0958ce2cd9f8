#include "window_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <via/bootstrap.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "collectives.hpp"
#include "comm.hpp"
#include "datatype.hpp"
#include "errors.hpp"

namespace viastack::mpi {

namespace {

std::size_t page_rounded(std::size_t bytes) {
  const auto page = std::size_t(sysconf(_SC_PAGESIZE));
  return (std::max<std::size_t>(bytes, 1) + page - 1) / page * page;
}

std::string errno_text(const char* what) {
  std::string why = what;
  why += ": ";
  why += std::strerror(errno);
  return why;
}

// What each member tells the others before a shared segment is made.
struct MemberRequest {
  std::int32_t node;
  std::int32_t reserved = 0;
  std::uint64_t size;
};

std::vector<MemberRequest> exchange_requests(std::size_t size, const Communicator& comm) {
  std::string error;
  const auto job = via::job_bootstrap(error);
  if (!job) fail(MPI_ERR_INTERN, "the job's layout is unknown: " + error);
  const MemberRequest mine{job->node_of(comm.world_rank(comm.rank())), 0, size};
  std::vector<MemberRequest> all(std::size_t(comm.size()));
  const Datatype& bytes = datatype_of(MPI_BYTE);
  std::vector<int> counts(all.size(), int(sizeof(MemberRequest))), displs(all.size());
  for (std::size_t r = 0; r < all.size(); ++r) displs[r] = int(r * sizeof(MemberRequest));
  allgatherv(&mine, sizeof mine, bytes, Blocks{all.data(), counts, displs, &bytes}, comm);
  return all;
}

}  // namespace

std::unique_ptr<WindowMemory> WindowMemory::private_block(std::size_t size) {
  const std::size_t mapped = page_rounded(size);
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail(MPI_ERR_NO_MEM, errno_text("allocating the window's memory"));
  return std::unique_ptr<WindowMemory>(
      new WindowMemory(static_cast<std::byte*>(p), mapped, std::vector<std::size_t>{0, size}, false));
}

std::unique_ptr<WindowMemory> WindowMemory::shared_segment(std::size_t size, const Communicator& comm) {
  const std::vector<MemberRequest> requests = exchange_requests(size, comm);
  // Every member decides from the same list, so all fail alike.
  for (const MemberRequest& r : requests)
    require(r.node == requests[0].node, MPI_ERR_RMA_SHARED,
            "MPI_Win_allocate_shared needs a communicator whose ranks all run on one node; this one spans nodes");
  std::vector<std::size_t> offsets(requests.size() + 1, 0);
  for (std::size_t r = 0; r < requests.size(); ++r) offsets[r + 1] = offsets[r] + requests[r].size;
  const std::size_t mapped = page_rounded(offsets.back());

  // The segment's name: the job's, the leader's world rank and a number of the leader's, told to the others.
  static std::uint32_t segments_made = 0;
  std::uint32_t number = segments_made++;
  bcast(&number, sizeof number, datatype_of(MPI_BYTE), 0, comm);
  std::string error;
  const auto job = via::job_bootstrap(error);
  const std::string name = "/viastack." + (job ? job->job_id() : std::string("nojob")) + ".mpiwin." +
                           std::to_string(comm.world_rank(0)) + "." + std::to_string(number);

  const bool leader = comm.rank() == 0;
  std::string why;
  void* p = MAP_FAILED;
  auto map_segment = [&](int flags) {
    const int fd = shm_open(name.c_str(), flags, 0600);
    if (fd < 0) return void(why = errno_text("opening the shared segment"));
    if (leader && ftruncate(fd, off_t(mapped)) != 0) why = errno_text("sizing the shared segment");
    // The pages now, not at first touch: a full /dev/shm is then an error
    // here rather than a SIGBUS in whichever member touches a page first.
    if (leader && why.empty())
      if (const int e = posix_fallocate(fd, 0, off_t(mapped)); e != 0)
        why = "reserving " + std::to_string(mapped) + " bytes in /dev/shm for the shared segment: " + std::strerror(e);
    if (why.empty()) {
      p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) why = errno_text("mapping the shared segment");
    }
    close(fd);
  };
  // The leader makes the segment; the others map it once it exists; the name goes once all have it.
  std::uint32_t leader_failed = 0;
  if (leader) {
    map_segment(O_CREAT | O_EXCL | O_RDWR);
    leader_failed = p == MAP_FAILED;
  }
  bcast(&leader_failed, sizeof leader_failed, datatype_of(MPI_BYTE), 0, comm);
  if (!leader && !leader_failed) map_segment(O_RDWR);
  std::uint32_t anyone_failed = 0;
  allreduce_max_u32(comm, p == MAP_FAILED ? 1u : 0u, anyone_failed);
  if (leader) shm_unlink(name.c_str());
  if (anyone_failed) {
    if (p != MAP_FAILED) munmap(p, mapped);
    fail(MPI_ERR_NO_MEM, why.empty() ? "another member could not map the shared segment" : why);
  }
  return std::unique_ptr<WindowMemory>(new WindowMemory(static_cast<std::byte*>(p), mapped, std::move(offsets), true));
}

WindowMemory::~WindowMemory() { munmap(mapping_, mapped_bytes_); }

}  // namespace viastack::mpi
