// Packet capture in the classic libpcap format (pcap-savefile(5)), link type
// LINKTYPE_RAW: each record is a bare IPv4 packet, as Wireshark and tshark
// decode it. The writer reads no clock; callers pass each packet's time.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>

namespace utcp::wire {

inline constexpr std::uint32_t pcap_linktype_raw = 101;

class PcapWriter {
 public:
  // Creates (truncates) the file and writes the global header. Packets longer
  // than snap_length are cut to it, keeping their original length in the
  // record. Throws std::system_error if the file cannot be written.
  explicit PcapWriter(const std::filesystem::path& file, std::uint32_t snap_length = 65535);
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;
  ~PcapWriter();

  // One record; timestamp is time since the Unix epoch (microsecond
  // resolution in the file).
  void write(std::chrono::microseconds timestamp, std::span<const std::uint8_t> packet);
  // Pushes buffered records to the file, so a reader sees them.
  void flush();

 private:
  void put(const void* bytes, std::size_t size);

  std::FILE* file_;
  std::filesystem::path path_;
  std::uint32_t snap_length_;
};

// utcp's trace file under a VIASTACK_TRACE value (via/trace.hpp: file.pcap,
// or layers:file.pcap naming utcp); none when unset, empty, bad, or naming
// other layers only.
std::optional<std::filesystem::path> trace_file(const char* setting);
// trace_file(getenv("VIASTACK_TRACE")).
std::optional<std::filesystem::path> trace_file_from_environment();

}  // namespace utcp::wire
