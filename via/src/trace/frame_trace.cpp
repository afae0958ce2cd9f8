// The VIA layer's pcap trace (frame_trace.hpp describes the records).
#include "trace/frame_trace.hpp"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine.hpp"
#include "providers/provider.hpp"
#include "via/bootstrap.hpp"
#include "via/log.hpp"
#include "via/trace.hpp"

namespace via::trace {

Tracer* active = nullptr;

namespace {

// Records longer than this are cut (their original length kept), as
// Wireshark reads no longer ones: a frame of the tcp provider may hold 512 KiB.
constexpr std::uint32_t kSnapLength = 262144;
constexpr std::uint32_t kPcapNanosecondMagic = 0xa1b23c4d;

void put8(std::vector<std::byte>& out, std::uint8_t v) { out.push_back(std::byte(v)); }
void put16(std::vector<std::byte>& out, std::uint16_t v) {
  for (int shift = 0; shift < 16; shift += 8) put8(out, std::uint8_t(v >> shift));
}
void put32(std::vector<std::byte>& out, std::uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) put8(out, std::uint8_t(v >> shift));
}
void put64(std::vector<std::byte>& out, std::uint64_t v) {
  for (int shift = 0; shift < 64; shift += 8) put8(out, std::uint8_t(v >> shift));
}
void put_bytes(std::vector<std::byte>& out, const void* bytes, std::size_t n) {
  const auto* p = static_cast<const std::byte*>(bytes);
  out.insert(out.end(), p, p + n);
}

// A discriminator as text: printable bytes as they are, others as \xNN.
std::string quoted(const std::vector<std::uint8_t>& bytes) {
  std::string text = "\"";
  for (std::uint8_t b : bytes) {
    if (b >= 0x20 && b < 0x7f && b != '"' && b != '\\') {
      text += char(b);
    } else {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", b);
      text += escaped;
    }
  }
  return text + "\"";
}

std::string describe(NicImpl& nic, const NetAddress& address) {
  const std::string host = address.host.empty() ? "this NIC" : nic.provider().describe_address(address.host);
  return host + " discriminator " + quoted(address.discriminator);
}

}  // namespace

class Tracer {
 public:
  Tracer(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {
    std::vector<std::byte> header;
    put32(header, kPcapNanosecondMagic);
    put16(header, 2);
    put16(header, 4);
    put32(header, 0);  // this zone
    put32(header, 0);  // sigfigs
    put32(header, kSnapLength);
    put32(header, kLinkType);
    write_out(header.data(), header.size());
  }

  // The service a VI's records carry, from its connection request.
  void remember_service(const ViImpl& vi, const std::vector<std::uint8_t>& discriminator) {
    std::lock_guard guard(lock_);
    services_[&vi] = discriminator;
  }

  // Starts a record in the scratch buffer; the caller appends the body and calls finish().
  std::vector<std::byte>& begin(Event event, std::uint32_t nic, std::uint32_t vi_number, std::uint8_t reliability,
                                std::uint32_t code, const ViImpl* vi, const std::vector<std::uint8_t>* service) {
    lock_.lock();
    if (!service && vi) {
      const auto it = services_.find(vi);
      if (it != services_.end()) service = &it->second;
    }
    const std::size_t service_bytes = service ? std::min(service->size(), kServiceBytes) : 0;
    record_.clear();
    put8(record_, 1);
    put8(record_, std::uint8_t(event));
    put8(record_, reliability);
    put8(record_, std::uint8_t(service_bytes));
    put32(record_, nic);
    put32(record_, vi_number);
    put32(record_, code);
    if (service_bytes) put_bytes(record_, service->data(), service_bytes);
    record_.resize(kRecordHeaderBytes);  // zero-pads the service
    return record_;
  }

  // Writes the record begun last; flush_now after events a reader waits for.
  void finish(std::size_t original_length, bool flush_now) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    const std::uint32_t captured = std::uint32_t(std::min<std::size_t>(record_.size(), kSnapLength));
    std::vector<std::byte> header;
    put32(header, std::uint32_t(now.tv_sec));
    put32(header, std::uint32_t(now.tv_nsec));
    put32(header, captured);
    put32(header, std::uint32_t(std::min<std::size_t>(original_length, UINT32_MAX)));
    write_out(header.data(), header.size());
    write_out(record_.data(), captured);
    if (flush_now) flush_locked();
    lock_.unlock();
  }

  void flush() {
    std::lock_guard guard(lock_);
    flush_locked();
  }

 private:
  void write_out(const void* bytes, std::size_t n) {
    if (failed_ || n == 0) return;
    if (std::fwrite(bytes, n, 1, file_) != 1) report_failure();
  }
  void flush_locked() {
    if (!failed_ && std::fflush(file_) != 0) report_failure();
  }
  // A full disk ends the trace with one line; the program goes on.
  void report_failure() {
    failed_ = true;
    VIA_LOG(error, "via", "VIASTACK_TRACE: writing %s failed (%s); VIA frames are no longer traced", path_.c_str(),
            std::strerror(errno));
  }

