// The shm provider's segments against other users and a full /dev/shm: a job's
// segments sit in a folder only its user may enter, a peer segment that is
// not the user's or whose inbox is hostile is never used (and never spun on),
// and running out of /dev/shm is an error, never a SIGBUS.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "providers/shm/segment.hpp"
#include "support/endpoint.hpp"

namespace {

using namespace testing_support;
namespace shm = via::shm;

constexpr uid_t kOtherUser = 65534;  // nobody

// Runs body in a child (which may change its user or mounts) and returns its
// exit code, or 128 + the signal that ended it; a child still running after
// `limit_s` is killed (a hang is a failure, not a stuck suite).
int in_child(const std::function<int()>& body, unsigned limit_s = 20) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(limit_s);
    int code = 1;
    try {
      code = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// Writes a segment for NIC `nic` of `job` that looks alive (this process as
// its owner); `inbox_seq` is what every inbox entry's sequence word holds.
void plant_segment(const std::string& job, std::uint32_t nic, std::uint64_t inbox_seq, uid_t owner) {
  std::string error;
  ASSERT_TRUE(shm::prepare_job_directory(job, error)) << error;
  const std::string path = shm::job_directory(job) + "/nic." + std::to_string(nic);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << path;
  const shm::RingGeometry rings = shm::RingGeometry::for_local_ranks(2);
  const std::size_t bytes = shm::segment_bytes(rings);
  ASSERT_EQ(ftruncate(fd, off_t(bytes)), 0);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* s = static_cast<shm::Segment*>(p);
  s->header.version = shm::kVersion;
  s->header.nic_id = nic;
  s->header.owner_pid = getpid();
  s->header.owner_start_time = shm::process_start_time(getpid());
  s->header.segment_size = bytes;
  s->header.rings = rings;
  for (std::uint32_t i = 0; i < shm::kInboxEntries; ++i) s->inbox[i].seq.store(inbox_seq + i);
  s->header.magic.store(shm::kMagic);
  munmap(p, bytes);
  if (owner != geteuid()) {
    ASSERT_EQ(fchown(fd, owner, owner), 0);
  }
  close(fd);
}

std::uint64_t planted_inbox_writes(const std::string& job, std::uint32_t nic) {
  const std::string path = shm::job_directory(job) + "/nic." + std::to_string(nic);
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return ~0ull;
  void* p = mmap(nullptr, sizeof(shm::SegmentHeader), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  const std::uint64_t writes = static_cast<shm::SegmentHeader*>(p)->inbox_write.load();
  munmap(p, sizeof(shm::SegmentHeader));
  return writes;
}

// NIC 0 asks NIC 1 (the planted one) for a connection, allowing `timeout_ms`.
via::Result connect_to_planted(Endpoint& ep, std::uint32_t timeout_ms) {
  via::Vi* vi = ep.create_vi();
  expect_ok(vi->connect_peer_request(address(*ep.nic, "0", "p"), address(*ep.nic, "1", "p"), timeout_ms),
            "connect request");
  return vi->connect_peer_wait();
}

class ShmSegments : public ::testing::Test {
 protected:
  void SetUp() override { job_ = use_unique_job("shmsegtest"); }
  void TearDown() override { shm::remove_job_directory(job_); }
  std::string job_;
};

TEST_F(ShmSegments, AHostileInboxIsATimeoutNotASpin) {
  // Every entry claims to be far ahead of the inbox's write position.
  plant_segment(job_, 1, 1ull << 40, geteuid());
  EXPECT_EQ(in_child([&] {
              Endpoint ep;
              ep.open("shm:0", 4096);
              const auto start = std::chrono::steady_clock::now();
              const double cpu_before = cpu_seconds();
              const via::Result r = connect_to_planted(ep, 300);
              const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
              const double cpu = cpu_seconds() - cpu_before;
              std::fprintf(stderr, "connect: %s after %.2f s wall, %.2f s CPU\n", via::describe(r), wall, cpu);
              return r == via::Result::timeout && wall < 3 && cpu < 1.5 ? 0 : 1;
            }),
            0);
}

TEST_F(ShmSegments, AnotherUsersSegmentIsNeverUsed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a file another user owns";
  plant_segment(job_, 1, 0, kOtherUser);
  EXPECT_EQ(in_child([&] {
              Endpoint ep;
              ep.open("shm:0", 4096);
              return connect_to_planted(ep, 300) == via::Result::timeout ? 0 : 1;
            }),
            0);
  EXPECT_EQ(planted_inbox_writes(job_, 1), 0u) << "a request went into another user's segment";
}

TEST_F(ShmSegments, AnotherUserCannotEnterTheJobsFolder) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  Endpoint ep;
  ep.open("shm:0", 4096);
  const std::string folder = shm::job_directory(job_);
  struct stat st;
  ASSERT_EQ(stat(folder.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(in_child([&] {
              if (setgid(kOtherUser) != 0 || setuid(kOtherUser) != 0) return 2;
              // Neither the names inside nor a planted segment of its own.
              if (open(folder.c_str(), O_RDONLY | O_DIRECTORY) >= 0) return 3;
              if (open((folder + "/nic.1").c_str(), O_RDWR | O_CREAT | O_EXCL, 0600) >= 0) return 4;
              if (open((folder + "/nic.0").c_str(), O_RDWR) >= 0) return 5;
              return 0;
            }),
            0);
}

TEST_F(ShmSegments, AFolderHeldByAnotherUserIsAClearError) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make a folder another user owns";
  const std::string folder = shm::job_directory(job_);
  ASSERT_EQ(mkdir(folder.c_str(), 0777), 0);
  ASSERT_EQ(chown(folder.c_str(), kOtherUser, kOtherUser), 0);
  std::unique_ptr<via::Nic> nic;
  EXPECT_EQ(via::Nic::open("shm:0", nic), via::Result::error_resource);
}

// A tmpfs of `bytes` mounted over /dev/shm in a mount namespace of a child's own.
bool small_dev_shm(std::size_t bytes) {
  if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  const std::string options = "size=" + std::to_string(bytes);
  return mount("tmpfs", "/dev/shm", "tmpfs", 0, options.c_str()) == 0;
}

TEST_F(ShmSegments, AFullDevShmIsAnErrorNeverASigbus) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a small /dev/shm in a mount namespace";
  const std::size_t header = shm::kSlotsOffset;
  const std::size_t slot = shm::RingGeometry::for_local_ranks(1).slot_bytes();
  // Room for two NICs and a VI on each: a third VI must be refused, the two work.
  EXPECT_EQ(in_child([&] {
              if (!small_dev_shm(2 * header + 2 * slot + 64 * 1024)) return 2;
              Endpoint x, y;
              x.open("shm:0", 1 << 20);
              y.open("shm:1", 1 << 20);
              via::Vi* a = x.create_vi();
              via::Vi* b = y.create_vi();
              via::Vi* c = nullptr;
              via::ViAttributes attrs;
              attrs.ptag = x.ptag;
              if (x.nic->create_vi(attrs, nullptr, nullptr, c) != via::Result::error_resource) return 3;
              auto [ra, rb] = connect_peers(x, "0", a, y, "1", b, "full");
              if (ra != via::Result::success || rb != via::Result::success) return 4;
              // Fill the rings: every page of both slots is written.
              for (int i = 0; i < 16; ++i) {
                VIP_DESCRIPTOR* received = y.message(0, 64 * 1024);
                VIP_DESCRIPTOR* sent = x.message(0, 64 * 1024);
                expect_ok(b->post_recv(received, y.arena.handle), "post receive");
                expect_ok(a->post_send(sent, x.arena.handle), "post send");
                VIP_DESCRIPTOR* d;
                if (!pump({x.nic.get(), y.nic.get()}, [&] { return b->recv_done(d) == via::Result::success; })) return 5;
                if (!pump({x.nic.get(), y.nic.get()}, [&] { return a->send_done(d) == via::Result::success; })) return 6;
              }
              return 0;
            }),
            0);
  EXPECT_EQ(in_child([&] {
              if (!small_dev_shm(header / 2)) return 2;
              std::unique_ptr<via::Nic> nic;
              return via::Nic::open("shm:0", nic) == via::Result::error_resource ? 0 : 3;
            }),
            0);
}

}  // namespace

namespace {

// A few ranks per node keep deep rings; a crowded node gets small ones, so that
// every pair of 256 local ranks can connect in a few GiB of /dev/shm.
TEST(ShmRings, SizedByHowManyRanksShareTheNode) {
  using shm::RingGeometry;
  for (int ranks : {1, 2, 16}) {
    EXPECT_EQ(RingGeometry::for_local_ranks(ranks).data_bytes, 256u * 1024) << ranks;
    EXPECT_EQ(RingGeometry::for_local_ranks(ranks).cells, 256u) << ranks;
  }
  EXPECT_EQ(RingGeometry::for_local_ranks(64).data_bytes, 64u * 1024);
  EXPECT_EQ(RingGeometry::for_local_ranks(256).data_bytes, 16u * 1024);
  EXPECT_EQ(RingGeometry::for_local_ranks(1024).cells, RingGeometry::kMinCells);
  for (int ranks = 1; ranks <= 4096; ranks *= 2) {
    const RingGeometry g = RingGeometry::for_local_ranks(ranks);
    EXPECT_TRUE(g.valid()) << ranks;
    EXPECT_LE(g.max_frame_payload(), g.data_bytes / 2) << ranks;
  }
  const std::uint64_t full_mesh_256 = 256ull * 255 * RingGeometry::for_local_ranks(256).slot_bytes();
  EXPECT_LT(full_mesh_256, 2ull << 30);
  EXPECT_FALSE((RingGeometry{48, 16 * 1024}.valid()));
  EXPECT_FALSE((RingGeometry{32, 8 * 1024}.valid()));
}

}  // namespace

namespace {

// A job's folder is gone once its NICs are: however their processes ended.
class ShmCleanup : public ::testing::Test {
 protected:
  void SetUp() override { job_ = use_unique_job("shmcleanup"); }
  void TearDown() override { shm::remove_job_directory(job_); }
  bool folder_exists() const { return std::filesystem::exists(shm::job_directory(job_)); }

