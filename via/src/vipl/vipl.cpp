// VIPL: the VIA 1.0 C API as a thin layer over the C++ engine. Its own work
// is handles (validated through a table, so a stale or made-up handle gets
// VIP_INVALID_PARAMETER instead of a crash) and translating structures.
#include <vipl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>

#include "via/log.hpp"
#include "via/via.hpp"

namespace {

using via::Result;

enum class Kind : std::uint8_t { nic = 1, vi, cq, conn };

// Handle value = (generation << 16) | index; index 0 is unused, so no handle is NULL.
class HandleTable {
 public:
  static constexpr std::uint32_t kSize = 1u << 16;

  void* add(Kind kind, void* object, via::Nic* owner) {
    std::lock_guard lock(mutex_);
    for (std::uint32_t n = 1; n < kSize; ++n) {
      std::uint32_t i = (next_ + n) % kSize;
      if (i == 0 || entries_[i].object.load(std::memory_order_relaxed)) continue;
      next_ = i;
      Entry& e = entries_[i];
      e.generation = (e.generation + 1) & 0xFFFF;
      if (e.generation == 0) e.generation = 1;
      e.kind = kind;
      e.owner = owner;
      std::uintptr_t value = (std::uintptr_t(e.generation) << 16) | i;
      e.value.store(value, std::memory_order_relaxed);
      e.object.store(object, std::memory_order_release);
      return reinterpret_cast<void*>(value);
    }
    return nullptr;
  }

  void* find(void* handle, Kind kind) const {
    std::uintptr_t value = reinterpret_cast<std::uintptr_t>(handle);
    std::uint32_t i = value & 0xFFFF;
    if (i == 0 || (value >> 32) != 0) return nullptr;
    const Entry& e = entries_[i];
    void* object = e.object.load(std::memory_order_acquire);
    if (!object || e.kind != kind || e.value.load(std::memory_order_relaxed) != value) return nullptr;
    return object;
  }

  void remove(void* handle) {
    std::lock_guard lock(mutex_);
    std::uint32_t i = reinterpret_cast<std::uintptr_t>(handle) & 0xFFFF;
    entries_[i].object.store(nullptr, std::memory_order_release);
    entries_[i].value.store(0, std::memory_order_relaxed);
  }

  // Drops every handle of objects that belong to a NIC being closed.
  void remove_owned_by(via::Nic* nic) {
    std::lock_guard lock(mutex_);
    for (Entry& e : entries_)
      if (e.object.load(std::memory_order_relaxed) && e.owner == nic) {
        e.object.store(nullptr, std::memory_order_release);
        e.value.store(0, std::memory_order_relaxed);
      }
  }