  std::mutex lock_;  // NICs of one process may be used from several threads
  std::FILE* file_;  // never closed: exit() flushes it, after every static destructor that may still send
  std::string path_;
  bool failed_ = false;
  std::vector<std::byte> record_;
  std::unordered_map<const ViImpl*, std::vector<std::uint8_t>> services_;
};

bool start() {
  static std::mutex starting;
  std::lock_guard guard(starting);
  if (active) return true;
  const auto setting = setting_from_environment();
  if (!setting || !setting->via) return true;
  std::string error;
  const auto job = job_bootstrap(error);
  const int rank = job ? job->rank() : 0, size = job ? job->size() : 1;
  const std::string path = file_for_rank(*layer_file(*setting, Layer::via), rank, size).string();
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) {
    VIA_LOG(error, "via", "VIASTACK_TRACE: cannot write %s: %s", path.c_str(), std::strerror(errno));
    return false;
  }
  // Never destroyed, as the file: frames may still be sent from static destructors.
  active = new Tracer(file, path);
  return true;
}

void flush() {
  if (active) active->flush();
}

namespace {

std::uint32_t nic_number(const ViImpl& vi) { return vi.nic().provider().nic_number(); }
std::uint8_t reliability(const ViImpl& vi) { return std::uint8_t(vi.attributes().reliability); }

void put_frame_header(std::vector<std::byte>& out, const FrameHeader& h) {
  put8(out, h.type);
  put8(out, h.flags);
  put16(out, h.message);
  put32(out, h.length);
  put64(out, h.total);
  put64(out, h.offset);
  put64(out, h.raddr);
  put32(out, h.rhandle);
  put32(out, h.imm);
}

void text_record(Event event, std::uint32_t nic, std::uint32_t vi_number, std::uint8_t level, std::uint32_t code,
                 const ViImpl* vi, const std::vector<std::uint8_t>* service, std::string_view text) {
  std::vector<std::byte>& record = active->begin(event, nic, vi_number, level, code, vi, service);
  put_bytes(record, text.data(), text.size());
  active->finish(record.size(), true);
}

}  // namespace

void record_frame(Event event, const ViImpl& vi, const FrameHeader& h, const iovec* iov, std::size_t iovcnt) {
  std::vector<std::byte>& record =
      active->begin(event, nic_number(vi), vi.provider_slot, reliability(vi), 0, &vi, nullptr);
  put_frame_header(record, h);
  std::size_t payload = 0;
  for (std::size_t i = 0; i < iovcnt; ++i) {
    // Bytes past the snap length are not kept: only their count.
    const std::size_t room = kSnapLength > record.size() ? kSnapLength - record.size() : 0;
    put_bytes(record, iov[i].iov_base, std::min(room, iov[i].iov_len));
    payload += iov[i].iov_len;
  }
  active->finish(kRecordHeaderBytes + sizeof(FrameHeader) + payload, false);
}

void record_direct(const ViImpl& vi, bool write, std::uint64_t remote_address, std::uint64_t length,
                   MemHandle remote_handle) {
  std::vector<std::byte>& record = active->begin(write ? Event::direct_write : Event::direct_read, nic_number(vi),
                                                 vi.provider_slot, reliability(vi), 0, &vi, nullptr);
  put64(record, remote_address);
  put64(record, length);
  put32(record, remote_handle);
  put32(record, 0);
  active->finish(record.size(), false);
}

void record_connect_request(const ViImpl& vi, const NetAddress& local, const NetAddress& remote, bool client) {
  active->remember_service(vi, remote.discriminator);
  text_record(client ? Event::connect_request : Event::peer_request, nic_number(vi), vi.provider_slot,
              reliability(vi), 0, &vi, nullptr,
              "from " + describe(vi.nic(), local) + " to " + describe(vi.nic(), remote));
}

void record_request(Event event, NicImpl& nic, const ConnRequestImpl& request, const ViImpl* vi) {
  if (vi) active->remember_service(*vi, request.local.discriminator);
  const std::uint32_t nic_id = nic.provider().nic_number();
  text_record(event, nic_id, vi ? vi->provider_slot : kNoVi,
              std::uint8_t(vi ? vi->attributes().reliability : request.remote_attrs.reliability), 0, vi,
              &request.local.discriminator,
              "from " + describe(nic, request.remote) + " to " + describe(nic, request.local));
}

void record_vi_event(Event event, const ViImpl& vi, std::uint32_t code, std::string_view text) {
  text_record(event, nic_number(vi), vi.provider_slot, reliability(vi), code, &vi, nullptr, text);
}

}  // namespace via::trace
