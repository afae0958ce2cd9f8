// The PMI-1 and PMI-2 clients against a scripted server on a socketpair
// (PMI_FD), as Hydra and Slurm hand one to each rank: the exchange, the
// layout it yields, the encoding of keys and values on the wire, and a clear
// error, not a hang, when the server answers badly, fails or goes away.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap_impl.hpp"

namespace {

constexpr const char* kClose = "<close>";  // a reply that hangs up instead
constexpr const char* kSilent = "<silent>";  // a reply that never comes

// Plays a process manager: reads one request per step of its script, keeps
// it, and writes the step's reply. With `v2`, every message after the first
// line is a PMI-2 frame (replies get their length prefix here).
class FakeServer {
 public:
  FakeServer(std::vector<std::string> replies, bool v2) : replies_(std::move(replies)), v2_(v2) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    server_ = fds[0];
    client_ = fds[1];
    setenv("PMI_FD", std::to_string(client_).c_str(), 1);
    thread_ = std::thread([this] { run(); });
  }
  ~FakeServer() {
    finish();
    ::close(server_);
  }
  // What the client sent, one entry per request, without framing, once the
  // script has run.
  const std::vector<std::string>& requests() {
    finish();
    return requests_;
  }

 private:
  void finish() {
    if (thread_.joinable()) thread_.join();
  }
  bool read_bytes(std::string& out, std::size_t n) {
    out.clear();
    while (out.size() < n) {
      pollfd p{server_, POLLIN, 0};
      char c;
      if (::poll(&p, 1, 10000) != 1 || ::read(server_, &c, 1) != 1) return false;
      out += c;
    }
    return true;
  }
  bool read_request(std::string& request, bool frame) {
    if (frame) {
      std::string length;
      return read_bytes(length, 6) && read_bytes(request, std::stoul(length));
    }
    request.clear();
    std::string c;
    while (read_bytes(c, 1) && c != "\n") request += c;
    return c == "\n";
  }
  void run() {
    for (std::size_t i = 0; i < replies_.size(); ++i) {
      std::string request;
      if (!read_request(request, v2_ && i > 0)) break;
      requests_.push_back(request);
      const std::string& reply = replies_[i];
      if (reply == kClose) break;
      if (reply == kSilent) {
        std::string rest;
        read_bytes(rest, 1);  // until the client gives up and closes
        break;
      }
      std::string out = reply;
      if (v2_ && i > 0) {
        char prefix[8];
        std::snprintf(prefix, sizeof prefix, "%-6zu", reply.size());  // left-aligned, as Slurm does
        out = prefix + reply;
      }
      EXPECT_EQ(::write(server_, out.data(), out.size()), ssize_t(out.size()));
    }
    ::shutdown(server_, SHUT_RDWR);
  }

  std::vector<std::string> replies_;
  bool v2_;
  int server_ = -1, client_ = -1;
  std::vector<std::string> requests_;
  std::thread thread_;
};

const std::vector<std::string> kPmi1Start = {
    "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
    "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n",
    "cmd=my_kvsname kvsname=kvs_42_0\n",
};

std::vector<std::string> pmi1_script(std::vector<std::string> more) {
  std::vector<std::string> script = kPmi1Start;
  script.insert(script.end(), more.begin(), more.end());
  return script;
}

class PmiClient : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("PMI_RANK", "1", 1);
    setenv("PMI_SIZE", "4", 1);
    setenv("VIASTACK_PMI_TIMEOUT", "1", 1);
  }
};

}  // namespace