 private:
  struct Entry {
    std::atomic<void*> object{nullptr};
    std::atomic<std::uintptr_t> value{0};
    std::uint32_t generation = 0;
    Kind kind{};
    via::Nic* owner = nullptr;
  };
  std::mutex mutex_;
  std::uint32_t next_ = 0;
  Entry entries_[kSize];
};

HandleTable& handles() {
  static HandleTable* table = new HandleTable();  // lives until exit, used from atexit paths too
  return *table;
}

VIP_RETURN ret(Result r) { return static_cast<VIP_RETURN>(r); }

via::Nic* nic_of(VIP_NIC_HANDLE h) { return static_cast<via::Nic*>(handles().find(h, Kind::nic)); }
via::Vi* vi_of(VIP_VI_HANDLE h) { return static_cast<via::Vi*>(handles().find(h, Kind::vi)); }
via::Cq* cq_of(VIP_CQ_HANDLE h) { return static_cast<via::Cq*>(handles().find(h, Kind::cq)); }
via::ConnRequest* conn_of(VIP_CONN_HANDLE h) { return static_cast<via::ConnRequest*>(handles().find(h, Kind::conn)); }

std::uint32_t timeout_ms(VIP_ULONG t) { return t >= VIP_INFINITE ? via::kInfinite : std::uint32_t(t); }

via::Ptag ptag_of(VIP_PROTECTION_HANDLE p) { return via::Ptag(reinterpret_cast<std::uintptr_t>(p)); }
VIP_PROTECTION_HANDLE ptag_handle(via::Ptag p) { return reinterpret_cast<VIP_PROTECTION_HANDLE>(std::uintptr_t(p)); }

bool to_net_address(const VIP_NET_ADDRESS* a, via::NetAddress& out) {
  if (!a) return false;
  const VIP_UINT8* bytes = a->HostAddress;
  out.host.assign(bytes, bytes + a->HostAddressLen);
  out.discriminator.assign(bytes + a->HostAddressLen, bytes + a->HostAddressLen + a->DiscriminatorLen);
  return true;
}

void from_net_address(const via::NetAddress& in, VIP_NET_ADDRESS* out) {
  out->HostAddressLen = VIP_UINT16(in.host.size());
  out->DiscriminatorLen = VIP_UINT16(in.discriminator.size());
  std::copy(in.host.begin(), in.host.end(), out->HostAddress);
  std::copy(in.discriminator.begin(), in.discriminator.end(), out->HostAddress + in.host.size());
}

via::ViAttributes to_engine(const VIP_VI_ATTRIBUTES& a) {
  return via::ViAttributes{a.ReliabilityLevel, std::uint32_t(std::min<VIP_ULONG>(a.MaxTransferSize, 0xFFFFFFFFul)),
                           ptag_of(a.Ptag), a.EnableRdmaWrite != 0, a.EnableRdmaRead != 0};
}

void from_engine(const via::ViAttributes& a, VIP_VI_ATTRIBUTES* out) {
  if (!out) return;
  *out = VIP_VI_ATTRIBUTES{};
  out->ReliabilityLevel = a.reliability;
  out->MaxTransferSize = a.max_transfer;
  out->Ptag = ptag_handle(a.ptag);
  out->EnableRdmaWrite = a.rdma_write;
  out->EnableRdmaRead = a.rdma_read;
}

}  // namespace

extern "C" {

VIP_RETURN VipOpenNic(const VIP_CHAR* DeviceName, VIP_NIC_HANDLE* NicHandle) {
  if (!NicHandle) return VIP_INVALID_PARAMETER;
  std::unique_ptr<via::Nic> nic;
  Result r = via::Nic::open(DeviceName ? DeviceName : "", nic);
  if (r != Result::success) return ret(r);
  void* h = handles().add(Kind::nic, nic.get(), nic.get());
  if (!h) return VIP_ERROR_RESOURCE;
  nic->user_handle = h;
  *NicHandle = h;
  nic.release();
  return VIP_SUCCESS;
}

VIP_RETURN VipCloseNic(VIP_NIC_HANDLE NicHandle) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic) return VIP_INVALID_PARAMETER;
  handles().remove_owned_by(nic);
  delete nic;
  return VIP_SUCCESS;
}

VIP_RETURN VipQueryNic(VIP_NIC_HANDLE NicHandle, VIP_NIC_ATTRIBUTES* NicAttribs) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic || !NicAttribs) return VIP_INVALID_PARAMETER;
  nic->query(*NicAttribs);
  return VIP_SUCCESS;
}

VIP_RETURN VipRegisterMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress, VIP_ULONG Length,
                          VIP_MEM_ATTRIBUTES* MemAttribs, VIP_MEM_HANDLE* MemoryHandle) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic || !MemAttribs || !MemoryHandle) return VIP_INVALID_PARAMETER;
  via::MemAttributes attrs{ptag_of(MemAttribs->Ptag), MemAttribs->EnableRdmaWrite != 0,
                           MemAttribs->EnableRdmaRead != 0};
  return ret(nic->register_memory(VirtualAddress, Length, attrs, *MemoryHandle));
}

VIP_RETURN VipDeregisterMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress, VIP_MEM_HANDLE MemoryHandle) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic) return VIP_INVALID_PARAMETER;
  return ret(nic->deregister_memory(VirtualAddress, MemoryHandle));
}

VIP_RETURN VipQueryMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID Address, VIP_MEM_HANDLE MemHandle,
                       VIP_MEM_ATTRIBUTES* MemAttribs) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic || !MemAttribs) return VIP_INVALID_PARAMETER;
  via::MemAttributes attrs;
  Result r = nic->query_memory(Address, MemHandle, attrs);
  if (r == Result::success) *MemAttribs = VIP_MEM_ATTRIBUTES{ptag_handle(attrs.ptag), attrs.rdma_write, attrs.rdma_read};
  return ret(r);
}

