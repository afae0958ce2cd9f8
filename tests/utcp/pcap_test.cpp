#include "utcp/pcap.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>
#include <unistd.h>

#include "packets.hpp"
#include "utcp/icmp.hpp"
#include "utcp/ipv4.hpp"
#include "utcp/tcp_header.hpp"
#include "utcp/udp.hpp"

namespace utcp::wire {
namespace {

using namespace std::chrono_literals;

class Pcap : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "utcp_pcap_";
    name += info->name();
    name += '_';
    name += std::to_string(::getpid());
    name += ".pcap";
    path_ = std::filesystem::temp_directory_path() / name;
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::vector<std::uint8_t> file_bytes() const {
    std::ifstream in(path_, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  std::filesystem::path path_;
};

std::uint32_t u32_at(const std::vector<std::uint8_t>& bytes, std::size_t offset) {
  std::uint32_t value;
  std::memcpy(&value, &bytes[offset], sizeof value);  // pcap is in the writer's byte order
  return value;
}

TEST_F(Pcap, WritesGlobalHeaderAndRecords) {
  const auto packet = test::from_hex(test::linux_udp);
  {
    PcapWriter writer(path_, 30);
    writer.write(1'700'000'000s + 123456us, packet);
    writer.write(1'700'000'001s, std::span(packet).first(20));
  }
  const auto bytes = file_bytes();
  ASSERT_EQ(bytes.size(), 24u + 16 + 30 + 16 + 20);
  EXPECT_EQ(u32_at(bytes, 0), 0xa1b2c3d4u);
  EXPECT_EQ(bytes[4] | bytes[5] << 8, 2);  // version 2.4, little-endian on this machine
  EXPECT_EQ(u32_at(bytes, 16), 30u);       // snap length
  EXPECT_EQ(u32_at(bytes, 20), pcap_linktype_raw);
  EXPECT_EQ(u32_at(bytes, 24), 1'700'000'000u);
  EXPECT_EQ(u32_at(bytes, 28), 123456u);
  EXPECT_EQ(u32_at(bytes, 32), 30u);                  // captured: cut to the snap length
  EXPECT_EQ(u32_at(bytes, 36), packet.size());        // original
  EXPECT_TRUE(std::equal(packet.begin(), packet.begin() + 30, bytes.begin() + 40));
  EXPECT_EQ(u32_at(bytes, 70), 1'700'000'001u);
  EXPECT_EQ(u32_at(bytes, 74), 0u);
  EXPECT_EQ(u32_at(bytes, 78), 20u);
}

TEST_F(Pcap, UnwritableFileThrows) {
  EXPECT_THROW(PcapWriter(path_ / "no" / "such" / "dir.pcap"), std::system_error);
}

TEST(TraceSetting, NamesTheFile) {
  EXPECT_EQ(trace_file(nullptr), std::nullopt);
  EXPECT_EQ(trace_file(""), std::nullopt);
  EXPECT_EQ(trace_file("out/trace.pcap"), std::filesystem::path("out/trace.pcap"));
  ::setenv("VIASTACK_TRACE", "/tmp/x.pcap", 1);
  EXPECT_EQ(trace_file_from_environment(), std::filesystem::path("/tmp/x.pcap"));
  ::unsetenv("VIASTACK_TRACE");
  EXPECT_EQ(trace_file_from_environment(), std::nullopt);
}

// One packet of each kind the wire layer builds, as a stack would send them.
std::vector<std::vector<std::uint8_t>> built_packets() {
  const Ipv4Address a = Ipv4Address::from_octets(10, 0, 0, 1);
  const Ipv4Address b = Ipv4Address::from_octets(10, 0, 0, 2);
  std::vector<std::vector<std::uint8_t>> packets;
  const auto wrap = [&](std::uint8_t protocol, std::span<const std::uint8_t> transport) {
    Ipv4Header ip;
    ip.protocol = protocol;
    ip.source = a;
    ip.destination = b;
    ip.identification = static_cast<std::uint16_t>(packets.size());
    ip.dont_fragment = true;
    std::vector<std::uint8_t> packet(ipv4_min_header_length + transport.size());
    emit_ipv4(ip, transport, packet);
    packets.push_back(std::move(packet));
  };
  const std::vector<std::uint8_t> payload = {'v', 'i', 'a', 's', 't', 'a', 'c', 'k', '!'};

  TcpHeader syn;
  syn.source_port = 40000;
  syn.destination_port = 5001;
  syn.sequence = SeqNumber(0xfffffff0);
  syn.flags = tcp_flags::syn;
  syn.window = 65535;
  syn.options = {1460, 7, true, TcpTimestamps{1, 0}};
  TcpHeader data = syn;
  data.flags = tcp_flags::ack | tcp_flags::psh;
  data.acknowledgment = SeqNumber(77);
  data.options = {};
  data.options.timestamps = TcpTimestamps{2, 1};
  for (const TcpHeader& header : {syn, data}) {
    std::vector<std::uint8_t> segment(tcp_header_length(header) + payload.size());
    emit_tcp(header, a, b, payload, segment);
    wrap(ip_protocol::tcp, segment);
  }
  std::vector<std::uint8_t> datagram(udp_header_length + payload.size());
  emit_udp({47000, 47001}, a, b, payload, datagram);
  wrap(ip_protocol::udp, datagram);
  std::vector<std::uint8_t> echo(icmp_header_length + payload.size());
  emit_icmp(IcmpEcho{false, 1, 2}, payload, echo);
  wrap(ip_protocol::icmp, echo);
  const auto quote = icmp_error_quote(packets[2]);
  std::vector<std::uint8_t> unreachable(icmp_header_length + quote.size());
  emit_icmp(IcmpDestinationUnreachable{unreachable_code::port, 0}, quote, unreachable);
  wrap(ip_protocol::icmp, unreachable);
  return packets;
}

std::string run(const std::string& command) {
  std::string output;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    std::array<char, 4096> buffer;
    while (std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
    ::pclose(pipe);
  }
  return output;
}

TEST_F(Pcap, TsharkDecodesEveryPacketWithValidChecksums) {
  if (std::system("command -v tshark >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "tshark is not installed (Debian: apt-get install tshark); the pcap format is checked above";
  {
    PcapWriter writer(path_);
    std::chrono::microseconds time = 1'700'000'000s;
    const auto packets = built_packets();
    for (const auto& packet : packets) writer.write(time += 1500us, packet);
    // A control: the SYN with one payload bit flipped must read as a bad TCP checksum.
    auto corrupted = packets[0];
    corrupted.back() ^= 1;
    writer.write(time += 1500us, corrupted);
  }
  // Checksum status: 1 good, 0 bad, 2 unverified; empty where a layer is absent.
  std::string command = "tshark -r ";
  command += path_.string();
  command +=
      " -d udp.port==47001,data -d tcp.port==5001,data"  // no heuristic dissector guesses at "viastack!"
      " -o ip.check_checksum:TRUE -o tcp.check_checksum:TRUE -o udp.check_checksum:TRUE"
      " -T fields -E separator=: -e frame.time_epoch -e ip.checksum.status -e tcp.checksum.status"
      " -e udp.checksum.status -e icmp.checksum.status -e tcp.options.mss_val -e tcp.options.wscale.shift"
      " -e tcp.options.sack_perm -e tcp.options.timestamp.tsval -e icmp.type -e icmp.code -e udp.srcport"
      " -e _ws.expert.severity";
  // Expert severity: 0x200000 chat (tshark notes the SYN), 0x600000 warn
  // (the data segment ACKs a SYN-ACK the capture lacks), 0x800000 error would
  // mean a malformed packet.
  std::istringstream lines(run(command + " 2>/dev/null"));
  std::vector<std::string> decoded;
  for (std::string line; std::getline(lines, line);) decoded.push_back(line);
  ASSERT_EQ(decoded.size(), 6u) << run(command + " 2>&1");
  // The port unreachable quotes an IP header, whose checksum tshark checks
  // too (1,1), and 8 bytes of UDP, whose checksum it cannot (2: unverified).
  const std::array<std::string_view, 6> expected = {
      "1700000000.001500000:1:1:::1460:7:0402:1::::2097152",
      "1700000000.003000000:1:1::::::2::::6291456",
      "1700000000.004500000:1::1::::::::47000:",
      "1700000000.006000000:1:::1:::::8:0::",
      "1700000000.007500000:1,1::2:1:::::3:3:47000:",
      "1700000000.009000000:1:0:::1460:7:0402:1::::2097152,8388608,4194304",  // chat, error (bad checksum), note
  };
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(decoded[i], expected[i]) << "packet " << i;
}

}  // namespace
}  // namespace utcp::wire
