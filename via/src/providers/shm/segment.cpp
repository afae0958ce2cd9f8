// Creating, finding and removing shm segments, including segments left
// behind by a killed job.
#include "providers/shm/segment.hpp"

#include "via/bootstrap.hpp"
#include "via/log.hpp"
#include "via/via.hpp"

#include <fcntl.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <new>

namespace via::shm {

namespace {

constexpr const char* kShmRoot = "/dev/shm";

// Segments this process created, removed however it ends: at exit, on a
// fatal signal whose action was the default one, before MPI's _exit
// (remove_owned_segments), and otherwise (SIGKILL) by the job's survivors,
// viarun, or the next process on the node to open a NIC (remove_dead_jobs).
// Kept in fixed storage so that a signal handler can walk it.
constexpr int kMaxOwned = 64;
struct OwnedPath {
  std::atomic<bool> used{false};
  char path[240];
};
OwnedPath owned[kMaxOwned];
std::mutex owned_mutex;  // for those who add and remove entries; handlers only read
std::atomic<pid_t> owner_pid{0};  // the process that created the files (a forked child must not remove them)

// What follows down to the signal handlers is async-signal-safe: system calls
// and stack buffers only, as a handler or a process about to _exit runs it.

// The inode of this process's pid namespace (0 where /proc lacks it).
std::uint32_t own_pid_namespace() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? std::uint32_t(st.st_ino) : 0u;
}

// Calls visit(name) for the entries of the folder open as `dir_fd`, until it returns false.
template <class Visit>
void for_each_entry(int dir_fd, Visit visit) {
  // getdents64 fills the buffer with records of the kernel's linux_dirent64:
  // inode (8 bytes), offset (8), this record's length (2), type (1), name.
  constexpr std::size_t kLengthAt = 16, kNameAt = 19;
  alignas(8) char buffer[4096];
  lseek(dir_fd, 0, SEEK_SET);
  for (;;) {
    const long bytes = syscall(SYS_getdents64, dir_fd, buffer, sizeof buffer);
    if (bytes <= 0) return;
    for (long at = 0; at < bytes;) {
      unsigned short length;
      std::memcpy(&length, buffer + at + kLengthAt, sizeof length);
      if (!visit(static_cast<const char*>(buffer + at + kNameAt))) return;
      at += length;
    }
  }
}

// Earlier layouts. Version 2: the same header fields at the same places, but no
// owner's pid namespace; version 3: this header, with 128-byte cells; version
// 4: this header, without the VI slots' read_claim; version 5: without their
// ring_read_claims.
constexpr std::uint32_t kVersionWithoutNamespace = 2;
constexpr std::uint32_t kVersionWith128ByteCells = 3;
constexpr std::uint32_t kVersionWithoutReadClaim = 4;
constexpr std::uint32_t kVersionWithoutRingReadClaims = 5;

bool is_segment_name(const char* name) { return std::strncmp(name, "nic.", 4) == 0; }

// A folder of this user's, open for for_each_entry; -1 otherwise.
int open_own_folder(const char* path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_uid != geteuid())) {
    close(fd);
    return -1;
  }
  return fd;
}

// A segment, as one who would remove it sees it.
enum class SegmentState {
  absent,
  live,     // its owner runs, or it is being created
  dead,     // its owner has ended, or it was never finished and is over 5 s old
  foreign,  // no segment file of this user's, or an owner this process cannot judge
};

SegmentState segment_state(int dir_fd, const char* name) {
  int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? SegmentState::absent : SegmentState::foreign;
  struct stat st;
  SegmentHeader header;
  SegmentState state = SegmentState::foreign;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) {
    const bool finished = pread(fd, &header, sizeof header, 0) == ssize_t(sizeof header) &&
                          header.magic.load(std::memory_order_relaxed) == kMagic;
    if (!finished)
      state = time(nullptr) - st.st_mtime > 5 ? SegmentState::dead : SegmentState::live;
    else if (((header.version == kVersion || header.version == kVersionWithoutRingReadClaims ||
               header.version == kVersionWithoutReadClaim ||
               header.version == kVersionWith128ByteCells) &&
              header.owner_pid_namespace == own_pid_namespace()) ||
             header.version == kVersionWithoutNamespace)  // judged by pid alone, as that version did
      state = process_alive(header.owner_pid, header.owner_start_time) ? SegmentState::live : SegmentState::dead;
  }
  close(fd);
  return state;
}