VIP_RETURN VipSetMemAttributes(VIP_NIC_HANDLE NicHandle, VIP_PVOID Address, VIP_MEM_HANDLE MemHandle,
                               VIP_MEM_ATTRIBUTES* MemAttribs) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic || !MemAttribs) return VIP_INVALID_PARAMETER;
  via::MemAttributes attrs{ptag_of(MemAttribs->Ptag), MemAttribs->EnableRdmaWrite != 0,
                           MemAttribs->EnableRdmaRead != 0};
  return ret(nic->set_memory_attributes(Address, MemHandle, attrs));
}

VIP_RETURN VipCreatePtag(VIP_NIC_HANDLE NicHandle, VIP_PROTECTION_HANDLE* Ptag) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic || !Ptag) return VIP_INVALID_PARAMETER;
  via::Ptag tag;
  Result r = nic->create_ptag(tag);
  if (r == Result::success) *Ptag = ptag_handle(tag);
  return ret(r);
}

VIP_RETURN VipDestroyPtag(VIP_NIC_HANDLE NicHandle, VIP_PROTECTION_HANDLE Ptag) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic) return VIP_INVALID_PARAMETER;
  return ret(nic->destroy_ptag(ptag_of(Ptag)));
}

VIP_RETURN VipErrorCallback(VIP_NIC_HANDLE NicHandle, VIP_PVOID Context, VIP_ERROR_HANDLER Handler) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic) return VIP_INVALID_PARAMETER;
  if (!Handler) {
    nic->set_error_handler(nullptr);
    return VIP_SUCCESS;
  }
  nic->set_error_handler([nic, Context, Handler](const via::AsyncError& e) {
    VIP_ERROR_DESCRIPTOR d{};
    d.NicHandle = nic->user_handle;
    d.ViHandle = e.vi ? e.vi->user_handle : nullptr;
    d.CQHandle = e.cq ? e.cq->user_handle : nullptr;
    d.DescriptorPtr = e.descriptor;
    d.OpCode = e.descriptor ? (e.descriptor->CS.Control & VIP_CONTROL_OP_MASK) : 0;
    d.ResourceCode = e.resource;
    d.ErrorCode = e.code;
    Handler(Context, &d);
  });
  return VIP_SUCCESS;
}

VIP_RETURN VipQuerySystemManagementInfo(VIP_NIC_HANDLE NicHandle, VIP_ULONG InfoType, VIP_PVOID SysManInfo) {
  if (!nic_of(NicHandle) || InfoType != VIP_SMI_AUTODISCOVERY || !SysManInfo) return VIP_INVALID_PARAMETER;
  auto* list = static_cast<VIP_AUTODISCOVERY_LIST*>(SysManInfo);
  list->NumberOfHops = 0;  // one machine: every NIC of the job is one hop away and named rankN
  list->NumAdAddrs = 0;
  return VIP_SUCCESS;
}

VIP_RETURN VipCreateVi(VIP_NIC_HANDLE NicHandle, VIP_VI_ATTRIBUTES* ViAttribs, VIP_CQ_HANDLE SendCQHandle,
                       VIP_CQ_HANDLE RecvCQHandle, VIP_VI_HANDLE* ViHandle) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic || !ViAttribs || !ViHandle) return VIP_INVALID_PARAMETER;
  via::Cq* send_cq = SendCQHandle ? cq_of(SendCQHandle) : nullptr;
  via::Cq* recv_cq = RecvCQHandle ? cq_of(RecvCQHandle) : nullptr;
  if ((SendCQHandle && !send_cq) || (RecvCQHandle && !recv_cq)) return VIP_INVALID_PARAMETER;
  via::Vi* vi;
  Result r = nic->create_vi(to_engine(*ViAttribs), send_cq, recv_cq, vi);
  if (r != Result::success) return ret(r);
  void* h = handles().add(Kind::vi, vi, nic);
  if (!h) {
    nic->destroy_vi(vi);
    return VIP_ERROR_RESOURCE;
  }
  vi->user_handle = h;
  *ViHandle = h;
  return VIP_SUCCESS;
}