  // A child that opens NIC `nic` of the job, says so on a pipe, then waits
  // for the end `how` brings (a signal from the parent, or its own doing).
  pid_t start_rank(std::uint32_t nic, const std::function<void()>& how) {
    int ready[2];
    EXPECT_EQ(pipe(ready), 0);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(20);
      Endpoint ep;
      ep.open("shm:" + std::to_string(nic), 4096);
      if (write(ready[1], "r", 1) != 1) _exit(3);
      how();
      _exit(0);
    }
    char byte;
    EXPECT_EQ(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    close(ready[1]);
    return pid;
  }
  static int status_of(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  }
  std::string job_;
};

TEST_F(ShmCleanup, AProcessEndedBySigtermRemovesItsSegment) {
  pid_t rank = start_rank(0, [] { pause(); });
  EXPECT_TRUE(folder_exists());
  kill(rank, SIGTERM);
  EXPECT_EQ(status_of(rank), 128 + SIGTERM) << "the signal's own status, as without viastack";
  EXPECT_FALSE(folder_exists());
}

TEST_F(ShmCleanup, AProcessThatAbortsRemovesItsSegment) {
  pid_t rank = start_rank(0, [] { std::abort(); });
  EXPECT_EQ(status_of(rank), 128 + SIGABRT);
  EXPECT_FALSE(folder_exists());
}

TEST_F(ShmCleanup, AProcessEndingWithoutExitHandlersCanRemoveItsSegmentFirst) {
  pid_t rank = start_rank(0, [] {
    via::remove_shared_memory_now();
    _exit(5);
  });
  EXPECT_EQ(status_of(rank), 5);
  EXPECT_FALSE(folder_exists());
}

TEST_F(ShmCleanup, ASignalRemovesWhatKilledPeersLeftToo) {
  pid_t killed = start_rank(1, [] { pause(); });
  pid_t survivor = start_rank(0, [] { pause(); });
  kill(killed, SIGKILL);
  EXPECT_EQ(status_of(killed), 128 + SIGKILL);
  kill(survivor, SIGTERM);  // as a launcher ends the job's other ranks
  EXPECT_EQ(status_of(survivor), 128 + SIGTERM);
  EXPECT_FALSE(folder_exists());
}

TEST_F(ShmCleanup, ARankThatEndsTheJobRemovesEveryLocalRanksSegment) {
  // The launcher may end the other ranks with SIGKILL right after: nobody else cleans up.
  pid_t other = start_rank(1, [] { pause(); });
  pid_t ender = start_rank(0, [] {
    via::remove_job_shared_memory_now();
    _exit(4);
  });
  EXPECT_EQ(status_of(ender), 4);
  EXPECT_FALSE(folder_exists());
  kill(other, SIGKILL);
  EXPECT_EQ(status_of(other), 128 + SIGKILL);
}

TEST_F(ShmCleanup, TheLastNicToCloseRemovesWhatKilledPeersLeft) {
  pid_t killed = start_rank(1, [] { pause(); });
  {
    Endpoint survivor;
    survivor.open("shm:0", 4096);
    kill(killed, SIGKILL);
    EXPECT_EQ(status_of(killed), 128 + SIGKILL);
    EXPECT_TRUE(std::filesystem::exists(shm::job_directory(job_) + "/nic.1")) << "SIGKILL leaves the segment";
  }
  EXPECT_FALSE(folder_exists());
}

// The state letter of /proc/PID/stat, 0 when there is no such process.
char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) return 0;
  return line[line.rfind(')') + 2];
}