TEST_F(PmiClient, Pmi1ExchangeLayoutAndEncoding) {
  FakeServer server(pmi1_script({"cmd=get_result rc=0 msg=success value=(vector,(0,2,1))\n",
                                 "cmd=put_result rc=0 msg=success\n", "cmd=barrier_out\n",
                                 "cmd=get_result rc=0 msg=success value=a%20b%3Bc\n",
                                 "cmd=get_result rc=-1 msg=key_nope_not_found value=unknown\n", "cmd=finalize_ack\n"}),
                    false);
  std::string error;
  {
    auto b = via::bootstrap::open_pmi1(error);
    ASSERT_TRUE(b) << error;
    EXPECT_STREQ(b->name(), "pmi1");
    EXPECT_EQ(b->rank(), 1);
    EXPECT_EQ(b->size(), 4);
    EXPECT_EQ(b->node_count(), 2);
    EXPECT_EQ(b->node_of(1), 1);
    EXPECT_EQ(b->node_of(2), 0);
    EXPECT_EQ(b->local_rank(), 0);
    EXPECT_EQ(b->job_id(), "kvs_42_0");
    EXPECT_TRUE(b->put("via.addr", "x y;z", error)) << error;
    EXPECT_TRUE(b->fence(error)) << error;
    std::string value;
    EXPECT_TRUE(b->get(3, "via.addr", value, error)) << error;
    EXPECT_EQ(value, "a b;c");
    EXPECT_FALSE(b->get(2, "missing", value, error));
    EXPECT_NE(error.find("no value 'missing' from rank 2"), std::string::npos) << error;
    EXPECT_NE(error.find("key_nope_not_found"), std::string::npos) << error;
  }
  const auto& sent = server.requests();
  ASSERT_EQ(sent.size(), 9u);
  EXPECT_EQ(sent[0], "cmd=init pmi_version=1 pmi_subversion=1");
  EXPECT_EQ(sent[3], "cmd=get kvsname=kvs_42_0 key=PMI_process_mapping");
  EXPECT_EQ(sent[4], "cmd=put kvsname=kvs_42_0 key=via_2Eaddr-1 value=x%20y%3Bz");
  EXPECT_EQ(sent[5], "cmd=barrier_in");
  EXPECT_EQ(sent[6], "cmd=get kvsname=kvs_42_0 key=via_2Eaddr-3");
  EXPECT_EQ(sent[8], "cmd=finalize");
}

TEST_F(PmiClient, Pmi1WithoutAMapTakesEveryPeerAsRemote) {
  FakeServer server(pmi1_script({"cmd=get_result rc=-1 msg=key_nope_not_found value=unknown\n", kClose}), false);
  std::string error;
  auto b = via::bootstrap::open_pmi1(error);
  ASSERT_TRUE(b) << error;
  EXPECT_EQ(b->node_count(), 4);
  EXPECT_EQ(b->local_size(), 1);
}

TEST_F(PmiClient, Pmi1RefusesValuesPastTheServersLimit) {
  FakeServer server(pmi1_script({"cmd=get_result rc=0 msg=success value=(vector,(0,1,4))\n", kClose}), false);
  std::string error;
  auto b = via::bootstrap::open_pmi1(error);
  ASSERT_TRUE(b) << error;
  EXPECT_FALSE(b->put("k", std::string(400, ' '), error));  // 1200 bytes encoded
  EXPECT_NE(error.find("too long"), std::string::npos) << error;
  EXPECT_FALSE(b->put(std::string(62, 'k'), "v", error));  // 64 bytes with the rank
  EXPECT_NE(error.find("too long"), std::string::npos) << error;
}

TEST_F(PmiClient, Pmi1SaysWhatWentWrong) {
  struct Case {
    std::vector<std::string> script;
    const char* expected;
  } cases[] = {
      {{kClose}, "PMI-1 init: the process manager closed the connection"},
      {{"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n"}, "PMI-1 init: the process manager's "
                                                                          "'response_to_init' says rc=-1"},
      {{"garbage\n"}, "PMI-1 init: PMI-1 line 'garbage': field 'garbage' is not key=value"},
      {{"cmd=response_to_init rc=0\n", "cmd=barrier_out\n"}, "PMI-1 get_maxes: the process manager answered "
                                                             "'barrier_out' where 'maxes' was expected"},
      {{"cmd=response_to_init rc=0\n", "cmd=maxes kvsname_max=256\n"}, "has no number 'keylen_max'"},
      {{"cmd=response_to_init rc=0\n", std::string(5000, 'x')}, "a line longer than 4096 bytes"},
      {pmi1_script({"cmd=get_result rc=0 value=(vector,(0,0,1))\n"}), "a block places no ranks"},
      {{kSilent}, "PMI-1 init: no answer from the process manager in 1 s (VIASTACK_PMI_TIMEOUT)"},
  };
  for (const Case& c : cases) {
    FakeServer server(c.script, false);
    std::string error;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(via::bootstrap::open_pmi1(error));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
    EXPECT_NE(error.find(c.expected), std::string::npos) << error;
  }
}

