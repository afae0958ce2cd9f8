// The VIPL boundary (vipl.h), tested from one process that opens two NICs,
// "shm:0" and "shm:1". Progress is explicit, so every wait polls both NICs in
// turn; no call blocks on one NIC while the other one has to answer (the
// client/server tests drive the server's NIC from a second thread instead).
#include <gtest/gtest.h>
#include <unistd.h>
#include <vipl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t kArenaBytes = 256 * 1024;
constexpr std::size_t kSlotBytes = 128;  // descriptor slots: room for up to 6 segments
constexpr int kSlots = 32;
constexpr std::size_t kBufferOffset = kSlotBytes * kSlots;  // data buffers follow the descriptor slots
constexpr VIP_ULONG kMaxTransfer = 64 * 1024;

// Records the asynchronous errors a NIC reports.
struct ErrorLog {
  std::vector<VIP_ERROR_DESCRIPTOR> errors;
  static void handler(VIP_PVOID context, VIP_ERROR_DESCRIPTOR* e) {
    static_cast<ErrorLog*>(context)->errors.push_back(*e);
  }
};

// A VIP_NET_ADDRESS with room for a host address and a discriminator.
struct Address {
  alignas(8) unsigned char storage[sizeof(VIP_NET_ADDRESS) + 64] = {};
  VIP_NET_ADDRESS* get() { return reinterpret_cast<VIP_NET_ADDRESS*>(storage); }
  std::vector<unsigned char> host() { return {get()->HostAddress, get()->HostAddress + get()->HostAddressLen}; }
  std::string discriminator() {
    const unsigned char* d = get()->HostAddress + get()->HostAddressLen;
    return {d, d + get()->DiscriminatorLen};
  }
};

// host: a name for VipNSGetHostByName, or nullptr for no host part (this NIC).
Address make_address(VIP_NIC_HANDLE nic, const char* host, const std::string& discriminator) {
  Address a;
  if (host) {
    EXPECT_EQ(VipNSGetHostByName(nic, const_cast<VIP_CHAR*>(host), a.get(), 0), VIP_SUCCESS) << host;
  }
  a.get()->DiscriminatorLen = VIP_UINT16(discriminator.size());
  std::memcpy(a.get()->HostAddress + a.get()->HostAddressLen, discriminator.data(), discriminator.size());
  return a;
}

// One NIC with a protection tag, a registered arena (descriptor slots, then
// buffers) and an error log.
struct Side {
  VIP_NIC_HANDLE nic = nullptr;
  VIP_PROTECTION_HANDLE ptag = nullptr;
  unsigned char* arena = nullptr;
  VIP_MEM_HANDLE mh = 0;
  VIP_CQ_HANDLE progress_cq = nullptr;  // never attached: VipCQDone on it just advances the NIC
  ErrorLog log;

  void open(const char* device) {
    ASSERT_EQ(VipOpenNic(device, &nic), VIP_SUCCESS) << device;
    ASSERT_EQ(VipErrorCallback(nic, &log, ErrorLog::handler), VIP_SUCCESS);
    ASSERT_EQ(VipCreatePtag(nic, &ptag), VIP_SUCCESS);
    arena = static_cast<unsigned char*>(std::aligned_alloc(4096, kArenaBytes));
    ASSERT_NE(arena, nullptr);
    std::memset(arena, 0, kArenaBytes);
    VIP_MEM_ATTRIBUTES attrs{ptag, VIP_TRUE, VIP_FALSE};
    ASSERT_EQ(VipRegisterMem(nic, arena, kArenaBytes, &attrs, &mh), VIP_SUCCESS);
    ASSERT_EQ(VipCreateCQ(nic, 4, &progress_cq), VIP_SUCCESS);
  }
  void close() {
    if (nic) {
      EXPECT_EQ(VipCloseNic(nic), VIP_SUCCESS);
    }
    nic = nullptr;
  }
  void progress() {
    VIP_VI_HANDLE vi;
    VIP_BOOLEAN recv;
    if (nic) VipCQDone(progress_cq, &vi, &recv);
  }
  VIP_DESCRIPTOR* desc(int slot) { return reinterpret_cast<VIP_DESCRIPTOR*>(arena + kSlotBytes * slot); }
  unsigned char* buffer(std::size_t offset) { return arena + kBufferOffset + offset; }

  VIP_VI_HANDLE create_vi(VIP_CQ_HANDLE send_cq = nullptr, VIP_CQ_HANDLE recv_cq = nullptr,
                          VIP_RELIABILITY_LEVEL level = VIP_SERVICE_RELIABLE_DELIVERY) {
    VIP_VI_ATTRIBUTES attrs{level, kMaxTransfer, nullptr, ptag, VIP_TRUE, VIP_FALSE};
    VIP_VI_HANDLE vi = nullptr;
    EXPECT_EQ(VipCreateVi(nic, &attrs, send_cq, recv_cq, &vi), VIP_SUCCESS);
    return vi;
  }
};

// Fills a descriptor: control segment plus local data segments (address, length).
struct Segment {
  void* address;
  VIP_UINT32 length;
};
VIP_DESCRIPTOR* fill(VIP_DESCRIPTOR* d, VIP_MEM_HANDLE mh, std::initializer_list<Segment> segments,
                     VIP_UINT16 control = VIP_CONTROL_OP_SENDRECV, VIP_UINT32 immediate = 0) {
  std::memset(d, 0, sizeof(VIP_CONTROL_SEGMENT) + segments.size() * sizeof(VIP_DESCRIPTOR_SEGMENT));
  d->CS.Control = control;
  d->CS.ImmediateData = immediate;
  d->CS.SegCount = VIP_UINT16(segments.size());
  VIP_UINT32 total = 0;
  int i = 0;
  for (const Segment& s : segments) {
    d->DS[i].Local.Data.Address = s.address;
    d->DS[i].Local.Handle = mh;
    d->DS[i].Local.Length = s.length;
    total += s.length;
    ++i;
  }
  d->CS.Length = total;
  return d;
}

VIP_UINT32 op_of(const VIP_DESCRIPTOR* d) { return d->CS.Status & VIP_STATUS_OP_MASK; }
VIP_UINT32 errors_of(const VIP_DESCRIPTOR* d) { return d->CS.Status & VIP_STATUS_ERROR_MASK; }

VIP_VI_STATE state_of(VIP_VI_HANDLE vi) {
  VIP_VI_STATE state = VIP_STATE_IDLE;
  EXPECT_EQ(VipQueryVi(vi, &state, nullptr, nullptr, nullptr), VIP_SUCCESS);
  return state;
}

class Vipl : public ::testing::Test {
 protected:
  void SetUp() override {
    // Our own job name: parallel test processes, and the tests of one
    // process, never meet each other's NICs.
    static int counter = 0;
    std::string job = "vipltest-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    setenv("VIASTACK_JOB", job.c_str(), 1);
    ASSERT_NO_FATAL_FAILURE(s[0].open("shm:0"));
    ASSERT_NO_FATAL_FAILURE(s[1].open("shm:1"));
  }
  void TearDown() override {
    for (Side& side : s) {
      side.close();
      std::free(side.arena);
    }
  }

  // Polls `done` while advancing both NICs, for up to timeout.
  bool poll(const std::function<bool()>& done, milliseconds timeout = milliseconds(3000)) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (done()) return true;
      s[0].progress();
      s[1].progress();
    }
    return done();
  }
  VIP_DESCRIPTOR* wait_recv(VIP_VI_HANDLE vi) {
    VIP_DESCRIPTOR* d = nullptr;
    EXPECT_TRUE(poll([&] { return VipRecvDone(vi, &d) == VIP_SUCCESS; })) << "no receive completed";
    return d;
  }
  VIP_DESCRIPTOR* wait_send(VIP_VI_HANDLE vi) {
    VIP_DESCRIPTOR* d = nullptr;
    EXPECT_TRUE(poll([&] { return VipSendDone(vi, &d) == VIP_SUCCESS; })) << "no send completed";
    return d;
  }

  // Connects vi0 (on NIC 0) and vi1 (on NIC 1) peer to peer.
  void connect_peer(VIP_VI_HANDLE vi0, VIP_VI_HANDLE vi1, const std::string& tag) {
    Address local0 = make_address(s[0].nic, nullptr, tag + "-0"), remote0 = make_address(s[0].nic, "rank1", tag + "-1");
    Address local1 = make_address(s[1].nic, "rank1", tag + "-1"), remote1 = make_address(s[1].nic, "rank0", tag + "-0");
    ASSERT_EQ(VipConnectPeerRequest(vi0, local0.get(), remote0.get(), 3000), VIP_SUCCESS);
    ASSERT_EQ(VipConnectPeerRequest(vi1, local1.get(), remote1.get(), 3000), VIP_SUCCESS);
    VIP_RETURN r0 = VIP_NOT_DONE, r1 = VIP_NOT_DONE;
    VIP_VI_ATTRIBUTES remote_attrs0{}, remote_attrs1{};
    poll([&] {
      if (r0 == VIP_NOT_DONE) r0 = VipConnectPeerDone(vi0, &remote_attrs0);
      if (r1 == VIP_NOT_DONE) r1 = VipConnectPeerDone(vi1, &remote_attrs1);
      return r0 != VIP_NOT_DONE && r1 != VIP_NOT_DONE;
    });
    ASSERT_EQ(r0, VIP_SUCCESS);
    ASSERT_EQ(r1, VIP_SUCCESS);
    VIP_VI_ATTRIBUTES own1{};
    ASSERT_EQ(VipQueryVi(vi1, nullptr, &own1, nullptr, nullptr), VIP_SUCCESS);
    EXPECT_EQ(remote_attrs0.ReliabilityLevel, own1.ReliabilityLevel);
    EXPECT_EQ(remote_attrs0.EnableRdmaWrite, own1.EnableRdmaWrite);
    EXPECT_EQ(state_of(vi0), VIP_STATE_CONNECTED);
    EXPECT_EQ(state_of(vi1), VIP_STATE_CONNECTED);
  }

  // A connected pair with `receives` receives of 256 bytes posted on each side
  // (slots 16.., buffers at 64 KiB..) before connecting.
  std::pair<VIP_VI_HANDLE, VIP_VI_HANDLE> connected_pair(const std::string& tag, int receives = 1) {
    VIP_VI_HANDLE vi[2] = {s[0].create_vi(), s[1].create_vi()};
    for (int side = 0; side < 2; ++side)
      for (int i = 0; i < receives; ++i)
        EXPECT_EQ(
            VipPostRecv(vi[side], fill(s[side].desc(16 + i), s[side].mh, {{s[side].buffer(65536 + 256 * i), 256}}),
                        s[side].mh),
            VIP_SUCCESS);
    connect_peer(vi[0], vi[1], tag);
    return {vi[0], vi[1]};
  }

  Side s[2];
};

// ---- invalid handles ----