VIP_RETURN VipDestroyVi(VIP_VI_HANDLE ViHandle) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi) return VIP_INVALID_PARAMETER;
  Result r = vi->nic().destroy_vi(vi);
  if (r == Result::success) handles().remove(ViHandle);
  return ret(r);
}

VIP_RETURN VipQueryVi(VIP_VI_HANDLE ViHandle, VIP_VI_STATE* State, VIP_VI_ATTRIBUTES* ViAttribs,
                      VIP_BOOLEAN* ViSendQEmpty, VIP_BOOLEAN* ViRecvQEmpty) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi) return VIP_INVALID_PARAMETER;
  if (State) *State = static_cast<VIP_VI_STATE>(vi->state());
  from_engine(vi->attributes(), ViAttribs);
  if (ViSendQEmpty) *ViSendQEmpty = vi->send_queue_empty();
  if (ViRecvQEmpty) *ViRecvQEmpty = vi->recv_queue_empty();
  return VIP_SUCCESS;
}

VIP_RETURN VipSetViAttributes(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES* ViAttribs) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi || !ViAttribs) return VIP_INVALID_PARAMETER;
  return ret(vi->set_attributes(to_engine(*ViAttribs)));
}

VIP_RETURN VipConnectWait(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS* LocalAddr, VIP_ULONG Timeout,
                          VIP_NET_ADDRESS* RemoteAddr, VIP_VI_ATTRIBUTES* RemoteViAttribs,
                          VIP_CONN_HANDLE* ConnHandle) {
  via::Nic* nic = nic_of(NicHandle);
  via::NetAddress local;
  if (!nic || !to_net_address(LocalAddr, local) || !ConnHandle) return VIP_INVALID_PARAMETER;
  via::ConnRequest* request;
  Result r = nic->connect_wait(local, timeout_ms(Timeout), request);
  if (r != Result::success) return ret(r);
  void* h = handles().add(Kind::conn, request, nic);
  if (!h) {
    nic->connect_reject(request);
    return VIP_ERROR_RESOURCE;
  }
  request->user_handle = h;
  if (RemoteAddr) from_net_address(request->remote, RemoteAddr);
  from_engine(request->remote_attrs, RemoteViAttribs);
  *ConnHandle = h;
  return VIP_SUCCESS;
}

VIP_RETURN VipConnectAccept(VIP_CONN_HANDLE ConnHandle, VIP_VI_HANDLE ViHandle) {
  via::ConnRequest* request = conn_of(ConnHandle);
  via::Vi* vi = vi_of(ViHandle);
  if (!request || !vi) return VIP_INVALID_PARAMETER;
  Result r = vi->nic().connect_accept(request, *vi);
  // The request is consumed unless the call was refused before looking at it.
  if (r != Result::invalid_parameter && r != Result::invalid_state && r != Result::invalid_reliability_level)
    handles().remove(ConnHandle);
  return ret(r);
}

VIP_RETURN VipConnectReject(VIP_CONN_HANDLE ConnHandle) {
  via::ConnRequest* request = conn_of(ConnHandle);
  if (!request) return VIP_INVALID_PARAMETER;
  Result r = request->nic->connect_reject(request);
  if (r == Result::success) handles().remove(ConnHandle);
  return ret(r);
}

VIP_RETURN VipConnectRequest(VIP_VI_HANDLE ViHandle, VIP_NET_ADDRESS* LocalAddr, VIP_NET_ADDRESS* RemoteAddr,
                             VIP_ULONG Timeout, VIP_VI_ATTRIBUTES* RemoteViAttribs) {
  via::Vi* vi = vi_of(ViHandle);
  via::NetAddress local, remote;
  if (!vi || !to_net_address(LocalAddr, local) || !to_net_address(RemoteAddr, remote)) return VIP_INVALID_PARAMETER;
  Result r = vi->connect_request(local, remote, timeout_ms(Timeout));
  if (r == Result::success) from_engine(vi->remote_attributes(), RemoteViAttribs);
  return ret(r);
}

VIP_RETURN VipDisconnect(VIP_VI_HANDLE ViHandle) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi) return VIP_INVALID_PARAMETER;
  return ret(vi->disconnect());
}