// Waits (up to 2 s) for a child to have ended without reaping it.
bool becomes_zombie(pid_t pid) {
  for (int i = 0; i < 200 && process_state(pid) != 'Z'; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return process_state(pid) == 'Z';
}

// A file or folder's modification time, `seconds` ago.
void age(const std::string& path, int seconds) {
  timeval times[2];
  gettimeofday(&times[0], nullptr);
  times[0].tv_sec -= seconds;
  times[1] = times[0];
  ASSERT_EQ(utimes(path.c_str(), times), 0) << path;
}

// A job whose processes were all SIGKILLed ran no clean-up: the next process
// to open a NIC on the node removes what it left, whether its processes have
// been reaped or are zombies still.
TEST_F(ShmCleanup, TheNextProcessToOpenANicRemovesWhatKilledJobsLeft) {
  const std::string reaped_job = job_;
  pid_t a = start_rank(0, [] { pause(); });
  pid_t b = start_rank(1, [] { pause(); });
  kill(a, SIGKILL);
  kill(b, SIGKILL);
  EXPECT_EQ(status_of(a), 128 + SIGKILL);
  EXPECT_EQ(status_of(b), 128 + SIGKILL);
  const std::string zombie_job = use_unique_job("shmcleanup");
  pid_t zombie = start_rank(0, [] { pause(); });
  kill(zombie, SIGKILL);
  ASSERT_TRUE(becomes_zombie(zombie));
  job_ = use_unique_job("shmcleanup");
  EXPECT_EQ(in_child([] {
              Endpoint ep;
              ep.open("shm:0", 4096);
              return 0;
            }),
            0);
  EXPECT_FALSE(std::filesystem::exists(shm::job_directory(reaped_job)));
  EXPECT_FALSE(std::filesystem::exists(shm::job_directory(zombie_job)));
  EXPECT_EQ(status_of(zombie), 128 + SIGKILL);
  shm::remove_job_directory(reaped_job);
  shm::remove_job_directory(zombie_job);
}

// A rank SIGKILLed after it removed its job's last segment but before its
// rmdir (a launcher ending a failed job kills the survivors while they clean
// up) leaves an empty folder, modified a moment ago. The next process to open
// a NIC removes it once it has been untouched for a few seconds, not after a
// minute: the launcher test saw such a folder outlive the next job's start.
TEST_F(ShmCleanup, TheNextProcessToOpenANicRemovesAnEmptyFolderLeftSecondsAgo) {
  const std::string emptied = "/dev/shm/viastack.shmcleanup-emptied-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(emptied.c_str(), 0700), 0);
  age(emptied, 3);
  EXPECT_EQ(in_child([] {
              Endpoint ep;
              ep.open("shm:0", 4096);
              return 0;
            }),
            0);
  EXPECT_FALSE(std::filesystem::exists(emptied)) << "an empty folder untouched for 3 s";
  std::filesystem::remove_all(emptied);
}

// What that clean-up must leave alone: a live job's segment, a folder just
// made (its job is about to create its segments), a folder holding what is
// no segment, another user's folder, and a segment whose owner lives in
// another pid namespace (a container sharing /dev/shm: its pids mean nothing here).
TEST_F(ShmCleanup, TheNextProcessToOpenANicLeavesWhatIsNoDeadJobsAlone) {
  const std::string live_job = job_;
  pid_t live = start_rank(0, [] { pause(); });
  const std::string prefix = "/dev/shm/viastack.shmcleanup-" + std::to_string(getpid());
  const std::string fresh = prefix + "-fresh", notes = prefix + "-notes", abandoned = prefix + "-abandoned";
  for (const std::string& folder : {fresh, notes, abandoned}) ASSERT_EQ(mkdir(folder.c_str(), 0700), 0) << folder;
  std::ofstream(notes + "/notes") << "not a segment\n";
  age(notes + "/notes", 3600);
  age(notes, 3600);
  age(abandoned, 3600);  // empty and old: left by a job killed before it made a segment
  const bool root = geteuid() == 0;
  const std::string theirs = prefix + "-nobody";
  std::string namespaced_job;
  int namespaced_end[2] = {-1, -1};
  pid_t namespaced = -1;
  if (root) {
    ASSERT_EQ(mkdir(theirs.c_str(), 0700), 0);
    std::ofstream(theirs + "/nic.0") << std::string(4096, '\0');
    ASSERT_EQ(chown((theirs + "/nic.0").c_str(), kOtherUser, kOtherUser), 0);
    ASSERT_EQ(chown(theirs.c_str(), kOtherUser, kOtherUser), 0);
    age(theirs + "/nic.0", 3600);
    age(theirs, 3600);
    // A rank in a pid namespace and a /proc of its own, holding its NIC open until told.
    namespaced_job = use_unique_job("shmcleanup");
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(namespaced_end), 0);
    namespaced = fork();
    if (namespaced == 0) {
      alarm(20);
      if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0 || mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        _exit(2);
      close(ready[0]);
      close(namespaced_end[1]);  // so that the test's close is an end of file here
      pid_t rank = fork();
      if (rank == 0) {
        if (mount("proc", "/proc", "proc", 0, nullptr) != 0) _exit(3);
        std::unique_ptr<via::Nic> nic;
        if (via::Nic::open("shm:0", nic) != via::Result::success) _exit(4);
        char byte;
        if (write(ready[1], "r", 1) != 1 || read(namespaced_end[0], &byte, 1) < 0) _exit(5);
        _exit(0);  // without clean-up: the test removes the folder
      }
      _exit(status_of(rank));
    }
    close(ready[1]);
    close(namespaced_end[0]);
    char byte;
    ASSERT_EQ(read(ready[0], &byte, 1), 1) << "the rank in a pid namespace did not open its NIC";
    close(ready[0]);
  }

  job_ = use_unique_job("shmcleanup");
  EXPECT_EQ(in_child([] {
              Endpoint ep;
              ep.open("shm:0", 4096);
              return 0;
            }),
            0);
  EXPECT_TRUE(std::filesystem::exists(shm::job_directory(live_job) + "/nic.0")) << "a live job's segment";
  EXPECT_TRUE(std::filesystem::exists(fresh)) << "a folder just made";
  EXPECT_TRUE(std::filesystem::exists(notes + "/notes")) << "a file that is no segment";
  EXPECT_FALSE(std::filesystem::exists(abandoned)) << "an empty folder an hour old";
  if (root) {
    EXPECT_TRUE(std::filesystem::exists(theirs + "/nic.0")) << "another user's folder";
    EXPECT_TRUE(std::filesystem::exists(shm::job_directory(namespaced_job) + "/nic.0"))
        << "a segment of a live process in another pid namespace";
    close(namespaced_end[1]);
    EXPECT_EQ(status_of(namespaced), 0);
    shm::remove_job_directory(namespaced_job);
  }
  kill(live, SIGTERM);
  EXPECT_EQ(status_of(live), 128 + SIGTERM);
  EXPECT_FALSE(std::filesystem::exists(shm::job_directory(live_job)));
  for (const std::string& folder : {fresh, notes, abandoned, theirs}) std::filesystem::remove_all(folder);
}

