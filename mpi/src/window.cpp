#include "window.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "collectives.hpp"
#include "errors.hpp"
#include "runtime.hpp"

namespace viastack::mpi {

Window::Window(void* base, std::size_t size, int disp_unit, const Communicator& comm)
    : runtime_(runtime()), base_(static_cast<std::byte*>(base)), size_(size), members_(std::size_t(comm.size())) {
  comm_ = std::make_unique<Communicator>(comm.shared_group(), runtime_.agree_on_context(comm), ErrhandlerKind::fatal);
  comm_->set_window(&handle);
  if (size > 0 && comm.size() > 1) registration_ = runtime_.p2p().transport().register_window(base, size);
  const Member mine{reinterpret_cast<std::uintptr_t>(base), size, registration_, disp_unit};
  const Datatype& bytes = datatype_of(MPI_BYTE);
  std::vector<int> counts(members_.size(), int(sizeof(Member))), displs(members_.size());
  for (std::size_t r = 0; r < members_.size(); ++r) displs[r] = int(r * sizeof(Member));
  allgatherv(&mine, sizeof mine, bytes, Blocks{members_.data(), counts, displs, &bytes}, *comm_);
  runtime_.windows().add(*this);
}

Window::~Window() {
  runtime_.windows().remove(*this);
  handle.kind = HandleKind{};  // a stale handle is then recognised as invalid
  if (registration_) runtime_.p2p().transport().deregister_window(base_, size_, registration_);
}

std::uint64_t Window::target_offset(int target, MPI_Aint displacement, std::size_t bytes) const {
  require(epoch_open_, MPI_ERR_RMA_SYNC, "no access epoch is open (MPI_Win_fence opens one)");
  comm_->check_rank(target, false, false);
  const Member& m = members_[std::size_t(target)];
  const auto unit = std::uint64_t(m.disp_unit);
  if (displacement >= 0 && std::uint64_t(displacement) <= m.size / unit &&
      bytes <= m.size - std::uint64_t(displacement) * unit)
    return std::uint64_t(displacement) * unit;
  std::string why = std::to_string(bytes);
  why += " bytes at displacement ";
  why += std::to_string(displacement);
  why += " (unit ";
  why += std::to_string(m.disp_unit);
  why += ") are outside rank ";
  why += std::to_string(target);
  why += "'s window of ";
  why += std::to_string(m.size);
  why += " bytes";
  fail(MPI_ERR_RMA_RANGE, why);
}

void Window::put(const void* origin, std::size_t bytes, int target, MPI_Aint displacement) {
  const std::uint64_t offset = target_offset(target, displacement, bytes);
  if (bytes == 0) return;
  if (target == comm_->rank()) {
    std::memmove(base_ + offset, origin, bytes);
    return;
  }
  const Member& m = members_[std::size_t(target)];
  const std::uint64_t id = runtime_.windows().track(*this);
  runtime_.p2p().transport().write(comm_->world_rank(target), origin, bytes, m.base + offset, m.handle, id);
  ++outstanding_;
}

void Window::get(void* origin, std::size_t bytes, int target, MPI_Aint displacement) {
  const std::uint64_t offset = target_offset(target, displacement, bytes);
  if (bytes == 0) return;
  if (target == comm_->rank()) {
    std::memmove(origin, base_ + offset, bytes);
    return;
  }
  const Member& m = members_[std::size_t(target)];
  const std::uint64_t id = runtime_.windows().track(*this);
  runtime_.p2p().transport().read(comm_->world_rank(target), origin, bytes, m.base + offset, m.handle, id);
  ++outstanding_;
}

void Window::accumulate(const void* origin, std::size_t bytes, Basic basic, const Op& op, int target,
                        MPI_Aint displacement) {
  const std::uint64_t offset = target_offset(target, displacement, bytes);
  const std::span<const std::byte> data{static_cast<const std::byte*>(origin), bytes};
  if (bytes == 0) return;
  if (target == comm_->rank()) return combine(op.builtin(), basic, offset, data);
  // Messages of whole elements, each within the eager limit.
  const std::size_t element = basic_size(basic);
  const std::size_t chunk = runtime_.p2p().eager_limit() / element * element;
  require(chunk > 0, MPI_ERR_OTHER, "VIASTACK_MPI_EAGER_LIMIT is too small for an accumulate message");
  WireHeader h{WireType::accumulate};
  h.context = comm_->p2p_context();
  h.source = comm_->rank();
  h.tag = int(op.builtin());
  h.handle = std::uint32_t(basic);
  for (std::size_t done = 0; done < bytes; done += chunk) {
    h.size = std::min(chunk, bytes - done);
    h.address = offset + done;
    runtime_.p2p().transport().send(comm_->world_rank(target), h, data.subspan(done, h.size));
  }
}

void Window::on_accumulate(const WireHeader& h, std::span<const std::byte> payload) {
  if (payload.size() != h.size || h.address > size_ || h.size > size_ - h.address) {
    std::string why = "an accumulate message from rank ";
    why += std::to_string(h.source);
    why += " does not fit the window";
    abort_job("progress", why);
  }
  combine(Builtin(h.tag), Basic(h.handle), h.address, payload);
}

// data, as elements of kind `basic`, combined by op into the window at offset.
void Window::combine(Builtin op, Basic basic, std::uint64_t offset, std::span<const std::byte> data) {
  const std::size_t size = basic_size(basic);
  const Datatype element(contiguous_layout(size), size, 0, std::ptrdiff_t(size), 1, basic);
  Op{op, nullptr}.apply(data.data(), base_ + offset, data.size() / size, element);
}

void Window::fence(int assertion) {
  runtime_.p2p().wait_until([&] { return outstanding_ == 0; });
  // An empty message to every member, behind this rank's RDMA writes and
  // accumulate messages to it; hearing from every member means that every
  // update aimed at this window has been applied.
  const Datatype& bytes = datatype_of(MPI_BYTE);
  const std::vector<int> none(std::size_t(comm_->size()), 0);
  const Blocks empty{nullptr, none, none, &bytes};
  alltoallv(empty, empty, *comm_);
  // Nobody reads a window (or updates it again) before its owner has heard from everyone.
  barrier(*comm_);
  epoch_open_ = !(assertion & MPI_MODE_NOSUCCEED);
}

void Windows::add(Window& window) { by_context_[window.comm().p2p_context()] = &window; }

void Windows::remove(Window& window) { by_context_.erase(window.comm().p2p_context()); }

std::uint64_t Windows::track(Window& window) {
  const std::uint64_t id = p2p_.new_rdma_id();
  rdma_[id] = &window;
  return id;
}

void Windows::on_accumulate(int peer, const WireHeader& header, std::span<const std::byte> payload) {
  auto it = by_context_.find(header.context);
  if (it == by_context_.end()) {
    std::string why = "an accumulate message from rank ";
    why += std::to_string(peer);
    why += " is for a window this rank does not have";
    abort_job("progress", why);
  }
  it->second->on_accumulate(header, payload);
}

void Windows::on_rdma_complete(std::uint64_t id) {
  auto it = rdma_.find(id);
  if (it == rdma_.end()) return;
  it->second->on_rdma_complete();
  rdma_.erase(it);
}

Window& window_of(MPI_Win handle) {
  if (handle == nullptr || handle->kind != HandleKind::win || handle->impl == nullptr)
    fail(MPI_ERR_WIN, "invalid window (MPI_WIN_NULL, freed, or not a window)");
  return *handle->impl;
}

}  // namespace viastack::mpi