// The folder part of a segment's path, into `folder` (of at least path's size).
void folder_of(const char* path, char* folder) {
  std::size_t slash = 0;
  for (std::size_t i = 0; path[i]; ++i)
    if (path[i] == '/') slash = i;
  std::memcpy(folder, path, slash);
  folder[slash] = '\0';
}

// Removes from the job folder `folder` the segments doomed(dir_fd, name)
// picks, then the folder if that left it empty.
template <class Doomed>
void remove_segments(const char* folder, Doomed doomed) {
  const int dir_fd = open_own_folder(folder);
  if (dir_fd < 0) return;
  for_each_entry(dir_fd, [&](const char* name) {
    if (is_segment_name(name) && doomed(dir_fd, name)) unlinkat(dir_fd, name, 0);
    return true;
  });
  close(dir_fd);
  rmdir(folder);  // fails while a segment or anything else remains
}

bool dead_segment(int dir_fd, const char* name) { return segment_state(dir_fd, name) == SegmentState::dead; }

bool own_segment_file(int dir_fd, const char* name) {
  struct stat st;
  return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

// Removes a segment this process owns, and what dead peers left beside it.
void remove_path(const char* path) {
  unlink(path);
  char folder[sizeof OwnedPath::path];
  folder_of(path, folder);
  remove_segments(folder, dead_segment);
}

void remove_owned() {
  if (getpid() != owner_pid.load()) return;
  for (OwnedPath& entry : owned)
    if (entry.used.exchange(false)) remove_path(entry.path);
}

constexpr int kFatalSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS};

void remove_owned_on_signal(int signal) {
  const int saved_errno = errno;
  remove_owned();
  errno = saved_errno;
  raise(signal);  // the action is the default one again (SA_RESETHAND): end as the signal would have
}

// Only signals the program left at their default action (ending the process)
// are taken; a handler of the program's own, or a sanitizer's, stays.
void remove_owned_on_fatal_signals() {
  for (int signal : kFatalSignals) {
    struct sigaction current {};
    if (sigaction(signal, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
        (current.sa_flags & SA_SIGINFO))
      continue;
    struct sigaction action {};
    action.sa_handler = remove_owned_on_signal;
    action.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(signal, &action, nullptr);
  }
}

void own(const std::string& path) {
  std::lock_guard lock(owned_mutex);
  static bool registered = (std::atexit(remove_owned), remove_owned_on_fatal_signals(), true);
  (void)registered;
  if (owner_pid.load() != getpid()) {  // files a parent made are its own to remove
    for (OwnedPath& entry : owned) entry.used.store(false);
    owner_pid.store(getpid());
  }
  if (path.size() >= sizeof OwnedPath::path) return;  // left to the job's survivors and viarun
  for (OwnedPath& entry : owned) {
    if (entry.used.load()) continue;
    std::memcpy(entry.path, path.c_str(), path.size() + 1);
    entry.used.store(true);
    return;
  }
}

void disown(const std::string& path) {
  std::lock_guard lock(owned_mutex);
  for (OwnedPath& entry : owned)
    if (entry.used.load() && path == entry.path) entry.used.store(false);
}

void* map_fd(int fd, std::size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

std::string segment_path(const std::string& job, std::uint32_t nic) {
  return job_directory(job) + "/nic." + std::to_string(nic);
}

// Opens a segment file without following a link; -1 unless it is a regular
// file of this user's.
int open_own_file(const std::string& path, int flags) {
  int fd = open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    close(fd);
    return -1;
  }
  return fd;
}

// posix_fallocate's reason, naming the file system and the bytes wanted.
std::string no_room(const std::string& what, std::size_t bytes, int error) {
  return std::string("cannot reserve ") + std::to_string(bytes) + " bytes in " + kShmRoot + " for " + what + ": " +
         std::strerror(error) + (error == ENOSPC ? " (is /dev/shm full or too small?)" : "");
}

}  // namespace