TEST_F(PmiClient, Pmi1NeedsItsRankAndSize) {
  FakeServer server({kClose}, false);
  unsetenv("PMI_SIZE");
  std::string error;
  EXPECT_FALSE(via::bootstrap::open_pmi1(error));
  EXPECT_NE(error.find("PMI_RANK/PMI_SIZE ('1', '') are not numbers"), std::string::npos) << error;
}

TEST_F(PmiClient, Pmi2ExchangeLayoutAndEncoding) {
  setenv("PMI_JOBID", "7.0", 1);
  FakeServer server({"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n",
                     "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=4;appnum=-1;",
                     "cmd=job-getid-response;rc=0;jobid=7.0;",
                     "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,2),(1,1,2));",
                     "cmd=kvs-put-response;rc=0;", "cmd=kvs-fence-response;rc=0;",
                     "cmd=kvs-get-response;rc=0;found=TRUE;value=a%20b%3Bc;",
                     "cmd=kvs-get-response;rc=0;found=FALSE;", "cmd=finalize-response;rc=0;"},
                    true);
  std::string error;
  {
    auto b = via::bootstrap::open_pmi2(error);
    ASSERT_TRUE(b) << error;
    EXPECT_STREQ(b->name(), "pmi2");
    EXPECT_EQ(b->rank(), 1);
    EXPECT_EQ(b->size(), 4);
    EXPECT_EQ(b->node_of(1), 0);
    EXPECT_EQ(b->node_of(2), 1);
    EXPECT_EQ(b->local_rank(), 1);
    EXPECT_EQ(b->job_id(), "7_0");
    EXPECT_TRUE(b->put("via.addr", "x y;z", error)) << error;
    EXPECT_TRUE(b->fence(error)) << error;
    std::string value;
    EXPECT_TRUE(b->get(3, "via.addr", value, error)) << error;
    EXPECT_EQ(value, "a b;c");
    EXPECT_FALSE(b->get(2, "missing", value, error));
    EXPECT_NE(error.find("no rank 2 published 'missing'"), std::string::npos) << error;
  }
  const auto& sent = server.requests();
  ASSERT_EQ(sent.size(), 9u);
  EXPECT_EQ(sent[0], "cmd=init pmi_version=2 pmi_subversion=0");
  EXPECT_EQ(sent[1], "cmd=fullinit;pmijobid=7.0;pmirank=1;threaded=FALSE;");
  EXPECT_EQ(sent[3], "cmd=info-getjobattr;key=PMI_process_mapping;");
  EXPECT_EQ(sent[4], "cmd=kvs-put;key=via_2Eaddr-1;value=x%20y%3Bz;");
  EXPECT_EQ(sent[6], "cmd=kvs-get;jobid=7.0;srcid=3;key=via_2Eaddr-3;");
  EXPECT_EQ(sent[8], "cmd=finalize;");
}

TEST_F(PmiClient, Pmi2SaysWhatWentWrong) {
  struct Case {
    std::vector<std::string> script;
    const char* expected;
  } cases[] = {
      {{kClose}, "PMI-2 init: the process manager closed the connection"},
      {{"cmd=response_to_init rc=0\n", "cmd=fullinit-response;rc=-1;errmsg=no_such_rank;"},
       "PMI-2 fullinit: the process manager's 'fullinit-response' says rc=-1: no_such_rank"},
      {{"cmd=response_to_init rc=0\n", "cmd=fullinit-response;rc=0;rank=1;"}, "has no number 'size'"},
      {{"cmd=response_to_init rc=0\n", kSilent}, "PMI-2 fullinit: no answer from the process manager in 1 s"},
  };
  for (const Case& c : cases) {
    FakeServer server(c.script, true);
    std::string error;
    EXPECT_FALSE(via::bootstrap::open_pmi2(error));
    EXPECT_NE(error.find(c.expected), std::string::npos) << error;
  }
}