VIP_RETURN VipConnectPeerRequest(VIP_VI_HANDLE ViHandle, VIP_NET_ADDRESS* LocalAddr, VIP_NET_ADDRESS* RemoteAddr,
                                 VIP_ULONG Timeout) {
  via::Vi* vi = vi_of(ViHandle);
  via::NetAddress local, remote;
  if (!vi || !to_net_address(LocalAddr, local) || !to_net_address(RemoteAddr, remote)) return VIP_INVALID_PARAMETER;
  return ret(vi->connect_peer_request(local, remote, timeout_ms(Timeout)));
}

VIP_RETURN VipConnectPeerDone(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES* RemoteViAttribs) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi) return VIP_INVALID_PARAMETER;
  Result r = vi->connect_peer_done();
  if (r == Result::success) from_engine(vi->remote_attributes(), RemoteViAttribs);
  return ret(r);
}

VIP_RETURN VipConnectPeerWait(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES* RemoteViAttribs) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi) return VIP_INVALID_PARAMETER;
  Result r = vi->connect_peer_wait();
  if (r == Result::success) from_engine(vi->remote_attributes(), RemoteViAttribs);
  return ret(r);
}

VIP_RETURN VipPostSend(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR* DescriptorPtr, VIP_MEM_HANDLE MemoryHandle) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi) return VIP_INVALID_PARAMETER;
  return ret(vi->post_send(DescriptorPtr, MemoryHandle));
}

VIP_RETURN VipPostRecv(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR* DescriptorPtr, VIP_MEM_HANDLE MemoryHandle) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi) return VIP_INVALID_PARAMETER;
  return ret(vi->post_recv(DescriptorPtr, MemoryHandle));
}

VIP_RETURN VipSendDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR** DescriptorPtr) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi || !DescriptorPtr) return VIP_INVALID_PARAMETER;
  return ret(vi->send_done(*DescriptorPtr));
}

VIP_RETURN VipRecvDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR** DescriptorPtr) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi || !DescriptorPtr) return VIP_INVALID_PARAMETER;
  return ret(vi->recv_done(*DescriptorPtr));
}

VIP_RETURN VipSendWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR** DescriptorPtr) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi || !DescriptorPtr) return VIP_INVALID_PARAMETER;
  return ret(vi->send_wait(timeout_ms(Timeout), *DescriptorPtr));
}

VIP_RETURN VipRecvWait(VIP_VI_HANDLE ViHandle, VIP_ULONG Timeout, VIP_DESCRIPTOR** DescriptorPtr) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi || !DescriptorPtr) return VIP_INVALID_PARAMETER;
  return ret(vi->recv_wait(timeout_ms(Timeout), *DescriptorPtr));
}

namespace {
VIP_RETURN set_notify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, VIP_DESCRIPTOR_NOTIFY Handler, bool recv) {
  via::Vi* vi = vi_of(ViHandle);
  if (!vi || !Handler) return VIP_INVALID_PARAMETER;
  via::Vi::DescriptorNotify notify = [vi, Context, Handler](VIP_DESCRIPTOR* d) {
    Handler(Context, vi->nic().user_handle, vi->user_handle, d);
  };
  if (recv)
    vi->set_recv_notify(std::move(notify));
  else
    vi->set_send_notify(std::move(notify));
  return VIP_SUCCESS;
}
}  // namespace

VIP_RETURN VipSendNotify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, VIP_DESCRIPTOR_NOTIFY Handler) {
  return set_notify(ViHandle, Context, Handler, false);
}

VIP_RETURN VipRecvNotify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, VIP_DESCRIPTOR_NOTIFY Handler) {
  return set_notify(ViHandle, Context, Handler, true);
}

VIP_RETURN VipCreateCQ(VIP_NIC_HANDLE NicHandle, VIP_ULONG EntryCount, VIP_CQ_HANDLE* CQHandle) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic || !CQHandle) return VIP_INVALID_PARAMETER;
  via::Cq* cq;
  Result r = nic->create_cq(EntryCount, cq);
  if (r != Result::success) return ret(r);
  void* h = handles().add(Kind::cq, cq, nic);
  if (!h) {
    nic->destroy_cq(cq);
    return VIP_ERROR_RESOURCE;
  }
  cq->user_handle = h;
  *CQHandle = h;
  return VIP_SUCCESS;
}