RingGeometry RingGeometry::for_local_ranks(int local_ranks) {
  // About 4 MiB of payload rings per NIC if it connects to every local rank.
  std::uint32_t data = kMaxData;
  while (data > kMinData && std::uint64_t(data) * std::uint64_t(std::max(local_ranks, 1)) > (4u << 20)) data /= 2;
  if (local_ranks <= 16) data = kMaxData;
  return RingGeometry{std::clamp(data / 1024, kMinCells, kMaxCells), data};
}

bool RingGeometry::valid() const {
  auto power_of_two_within = [](std::uint32_t v, std::uint32_t lo, std::uint32_t hi) {
    return v >= lo && v <= hi && (v & (v - 1)) == 0;
  };
  return power_of_two_within(cells, kMinCells, kMaxCells) && power_of_two_within(data_bytes, kMinData, kMaxData);
}

std::string job_directory(const std::string& job) { return std::string(kShmRoot) + "/viastack." + job; }

bool prepare_job_directory(const std::string& job, std::string& error) {
  const std::string path = job_directory(job);
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    error = "cannot create " + path + ": " + std::strerror(errno);
    return false;
  }
  int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  const bool ok = fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 077) == 0;
  if (fd >= 0) close(fd);
  if (!ok) {
    error = path + " is not a folder of this user's that only this user may enter (another user may hold this " +
            "job's name); refusing to put the job's shared memory there";
    return false;
  }
  return true;
}

void remove_job_directory(const std::string& job) {
  std::error_code ignored;
  std::filesystem::remove_all(job_directory(job), ignored);
}

std::uint64_t process_start_time(int pid) {
  // "/proc/<pid>/stat", written without allocating.
  char path[32] = "/proc/";
  char digits[12];
  int n = 0;
  for (unsigned value = unsigned(pid); n == 0 || value > 0; value /= 10) digits[n++] = char('0' + value % 10);
  std::size_t at = 6;
  while (n > 0) path[at++] = digits[--n];
  std::memcpy(path + at, "/stat", 6);
  char line[1024];
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t length = read(fd, line, sizeof line - 1);
  close(fd);
  if (length <= 0) return 0;
  line[length] = '\0';
  // The state (field 3) and starttime (field 22) follow the command name,
  // which is in parentheses and may hold spaces and parentheses itself.
  const char* field = std::strrchr(line, ')');
  if (!field || field[1] != ' ') return 0;
  field += 2;
  for (int number = 3; number < 22; ++number) {
    if (number == 3 && (*field == 'Z' || *field == 'X')) return 0;  // a zombie has ended
    field = std::strchr(field, ' ');
    if (!field) return 0;
    ++field;
  }
  std::uint64_t start_time = 0;
  for (; *field >= '0' && *field <= '9'; ++field) start_time = start_time * 10 + std::uint64_t(*field - '0');
  return start_time;
}

bool process_alive(int pid, std::uint64_t start_time) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::uint64_t now = process_start_time(pid);
  return now != 0 && now == start_time;
}

