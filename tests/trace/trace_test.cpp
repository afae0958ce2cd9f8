// VIASTACK_TRACE: the value's forms, and the VIA layer's pcap as the engine
// writes it over every provider (two NICs in one process, one file).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/endpoint.hpp"
#include "support/job_directory.hpp"
#include "trace/frame_trace.hpp"
#include "utcp/pcap.hpp"
#include "via/config.hpp"
#include "via/log.hpp"
#include "via/trace.hpp"

using namespace testing_support;
using via::trace::Event;

namespace {

via::trace::Setting parsed(const char* text) {
  via::trace::Setting setting;
  std::string error;
  EXPECT_TRUE(via::trace::parse_setting(text, setting, error)) << text << ": " << error;
  return setting;
}

TEST(TraceSetting, AFileAloneIsUtcpsAsBefore) {
  const auto setting = parsed("out/run.pcap");
  EXPECT_TRUE(setting.utcp);
  EXPECT_FALSE(setting.via);
  EXPECT_EQ(via::trace::layer_file(setting, via::trace::Layer::utcp), std::filesystem::path("out/run.pcap"));
  EXPECT_EQ(via::trace::layer_file(setting, via::trace::Layer::via), std::nullopt);
  EXPECT_EQ(utcp::wire::trace_file("out/run.pcap"), std::filesystem::path("out/run.pcap"));
}

TEST(TraceSetting, LayersChooseWhoWritesAndSeveralNameTheirFiles) {
  const auto via_only = parsed("via:run.pcap");
  EXPECT_EQ(via::trace::layer_file(via_only, via::trace::Layer::via), std::filesystem::path("run.pcap"));
  EXPECT_EQ(via::trace::layer_file(via_only, via::trace::Layer::utcp), std::nullopt);
  EXPECT_EQ(utcp::wire::trace_file("via:run.pcap"), std::nullopt) << "utcp does not write over via's file";

  const auto both = parsed("utcp,via:/tmp/t/run.pcap");
  EXPECT_EQ(via::trace::layer_file(both, via::trace::Layer::via), std::filesystem::path("/tmp/t/run.via.pcap"));
  EXPECT_EQ(via::trace::layer_file(both, via::trace::Layer::utcp), std::filesystem::path("/tmp/t/run.utcp.pcap"));
  EXPECT_EQ(utcp::wire::trace_file("via,utcp:run.pcap"), std::filesystem::path("run.utcp.pcap"));

  // A colon after something that is no layer list belongs to the file name.
  EXPECT_EQ(via::trace::layer_file(parsed("./odd:name.pcap"), via::trace::Layer::utcp),
            std::filesystem::path("./odd:name.pcap"));
  EXPECT_EQ(via::trace::layer_file(parsed("utcp:odd:name.pcap"), via::trace::Layer::utcp),
            std::filesystem::path("odd:name.pcap"));
}

TEST(TraceSetting, EachRankWritesItsOwnFile) {
  EXPECT_EQ(via::trace::file_for_rank("run.via.pcap", 0, 1), std::filesystem::path("run.via.pcap"));
  EXPECT_EQ(via::trace::file_for_rank("d/run.via.pcap", 3, 4), std::filesystem::path("d/run.via.rank3.pcap"));
  EXPECT_EQ(via::trace::file_for_rank("run", 1, 2), std::filesystem::path("run.rank1"));
}

TEST(TraceSetting, BadValuesSayWhy) {
  via::trace::Setting setting;
  std::string error;
  EXPECT_FALSE(via::trace::parse_setting("vai:run.pcap", setting, error));
  EXPECT_NE(error.find("unknown layer 'vai'"), std::string::npos) << error;
  EXPECT_FALSE(via::trace::parse_setting("via,:run.pcap", setting, error));
  EXPECT_FALSE(via::trace::parse_setting("via:", setting, error));
  EXPECT_NE(error.find("no file"), std::string::npos) << error;
}

TEST(TraceSetting, ABadValueStopsTheProgramNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("VIASTACK_TRACE", "vai:run.pcap", 1);
        via::config::text_if_set("VIASTACK_TRACE");
      },
      ::testing::ExitedWithCode(1), "error: VIASTACK_TRACE=vai:run.pcap: expected FILE .* or LAYERS:FILE");
}