// Calls every VIPL function taking a NIC handle with `nic` and otherwise valid arguments.
void expect_nic_calls_invalid(VIP_NIC_HANDLE nic, Side& valid) {
  SCOPED_TRACE("NIC handle " + std::to_string(reinterpret_cast<std::uintptr_t>(nic)));
  VIP_NIC_ATTRIBUTES nic_attrs;
  VIP_MEM_ATTRIBUTES mem_attrs{valid.ptag, VIP_FALSE, VIP_FALSE};
  VIP_MEM_HANDLE mh = 0;
  VIP_PROTECTION_HANDLE ptag = nullptr;
  VIP_VI_ATTRIBUTES vi_attrs{VIP_SERVICE_RELIABLE_DELIVERY, kMaxTransfer, nullptr, valid.ptag, VIP_FALSE, VIP_FALSE};
  VIP_VI_HANDLE vi = nullptr;
  VIP_CQ_HANDLE cq = nullptr;
  VIP_CONN_HANDLE conn = nullptr;
  Address local = make_address(valid.nic, nullptr, "x"), remote;
  Address host = make_address(valid.nic, "rank1", "");
  VIP_AUTODISCOVERY_LIST list{};
  char name[64];
  VIP_ULONG name_len = sizeof name;
  unsigned char* buf = valid.buffer(0);
  EXPECT_EQ(VipQueryNic(nic, &nic_attrs), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipRegisterMem(nic, buf, 64, &mem_attrs, &mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipDeregisterMem(nic, valid.arena, valid.mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipQueryMem(nic, valid.arena, valid.mh, &mem_attrs), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipSetMemAttributes(nic, valid.arena, valid.mh, &mem_attrs), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCreatePtag(nic, &ptag), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipDestroyPtag(nic, valid.ptag), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipErrorCallback(nic, nullptr, ErrorLog::handler), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipQuerySystemManagementInfo(nic, VIP_SMI_AUTODISCOVERY, &list), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCreateVi(nic, &vi_attrs, nullptr, nullptr, &vi), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipConnectWait(nic, local.get(), 0, remote.get(), &vi_attrs, &conn), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCreateCQ(nic, 8, &cq), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipNSInit(nic, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipNSGetHostByName(nic, const_cast<VIP_CHAR*>("rank1"), remote.get(), 0), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipNSGetHostByAddr(nic, host.get(), name, &name_len), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipNSShutdown(nic), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCloseNic(nic), VIP_INVALID_PARAMETER);
  EXPECT_EQ(vi, nullptr);
  EXPECT_EQ(cq, nullptr);
  EXPECT_EQ(conn, nullptr);
}

// Every VIPL function taking a VI handle, with `vi`.
void expect_vi_calls_invalid(VIP_VI_HANDLE vi, Side& valid) {
  SCOPED_TRACE("VI handle " + std::to_string(reinterpret_cast<std::uintptr_t>(vi)));
  VIP_VI_STATE state;
  VIP_VI_ATTRIBUTES attrs{VIP_SERVICE_RELIABLE_DELIVERY, kMaxTransfer, nullptr, valid.ptag, VIP_FALSE, VIP_FALSE};
  VIP_BOOLEAN send_empty, recv_empty;
  Address local = make_address(valid.nic, nullptr, "x"), remote = make_address(valid.nic, "rank1", "y");
  VIP_DESCRIPTOR* d = fill(valid.desc(0), valid.mh, {{valid.buffer(0), 16}});
  VIP_DESCRIPTOR* out = nullptr;
  auto notify = [](VIP_PVOID, VIP_NIC_HANDLE, VIP_VI_HANDLE, VIP_DESCRIPTOR*) { ADD_FAILURE() << "notified"; };
  EXPECT_EQ(VipDestroyVi(vi), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipQueryVi(vi, &state, &attrs, &send_empty, &recv_empty), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipSetViAttributes(vi, &attrs), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipConnectRequest(vi, local.get(), remote.get(), 0, &attrs), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipDisconnect(vi), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipConnectPeerRequest(vi, local.get(), remote.get(), 0), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipConnectPeerDone(vi, &attrs), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipConnectPeerWait(vi, &attrs), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipPostSend(vi, d, valid.mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipSendDone(vi, &out), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipSendWait(vi, 0, &out), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipPostRecv(vi, d, valid.mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipRecvDone(vi, &out), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipRecvWait(vi, 0, &out), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipSendNotify(vi, nullptr, notify), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipRecvNotify(vi, nullptr, notify), VIP_INVALID_PARAMETER);
  EXPECT_EQ(out, nullptr);
}

// Every VIPL function taking a CQ handle, with `cq`.
void expect_cq_calls_invalid(VIP_CQ_HANDLE cq) {
  SCOPED_TRACE("CQ handle " + std::to_string(reinterpret_cast<std::uintptr_t>(cq)));
  VIP_VI_HANDLE vi = nullptr;
  VIP_BOOLEAN recv = VIP_FALSE;
  auto notify = [](VIP_PVOID, VIP_NIC_HANDLE, VIP_VI_HANDLE, VIP_BOOLEAN) { ADD_FAILURE() << "notified"; };
  EXPECT_EQ(VipDestroyCQ(cq), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipResizeCQ(cq, 16), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCQDone(cq, &vi, &recv), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCQWait(cq, 0, &vi, &recv), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCQNotify(cq, nullptr, notify), VIP_INVALID_PARAMETER);
  EXPECT_EQ(vi, nullptr);
}

// The functions taking a connection handle, with `conn` (and a valid idle VI).
void expect_conn_calls_invalid(VIP_CONN_HANDLE conn, VIP_VI_HANDLE idle_vi) {
  SCOPED_TRACE("connection handle " + std::to_string(reinterpret_cast<std::uintptr_t>(conn)));
  EXPECT_EQ(VipConnectAccept(conn, idle_vi), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipConnectReject(conn), VIP_INVALID_PARAMETER);
}

TEST_F(Vipl, NullAndMadeUpHandlesAreInvalidParameters) {
  VIP_VI_HANDLE vi = s[0].create_vi();
  VIP_CQ_HANDLE cq;
  ASSERT_EQ(VipCreateCQ(s[0].nic, 8, &cq), VIP_SUCCESS);
  int on_stack = 0;
  std::vector<void*> bogus = {nullptr,
                              reinterpret_cast<void*>(0xdeadbeef),
                              reinterpret_cast<void*>(1),
                              reinterpret_cast<void*>(0xffff),
                              &on_stack,
                              s[0].arena};
  for (void* h : bogus) {
    expect_nic_calls_invalid(h, s[0]);
    expect_vi_calls_invalid(h, s[0]);
    expect_cq_calls_invalid(h);
    expect_conn_calls_invalid(h, vi);
  }
  // A live handle of one kind is not a handle of another kind.
  expect_nic_calls_invalid(vi, s[0]);
  expect_nic_calls_invalid(cq, s[0]);
  expect_vi_calls_invalid(s[0].nic, s[0]);
  expect_vi_calls_invalid(cq, s[0]);
  expect_cq_calls_invalid(s[0].nic);
  expect_cq_calls_invalid(vi);
  expect_conn_calls_invalid(vi, vi);
  // Everything still works with the real handles.
  EXPECT_EQ(state_of(vi), VIP_STATE_IDLE);
  VIP_VI_HANDLE from;
  VIP_BOOLEAN recv;
  EXPECT_EQ(VipCQDone(cq, &from, &recv), VIP_NOT_DONE);
  // NULL output pointers.
  EXPECT_EQ(VipOpenNic("shm:5", nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipQueryNic(s[0].nic, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCreatePtag(s[0].nic, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCreateCQ(s[0].nic, 8, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipSendDone(vi, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipRecvDone(vi, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCQDone(cq, nullptr, &recv), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipPostRecv(vi, nullptr, s[0].mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipSendNotify(vi, nullptr, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCQNotify(cq, nullptr, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipQuerySystemManagementInfo(s[0].nic, VIP_SMI_AUTODISCOVERY, nullptr), VIP_INVALID_PARAMETER);
  VIP_AUTODISCOVERY_LIST list{};
  EXPECT_EQ(VipQuerySystemManagementInfo(s[0].nic, 77, &list), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipQuerySystemManagementInfo(s[0].nic, VIP_SMI_AUTODISCOVERY, &list), VIP_SUCCESS);
}

TEST_F(Vipl, DestroyedHandlesAreInvalidParameters) {
  VIP_VI_HANDLE vi = s[0].create_vi();
  VIP_VI_HANDLE other = s[0].create_vi();
  VIP_CQ_HANDLE cq;
  ASSERT_EQ(VipCreateCQ(s[0].nic, 8, &cq), VIP_SUCCESS);
  ASSERT_EQ(VipDestroyVi(vi), VIP_SUCCESS);
  ASSERT_EQ(VipDestroyCQ(cq), VIP_SUCCESS);
  expect_vi_calls_invalid(vi, s[0]);
  expect_cq_calls_invalid(cq);
  // A new object must not answer to the old handle.
  VIP_VI_HANDLE again = s[0].create_vi();
  EXPECT_EQ(VipQueryVi(vi, nullptr, nullptr, nullptr, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(state_of(again), VIP_STATE_IDLE);
  EXPECT_EQ(state_of(other), VIP_STATE_IDLE);
}

TEST_F(Vipl, ClosingANicInvalidatesItsViAndCqHandles) {
  VIP_VI_HANDLE vi = s[0].create_vi();
  VIP_CQ_HANDLE cq;
  ASSERT_EQ(VipCreateCQ(s[0].nic, 8, &cq), VIP_SUCCESS);
  VIP_VI_HANDLE vi_with_cq = s[0].create_vi(cq, cq);
  VIP_VI_HANDLE survivor = s[1].create_vi();
  VIP_NIC_HANDLE closed = s[0].nic;
  ASSERT_EQ(VipCloseNic(closed), VIP_SUCCESS);
  s[0].nic = nullptr;
  expect_nic_calls_invalid(closed, s[1]);
  expect_vi_calls_invalid(vi, s[1]);
  expect_vi_calls_invalid(vi_with_cq, s[1]);
  expect_cq_calls_invalid(cq);
  expect_cq_calls_invalid(s[0].progress_cq);
  // The other NIC is untouched, and the closed one can be opened again under a new handle.
  EXPECT_EQ(state_of(survivor), VIP_STATE_IDLE);
  VIP_NIC_HANDLE reopened;
  ASSERT_EQ(VipOpenNic("shm:0", &reopened), VIP_SUCCESS);
  EXPECT_EQ(VipQueryVi(vi, nullptr, nullptr, nullptr, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCloseNic(closed), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipCloseNic(reopened), VIP_SUCCESS);
}

TEST_F(Vipl, ClosingANicBreaksTheConnectionOfItsPeer) {
  auto [vi0, vi1] = connected_pair("close");
  s[0].close();
  VIP_DESCRIPTOR* d = wait_recv(vi1);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(errors_of(d), VIP_STATUS_DESC_FLUSHED_ERROR);
  EXPECT_EQ(state_of(vi1), VIP_STATE_ERROR);
  ASSERT_EQ(s[1].log.errors.size(), 1u);
  EXPECT_EQ(s[1].log.errors[0].ErrorCode, VIP_ERROR_CONN_LOST);
  EXPECT_EQ(s[1].log.errors[0].ViHandle, vi1);
}

// ---- NIC, memory, protection tags, name service ----

TEST_F(Vipl, QueryNicReportsSaneAttributes) {
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("NIC " + std::to_string(i));
    VIP_NIC_ATTRIBUTES a;
    std::memset(&a, 0xAB, sizeof a);
    ASSERT_EQ(VipQueryNic(s[i].nic, &a), VIP_SUCCESS);
    EXPECT_NE(std::memchr(a.Name, '\0', sizeof a.Name), nullptr) << "Name is not terminated";
    EXPECT_GT(std::strlen(a.Name), 0u);
    ASSERT_EQ(a.NicAddressLen, 4);
    ASSERT_NE(a.LocalNicAddress, nullptr);
    Address own = make_address(s[i].nic, i == 0 ? "rank0" : "rank1", "");
    EXPECT_EQ(own.host(), std::vector<unsigned char>(a.LocalNicAddress, a.LocalNicAddress + a.NicAddressLen));
    EXPECT_GE(a.MaxDiscriminatorLen, 4);
    EXPECT_GT(a.MaxRegisterBytes, 0u);
    EXPECT_GT(a.MaxRegisterRegions, 1u);
    EXPECT_GT(a.MaxRegisterBlockBytes, 0u);
    EXPECT_GE(a.MaxVI, 2u);
    EXPECT_GE(a.MaxDescriptorsPerQueue, 2u);
    EXPECT_GE(a.MaxSegmentsPerDesc, 2u);
    EXPECT_GE(a.MaxCQ, 1u);
    EXPECT_GE(a.MaxCQEntries, 1u);
    EXPECT_GE(a.MaxTransferSize, a.NativeMTU);
    EXPECT_GT(a.NativeMTU, 0u);
    EXPECT_GE(a.MaxPtags, 1u);
    EXPECT_TRUE(a.ThreadSafe == VIP_TRUE || a.ThreadSafe == VIP_FALSE);
    const VIP_RELIABILITY_LEVEL all =
        VIP_SERVICE_UNRELIABLE | VIP_SERVICE_RELIABLE_DELIVERY | VIP_SERVICE_RELIABLE_RECEPTION;
    EXPECT_TRUE(a.ReliabilityLevelSupport & VIP_SERVICE_RELIABLE_DELIVERY);
    EXPECT_EQ(a.ReliabilityLevelSupport & ~all, 0);
    EXPECT_EQ(a.RDMAReadSupport & ~a.ReliabilityLevelSupport, 0);
    EXPECT_EQ(a.RDMAReadSupport & VIP_SERVICE_UNRELIABLE, 0) << "VIA: no RDMA read on unreliable VIs";
  }
  VIP_NIC_ATTRIBUTES a0, a1;
  ASSERT_EQ(VipQueryNic(s[0].nic, &a0), VIP_SUCCESS);
  ASSERT_EQ(VipQueryNic(s[1].nic, &a1), VIP_SUCCESS);
  EXPECT_NE(std::memcmp(a0.LocalNicAddress, a1.LocalNicAddress, 4), 0);
}

TEST_F(Vipl, RegisterMemChecksItsArguments) {
  unsigned char* buf = s[0].buffer(0);
  VIP_MEM_HANDLE mh = 0;
  VIP_MEM_ATTRIBUTES attrs{s[0].ptag, VIP_FALSE, VIP_FALSE};
  EXPECT_EQ(VipRegisterMem(s[0].nic, buf, 0, &attrs, &mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipRegisterMem(s[0].nic, nullptr, 64, &attrs, &mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipRegisterMem(s[0].nic, buf, 64, nullptr, &mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipRegisterMem(s[0].nic, buf, 64, &attrs, nullptr), VIP_INVALID_PARAMETER);
  VIP_MEM_ATTRIBUTES unknown{reinterpret_cast<VIP_PROTECTION_HANDLE>(0x7777), VIP_FALSE, VIP_FALSE};
  EXPECT_EQ(VipRegisterMem(s[0].nic, buf, 64, &unknown, &mh), VIP_INVALID_PTAG);
  unknown.Ptag = nullptr;
  EXPECT_EQ(VipRegisterMem(s[0].nic, buf, 64, &unknown, &mh), VIP_INVALID_PTAG);
  // NIC 1's tag is not NIC 0's: create a second tag there so the values differ.
  VIP_PROTECTION_HANDLE nic1_tag;
  ASSERT_EQ(VipCreatePtag(s[1].nic, &nic1_tag), VIP_SUCCESS);
  VIP_MEM_ATTRIBUTES foreign{nic1_tag, VIP_FALSE, VIP_FALSE};
  EXPECT_EQ(VipRegisterMem(s[0].nic, buf, 64, &foreign, &mh), VIP_INVALID_PTAG);
  EXPECT_EQ(mh, 0u);

  ASSERT_EQ(VipRegisterMem(s[0].nic, buf, 64, &attrs, &mh), VIP_SUCCESS);
  EXPECT_NE(mh, 0u);
  EXPECT_NE(mh, s[0].mh);
  EXPECT_EQ(VipDeregisterMem(s[0].nic, buf + 1, mh), VIP_INVALID_PARAMETER) << "wrong address";
  EXPECT_EQ(VipDeregisterMem(s[0].nic, buf, mh ^ 0x10000), VIP_INVALID_PARAMETER) << "made-up handle";
  EXPECT_EQ(VipDeregisterMem(s[1].nic, buf, mh), VIP_INVALID_PARAMETER) << "other NIC";
  EXPECT_EQ(VipDeregisterMem(s[0].nic, buf, mh), VIP_SUCCESS);
  EXPECT_EQ(VipDeregisterMem(s[0].nic, buf, mh), VIP_INVALID_PARAMETER) << "deregistered twice";
  EXPECT_EQ(VipQueryMem(s[0].nic, buf, mh, &attrs), VIP_INVALID_PARAMETER);
  // A new registration of the same slot gets a new handle.
  VIP_MEM_HANDLE again;
  ASSERT_EQ(VipRegisterMem(s[0].nic, buf, 64, &attrs, &again), VIP_SUCCESS);
  EXPECT_NE(again, mh);
  EXPECT_EQ(VipDeregisterMem(s[0].nic, buf, mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipDeregisterMem(s[0].nic, buf, again), VIP_SUCCESS);
}

TEST_F(Vipl, QueryAndSetMemAttributes) {
  VIP_PROTECTION_HANDLE tag2;
  ASSERT_EQ(VipCreatePtag(s[0].nic, &tag2), VIP_SUCCESS);
  unsigned char* buf = s[0].buffer(4096);
  VIP_MEM_ATTRIBUTES attrs{s[0].ptag, VIP_TRUE, VIP_FALSE}, got{};
  VIP_MEM_HANDLE mh;
  ASSERT_EQ(VipRegisterMem(s[0].nic, buf, 4096, &attrs, &mh), VIP_SUCCESS);
  ASSERT_EQ(VipQueryMem(s[0].nic, buf, mh, &got), VIP_SUCCESS);
  EXPECT_EQ(got.Ptag, s[0].ptag);
  EXPECT_TRUE(got.EnableRdmaWrite);
  EXPECT_FALSE(got.EnableRdmaRead);

  VIP_MEM_ATTRIBUTES changed{tag2, VIP_FALSE, VIP_TRUE};
  ASSERT_EQ(VipSetMemAttributes(s[0].nic, buf, mh, &changed), VIP_SUCCESS);
  ASSERT_EQ(VipQueryMem(s[0].nic, buf, mh, &got), VIP_SUCCESS);
  EXPECT_EQ(got.Ptag, tag2);
  EXPECT_FALSE(got.EnableRdmaWrite);
  EXPECT_TRUE(got.EnableRdmaRead);

  VIP_MEM_ATTRIBUTES bad{reinterpret_cast<VIP_PROTECTION_HANDLE>(0x7777), VIP_FALSE, VIP_FALSE};
  EXPECT_EQ(VipSetMemAttributes(s[0].nic, buf, mh, &bad), VIP_INVALID_PTAG);
  EXPECT_EQ(VipSetMemAttributes(s[0].nic, buf, mh, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipSetMemAttributes(s[0].nic, buf + 64, mh, &changed), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipSetMemAttributes(s[0].nic, buf, mh + 1, &changed), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipQueryMem(s[0].nic, buf + 64, mh, &got), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipQueryMem(s[0].nic, buf, mh, nullptr), VIP_INVALID_PARAMETER);
  ASSERT_EQ(VipQueryMem(s[0].nic, buf, mh, &got), VIP_SUCCESS);
  EXPECT_EQ(got.Ptag, tag2) << "a refused change must change nothing";

  // The region now belongs to tag2: a VI with the NIC's first tag may not use
  // a descriptor in it.
  VIP_VI_HANDLE vi = s[0].create_vi();
  auto* d = reinterpret_cast<VIP_DESCRIPTOR*>(buf);
  EXPECT_EQ(VipPostRecv(vi, fill(d, mh, {{buf + 1024, 64}}), mh), VIP_INVALID_PARAMETER);
  ASSERT_EQ(VipSetMemAttributes(s[0].nic, buf, mh, &attrs), VIP_SUCCESS);
  EXPECT_EQ(VipPostRecv(vi, fill(d, mh, {{buf + 1024, 64}}), mh), VIP_SUCCESS);
}

TEST_F(Vipl, CreateAndDestroyPtags) {
  VIP_PROTECTION_HANDLE a, b;
  ASSERT_EQ(VipCreatePtag(s[0].nic, &a), VIP_SUCCESS);
  ASSERT_EQ(VipCreatePtag(s[0].nic, &b), VIP_SUCCESS);
  EXPECT_NE(a, b);
  EXPECT_NE(a, s[0].ptag);
  EXPECT_NE(a, nullptr);
  EXPECT_EQ(VipDestroyPtag(s[0].nic, b), VIP_SUCCESS);
  EXPECT_NE(VipDestroyPtag(s[0].nic, b), VIP_SUCCESS) << "destroyed twice";
  EXPECT_NE(VipDestroyPtag(s[0].nic, reinterpret_cast<VIP_PROTECTION_HANDLE>(0x7777)), VIP_SUCCESS);
  VIP_MEM_ATTRIBUTES gone{b, VIP_FALSE, VIP_FALSE};
  VIP_MEM_HANDLE mh;
  EXPECT_EQ(VipRegisterMem(s[0].nic, s[0].buffer(0), 64, &gone, &mh), VIP_INVALID_PTAG);

  // In use by a memory region: refused, and the tag stays usable.
  VIP_MEM_ATTRIBUTES with_a{a, VIP_FALSE, VIP_FALSE};
  ASSERT_EQ(VipRegisterMem(s[0].nic, s[0].buffer(0), 64, &with_a, &mh), VIP_SUCCESS);
  EXPECT_NE(VipDestroyPtag(s[0].nic, a), VIP_SUCCESS) << "tag in use by a memory region";
  VIP_MEM_HANDLE mh2;
  EXPECT_EQ(VipRegisterMem(s[0].nic, s[0].buffer(64), 64, &with_a, &mh2), VIP_SUCCESS);
  EXPECT_EQ(VipDeregisterMem(s[0].nic, s[0].buffer(64), mh2), VIP_SUCCESS);
  EXPECT_EQ(VipDeregisterMem(s[0].nic, s[0].buffer(0), mh), VIP_SUCCESS);

  // In use by a VI: refused until the VI is gone.
  VIP_VI_ATTRIBUTES vattrs{VIP_SERVICE_RELIABLE_DELIVERY, kMaxTransfer, nullptr, a, VIP_FALSE, VIP_FALSE};
  VIP_VI_HANDLE vi;
  ASSERT_EQ(VipCreateVi(s[0].nic, &vattrs, nullptr, nullptr, &vi), VIP_SUCCESS);
  EXPECT_NE(VipDestroyPtag(s[0].nic, a), VIP_SUCCESS) << "tag in use by a VI";
  ASSERT_EQ(VipDestroyVi(vi), VIP_SUCCESS);
  EXPECT_EQ(VipDestroyPtag(s[0].nic, a), VIP_SUCCESS);
}

TEST_F(Vipl, NameService) {
  EXPECT_EQ(VipNSInit(s[0].nic, nullptr), VIP_SUCCESS);
  Address a;
  ASSERT_EQ(VipNSGetHostByName(s[0].nic, const_cast<VIP_CHAR*>("rank3"), a.get(), 0), VIP_SUCCESS);
  EXPECT_EQ(a.host(), (std::vector<unsigned char>{3, 0, 0, 0}));
  Address b;
  ASSERT_EQ(VipNSGetHostByName(s[1].nic, const_cast<VIP_CHAR*>("localhost"), b.get(), 3), VIP_SUCCESS);
  EXPECT_EQ(b.host(), a.host()) << "localhost, NameIndex 3 is NIC 3";
  for (const char* bad : {"no-such-host.invalid", "rank", "rankX", "rank-1", ""}) {
    Address c;
    EXPECT_EQ(VipNSGetHostByName(s[0].nic, const_cast<VIP_CHAR*>(bad), c.get(), 0), VIP_ERROR_NAMESERVICE)
        << "'" << bad << "'";
  }
  EXPECT_EQ(VipNSGetHostByName(s[0].nic, nullptr, a.get(), 0), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipNSGetHostByName(s[0].nic, const_cast<VIP_CHAR*>("rank3"), nullptr, 0), VIP_INVALID_PARAMETER);

  // And back: an address names its NIC; a short buffer gets the length needed.
  char name[64];
  VIP_ULONG len = sizeof name;
  ASSERT_EQ(VipNSGetHostByAddr(s[0].nic, a.get(), name, &len), VIP_SUCCESS);
  EXPECT_STREQ(name, "shm:3");
  EXPECT_EQ(len, std::strlen(name) + 1);
  char tiny[2];
  VIP_ULONG tiny_len = sizeof tiny;
  EXPECT_EQ(VipNSGetHostByAddr(s[0].nic, a.get(), tiny, &tiny_len), VIP_ERROR_RESOURCE);
  EXPECT_EQ(tiny_len, std::strlen("shm:3") + 1);
  EXPECT_EQ(VipNSGetHostByAddr(s[0].nic, nullptr, name, &len), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipNSGetHostByAddr(s[0].nic, a.get(), nullptr, &len), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipNSGetHostByAddr(s[0].nic, a.get(), name, nullptr), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipNSShutdown(s[0].nic), VIP_SUCCESS);
}

// ---- VIs ----

TEST_F(Vipl, CreateViRejectsBadAttributes) {
  VIP_NIC_ATTRIBUTES nic;
  ASSERT_EQ(VipQueryNic(s[0].nic, &nic), VIP_SUCCESS);
  VIP_VI_HANDLE vi = nullptr;
  auto attrs = [&](VIP_RELIABILITY_LEVEL level, VIP_ULONG max, VIP_PROTECTION_HANDLE tag, VIP_BOOLEAN read) {
    return VIP_VI_ATTRIBUTES{level, max, nullptr, tag, VIP_FALSE, read};
  };
  for (VIP_RELIABILITY_LEVEL level : {0, 3, 6, 8, 0x100}) {
    VIP_VI_ATTRIBUTES a = attrs(level, kMaxTransfer, s[0].ptag, VIP_FALSE);
    EXPECT_EQ(VipCreateVi(s[0].nic, &a, nullptr, nullptr, &vi), VIP_INVALID_RELIABILITY_LEVEL) << level;
  }
  VIP_VI_ATTRIBUTES a = attrs(VIP_SERVICE_RELIABLE_DELIVERY, kMaxTransfer, nullptr, VIP_FALSE);
  EXPECT_EQ(VipCreateVi(s[0].nic, &a, nullptr, nullptr, &vi), VIP_INVALID_PTAG);
  a.Ptag = reinterpret_cast<VIP_PROTECTION_HANDLE>(0x7777);
  EXPECT_EQ(VipCreateVi(s[0].nic, &a, nullptr, nullptr, &vi), VIP_INVALID_PTAG);
  a = attrs(VIP_SERVICE_RELIABLE_DELIVERY, nic.MaxTransferSize + 1, s[0].ptag, VIP_FALSE);
  EXPECT_EQ(VipCreateVi(s[0].nic, &a, nullptr, nullptr, &vi), VIP_INVALID_MTU);
  a.MaxTransferSize = ~VIP_ULONG(0);
  EXPECT_EQ(VipCreateVi(s[0].nic, &a, nullptr, nullptr, &vi), VIP_INVALID_MTU);
  a = attrs(VIP_SERVICE_UNRELIABLE, kMaxTransfer, s[0].ptag, VIP_TRUE);
  EXPECT_EQ(VipCreateVi(s[0].nic, &a, nullptr, nullptr, &vi), VIP_INVALID_RDMAREAD);
  EXPECT_EQ(VipCreateVi(s[0].nic, nullptr, nullptr, nullptr, &vi), VIP_INVALID_PARAMETER);
  // A CQ of another NIC.
  VIP_CQ_HANDLE foreign;
  ASSERT_EQ(VipCreateCQ(s[1].nic, 4, &foreign), VIP_SUCCESS);
  a = attrs(VIP_SERVICE_RELIABLE_DELIVERY, kMaxTransfer, s[0].ptag, VIP_FALSE);
  EXPECT_EQ(VipCreateVi(s[0].nic, &a, foreign, nullptr, &vi), VIP_INVALID_PARAMETER);
  EXPECT_EQ(vi, nullptr);

  // The limits themselves are fine; the attributes read back as given.
  a = attrs(VIP_SERVICE_RELIABLE_RECEPTION, nic.MaxTransferSize, s[0].ptag, VIP_TRUE);
  ASSERT_EQ(VipCreateVi(s[0].nic, &a, nullptr, nullptr, &vi), VIP_SUCCESS);
  VIP_VI_ATTRIBUTES got{};
  VIP_VI_STATE state;
  VIP_BOOLEAN send_empty = VIP_FALSE, recv_empty = VIP_FALSE;
  ASSERT_EQ(VipQueryVi(vi, &state, &got, &send_empty, &recv_empty), VIP_SUCCESS);
  EXPECT_EQ(state, VIP_STATE_IDLE);
  EXPECT_EQ(got.ReliabilityLevel, VIP_SERVICE_RELIABLE_RECEPTION);
  EXPECT_EQ(got.MaxTransferSize, nic.MaxTransferSize);
  EXPECT_EQ(got.Ptag, s[0].ptag);
  EXPECT_TRUE(got.EnableRdmaRead);
  EXPECT_TRUE(send_empty);
  EXPECT_TRUE(recv_empty);
  // VipSetViAttributes applies the same checks.
  VIP_VI_ATTRIBUTES bad = attrs(3, kMaxTransfer, s[0].ptag, VIP_FALSE);
  EXPECT_EQ(VipSetViAttributes(vi, &bad), VIP_INVALID_RELIABILITY_LEVEL);
  bad = attrs(VIP_SERVICE_RELIABLE_DELIVERY, nic.MaxTransferSize + 1, s[0].ptag, VIP_FALSE);
  EXPECT_EQ(VipSetViAttributes(vi, &bad), VIP_INVALID_MTU);
  bad = attrs(VIP_SERVICE_RELIABLE_DELIVERY, kMaxTransfer, nullptr, VIP_FALSE);
  EXPECT_EQ(VipSetViAttributes(vi, &bad), VIP_INVALID_PTAG);
  EXPECT_EQ(VipSetViAttributes(vi, nullptr), VIP_INVALID_PARAMETER);
  VIP_VI_ATTRIBUTES good = attrs(VIP_SERVICE_UNRELIABLE, 4096, s[0].ptag, VIP_FALSE);
  EXPECT_EQ(VipSetViAttributes(vi, &good), VIP_SUCCESS);
  ASSERT_EQ(VipQueryVi(vi, nullptr, &got, nullptr, nullptr), VIP_SUCCESS);
  EXPECT_EQ(got.ReliabilityLevel, VIP_SERVICE_UNRELIABLE);
  EXPECT_EQ(got.MaxTransferSize, 4096u);
}

// VipSetViAttributes must refuse what VipCreateVi refuses: RDMA read on an
// unreliable VI (see the report: it is accepted).
TEST_F(Vipl, SetViAttributesRefusesRdmaReadOnUnreliable) {
  VIP_VI_HANDLE vi = s[0].create_vi();
  VIP_VI_ATTRIBUTES a{VIP_SERVICE_UNRELIABLE, kMaxTransfer, nullptr, s[0].ptag, VIP_FALSE, VIP_TRUE};
  EXPECT_EQ(VipSetViAttributes(vi, &a), VIP_INVALID_RDMAREAD);
}

TEST_F(Vipl, SendOnIdleViIsInvalidState) {
  VIP_VI_HANDLE vi = s[0].create_vi();
  VIP_DESCRIPTOR* d = fill(s[0].desc(0), s[0].mh, {{s[0].buffer(0), 16}});
  EXPECT_EQ(VipPostSend(vi, d, s[0].mh), VIP_INVALID_STATE);
  VIP_BOOLEAN send_empty = VIP_FALSE;
  ASSERT_EQ(VipQueryVi(vi, nullptr, nullptr, &send_empty, nullptr), VIP_SUCCESS);
  EXPECT_TRUE(send_empty);
  EXPECT_TRUE(s[0].log.errors.empty());
  // Receives may be posted before connecting; an idle VI with a posted receive
  // cannot be destroyed.
  EXPECT_EQ(VipPostRecv(vi, fill(s[0].desc(1), s[0].mh, {{s[0].buffer(0), 16}}), s[0].mh), VIP_SUCCESS);
  EXPECT_EQ(VipDestroyVi(vi), VIP_INVALID_STATE);
}

TEST_F(Vipl, DestroyingAConnectedViIsInvalidState) {
  auto [vi0, vi1] = connected_pair("destroy", 0);
  EXPECT_EQ(VipDestroyVi(vi0), VIP_INVALID_STATE);
  EXPECT_EQ(VipDestroyVi(vi1), VIP_INVALID_STATE);
  EXPECT_EQ(state_of(vi0), VIP_STATE_CONNECTED);
  ASSERT_EQ(VipDisconnect(vi0), VIP_SUCCESS);
  EXPECT_EQ(state_of(vi0), VIP_STATE_IDLE);
  EXPECT_EQ(VipDestroyVi(vi0), VIP_SUCCESS);
}

TEST_F(Vipl, PostRejectsMisplacedDescriptors) {
  auto [vi0, vi1] = connected_pair("misplaced");
  VIP_MEM_HANDLE mh = s[0].mh;
  unsigned char* buf = s[0].buffer(0);
  // Not 64-byte aligned (but inside the region).
  auto* unaligned = reinterpret_cast<VIP_DESCRIPTOR*>(s[0].arena + 8);
  fill(unaligned, mh, {{buf, 16}});
  EXPECT_EQ(VipPostSend(vi0, unaligned, mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipPostRecv(vi0, unaligned, mh), VIP_INVALID_PARAMETER);
  auto* unaligned32 = reinterpret_cast<VIP_DESCRIPTOR*>(s[0].arena + 32);
  fill(unaligned32, mh, {{buf, 16}});
  EXPECT_EQ(VipPostSend(vi0, unaligned32, mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipPostSend(vi0, nullptr, mh), VIP_INVALID_PARAMETER);

  // Outside the region the handle names: unregistered memory, another
  // region's memory, and a descriptor whose segments run past the region's end.
  alignas(64) static unsigned char unregistered[256];
  auto* outside = reinterpret_cast<VIP_DESCRIPTOR*>(unregistered);
  fill(outside, mh, {{buf, 16}});
  EXPECT_EQ(VipPostSend(vi0, outside, mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipPostRecv(vi0, outside, mh), VIP_INVALID_PARAMETER);

  unsigned char* other = static_cast<unsigned char*>(std::aligned_alloc(64, 4096));
  VIP_MEM_ATTRIBUTES attrs{s[0].ptag, VIP_FALSE, VIP_FALSE};
  VIP_MEM_HANDLE other_mh;
  ASSERT_EQ(VipRegisterMem(s[0].nic, other, 4096, &attrs, &other_mh), VIP_SUCCESS);
  auto* in_other = reinterpret_cast<VIP_DESCRIPTOR*>(other);
  fill(in_other, mh, {{buf, 16}});
  EXPECT_EQ(VipPostSend(vi0, in_other, mh), VIP_INVALID_PARAMETER) << "descriptor in another region";
  EXPECT_EQ(VipPostSend(vi0, s[0].desc(0), other_mh), VIP_INVALID_PARAMETER) << "handle of another region";
  EXPECT_EQ(VipPostSend(vi0, in_other, 0), VIP_INVALID_PARAMETER) << "no handle";

  auto* last = reinterpret_cast<VIP_DESCRIPTOR*>(other + 4096 - 64);
  fill(last, other_mh, {{other, 16}, {other + 16, 16}});  // 32 + 2 * 16 bytes: fits exactly
  last->CS.SegCount = 3;                                  // 80 bytes: runs past the end
  EXPECT_EQ(VipPostSend(vi0, last, other_mh), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipPostRecv(vi0, last, other_mh), VIP_INVALID_PARAMETER);

  // None of this touched the VI: it is connected with empty send queue, and a
  // correct send still gets through.
  EXPECT_EQ(state_of(vi0), VIP_STATE_CONNECTED);
  EXPECT_TRUE(s[0].log.errors.empty());
  std::memcpy(buf, "still connected", 16);
  ASSERT_EQ(VipPostSend(vi0, fill(s[0].desc(0), mh, {{buf, 16}}), mh), VIP_SUCCESS);
  VIP_DESCRIPTOR* sent = wait_send(vi0);
  ASSERT_EQ(sent, s[0].desc(0));
  EXPECT_EQ(sent->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_SEND);
  VIP_DESCRIPTOR* got = wait_recv(vi1);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(errors_of(got), 0u);
  EXPECT_STREQ(reinterpret_cast<char*>(s[1].buffer(65536)), "still connected");
  ASSERT_EQ(VipDisconnect(vi0), VIP_SUCCESS);
  ASSERT_EQ(VipDeregisterMem(s[0].nic, other, other_mh), VIP_SUCCESS);
  std::free(other);
}

// ---- data transfer ----

TEST_F(Vipl, GatherThreeSegmentsIntoScatterTwoWithImmediateData) {
  VIP_VI_HANDLE vi0 = s[0].create_vi(), vi1 = s[1].create_vi();
  // Receive: scatter into 100 + 200 bytes, with sentinels around.
  unsigned char* r1 = s[1].buffer(1000);
  unsigned char* r2 = s[1].buffer(3000);
  std::memset(s[1].buffer(0), 0xEE, 8192);
  VIP_DESCRIPTOR* rd = fill(s[1].desc(2), s[1].mh, {{r1, 100}, {r2, 200}});
  ASSERT_EQ(VipPostRecv(vi1, rd, s[1].mh), VIP_SUCCESS);
  ASSERT_NO_FATAL_FAILURE(connect_peer(vi0, vi1, "gather"));

  // Send: gather 50 + 120 + 80 = 250 bytes from three places.
  unsigned char* g[3] = {s[0].buffer(5000), s[0].buffer(700), s[0].buffer(20000)};
  const VIP_UINT32 len[3] = {50, 120, 80};
  std::vector<unsigned char> expected;
  for (int i = 0; i < 3; ++i)
    for (VIP_UINT32 j = 0; j < len[i]; ++j) {
      g[i][j] = static_cast<unsigned char>(i * 70 + j * 3 + 1);
      expected.push_back(g[i][j]);
    }
  VIP_DESCRIPTOR* sd = fill(s[0].desc(4), s[0].mh, {{g[0], len[0]}, {g[1], len[1]}, {g[2], len[2]}},
                            VIP_CONTROL_OP_SENDRECV | VIP_CONTROL_IMMEDIATE, 0xC0FFEE42);
  ASSERT_EQ(VipPostSend(vi0, sd, s[0].mh), VIP_SUCCESS);
  VIP_DESCRIPTOR* sent = wait_send(vi0);
  ASSERT_EQ(sent, sd);
  EXPECT_TRUE(sent->CS.Status & VIP_STATUS_DONE);
  EXPECT_EQ(errors_of(sent), 0u);
  EXPECT_EQ(op_of(sent), VIP_STATUS_OP_SEND);

  VIP_DESCRIPTOR* got = wait_recv(vi1);
  ASSERT_EQ(got, rd);
  EXPECT_EQ(got->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE | VIP_STATUS_IMMEDIATE);
  EXPECT_EQ(got->CS.ImmediateData, 0xC0FFEE42u);
  EXPECT_EQ(got->CS.Length, 250u);
  EXPECT_EQ(std::vector<unsigned char>(r1, r1 + 100),
            std::vector<unsigned char>(expected.begin(), expected.begin() + 100));
  EXPECT_EQ(std::vector<unsigned char>(r2, r2 + 150),
            std::vector<unsigned char>(expected.begin() + 100, expected.end()));
  for (int j = 150; j < 200; ++j) ASSERT_EQ(r2[j], 0xEE) << "byte " << j << " of the second scatter segment";
  EXPECT_EQ(r1[-1], 0xEE);
  EXPECT_EQ(r1[100], 0xEE);
  EXPECT_EQ(r2[-1], 0xEE);
  EXPECT_EQ(r2[200], 0xEE);

  // A plain send afterwards carries no IMMEDIATE bit.
  ASSERT_EQ(VipPostRecv(vi1, rd, s[1].mh), VIP_SUCCESS);
  ASSERT_EQ(VipPostSend(vi0, fill(sd, s[0].mh, {{g[0], 8}}), s[0].mh), VIP_SUCCESS);
  got = wait_recv(vi1);
  ASSERT_EQ(got, rd);
  EXPECT_EQ(got->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);
  EXPECT_EQ(got->CS.Length, 8u);
}

TEST_F(Vipl, RdmaWriteWithImmediateConsumesAReceive) {
  auto [vi0, vi1] = connected_pair("rdma");
  unsigned char* target = s[1].buffer(100000);
  std::memset(target - 16, 0xEE, 4096 + 32);
  unsigned char* source = s[0].buffer(0);
  for (int i = 0; i < 4096; ++i) source[i] = static_cast<unsigned char>(i * 7 + 3);
  // An address segment naming the target, then the local data segment.
  VIP_DESCRIPTOR* d =
      fill(s[0].desc(0), s[0].mh, {{nullptr, 0}, {source, 4096}}, VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, 77);
  d->DS[0].Remote.Data.Address = target;
  d->DS[0].Remote.Handle = s[1].mh;
  d->DS[0].Remote.Reserved = 0;
  ASSERT_EQ(VipPostSend(vi0, d, s[0].mh), VIP_SUCCESS);
  VIP_DESCRIPTOR* sent = wait_send(vi0);
  ASSERT_EQ(sent, d);
  EXPECT_EQ(sent->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RDMA_WRITE);
  VIP_DESCRIPTOR* got = wait_recv(vi1);
  ASSERT_EQ(got, s[1].desc(16));
  EXPECT_EQ(got->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_REMOTE_RDMA_WRITE | VIP_STATUS_IMMEDIATE);
  EXPECT_EQ(got->CS.ImmediateData, 77u);
  EXPECT_EQ(got->CS.Length, 4096u);
  EXPECT_EQ(std::memcmp(target, source, 4096), 0);
  EXPECT_EQ(target[-1], 0xEE);
  EXPECT_EQ(target[4096], 0xEE);
  EXPECT_EQ(s[1].buffer(65536)[0], 0) << "the receive's own segments stay untouched";
}

TEST_F(Vipl, RdmaWriteIntoMemoryWithoutRdmaWriteBreaksTheConnection) {
  auto [vi0, vi1] = connected_pair("rdmaprot");
  unsigned char* target = static_cast<unsigned char*>(std::aligned_alloc(64, 4096));
  std::memset(target, 0xEE, 4096);
  VIP_MEM_ATTRIBUTES read_only{s[1].ptag, VIP_FALSE, VIP_FALSE};
  VIP_MEM_HANDLE target_mh;
  ASSERT_EQ(VipRegisterMem(s[1].nic, target, 4096, &read_only, &target_mh), VIP_SUCCESS);
  VIP_DESCRIPTOR* d = fill(s[0].desc(0), s[0].mh, {{nullptr, 0}, {s[0].buffer(0), 64}},
                           VIP_CONTROL_OP_RDMAWRITE | VIP_CONTROL_IMMEDIATE, 1);
  d->DS[0].Remote.Data.Address = target;
  d->DS[0].Remote.Handle = target_mh;
  ASSERT_EQ(VipPostSend(vi0, d, s[0].mh), VIP_SUCCESS);
  // Whichever side catches it (the sender before a single-copy write, or the
  // target on arrival), the connection breaks and no byte lands.
  VIP_DESCRIPTOR* got = wait_recv(vi1);
  ASSERT_NE(got, nullptr);
  EXPECT_NE(errors_of(got), 0u);
  EXPECT_TRUE(poll([&] { return state_of(vi0) == VIP_STATE_ERROR; }));
  EXPECT_EQ(state_of(vi1), VIP_STATE_ERROR);
  bool reported = false;
  for (Side& side : s)
    for (const VIP_ERROR_DESCRIPTOR& e : side.log.errors) reported |= e.ErrorCode == VIP_ERROR_RDMAW_PROT;
  EXPECT_TRUE(reported) << "no VIP_ERROR_RDMAW_PROT reported";
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(target[i], 0xEE) << i;
  EXPECT_EQ(VipDeregisterMem(s[1].nic, target, target_mh), VIP_SUCCESS);
  std::free(target);
}

TEST_F(Vipl, ReliableMessageWithoutAReceiveBreaksTheConnection) {
  auto [vi0, vi1] = connected_pair("norecv", 0);
  ASSERT_EQ(VipPostSend(vi0, fill(s[0].desc(0), s[0].mh, {{s[0].buffer(0), 8}}), s[0].mh), VIP_SUCCESS);
  ASSERT_TRUE(poll([&] { return state_of(vi1) == VIP_STATE_ERROR; }));
  ASSERT_EQ(s[1].log.errors.size(), 1u);
  EXPECT_EQ(s[1].log.errors[0].ErrorCode, VIP_ERROR_RECVQ_EMPTY);
  EXPECT_EQ(s[1].log.errors[0].ViHandle, vi1);
  EXPECT_TRUE(poll([&] { return state_of(vi0) == VIP_STATE_ERROR; })) << "the sender learns of it too";
}

TEST_F(Vipl, MessageLongerThanTheReceiveIsALengthError) {
  auto [vi0, vi1] = connected_pair("toolong");  // 256-byte receives
  ASSERT_EQ(VipPostSend(vi0, fill(s[0].desc(0), s[0].mh, {{s[0].buffer(0), 300}}), s[0].mh), VIP_SUCCESS);
  VIP_DESCRIPTOR* got = wait_recv(vi1);
  ASSERT_EQ(got, s[1].desc(16));
  EXPECT_EQ(got->CS.Status, VIP_STATUS_DONE | VIP_STATUS_LENGTH_ERROR | VIP_STATUS_OP_RECEIVE);
  EXPECT_EQ(state_of(vi1), VIP_STATE_ERROR) << "reliable VI";
}

TEST_F(Vipl, UnreliableViDropsAMessageWithoutAReceive) {
  VIP_VI_HANDLE vi0 = s[0].create_vi(nullptr, nullptr, VIP_SERVICE_UNRELIABLE);
  VIP_VI_HANDLE vi1 = s[1].create_vi(nullptr, nullptr, VIP_SERVICE_UNRELIABLE);
  ASSERT_NO_FATAL_FAILURE(connect_peer(vi0, vi1, "unrel"));
  std::memcpy(s[0].buffer(0), "lost", 5);
  ASSERT_EQ(VipPostSend(vi0, fill(s[0].desc(0), s[0].mh, {{s[0].buffer(0), 5}}), s[0].mh), VIP_SUCCESS);
  EXPECT_EQ(wait_send(vi0), s[0].desc(0));
  for (int i = 0; i < 1000; ++i) s[1].progress();  // the message arrives and is dropped
  EXPECT_EQ(state_of(vi1), VIP_STATE_CONNECTED);
  EXPECT_TRUE(s[1].log.errors.empty());
  ASSERT_EQ(VipPostRecv(vi1, fill(s[1].desc(0), s[1].mh, {{s[1].buffer(0), 64}}), s[1].mh), VIP_SUCCESS);
  std::memcpy(s[0].buffer(0), "kept", 5);
  ASSERT_EQ(VipPostSend(vi0, fill(s[0].desc(1), s[0].mh, {{s[0].buffer(0), 5}}), s[0].mh), VIP_SUCCESS);
  VIP_DESCRIPTOR* got = wait_recv(vi1);
  ASSERT_EQ(got, s[1].desc(0));
  EXPECT_EQ(got->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);
  EXPECT_STREQ(reinterpret_cast<char*>(s[1].buffer(0)), "kept");
}

TEST_F(Vipl, OneCqServesSendAndReceiveQueuesOfThreeVis) {
  VIP_CQ_HANDLE cq;
  ASSERT_EQ(VipCreateCQ(s[0].nic, 16, &cq), VIP_SUCCESS);
  VIP_VI_HANDLE a[3], b[3];
  for (int i = 0; i < 3; ++i) {
    a[i] = s[0].create_vi(cq, cq);
    b[i] = s[1].create_vi();
    ASSERT_EQ(VipPostRecv(a[i], fill(s[0].desc(8 + i), s[0].mh, {{s[0].buffer(1024 * i), 64}}), s[0].mh), VIP_SUCCESS);
    ASSERT_EQ(VipPostRecv(b[i], fill(s[1].desc(8 + i), s[1].mh, {{s[1].buffer(1024 * i), 64}}), s[1].mh), VIP_SUCCESS);
    ASSERT_NO_FATAL_FAILURE(connect_peer(a[i], b[i], "cq" + std::to_string(i)));
  }
  VIP_VI_HANDLE vi = nullptr;
  VIP_BOOLEAN recv = VIP_FALSE;
  EXPECT_EQ(VipCQDone(cq, &vi, &recv), VIP_NOT_DONE);
  auto next = [&](VIP_VI_HANDLE want_vi, VIP_BOOLEAN want_recv) {
    vi = nullptr;
    ASSERT_TRUE(poll([&] { return VipCQDone(cq, &vi, &recv) == VIP_SUCCESS; }));
    EXPECT_EQ(vi, want_vi);
    EXPECT_EQ(recv, want_recv);
  };
  auto send = [&](Side& side, VIP_VI_HANDLE from, int slot) {
    ASSERT_EQ(VipPostSend(from, fill(side.desc(slot), side.mh, {{side.buffer(8192), 32}}), side.mh), VIP_SUCCESS);
  };

  // A receive on the middle VI.
  send(s[1], b[1], 0);
  next(a[1], VIP_TRUE);
  VIP_DESCRIPTOR* d = nullptr;
  ASSERT_EQ(VipRecvDone(a[1], &d), VIP_SUCCESS);
  EXPECT_EQ(d, s[0].desc(9));
  EXPECT_EQ(VipCQDone(cq, &vi, &recv), VIP_NOT_DONE);

  // A send on the last VI.
  send(s[0], a[2], 0);
  next(a[2], VIP_FALSE);
  ASSERT_EQ(VipSendDone(a[2], &d), VIP_SUCCESS);
  EXPECT_EQ(d, s[0].desc(0));
  ASSERT_NE(wait_recv(b[2]), nullptr);

  // A send then a receive on the first VI, in that order, through VipCQWait.
  send(s[0], a[0], 1);
  send(s[1], b[0], 1);
  ASSERT_EQ(VipCQWait(cq, 1000, &vi, &recv), VIP_SUCCESS);
  EXPECT_EQ(vi, a[0]);
  EXPECT_FALSE(recv);
  ASSERT_EQ(VipSendDone(a[0], &d), VIP_SUCCESS);
  EXPECT_EQ(d, s[0].desc(1));
  next(a[0], VIP_TRUE);  // b[0]'s NIC already sent: only NIC 0 has to move
  ASSERT_EQ(VipRecvDone(a[0], &d), VIP_SUCCESS);
  EXPECT_EQ(d, s[0].desc(8));
  EXPECT_EQ(errors_of(d), 0u);

  EXPECT_EQ(VipCQDone(cq, &vi, &recv), VIP_NOT_DONE);
  EXPECT_EQ(VipCQWait(cq, 20, &vi, &recv), VIP_TIMEOUT);
  EXPECT_EQ(VipDestroyCQ(cq), VIP_INVALID_STATE) << "VIs still use it";
  EXPECT_EQ(VipResizeCQ(cq, 0), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipResizeCQ(cq, 64), VIP_SUCCESS);
  VIP_CQ_HANDLE zero;
  EXPECT_EQ(VipCreateCQ(s[0].nic, 0, &zero), VIP_INVALID_PARAMETER);
}

// A CQ must not hand out a VI that no longer exists: the flushed receive of a
// disconnected VI leaves an entry in its CQ, and the VI is destroyed before
// the CQ is read (see the report: the entry survives and VipCQDone reads the
// destroyed VI).
TEST_F(Vipl, CqForgetsDestroyedVis) {
  VIP_CQ_HANDLE cq;
  ASSERT_EQ(VipCreateCQ(s[0].nic, 16, &cq), VIP_SUCCESS);
  VIP_VI_HANDLE vi = s[0].create_vi(nullptr, cq);
  ASSERT_EQ(VipPostRecv(vi, fill(s[0].desc(0), s[0].mh, {{s[0].buffer(0), 64}}), s[0].mh), VIP_SUCCESS);
  VIP_VI_HANDLE peer = s[1].create_vi();
  ASSERT_NO_FATAL_FAILURE(connect_peer(vi, peer, "cqgone"));
  ASSERT_EQ(VipDisconnect(vi), VIP_SUCCESS);
  VIP_DESCRIPTOR* d;
  ASSERT_EQ(VipRecvDone(vi, &d), VIP_SUCCESS);
  EXPECT_EQ(errors_of(d), VIP_STATUS_DESC_FLUSHED_ERROR);
  ASSERT_EQ(VipDestroyVi(vi), VIP_SUCCESS);
  VIP_VI_HANDLE from = nullptr;
  VIP_BOOLEAN recv;
  EXPECT_EQ(VipCQDone(cq, &from, &recv), VIP_NOT_DONE);
}

struct Notified {
  int count = 0;
  VIP_PVOID context = nullptr;
  VIP_NIC_HANDLE nic = nullptr;
  VIP_VI_HANDLE vi = nullptr;
  VIP_DESCRIPTOR* desc = nullptr;
  static void handler(VIP_PVOID context, VIP_NIC_HANDLE nic, VIP_VI_HANDLE vi, VIP_DESCRIPTOR* desc) {
    auto* n = static_cast<Notified*>(context);
    ++n->count;
    n->context = context;
    n->nic = nic;
    n->vi = vi;
    n->desc = desc;
  }
};

TEST_F(Vipl, SendAndRecvNotifyFireOnce) {
  auto [vi0, vi1] = connected_pair("notify", 2);
  Notified on_send, on_recv;
  ASSERT_EQ(VipSendNotify(vi0, &on_send, Notified::handler), VIP_SUCCESS);
  ASSERT_EQ(VipRecvNotify(vi1, &on_recv, Notified::handler), VIP_SUCCESS);
  EXPECT_EQ(on_send.count, 0);
  EXPECT_EQ(on_recv.count, 0);

  VIP_DESCRIPTOR* first = fill(s[0].desc(0), s[0].mh, {{s[0].buffer(0), 16}});
  ASSERT_EQ(VipPostSend(vi0, first, s[0].mh), VIP_SUCCESS);
  ASSERT_TRUE(poll([&] { return on_send.count > 0 && on_recv.count > 0; }));
  EXPECT_EQ(on_send.context, &on_send);
  EXPECT_EQ(on_send.nic, s[0].nic);
  EXPECT_EQ(on_send.vi, vi0);
  EXPECT_EQ(on_send.desc, first);
  EXPECT_TRUE(first->CS.Status & VIP_STATUS_DONE);
  EXPECT_EQ(on_recv.context, &on_recv);
  EXPECT_EQ(on_recv.nic, s[1].nic);
  EXPECT_EQ(on_recv.vi, vi1);
  EXPECT_EQ(on_recv.desc, s[1].desc(16));
  EXPECT_EQ(on_recv.desc->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);

  // One-shot: the next completions are dequeued the ordinary way.
  VIP_DESCRIPTOR* second = fill(s[0].desc(1), s[0].mh, {{s[0].buffer(0), 16}});
  ASSERT_EQ(VipPostSend(vi0, second, s[0].mh), VIP_SUCCESS);
  EXPECT_EQ(wait_send(vi0), second);
  EXPECT_EQ(wait_recv(vi1), s[1].desc(17));
  for (int i = 0; i < 1000; ++i) {
    s[0].progress();
    s[1].progress();
  }
  EXPECT_EQ(on_send.count, 1);
  EXPECT_EQ(on_recv.count, 1);
}

TEST_F(Vipl, ProtectionErrorBreaksTheViAndIsReported) {
  auto [vi0, vi1] = connected_pair("protect");
  // The data segment names bytes past the end of the region its handle names.
  VIP_DESCRIPTOR* bad = fill(s[0].desc(0), s[0].mh, {{s[0].arena + kArenaBytes - 8, 16}});
  ASSERT_EQ(VipPostSend(vi0, bad, s[0].mh), VIP_SUCCESS) << "the error is the descriptor's, not the call's";
  VIP_DESCRIPTOR* d = wait_send(vi0);
  ASSERT_EQ(d, bad);
  EXPECT_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_PROTECTION_ERROR | VIP_STATUS_OP_SEND);

  ASSERT_EQ(s[0].log.errors.size(), 1u);
  const VIP_ERROR_DESCRIPTOR& e = s[0].log.errors[0];
  EXPECT_EQ(e.NicHandle, s[0].nic);
  EXPECT_EQ(e.ViHandle, vi0);
  EXPECT_EQ(e.ResourceCode, VIP_RESOURCE_VI);
  EXPECT_EQ(e.ErrorCode, VIP_ERROR_POST_DESC);
  EXPECT_EQ(e.DescriptorPtr, bad);
  EXPECT_EQ(state_of(vi0), VIP_STATE_ERROR);

  // The receive posted before the error, and everything posted after it, is flushed.
  d = wait_recv(vi0);
  ASSERT_EQ(d, s[0].desc(16));
  EXPECT_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_DESC_FLUSHED_ERROR | VIP_STATUS_OP_RECEIVE);
  VIP_DESCRIPTOR* later = fill(s[0].desc(1), s[0].mh, {{s[0].buffer(0), 16}});
  ASSERT_EQ(VipPostRecv(vi0, later, s[0].mh), VIP_SUCCESS);
  d = wait_recv(vi0);
  ASSERT_EQ(d, later);
  EXPECT_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_DESC_FLUSHED_ERROR | VIP_STATUS_OP_RECEIVE);
  VIP_DESCRIPTOR* later_send = fill(s[0].desc(2), s[0].mh, {{s[0].buffer(0), 16}});
  ASSERT_EQ(VipPostSend(vi0, later_send, s[0].mh), VIP_SUCCESS);
  d = wait_send(vi0);
  ASSERT_EQ(d, later_send);
  EXPECT_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_DESC_FLUSHED_ERROR | VIP_STATUS_OP_SEND);
  EXPECT_EQ(s[0].log.errors.size(), 1u) << "one error breaks the VI once";

  // The peer learns that the connection broke.
  d = wait_recv(vi1);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(errors_of(d), VIP_STATUS_DESC_FLUSHED_ERROR);
  EXPECT_EQ(state_of(vi1), VIP_STATE_ERROR);
  ASSERT_EQ(s[1].log.errors.size(), 1u);
  EXPECT_EQ(s[1].log.errors[0].ViHandle, vi1);
  EXPECT_EQ(s[1].log.errors[0].ErrorCode, VIP_ERROR_CONN_LOST);

  // Disconnecting takes both back to idle.
  ASSERT_EQ(VipDisconnect(vi0), VIP_SUCCESS);
  ASSERT_EQ(VipDisconnect(vi1), VIP_SUCCESS);
  EXPECT_EQ(state_of(vi0), VIP_STATE_IDLE);
  EXPECT_EQ(state_of(vi1), VIP_STATE_IDLE);
}

TEST_F(Vipl, DisconnectFlushesReceivesAndBreaksThePeer) {
  auto [vi0, vi1] = connected_pair("disc", 2);
  ASSERT_EQ(VipDisconnect(vi0), VIP_SUCCESS);
  EXPECT_EQ(state_of(vi0), VIP_STATE_IDLE);
  for (int i = 0; i < 2; ++i) {
    VIP_DESCRIPTOR* d = nullptr;
    ASSERT_EQ(VipRecvDone(vi0, &d), VIP_SUCCESS) << i;
    EXPECT_EQ(d, s[0].desc(16 + i));
    EXPECT_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_DESC_FLUSHED_ERROR | VIP_STATUS_OP_RECEIVE);
  }
  VIP_DESCRIPTOR* d = nullptr;
  EXPECT_EQ(VipRecvDone(vi0, &d), VIP_NOT_DONE);
  EXPECT_EQ(VipDisconnect(vi0), VIP_INVALID_STATE) << "already idle";
  EXPECT_TRUE(s[0].log.errors.empty());

  // The peer notices once it polls: its VI breaks and its receives are flushed.
  for (int i = 0; i < 2; ++i) {
    d = wait_recv(vi1);
    ASSERT_EQ(d, s[1].desc(16 + i));
    EXPECT_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_DESC_FLUSHED_ERROR | VIP_STATUS_OP_RECEIVE);
  }
  EXPECT_EQ(state_of(vi1), VIP_STATE_ERROR);
  ASSERT_EQ(s[1].log.errors.size(), 1u);
  EXPECT_EQ(s[1].log.errors[0].ViHandle, vi1);
  EXPECT_EQ(s[1].log.errors[0].ErrorCode, VIP_ERROR_CONN_LOST);
  ASSERT_EQ(VipDisconnect(vi1), VIP_SUCCESS);
  EXPECT_EQ(state_of(vi1), VIP_STATE_IDLE);

  // Both VIs can connect again and carry data.
  ASSERT_EQ(VipPostRecv(vi1, fill(s[1].desc(16), s[1].mh, {{s[1].buffer(65536), 256}}), s[1].mh), VIP_SUCCESS);
  ASSERT_NO_FATAL_FAILURE(connect_peer(vi0, vi1, "disc-again"));
  std::memcpy(s[0].buffer(0), "second life", 12);
  ASSERT_EQ(VipPostSend(vi0, fill(s[0].desc(0), s[0].mh, {{s[0].buffer(0), 12}}), s[0].mh), VIP_SUCCESS);
  d = wait_recv(vi1);
  ASSERT_EQ(d, s[1].desc(16));
  EXPECT_EQ(d->CS.Status, VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE);
  EXPECT_STREQ(reinterpret_cast<char*>(s[1].buffer(65536)), "second life");
  EXPECT_EQ(wait_send(vi0), s[0].desc(0));
  ASSERT_EQ(VipDisconnect(vi0), VIP_SUCCESS);
  ASSERT_EQ(VipDisconnect(vi1), VIP_SUCCESS);
  EXPECT_EQ(VipDestroyVi(vi0), VIP_SUCCESS);
  EXPECT_EQ(VipDestroyVi(vi1), VIP_SUCCESS);
}

// ---- connection set-up and timeouts ----

TEST_F(Vipl, ClientServerAccept) {
  VIP_VI_HANDLE server_vi = s[1].create_vi(), client_vi = s[0].create_vi();
  ASSERT_EQ(VipPostRecv(server_vi, fill(s[1].desc(0), s[1].mh, {{s[1].buffer(0), 64}}), s[1].mh), VIP_SUCCESS);
  VIP_RETURN wait_r = VIP_NOT_DONE, accept_r = VIP_NOT_DONE;
  Address remote_seen;
  VIP_VI_ATTRIBUTES client_attrs{};
  {
    std::jthread server([&] {  // NIC 1 belongs to this thread until it ends
      Address local = make_address(s[1].nic, nullptr, "server");
      VIP_CONN_HANDLE conn = nullptr;
      wait_r = VipConnectWait(s[1].nic, local.get(), 3000, remote_seen.get(), &client_attrs, &conn);
      if (wait_r == VIP_SUCCESS) accept_r = VipConnectAccept(conn, server_vi);
      EXPECT_EQ(VipConnectAccept(conn, server_vi), VIP_INVALID_PARAMETER) << "the request was used up";
    });
    Address local = make_address(s[0].nic, nullptr, "client");
    Address remote = make_address(s[0].nic, "rank1", "server");
    VIP_VI_ATTRIBUTES server_attrs{};
    EXPECT_EQ(VipConnectRequest(client_vi, local.get(), remote.get(), 3000, &server_attrs), VIP_SUCCESS);
    EXPECT_EQ(server_attrs.ReliabilityLevel, VIP_SERVICE_RELIABLE_DELIVERY);
  }
  ASSERT_EQ(wait_r, VIP_SUCCESS);
  ASSERT_EQ(accept_r, VIP_SUCCESS);
  EXPECT_EQ(remote_seen.host(), (std::vector<unsigned char>{0, 0, 0, 0}));
  EXPECT_EQ(remote_seen.discriminator(), "client");
  EXPECT_EQ(client_attrs.ReliabilityLevel, VIP_SERVICE_RELIABLE_DELIVERY);
  EXPECT_EQ(state_of(client_vi), VIP_STATE_CONNECTED);
  EXPECT_EQ(state_of(server_vi), VIP_STATE_CONNECTED);
  std::memcpy(s[0].buffer(0), "hello server", 13);
  ASSERT_EQ(VipPostSend(client_vi, fill(s[0].desc(0), s[0].mh, {{s[0].buffer(0), 13}}), s[0].mh), VIP_SUCCESS);
  VIP_DESCRIPTOR* d = wait_recv(server_vi);
  ASSERT_EQ(d, s[1].desc(0));
  EXPECT_EQ(d->CS.Length, 13u);
  EXPECT_STREQ(reinterpret_cast<char*>(s[1].buffer(0)), "hello server");
}

TEST_F(Vipl, ClientServerReject) {
  VIP_VI_HANDLE client_vi = s[0].create_vi();
  VIP_RETURN wait_r = VIP_NOT_DONE, reject_r = VIP_NOT_DONE, again_r = VIP_NOT_DONE;
  VIP_RETURN client_r;
  {
    std::jthread server([&] {
      Address local = make_address(s[1].nic, nullptr, "picky");
      Address remote;
      VIP_VI_ATTRIBUTES attrs;
      VIP_CONN_HANDLE conn = nullptr;
      wait_r = VipConnectWait(s[1].nic, local.get(), 3000, remote.get(), &attrs, &conn);
      if (wait_r != VIP_SUCCESS) return;
      reject_r = VipConnectReject(conn);
      again_r = VipConnectReject(conn);
    });
    Address local = make_address(s[0].nic, nullptr, "hopeful");
    Address remote = make_address(s[0].nic, "rank1", "picky");
    client_r = VipConnectRequest(client_vi, local.get(), remote.get(), 3000, nullptr);
  }
  EXPECT_EQ(client_r, VIP_REJECT);
  EXPECT_EQ(wait_r, VIP_SUCCESS);
  EXPECT_EQ(reject_r, VIP_SUCCESS);
  EXPECT_EQ(again_r, VIP_INVALID_PARAMETER) << "a rejected request's handle is gone";
  EXPECT_EQ(state_of(client_vi), VIP_STATE_IDLE);
  EXPECT_EQ(VipDestroyVi(client_vi), VIP_SUCCESS);
}

TEST_F(Vipl, ConnectRequestToNobodyTimesOut) {
  VIP_VI_HANDLE vi = s[0].create_vi();
  Address local = make_address(s[0].nic, nullptr, "lonely");
  Address remote = make_address(s[0].nic, "rank1", "nobody");
  const auto start = Clock::now();
  EXPECT_EQ(VipConnectRequest(vi, local.get(), remote.get(), 200, nullptr), VIP_TIMEOUT);
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(190));
  EXPECT_LT(elapsed, milliseconds(2000));
  EXPECT_EQ(state_of(vi), VIP_STATE_IDLE);
  // Nor does a NIC that does not exist answer.
  Address absent = make_address(s[0].nic, "rank7", "nobody");
  EXPECT_EQ(VipConnectRequest(vi, local.get(), absent.get(), 100, nullptr), VIP_TIMEOUT);
  EXPECT_EQ(state_of(vi), VIP_STATE_IDLE);
  EXPECT_EQ(VipDestroyVi(vi), VIP_SUCCESS);
}

TEST_F(Vipl, ConnectPeerRequestWithoutAPeerTimesOut) {
  VIP_VI_HANDLE vi = s[0].create_vi();
  Address local = make_address(s[0].nic, nullptr, "alone");
  Address remote = make_address(s[0].nic, "rank1", "absent");
  ASSERT_EQ(VipConnectPeerRequest(vi, local.get(), remote.get(), 100), VIP_SUCCESS);
  EXPECT_EQ(state_of(vi), VIP_STATE_CONNECT_PENDING);
  EXPECT_EQ(VipConnectPeerRequest(vi, local.get(), remote.get(), 100), VIP_INVALID_STATE);
  VIP_RETURN r = VIP_NOT_DONE;
  const auto start = Clock::now();
  poll([&] { return (r = VipConnectPeerDone(vi, nullptr)) != VIP_NOT_DONE; });
  EXPECT_EQ(r, VIP_TIMEOUT);
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_EQ(state_of(vi), VIP_STATE_IDLE);
}

TEST_F(Vipl, WaitsOnAQuietConnectedViTimeOut) {
  auto [vi0, vi1] = connected_pair("quiet");
  VIP_DESCRIPTOR* d = nullptr;
  auto start = Clock::now();
  EXPECT_EQ(VipRecvWait(vi0, 50, &d), VIP_TIMEOUT);
  auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(45));
  EXPECT_LT(elapsed, milliseconds(1000));
  EXPECT_EQ(d, nullptr);
  start = Clock::now();
  EXPECT_EQ(VipSendWait(vi0, 50, &d), VIP_TIMEOUT);
  EXPECT_GE(Clock::now() - start, milliseconds(45));
  VIP_CQ_HANDLE cq;
  ASSERT_EQ(VipCreateCQ(s[0].nic, 4, &cq), VIP_SUCCESS);
  VIP_VI_HANDLE vi;
  VIP_BOOLEAN recv;
  start = Clock::now();
  EXPECT_EQ(VipCQWait(cq, 50, &vi, &recv), VIP_TIMEOUT);
  EXPECT_GE(Clock::now() - start, milliseconds(45));
  EXPECT_EQ(state_of(vi0), VIP_STATE_CONNECTED);
  EXPECT_EQ(state_of(vi1), VIP_STATE_CONNECTED);
}

// ---- viastack's extensions (vipl.h, "not in the VIA specification") ----

TEST_F(Vipl, ErrorCodeNamesAreTheVipNames) {
  EXPECT_STREQ(VipErrorCodeName(VIP_ERROR_RECVQ_EMPTY), "VIP_ERROR_RECVQ_EMPTY");
  EXPECT_STREQ(VipErrorCodeName(VIP_ERROR_POST_DESC), "VIP_ERROR_POST_DESC");
  EXPECT_STREQ(VipErrorCodeName(VIP_ERROR_CATASTROPHIC), "VIP_ERROR_CATASTROPHIC");
  EXPECT_STREQ(VipErrorCodeName(VIP_ERROR_CODE(99)), "an unknown VIP_ERROR code");
}

TEST_F(Vipl, ReturnCodesAndStatusBitsHaveTheirVipNames) {
  EXPECT_STREQ(VipReturnName(VIP_SUCCESS), "VIP_SUCCESS");
  EXPECT_STREQ(VipReturnName(VIP_INVALID_PARAMETER), "VIP_INVALID_PARAMETER");
  EXPECT_STREQ(VipReturnName(VIP_NO_MATCH), "VIP_NO_MATCH");
  EXPECT_STREQ(VipReturnName(VIP_RETURN(VIP_NO_MATCH + 1)), "an unknown VIP_RETURN");

  char names[256];
  EXPECT_EQ(VipStatusErrorNames(VIP_STATUS_DONE | VIP_STATUS_OP_RECEIVE, names, sizeof names), 0u);
  EXPECT_STREQ(names, "");
  const std::uint32_t flushed_and_length = VIP_STATUS_DONE | VIP_STATUS_DESC_FLUSHED_ERROR | VIP_STATUS_LENGTH_ERROR;
  const std::size_t length = VipStatusErrorNames(flushed_and_length, names, sizeof names);
  EXPECT_EQ(length, std::strlen(names));
  const std::string text = names;
  EXPECT_EQ(text.find("VIP_STATUS_LENGTH_ERROR ("), 0u) << text;
  EXPECT_NE(text.find("; VIP_STATUS_DESC_FLUSHED_ERROR (the VI was disconnected"), std::string::npos) << text;
  // Cut short as snprintf does: NUL-terminated, the whole length returned.
  char small[8];
  EXPECT_EQ(VipStatusErrorNames(flushed_and_length, small, sizeof small), length);
  EXPECT_STREQ(small, "VIP_STA");
  EXPECT_EQ(VipStatusErrorNames(flushed_and_length, nullptr, 0), length);
}

// Both NICs opened under VIASTACK_FAULTS=drop=1: every data frame of an
// unreliable VI is lost, none of a reliable one.
class ViplFaults : public Vipl {
 protected:
  void SetUp() override {
    setenv("VIASTACK_FAULTS", "drop=1,seed=5", 1);
    Vipl::SetUp();
  }
  void TearDown() override {
    Vipl::TearDown();
    unsetenv("VIASTACK_FAULTS");
  }
  VIP_FAULT_COUNTERS counters_of(int side) {
    VIP_FAULT_COUNTERS counters{};
    EXPECT_EQ(VipQueryFaultCounters(s[side].nic, &counters), VIP_SUCCESS);
    return counters;
  }
};

TEST_F(ViplFaults, FaultCountersCountWhatWasInjectedOnUnreliableVisOnly) {
  VIP_FAULT_COUNTERS none = counters_of(0);
  EXPECT_EQ(none.Dropped + none.Duplicated + none.Reordered + none.Delayed, 0u);

  VIP_VI_HANDLE lossy0 = s[0].create_vi(nullptr, nullptr, VIP_SERVICE_UNRELIABLE);
  VIP_VI_HANDLE lossy1 = s[1].create_vi(nullptr, nullptr, VIP_SERVICE_UNRELIABLE);
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(VipPostRecv(lossy1, fill(s[1].desc(i), s[1].mh, {{s[1].buffer(256 * i), 256}}), s[1].mh), VIP_SUCCESS);
  ASSERT_NO_FATAL_FAILURE(connect_peer(lossy0, lossy1, "lossy"));
  constexpr int kSent = 3;
  for (int i = 0; i < kSent; ++i) {
    ASSERT_EQ(VipPostSend(lossy0, fill(s[0].desc(i), s[0].mh, {{s[0].buffer(0), 32}}), s[0].mh), VIP_SUCCESS);
    EXPECT_EQ(wait_send(lossy0), s[0].desc(i));
  }
  VIP_DESCRIPTOR* d = nullptr;
  EXPECT_FALSE(poll([&] { return VipRecvDone(lossy1, &d) == VIP_SUCCESS; }, milliseconds(50))) << "all were dropped";
  VIP_FAULT_COUNTERS after = counters_of(0);
  EXPECT_EQ(after.Dropped, VIP_UINT64(kSent));
  EXPECT_EQ(after.Duplicated + after.Reordered + after.Delayed, 0u);
  EXPECT_EQ(counters_of(1).Dropped, 0u) << "the receiver sent no data frame";

  auto [vi0, vi1] = connected_pair("reliable");
  ASSERT_EQ(VipPostSend(vi0, fill(s[0].desc(8), s[0].mh, {{s[0].buffer(0), 32}}), s[0].mh), VIP_SUCCESS);
  EXPECT_NE(wait_recv(vi1), nullptr);
  EXPECT_EQ(counters_of(0).Dropped, VIP_UINT64(kSent)) << "a reliable VI is never touched";
}

TEST_F(ViplFaults, FaultCountersCheckTheirArguments) {
  VIP_FAULT_COUNTERS counters{};
  EXPECT_EQ(VipQueryFaultCounters(nullptr, &counters), VIP_INVALID_PARAMETER);
  EXPECT_EQ(VipQueryFaultCounters(s[0].nic, nullptr), VIP_INVALID_PARAMETER);
  int not_a_nic = 0;
  EXPECT_EQ(VipQueryFaultCounters(&not_a_nic, &counters), VIP_INVALID_PARAMETER);
}

}  // namespace
