#include "transport.hpp"

#include <cstring>
#include <string>

#include "errors.hpp"

namespace viastack::mpi {

namespace {

void check(via::Result r, const char* what) {
  if (r == via::Result::success) return;
  std::string why = what;
  why += ": ";
  why += via::describe(r);
  abort_job("VIA transport", why);
}

}  // namespace

Transport::Transport(int rank, int size, std::size_t eager_limit, TransportClient& client)
    : client_(client), eager_limit_(eager_limit) {
  check(via::Nic::open("", nic_), "opening the NIC");
  via::MeshOptions options;
  options.service = "mpi";
  options.rdma_read = true;   // peers read rendezvous messages from our buffers, and windows
  options.rdma_write = true;  // peers write into windows
  options.message_bytes = sizeof(WireHeader) + eager_limit;
  // Credits for a window of 64 eager messages in flight to one peer each way
  // at once (osu_bw's and osu_bibw's, and a 64-message non-blocking
  // exchange): with fewer, the rest wait in the backlog, copied once more,
  // for the receiver to return credits. Twice the window, because credits go
  // back in bulk only once half of them are owed: with 64, up to 31 of the
  // last window's were still owed when the next began, and over tcp a third
  // to two thirds of one rank's 16-32 KiB bibw messages waited (0.73-0.79x
  // Open MPI's tcp BTL; with 128 under 1 %). The buffers behind them cost
  // address space only: a one-frame message is consumed in place, never
  // copied into one.
  options.receives_per_peer = 128;
  // An eager message is matched and copied to its receive buffer straight
  // from the link (no copy into a receive buffer first); no handler of ours
  // waits for another message.
  options.consume_in_place = true;
  check(via::Mesh::open(*nic_, rank, size, options, *this, mesh_), "opening the mesh");
}

Transport::~Transport() {
  mesh_.reset();
  nic_.reset();
}

via::MemHandle Transport::acquire_buffer(const void* addr, std::size_t len) {
  via::MemHandle handle = 0;
  if (const via::Result r = mesh_->registrations().acquire(addr, len, handle); r != via::Result::success) {
    std::string why = "registering a message buffer failed: ";
    why += via::describe(r);
    fail(MPI_ERR_NO_MEM, why);
  }
  return handle;
}

via::MemHandle Transport::register_window(void* addr, std::size_t len) {
  via::MemHandle handle = 0;
  if (const via::Result r = mesh_->register_exposed(addr, len, handle); r != via::Result::success) {
    std::string why = "registering the window failed: ";
    why += via::describe(r);
    fail(MPI_ERR_NO_MEM, why);
  }
  return handle;
}

void Transport::on_message(int peer, std::span<std::byte> message) {
  WireHeader h;
  const bool eager = !message.empty() && WireType(message[0]) == WireType::eager;
  const std::size_t header_bytes = eager ? sizeof(EagerHeader) : sizeof(WireHeader);
  if (message.size() < header_bytes) {
    std::string why = "a message from rank ";
    why += std::to_string(peer);
    why += " is shorter than a header";
    abort_job("progress", why);
  }
  if (eager) {
    EagerHeader e;
    std::memcpy(&e, message.data(), sizeof e);
    h.type = WireType::eager;
    h.context = e.context;
    h.source = e.source;
    h.tag = e.tag;
    h.size = message.size() - sizeof e;
  } else {
    std::memcpy(&h, message.data(), sizeof h);
  }
  client_.on_message(peer, h, message.subspan(header_bytes));
}

void Transport::on_rdma_complete(std::uint64_t id, bool ok) {
  if (!ok) abort_job("progress", "an RDMA transfer failed (its connection broke)");
  client_.on_rdma_complete(id);
}

void Transport::on_peer_failed(int peer, const std::string& why) {
  std::string message = "rank ";
  message += std::to_string(peer);
  message += ": ";
  message += why;
  abort_job("progress", message);
}

}  // namespace viastack::mpi