void remove_dead_jobs(const std::string& job) {
  const std::string own_folder = "viastack." + job;
  const int root_fd = open(kShmRoot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) return;
  for_each_entry(root_fd, [&](const char* name) {
    struct stat st;
    if (std::strncmp(name, "viastack.", 9) != 0 || own_folder == name ||
        fstatat(root_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
      return true;
    const std::string folder = std::string(kShmRoot) + "/" + name;
    const int dir_fd = open_own_folder(folder.c_str());
    if (dir_fd < 0) return true;
    bool any_dead = false, any_other = false;
    for_each_entry(dir_fd, [&](const char* entry) {  // up to the first segment still in use
      if (!is_segment_name(entry)) return true;
      const SegmentState state = segment_state(dir_fd, entry);
      any_dead = any_dead || state == SegmentState::dead;
      any_other = state == SegmentState::live || state == SegmentState::foreign;
      return !any_other;
    });
    close(dir_fd);
    // A folder with no segment in use and none dead is removed only if empty
    // (the rmdir fails otherwise) and untouched for a few seconds: its job may
    // be about to make its first segment (and would make the folder again).
    // Not a minute: a rank SIGKILLed between removing the last segment and
    // its rmdir leaves an empty folder just modified, and the next job's
    // start must still remove it.
    constexpr time_t kUnusedFolderSeconds = 2;
    if (!any_other && (any_dead || time(nullptr) - st.st_mtime > kUnusedFolderSeconds))
      remove_segments(folder.c_str(), dead_segment);
    return true;
  });
  close(root_fd);
}

namespace {
std::atomic<bool> membarrier_failed{false};
}

bool sleeper_fences_failed() { return membarrier_failed.load(std::memory_order_relaxed); }

}  // namespace via::shm

namespace via {

bool sleeper_fences() {
  // Asked once per process: a forked child registers anew.
  static std::atomic<pid_t> asked_in{0};
  static std::atomic<bool> registered{false};
  if (asked_in.load(std::memory_order_acquire) != getpid()) {
    const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    registered.store(supported > 0 && (supported & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
                         syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0,
                     std::memory_order_relaxed);
    asked_in.store(getpid(), std::memory_order_release);
  }
  return registered.load(std::memory_order_relaxed);
}

void fence_before_sleep() {
  if (!sleeper_fences()) return std::atomic_thread_fence(std::memory_order_seq_cst);
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0) return;
  const int error = errno;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!shm::membarrier_failed.exchange(true))
    VIA_LOG(warn, "shm", "membarrier failed (%s): sleeps are cut to 1 ms slices", std::strerror(error));
}

}  // namespace via

namespace via::shm {

Segment* create_segment(const std::string& job, std::uint32_t nic, RingGeometry rings, int& fd_out,
                        std::string& error) {
  const std::string path = segment_path(job, nic);
  // Once by each process (a forked child is a process of its own).
  static std::atomic<pid_t> removed_dead_jobs_in{0};
  if (removed_dead_jobs_in.exchange(getpid()) != getpid()) remove_dead_jobs(job);
  int fd = -1;
  // A NIC of the job that closes last removes the folder: make it again then.
  for (int attempt = 0; attempt < 4 && fd < 0; ++attempt) {
    if (!prepare_job_directory(job, error)) return nullptr;
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EEXIST && errno != ENOENT)) break;
    if (errno == EEXIST) {
      const SegmentState state = segment_state(AT_FDCWD, path.c_str());
      if (state == SegmentState::live || state == SegmentState::foreign) {
        error = "NIC " + std::to_string(nic) + " of this job is already open in another live process (" + path + ")";
        return nullptr;
      }
      unlink(path.c_str());  // left behind by a dead process
    }
  }
  if (fd < 0) {
    error = "cannot create shared segment " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  auto fail = [&](std::string why) -> Segment* {
    error = std::move(why);
    close(fd);
    remove_path(path.c_str());
    return nullptr;
  };
  // The file spans every VI slot, but only the slots in use are ever backed by memory.
  const std::size_t size = segment_bytes(rings);
  if (ftruncate(fd, off_t(size)) != 0)
    return fail("cannot size shared segment " + path + ": " + std::strerror(errno));
  if (int e = posix_fallocate(fd, 0, kSlotsOffset); e != 0)
    return fail(no_room("NIC " + std::to_string(nic) + "'s shared segment", kSlotsOffset, e));
  void* p = map_fd(fd, size);
  if (!p) return fail("cannot map shared segment " + path + ": " + std::strerror(errno));
  auto* s = static_cast<Segment*>(p);
  SegmentHeader& h = s->header;
  h.version = kVersion;
  h.nic_id = nic;
  h.owner_pid = getpid();
  h.owner_pid_namespace = own_pid_namespace();
  h.owner_start_time = process_start_time(getpid());
  h.owner_base = reinterpret_cast<std::uintptr_t>(s);
  h.probe_value = kMagic ^ std::uint64_t(getpid());
  h.segment_size = size;
  h.rings = rings;
  h.sleeper_fences = sleeper_fences();
  for (std::uint32_t i = 0; i < kInboxEntries; ++i) s->inbox[i].seq.store(i, std::memory_order_relaxed);
  h.magic.store(kMagic, std::memory_order_release);
  own(path);
  fd_out = fd;
  return s;
}

