#include "utcp/pcap.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

#include <via/config.hpp>
#include <via/trace.hpp>

namespace utcp::wire {
namespace {

// pcap-savefile(5): written in the writer's byte order, which a reader tells
// from the magic number; 0xa1b2c3d4 means microsecond timestamps.
struct GlobalHeader {
  std::uint32_t magic = 0xa1b2c3d4;
  std::uint16_t version_major = 2;
  std::uint16_t version_minor = 4;
  std::int32_t this_zone = 0;
  std::uint32_t sigfigs = 0;
  std::uint32_t snap_length;
  std::uint32_t link_type = pcap_linktype_raw;
};
static_assert(sizeof(GlobalHeader) == 24);

struct RecordHeader {
  std::uint32_t seconds;
  std::uint32_t microseconds;
  std::uint32_t captured_length;
  std::uint32_t original_length;
};
static_assert(sizeof(RecordHeader) == 16);

[[noreturn]] void fail(const std::filesystem::path& path, const char* what) {
  std::string message = "pcap ";
  message += what;
  message += ' ';
  message += path.string();
  throw std::system_error(errno ? errno : EIO, std::generic_category(), message);
}

}  // namespace

PcapWriter::PcapWriter(const std::filesystem::path& file, std::uint32_t snap_length)
    : file_(std::fopen(file.c_str(), "wb")), path_(file), snap_length_(snap_length) {
  if (!file_) fail(path_, "open");
  GlobalHeader header;
  header.snap_length = snap_length;
  try {
    put(&header, sizeof header);
  } catch (...) {
    std::fclose(file_);
    throw;
  }
}

PcapWriter::~PcapWriter() { std::fclose(file_); }

void PcapWriter::write(std::chrono::microseconds timestamp, std::span<const std::uint8_t> packet) {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timestamp);
  const std::size_t captured = std::min<std::size_t>(packet.size(), snap_length_);
  const RecordHeader record{static_cast<std::uint32_t>(seconds.count()),
                            static_cast<std::uint32_t>((timestamp - seconds).count()),
                            static_cast<std::uint32_t>(captured), static_cast<std::uint32_t>(packet.size())};
  put(&record, sizeof record);
  put(packet.data(), captured);
}

void PcapWriter::flush() {
  if (std::fflush(file_) != 0) fail(path_, "flush");
}

void PcapWriter::put(const void* bytes, std::size_t size) {
  if (size != 0 && std::fwrite(bytes, size, 1, file_) != 1) fail(path_, "write");
}

std::optional<std::filesystem::path> trace_file(const char* setting) {
  if (!setting || !*setting) return std::nullopt;
  via::trace::Setting parsed;
  std::string error;
  if (!via::trace::parse_setting(setting, parsed, error)) return std::nullopt;
  return via::trace::layer_file(parsed, via::trace::Layer::utcp);
}

std::optional<std::filesystem::path> trace_file_from_environment() {
  const auto setting = via::config::text_if_set("VIASTACK_TRACE");
  return trace_file(setting ? setting->c_str() : nullptr);
}

}  // namespace utcp::wire