VIP_RETURN VipDestroyCQ(VIP_CQ_HANDLE CQHandle) {
  via::Cq* cq = cq_of(CQHandle);
  if (!cq) return VIP_INVALID_PARAMETER;
  Result r = cq->nic().destroy_cq(cq);
  if (r == Result::success) handles().remove(CQHandle);
  return ret(r);
}

VIP_RETURN VipResizeCQ(VIP_CQ_HANDLE CQHandle, VIP_ULONG EntryCount) {
  via::Cq* cq = cq_of(CQHandle);
  if (!cq) return VIP_INVALID_PARAMETER;
  return ret(cq->resize(EntryCount));
}

VIP_RETURN VipCQDone(VIP_CQ_HANDLE CQHandle, VIP_VI_HANDLE* ViHandle, VIP_BOOLEAN* RecvQueue) {
  via::Cq* cq = cq_of(CQHandle);
  if (!cq || !ViHandle || !RecvQueue) return VIP_INVALID_PARAMETER;
  via::Cq::Entry e;
  Result r = cq->done(e);
  if (r == Result::success) {
    *ViHandle = e.vi->user_handle;
    *RecvQueue = e.recv_queue;
  }
  return ret(r);
}

VIP_RETURN VipCQWait(VIP_CQ_HANDLE CQHandle, VIP_ULONG Timeout, VIP_VI_HANDLE* ViHandle, VIP_BOOLEAN* RecvQueue) {
  via::Cq* cq = cq_of(CQHandle);
  if (!cq || !ViHandle || !RecvQueue) return VIP_INVALID_PARAMETER;
  via::Cq::Entry e;
  Result r = cq->wait(timeout_ms(Timeout), e);
  if (r == Result::success) {
    *ViHandle = e.vi->user_handle;
    *RecvQueue = e.recv_queue;
  }
  return ret(r);
}

VIP_RETURN VipCQNotify(VIP_CQ_HANDLE CQHandle, VIP_PVOID Context, VIP_CQ_NOTIFY Handler) {
  via::Cq* cq = cq_of(CQHandle);
  if (!cq || !Handler) return VIP_INVALID_PARAMETER;
  cq->set_notify([cq, Context, Handler](const via::Cq::Entry& e) {
    Handler(Context, cq->nic().user_handle, e.vi->user_handle, e.recv_queue);
  });
  return VIP_SUCCESS;
}

VIP_RETURN VipNSInit(VIP_NIC_HANDLE NicHandle, VIP_PVOID) {
  return nic_of(NicHandle) ? VIP_SUCCESS : VIP_INVALID_PARAMETER;
}

VIP_RETURN VipNSGetHostByName(VIP_NIC_HANDLE NicHandle, VIP_CHAR* Name, VIP_NET_ADDRESS* Address,
                              VIP_ULONG NameIndex) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic || !Name || !Address) return VIP_INVALID_PARAMETER;
  std::vector<std::uint8_t> host;
  Result r = nic->resolve(Name, std::uint32_t(NameIndex), host);
  if (r != Result::success) return ret(r);
  // Only the host part is written; the caller appends its discriminator after it.
  Address->HostAddressLen = VIP_UINT16(host.size());
  std::copy(host.begin(), host.end(), Address->HostAddress);
  return VIP_SUCCESS;
}

VIP_RETURN VipNSGetHostByAddr(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS* Address, VIP_CHAR* Name,
                              VIP_ULONG* NameLen) {
  via::Nic* nic = nic_of(NicHandle);
  via::NetAddress addr;
  if (!nic || !to_net_address(Address, addr) || !Name || !NameLen) return VIP_INVALID_PARAMETER;
  std::string name = nic->describe_address(addr.host);
  if (*NameLen < name.size() + 1) {
    *NameLen = name.size() + 1;
    return VIP_ERROR_RESOURCE;
  }
  std::memcpy(Name, name.c_str(), name.size() + 1);
  *NameLen = name.size() + 1;
  return VIP_SUCCESS;
}

VIP_RETURN VipNSShutdown(VIP_NIC_HANDLE NicHandle) {
  return nic_of(NicHandle) ? VIP_SUCCESS : VIP_INVALID_PARAMETER;
}