bool reserve_slot(int fd, RingGeometry rings, std::uint32_t slot, std::string& error) {
  const std::size_t offset = kSlotsOffset + std::size_t(slot) * rings.slot_bytes();
  if (int e = posix_fallocate(fd, off_t(offset), off_t(rings.slot_bytes())); e != 0) {
    error = no_room("a VI's receive rings", rings.slot_bytes(), e);
    return false;
  }
  return true;
}

std::uint64_t segment_inode(const std::string& job, std::uint32_t nic) {
  struct stat st;
  if (lstat(segment_path(job, nic).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  return std::uint64_t(st.st_ino);
}

Segment* open_segment(const std::string& job, std::uint32_t nic, std::uint64_t& inode) {
  int fd = open_own_file(segment_path(job, nic), O_RDWR);
  if (fd < 0) return nullptr;
  // The header says how large the segment is; it must agree with the file.
  struct stat st;
  SegmentHeader header;
  if (fstat(fd, &st) != 0 || std::size_t(st.st_size) < kSlotsOffset ||
      pread(fd, &header, sizeof header, 0) != ssize_t(sizeof header) || !header.rings.valid() ||
      header.segment_size != segment_bytes(header.rings) || std::uint64_t(st.st_size) != header.segment_size) {
    close(fd);
    return nullptr;
  }
  inode = st.st_ino;
  void* p = map_fd(fd, header.segment_size);
  close(fd);
  if (!p) return nullptr;
  auto* s = static_cast<Segment*>(p);
  if (s->header.magic.load(std::memory_order_acquire) != kMagic || s->header.version != kVersion ||
      s->header.nic_id != nic || s->header.segment_size != header.segment_size ||
      s->header.rings.cells != header.rings.cells || s->header.rings.data_bytes != header.rings.data_bytes ||
      !process_alive(s->header.owner_pid, s->header.owner_start_time)) {
    munmap(p, header.segment_size);
    return nullptr;
  }
  return s;
}

void unmap_segment(Segment* s) {
  if (s) munmap(s, s->header.segment_size);
}

void remove_segment(const std::string& job, std::uint32_t nic) {
  const std::string path = segment_path(job, nic);
  if (owner_pid.load() == getpid()) unlink(path.c_str());
  disown(path);
  // What killed peers left is removed by whoever closes last.
  remove_segments(job_directory(job).c_str(), dead_segment);
}

void remove_owned_segments() { remove_owned(); }

void remove_job_segments() {
  if (getpid() != owner_pid.load()) return;
  for (OwnedPath& entry : owned) {
    if (!entry.used.exchange(false)) continue;
    char folder[sizeof OwnedPath::path];
    folder_of(entry.path, folder);
    remove_segments(folder, own_segment_file);
  }
}

}  // namespace via::shm

void via::remove_shared_memory_now() { shm::remove_owned_segments(); }
void via::remove_job_shared_memory_now() { shm::remove_job_segments(); }