// ---- the VIA layer's trace ----

std::uint64_t le(const std::vector<std::uint8_t>& bytes, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | bytes[at + std::size_t(i)];
  return v;
}

struct Record {
  Event event;
  std::uint8_t reliability;
  std::uint32_t nic, vi, code;
  std::string service;
  std::vector<std::uint8_t> body;
  std::uint32_t original_length;
  // Frame records: the frame header's fields.
  std::uint8_t frame_type() const { return body[0]; }
  std::uint32_t frame_length() const { return std::uint32_t(le(body, 4, 4)); }
  std::string text() const { return {body.begin(), body.end()}; }
};

// Reads a pcap of the VIA layer, checking its global header.
std::vector<Record> read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  EXPECT_GE(bytes.size(), 24u) << path;
  if (bytes.size() < 24) return {};
  EXPECT_EQ(le(bytes, 0, 4), 0xa1b23c4du) << "nanosecond pcap";
  EXPECT_EQ(le(bytes, 20, 4), via::trace::kLinkType);
  std::vector<Record> records;
  for (std::size_t at = 24; at + 16 <= bytes.size();) {
    const std::size_t captured = le(bytes, at + 8, 4);
    const std::uint32_t original = std::uint32_t(le(bytes, at + 12, 4));
    at += 16;
    EXPECT_LE(at + captured, bytes.size());
    EXPECT_GE(captured, via::trace::kRecordHeaderBytes);
    if (at + captured > bytes.size() || captured < via::trace::kRecordHeaderBytes) break;
    std::vector<std::uint8_t> r(bytes.begin() + long(at), bytes.begin() + long(at + captured));
    EXPECT_EQ(r[0], 1u) << "record version";
    records.push_back(Record{Event(r[1]), r[2], std::uint32_t(le(r, 4, 4)), std::uint32_t(le(r, 8, 4)),
                             std::uint32_t(le(r, 12, 4)), std::string(r.begin() + 16, r.begin() + 16 + r[3]),
                             std::vector<std::uint8_t>(r.begin() + 32, r.end()), original});
    at += captured;
  }
  return records;
}

class FrameTrace : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    use_unique_job("tracetest");
    if (std::string(GetParam()) == "tcp") use_job_directory();
    path_ = ::testing::TempDir() + "via_trace_" + GetParam() + "_" + std::to_string(getpid()) + ".pcap";
    setenv("VIASTACK_TRACE", ("via:" + path_).c_str(), 1);
  }
  void TearDown() override {
    unsetenv("VIASTACK_TRACE");
    std::remove(path_.c_str());
  }
  std::string nic(int n) const { return std::string(GetParam()) + ":" + std::to_string(n); }
  std::string path_;
};

