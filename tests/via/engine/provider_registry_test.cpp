// The registry of providers: the built-in ones and any other registered by
// name, a plugin loaded from VIASTACK_PROVIDER_PLUGIN among them, and a clear
// error for a name nobody registered.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "providers/provider.hpp"
#include "support/endpoint.hpp"
#include "via/log.hpp"

namespace {

// Every log line, while the test runs.
struct CapturedLog {
  CapturedLog() {
    via::log::set_hook([this](via::log::Level, std::string_view line) { lines.emplace_back(line); });
  }
  ~CapturedLog() { via::log::set_hook({}); }
  std::string all() const {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    return text;
  }
  std::vector<std::string> lines;
};

class ProviderRegistry : public ::testing::Test {
 protected:
  void SetUp() override {
    testing_support::use_unique_job("registrytest");
    unsetenv("VIASTACK_PROVIDER");
    unsetenv("VIASTACK_PROVIDER_PLUGIN");
  }
};

TEST_F(ProviderRegistry, TheBuiltInProvidersAreRegistered) {
  const std::vector<std::string> names = via::registered_providers();
  for (const char* builtin : {"shm", "tcp", "mixed"})
    EXPECT_NE(std::find(names.begin(), names.end(), builtin), names.end()) << builtin;
}

TEST_F(ProviderRegistry, AnUnknownNameFailsWithALineNamingTheRegisteredOnes) {
  CapturedLog log;
  std::unique_ptr<via::Nic> nic;
  EXPECT_EQ(via::Nic::open("nosuch:0", nic), via::Result::error_resource);
  EXPECT_EQ(nic, nullptr);
  ASSERT_EQ(log.lines.size(), 1u) << log.all();
  EXPECT_NE(log.lines[0].find("unknown provider 'nosuch' (registered: shm, tcp, mixed"), std::string::npos)
      << log.lines[0];
  EXPECT_NE(log.lines[0].find("VIASTACK_PROVIDER_PLUGIN"), std::string::npos) << log.lines[0];

  setenv("VIASTACK_PROVIDER", "nosuch", 1);
  log.lines.clear();
  EXPECT_EQ(via::Nic::open("", nic), via::Result::error_resource);
  ASSERT_EQ(log.lines.size(), 1u) << log.all();
  EXPECT_NE(log.lines[0].find("unknown provider 'nosuch'"), std::string::npos) << log.lines[0];
}

// A provider registered here opens by its name, from the device string and
// from VIASTACK_PROVIDER, and shows in the list an unknown name gets.
TEST_F(ProviderRegistry, ARegisteredProviderOpensByItsName) {
  static int opened = 0;
  ASSERT_TRUE(via::register_provider(
      "counted", [](std::string_view device, const std::shared_ptr<via::Bootstrap>& job,
                    std::unique_ptr<via::Provider>& out) {
        ++opened;
        const std::string_view number = device.substr(device.find(':') + 1);
        const std::string shm_device = device.find(':') == std::string_view::npos ? "shm" : "shm:" + std::string(number);
        return via::shm::open_shm_provider(shm_device, *job, out);
      }));
  std::unique_ptr<via::Nic> nic;
  ASSERT_EQ(via::Nic::open("counted:3", nic), via::Result::success);
  EXPECT_EQ(opened, 1);
  EXPECT_STREQ(nic->provider_name(), "shm");
  nic.reset();
  setenv("VIASTACK_PROVIDER", "counted", 1);
  ASSERT_EQ(via::Nic::open("", nic), via::Result::success);
  EXPECT_EQ(opened, 2);
  nic.reset();

  CapturedLog log;
  EXPECT_EQ(via::Nic::open("nosuch:0", nic), via::Result::error_resource);
  ASSERT_EQ(log.lines.size(), 1u) << log.all();
  EXPECT_NE(log.lines[0].find("registered: shm, tcp, mixed, counted;"), std::string::npos) << log.lines[0];
}

TEST_F(ProviderRegistry, ANameTakenOrReservedIsRefused) {
  auto opener = [](std::string_view, const std::shared_ptr<via::Bootstrap>&, std::unique_ptr<via::Provider>&) {
    return via::Result::error_resource;
  };
  CapturedLog log;
  for (const char* refused : {"shm", "tcp", "auto", "via0", "", "a:b"}) {
    log.lines.clear();
    EXPECT_FALSE(via::register_provider(refused, opener)) << refused;
    ASSERT_EQ(log.lines.size(), 1u) << log.all();
    EXPECT_NE(log.lines[0].find(std::string("cannot register a provider named '") + refused + "'"), std::string::npos)
        << log.lines[0];
  }
  EXPECT_FALSE(via::register_provider("no-opener", nullptr));
  EXPECT_TRUE(via::register_provider("once", opener));
  EXPECT_FALSE(via::register_provider("once", opener));
}

// The plugin is loaded once per process: each case runs in a child of its
// own. The child's status is 0 when its NIC opened, 3 when not; its stderr
// is returned.
int open_in_child(const char* plugin, const char* device, std::string& err) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    setenv("VIASTACK_PROVIDER_PLUGIN", plugin, 1);
    std::unique_ptr<via::Nic> nic;
    _exit(via::Nic::open(device, nic) == via::Result::success ? 0 : 3);
  }
  close(pipe_fds[1]);
  char buffer[4096];
  for (ssize_t got; (got = read(pipe_fds[0], buffer, sizeof buffer)) > 0;) err.append(buffer, std::size_t(got));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(ProviderRegistry, APluginRegistersItsProviderAsItLoads) {
  std::string err;
  EXPECT_EQ(open_in_child(PLUGIN_PROBE_PATH, "plugin_probe:0", err), 0) << err;
  EXPECT_EQ(err, "");
}

TEST_F(ProviderRegistry, APluginThatCannotBeLoadedFailsTheOpeningNamingIt) {
  std::string err;
  EXPECT_EQ(open_in_child("/nonexistent/plugin.so", "shm:0", err), 3) << err;
  EXPECT_NE(err.find("cannot load the provider plugin VIASTACK_PROVIDER_PLUGIN=/nonexistent/plugin.so: "),
            std::string::npos)
      << err;
}

}  // namespace