// A process that has exited but that its parent has not reaped yet (a zombie:
// kill(pid, 0) still finds it) has ended: it is not alive, a peer does not
// connect to it, and its NIC's name is free.
TEST_F(ShmCleanup, AZombieIsDead) {
  // A live NIC in the job: a concurrent process's first NIC must not take it for a dead job.
  Endpoint live;
  live.open("shm:2", 4096);
  int end[2];
  ASSERT_EQ(pipe(end), 0);
  pid_t zombie = start_rank(1, [&] {
    char byte;
    if (read(end[0], &byte, 1) < 0) _exit(2);
    _exit(0);  // no exit handlers: its segment stays
  });
  const std::uint64_t start_time = shm::process_start_time(zombie);
  EXPECT_TRUE(shm::process_alive(zombie, start_time));
  ASSERT_EQ(write(end[1], "x", 1), 1);
  ASSERT_TRUE(becomes_zombie(zombie));
  EXPECT_EQ(kill(zombie, 0), 0) << "a zombie answers kill(pid, 0)";
  EXPECT_FALSE(shm::process_alive(zombie, start_time));
  EXPECT_TRUE(std::filesystem::exists(shm::job_directory(job_) + "/nic.1"));
  EXPECT_EQ(in_child([&] {
              Endpoint ep;
              ep.open("shm:0", 4096);
              const auto start = std::chrono::steady_clock::now();
              const via::Result r = connect_to_planted(ep, 500);
              const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
              std::fprintf(stderr, "connecting to a zombie: %s after %.2f s\n", via::describe(r), seconds);
              return r != via::Result::success && seconds < 3 ? 0 : 1;
            }),
            0);
  EXPECT_EQ(in_child([] {
              std::unique_ptr<via::Nic> nic;
              return via::Nic::open("shm:1", nic) == via::Result::success ? 0 : 1;
            }),
            0)
      << "the zombie's NIC number is free";
  EXPECT_EQ(status_of(zombie), 0);
  close(end[0]);
  close(end[1]);
}

}  // namespace