TEST_P(FrameTrace, RecordsConnectionsFramesAndRdmaOfEveryVi) {
  {
    Endpoint a, b;
    a.open(nic(0), 1 << 20);
    b.open(nic(1), 1 << 20);
    via::Vi* va = a.create_vi(VIP_SERVICE_RELIABLE_DELIVERY);
    via::Vi* vb = b.create_vi(VIP_SERVICE_RELIABLE_DELIVERY);
    expect_ok(vb->post_recv(b.message(0, 256), b.arena.handle), "recv");
    ASSERT_EQ(connect_peers(a, "rank0", va, b, "rank1", vb, "svc"),
              std::make_pair(via::Result::success, via::Result::success));
    std::memcpy(a.arena.data(0), "hello", 5);
    expect_ok(va->post_send(a.message(0, 5), a.arena.handle), "send");
    // 100 bytes into b's arena by RDMA write.
    const std::uint64_t target = reinterpret_cast<std::uintptr_t>(b.arena.data(4096));
    expect_ok(va->post_send(a.rdma(VIP_CONTROL_OP_RDMAWRITE, target, b.arena.handle, 0, 100), a.arena.handle), "write");
    VIP_DESCRIPTOR* d = nullptr;
    int sends_done = 0;
    ASSERT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] {
      while (va->send_done(d) == via::Result::success) ++sends_done;
      return sends_done == 2 && vb->recv_done(d) == via::Result::success;
    }));
    expect_ok(va->disconnect(), "disconnect");
  }  // the NICs close: the trace is flushed
  const std::vector<Record> records = read_trace(path_);
  auto count = [&](Event event, std::uint32_t on_nic, std::uint8_t frame_type = 0, std::uint32_t length = 0) {
    int n = 0;
    for (const Record& r : records)
      n += r.event == event && r.nic == on_nic && (!frame_type || (r.frame_type() == frame_type && r.frame_length() == length));
    return n;
  };
  EXPECT_EQ(count(Event::peer_request, 0), 1);
  EXPECT_EQ(count(Event::peer_request, 1), 1);
  EXPECT_EQ(count(Event::connected, 0), 1);
  EXPECT_EQ(count(Event::connected, 1), 1);
  EXPECT_EQ(count(Event::frame_sent, 0, via::kFrameSend, 5), 1);
  EXPECT_EQ(count(Event::frame_received, 1, via::kFrameSend, 5), 1);
  EXPECT_EQ(count(Event::frame_sent, 0, via::kFrameRdmaWrite, 100), 1);
  EXPECT_EQ(count(Event::frame_received, 1, via::kFrameRdmaWrite, 100), 1);
  EXPECT_EQ(count(Event::disconnected, 0), 1);
  for (const Record& r : records) {
    EXPECT_EQ(r.service, "svc") << "event " << int(r.event);
    EXPECT_EQ(r.reliability, VIP_SERVICE_RELIABLE_DELIVERY);
    if (r.event == Event::frame_sent && r.frame_type() == via::kFrameSend) {
      ASSERT_EQ(r.body.size(), sizeof(via::FrameHeader) + 5);
      EXPECT_EQ(std::string(r.body.begin() + 40, r.body.end()), "hello");
      EXPECT_EQ(r.original_length, via::trace::kRecordHeaderBytes + sizeof(via::FrameHeader) + 5);
    }
    if (r.event == Event::peer_request) {
      EXPECT_NE(r.text().find("discriminator \"svc\""), std::string::npos) << r.text();
      EXPECT_NE(r.text().find(std::string(GetParam()) + ":"), std::string::npos) << r.text();
    }
  }
}

TEST_P(FrameTrace, AViErrorIsRecordedByItsVipName) {
  {
    Endpoint a, b;
    a.open(nic(0), 1 << 20);
    b.open(nic(1), 1 << 20);
    via::log::set_hook([](via::log::Level, std::string_view) {});  // the error's line is diagnostics_test's
    via::Vi* va = a.create_vi();
    via::Vi* vb = b.create_vi();
    ASSERT_EQ(connect_peers(a, "rank0", va, b, "rank1", vb, "err"),
              std::make_pair(via::Result::success, via::Result::success));
    expect_ok(va->post_send(a.message(0, 5), a.arena.handle), "send");  // b posted no receive
    ASSERT_TRUE(pump({a.nic.get(), b.nic.get()}, [&] { return vb->state() == via::ViState::error; }));
    via::log::set_hook(nullptr);
  }
  int errors = 0;
  for (const Record& r : read_trace(path_)) {
    if (r.event != Event::vi_error || r.nic != 1) continue;
    ++errors;
    EXPECT_EQ(r.code, std::uint32_t(VIP_ERROR_RECVQ_EMPTY));
    EXPECT_EQ(r.text().rfind("VIP_ERROR_RECVQ_EMPTY: ", 0), 0u) << r.text();
  }
  EXPECT_EQ(errors, 1);
}

TEST_P(FrameTrace, AnUnwritableFileFailsTheNicOpenNamingIt) {
  const std::string bad = ::testing::TempDir() + "no/such/dir/t.pcap";
  setenv("VIASTACK_TRACE", ("via:" + bad).c_str(), 1);
  std::string logged;
  via::log::set_hook([&](via::log::Level, std::string_view line) { logged += std::string(line) + "\n"; });
  std::unique_ptr<via::Nic> nic;
  EXPECT_EQ(via::Nic::open(this->nic(0), nic), via::Result::invalid_parameter);
  via::log::set_hook(nullptr);
  EXPECT_NE(logged.find("VIASTACK_TRACE: cannot write " + bad), std::string::npos) << logged;
}

INSTANTIATE_TEST_SUITE_P(Providers, FrameTrace, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