static_assert(VIA_LOG_ERROR == int(via::log::Level::error) && VIA_LOG_WARN == int(via::log::Level::warn) &&
              VIA_LOG_INFO == int(via::log::Level::info) && VIA_LOG_DEBUG == int(via::log::Level::debug));

void via_set_log_hook(VIA_LOG_HOOK Hook, void* Context) {
  if (!Hook) return via::log::set_hook({});
  via::log::set_hook([Hook, Context](via::log::Level level, std::string_view line) {
    const std::string text(line);  // C wants the NUL
    Hook(Context, int(level), text.c_str());
  });
}

const char* VipErrorCodeName(VIP_ERROR_CODE Code) { return via::error_name(Code); }

const char* VipReturnName(VIP_RETURN Code) {
  // In vipl.h's order: VIP_SUCCESS is 0.
  static constexpr const char* names[] = {"VIP_SUCCESS",         "VIP_NOT_DONE",
                                          "VIP_INVALID_PARAMETER", "VIP_ERROR_RESOURCE",
                                          "VIP_TIMEOUT",         "VIP_REJECT",
                                          "VIP_INVALID_RELIABILITY_LEVEL", "VIP_INVALID_MTU",
                                          "VIP_INVALID_QOS",     "VIP_INVALID_PTAG",
                                          "VIP_INVALID_RDMAREAD", "VIP_DESCRIPTOR_ERROR",
                                          "VIP_INVALID_STATE",   "VIP_ERROR_NAMESERVICE",
                                          "VIP_NO_MATCH"};
  static_assert(std::size(names) == VIP_NO_MATCH + 1);
  return unsigned(Code) < std::size(names) ? names[Code] : "an unknown VIP_RETURN";
}

size_t VipStatusErrorNames(VIP_UINT32 Status, char* Buffer, size_t Size) {
  static constexpr struct {
    VIP_UINT32 bit;
    const char* name;
  } errors[] = {
      {VIP_STATUS_FORMAT_ERROR, "VIP_STATUS_FORMAT_ERROR (the descriptor is malformed: its segment count or lengths)"},
      {VIP_STATUS_PROTECTION_ERROR,
       "VIP_STATUS_PROTECTION_ERROR (a segment lies outside a registered region, or under another protection tag)"},
      {VIP_STATUS_LENGTH_ERROR, "VIP_STATUS_LENGTH_ERROR (the message was longer than the receive's buffers)"},
      {VIP_STATUS_PARTIAL_ERROR, "VIP_STATUS_PARTIAL_ERROR (only part of the data was placed)"},
      {VIP_STATUS_DESC_FLUSHED_ERROR,
       "VIP_STATUS_DESC_FLUSHED_ERROR (the VI was disconnected: the peer closed it or left)"},
      {VIP_STATUS_TRANSPORT_ERROR, "VIP_STATUS_TRANSPORT_ERROR (the connection broke)"},
      {VIP_STATUS_RDMA_PROT_ERROR,
       "VIP_STATUS_RDMA_PROT_ERROR (the remote memory is not registered for this RDMA, or under another tag)"},
      {VIP_STATUS_REMOTE_DESC_ERROR, "VIP_STATUS_REMOTE_DESC_ERROR (the peer had no receive posted, or a bad one)"},
  };
  std::string text;
  for (const auto& e : errors)
    if (Status & e.bit) text.append(text.empty() ? "" : "; ").append(e.name);
  if (Size > 0) {
    const std::size_t kept = std::min(text.size(), Size - 1);
    std::memcpy(Buffer, text.data(), kept);
    Buffer[kept] = '\0';
  }
  return text.size();
}

VIP_RETURN VipQueryFaultCounters(VIP_NIC_HANDLE NicHandle, VIP_FAULT_COUNTERS* Counters) {
  via::Nic* nic = nic_of(NicHandle);
  if (!nic || !Counters) return VIP_INVALID_PARAMETER;
  const via::NicCounters& counters = nic->counters();
  *Counters = VIP_FAULT_COUNTERS{counters.faults_dropped, counters.faults_duplicated, counters.faults_reordered,
                                 counters.faults_delayed};
  return VIP_SUCCESS;
}

}  // extern "C"
