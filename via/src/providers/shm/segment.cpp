// Creating, finding and removing shm segments, including segments left
// behind by a killed job.
#include "providers/shm/segment.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <set>
#include <sstream>

namespace via::shm {

namespace {

// Segments this process created, removed at exit even if the program never
// closed its NICs (a killed process leaves them to viarun or the next owner).
// Never destroyed: the atexit handler below runs after static destructors
// registered later than it would.
std::mutex owned_mutex;
std::set<std::string>& owned_names() {
  static auto* names = new std::set<std::string>();
  return *names;
}
pid_t owner_pid = 0;  // the process that created the names (a forked child must not remove them)
void remove_owned_at_exit() {
  std::lock_guard lock(owned_mutex);
  if (getpid() != owner_pid) return;
  for (const std::string& name : owned_names()) shm_unlink(name.c_str());
  owned_names().clear();
}

void* map_fd(int fd, std::size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// A segment whose owner is gone (or that was never finished) may be replaced.
bool segment_is_stale(const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) return errno == ENOENT;
  struct stat st;
  bool stale = true;
  if (fstat(fd, &st) == 0 && std::size_t(st.st_size) >= sizeof(SegmentHeader)) {
    void* p = mmap(nullptr, sizeof(SegmentHeader), PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      auto* h = static_cast<const SegmentHeader*>(p);
      if (h->magic.load(std::memory_order_acquire) == kMagic)
        stale = !process_alive(h->owner_pid, h->owner_start_time);
      else
        stale = time(nullptr) - st.st_mtime > 5;  // half-created: stale unless very recent
      munmap(p, sizeof(SegmentHeader));
    }
  }
  close(fd);
  return stale;
}

}  // namespace

std::string segment_name(const std::string& job, std::uint32_t nic) {
  std::string name = "/viastack.";
  name += job;
  name += '.';
  name += std::to_string(nic);
  return name;
}

std::uint64_t process_start_time(int pid) {
  std::string path = "/proc/";
  path += std::to_string(pid);
  path += "/stat";
  std::ifstream stat(path);
  std::string line;
  if (!std::getline(stat, line)) return 0;
  // Field 22 (starttime) follows the command name, which is in parentheses and may hold spaces.
  std::size_t close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream rest(line.substr(close_paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  return 0;
}

bool process_alive(int pid, std::uint64_t start_time) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::uint64_t now = process_start_time(pid);
  return now != 0 && now == start_time;
}

Segment* create_segment(const std::string& job, std::uint32_t nic, std::string& error) {
  const std::string name = segment_name(job, nic);
  int fd = -1;
  for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0 || errno != EEXIST) break;
    if (!segment_is_stale(name)) {
      error = "NIC " + std::to_string(nic) + " of this job is already open in another live process (" + name + ")";
      return nullptr;
    }
    shm_unlink(name.c_str());  // left behind by a dead process
  }
  if (fd < 0) {
    error = "cannot create shared segment " + name + ": " + std::strerror(errno);
    return nullptr;
  }
  // The file is sparse: pages of VI slots never used are never allocated.
  if (ftruncate(fd, sizeof(Segment)) != 0) {
    error = "cannot size shared segment " + name + ": " + std::strerror(errno);
    close(fd);
    shm_unlink(name.c_str());
    return nullptr;
  }
  void* p = map_fd(fd, sizeof(Segment));
  close(fd);
  if (!p) {
    error = "cannot map shared segment " + name + ": " + std::strerror(errno);
    shm_unlink(name.c_str());
    return nullptr;
  }
  auto* s = static_cast<Segment*>(p);
  SegmentHeader& h = s->header;
  h.version = kVersion;
  h.nic_id = nic;
  h.owner_pid = getpid();
  h.owner_start_time = process_start_time(getpid());
  h.owner_base = reinterpret_cast<std::uintptr_t>(s);
  h.probe_value = kMagic ^ std::uint64_t(getpid());
  h.segment_size = sizeof(Segment);
  for (std::uint32_t i = 0; i < kInboxEntries; ++i) s->inbox[i].seq.store(i, std::memory_order_relaxed);
  h.magic.store(kMagic, std::memory_order_release);
  {
    std::lock_guard lock(owned_mutex);
    static bool registered = (std::atexit(remove_owned_at_exit), true);
    (void)registered;
    if (owner_pid != getpid()) owned_names().clear();  // names a parent made are its own to remove
    owner_pid = getpid();
    owned_names().insert(name);
  }
  return s;
}

std::uint64_t segment_inode(const std::string& job, std::uint32_t nic) {
  int fd = shm_open(segment_name(job, nic).c_str(), O_RDONLY, 0);
  if (fd < 0) return 0;
  struct stat st;
  std::uint64_t inode = fstat(fd, &st) == 0 ? std::uint64_t(st.st_ino) : 0;
  close(fd);
  return inode;
}

Segment* open_segment(const std::string& job, std::uint32_t nic, std::uint64_t& inode) {
  const std::string name = segment_name(job, nic);
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;
  struct stat st;
  if (fstat(fd, &st) != 0 || std::size_t(st.st_size) != sizeof(Segment)) {
    close(fd);
    return nullptr;
  }
  inode = st.st_ino;
  void* p = map_fd(fd, sizeof(Segment));
  close(fd);
  if (!p) return nullptr;
  auto* s = static_cast<Segment*>(p);
  if (s->header.magic.load(std::memory_order_acquire) != kMagic || s->header.version != kVersion ||
      s->header.nic_id != nic || !process_alive(s->header.owner_pid, s->header.owner_start_time)) {
    munmap(p, sizeof(Segment));
    return nullptr;
  }
  return s;
}

void unmap_segment(Segment* s) {
  if (s) munmap(s, sizeof(Segment));
}

void remove_segment(const std::string& job, std::uint32_t nic) {
  const std::string name = segment_name(job, nic);
  if (owner_pid == getpid()) shm_unlink(name.c_str());
  std::lock_guard lock(owned_mutex);
  owned_names().erase(name);
}

}  // namespace via::shm
