// viastack's log (via/log.hpp): levels and VIASTACK_LOG, the hook a program
// installs (C++ and C), the prefix naming layer and rank, one write per
// message from many threads, and messages of real library paths.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "via/bootstrap.hpp"
#include "via/config.hpp"
#include "via/log.hpp"
#include "vipl.h"

namespace {

using via::log::Level;

struct Message {
  Level level;
  std::string line;
};

// Installs a hook that keeps every message, and restores stderr and the
// level after.
class Collector {
 public:
  explicit Collector(Level level = Level::warn) {
    via::log::set_level(level);
    via::log::set_hook([this](Level level, std::string_view line) {
      std::lock_guard guard(lock_);
      messages_.push_back({level, std::string(line)});
    });
  }
  ~Collector() {
    via::log::set_hook({});
    via::log::set_level(Level::warn);
  }
  std::vector<Message> messages() {
    std::lock_guard guard(lock_);
    return messages_;
  }

 private:
  std::mutex lock_;
  std::vector<Message> messages_;
};

// The prefix of a line from `layer` before or after the bootstrap named the rank.
std::string prefix_pattern(const std::string& layer, const std::string& level) {
  return "^viastack\\[" + layer + " (rank [0-9]+|pid [0-9]+)\\] " + level + ": ";
}

TEST(LogLevels, NamesAndOrder) {
  EXPECT_EQ(via::log::name(Level::error), "error");
  EXPECT_EQ(via::log::name(Level::warn), "warn");
  EXPECT_EQ(via::log::name(Level::info), "info");
  EXPECT_EQ(via::log::name(Level::debug), "debug");
}

TEST(LogLevels, OnlyMessagesUpToTheLevelAreShown) {
  Collector collector(Level::warn);
  VIA_LOG(error, "via", "an error %d", 1);
  VIA_LOG(warn, "via", "a warning %d", 2);
  VIA_LOG(info, "via", "some news %d", 3);
  VIA_LOG(debug, "via", "a detail %d", 4);
  via::log::set_level(Level::debug);
  VIA_LOG(debug, "via", "a detail %d", 5);
  via::log::set_level(Level::error);
  VIA_LOG(warn, "via", "a warning %d", 6);
  VIA_LOG(error, "via", "an error %d", 7);

  const auto messages = collector.messages();
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[0].level, Level::error);
  EXPECT_TRUE(messages[0].line.ends_with("error: an error 1")) << messages[0].line;
  EXPECT_EQ(messages[1].level, Level::warn);
  EXPECT_TRUE(messages[1].line.ends_with("warn: a warning 2")) << messages[1].line;
  EXPECT_EQ(messages[2].level, Level::debug);
  EXPECT_TRUE(messages[2].line.ends_with("debug: a detail 5")) << messages[2].line;
  EXPECT_TRUE(messages[3].line.ends_with("error: an error 7")) << messages[3].line;
}

TEST(LogLevels, ErrorsCannotBeSilenced) {
  Collector collector(Level::error);
  EXPECT_TRUE(via::log::enabled(Level::error));
  EXPECT_FALSE(via::log::enabled(Level::warn));
  VIA_LOG(error, "via", "still shown");
  EXPECT_EQ(collector.messages().size(), 1u);
}

TEST(LogLevels, ADisabledMessageEvaluatesNoArgument) {
  Collector collector(Level::warn);
  int evaluated = 0;
  auto costly = [&evaluated] {
    ++evaluated;
    return 1;
  };
  VIA_LOG(debug, "via", "%d", costly());
  VIA_LOG(info, "via", "%d", costly());
  EXPECT_EQ(evaluated, 0);
  VIA_LOG(warn, "via", "%d", costly());
  EXPECT_EQ(evaluated, 1);
}

TEST(LogHook, ReceivesTheWholeLineWithLayerAndLevel) {
  Collector collector(Level::info);
  VIA_LOG(info, "mpi", "MPI_Send: %s", "a message");
  const auto messages = collector.messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].level, Level::info);
  EXPECT_TRUE(std::regex_search(messages[0].line, std::regex(prefix_pattern("mpi", "info") + "MPI_Send: a message$")))
      << messages[0].line;
  EXPECT_EQ(messages[0].line.find('\n'), std::string::npos);
}

TEST(LogHook, ALongMessageArrivesWhole) {
  Collector collector;
  const std::string text(5000, 'x');
  VIA_LOG(warn, "utcp", "[%s]", text.c_str());
  const auto messages = collector.messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_TRUE(messages[0].line.ends_with("warn: [" + text + "]")) << messages[0].line.size();
}

TEST(LogHook, AMessageLoggedInsideTheHookGoesToStderr) {
  std::vector<std::string> seen;
  via::log::set_hook([&seen](Level, std::string_view line) {
    seen.emplace_back(line);
    VIA_LOG(warn, "via", "from inside the hook");
  });
  testing::internal::CaptureStderr();
  VIA_LOG(warn, "via", "outside");
  const std::string err = testing::internal::GetCapturedStderr();
  via::log::set_hook({});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].ends_with("warn: outside"));
  EXPECT_TRUE(std::regex_search(err, std::regex(prefix_pattern("via", "warn") + "from inside the hook\n$"))) << err;
}

TEST(LogHook, WithoutAHookEachMessageIsOneLineOnStderr) {
  via::log::set_level(Level::warn);
  constexpr int kThreads = 4, kMessages = 200;
  testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < kMessages; ++i) VIA_LOG(warn, "via", "thread %d message %d of a line long enough", t, i);
    });
  for (auto& thread : threads) thread.join();
  const std::string err = testing::internal::GetCapturedStderr();
  const std::regex whole(prefix_pattern("via", "warn") + "thread [0-9] message [0-9]+ of a line long enough$");
  std::istringstream lines(err);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) EXPECT_TRUE(std::regex_search(line, whole)) << line;
  EXPECT_EQ(count, kThreads * kMessages);
}

TEST(LogHook, CalledOneMessageAtATime) {
  std::atomic<int> inside{0}, overlaps{0}, calls{0};
  via::log::set_hook([&](Level, std::string_view) {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    std::this_thread::yield();
    inside.fetch_sub(1);
    calls.fetch_add(1);
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 500; ++i) VIA_LOG(error, "via", "message %d", i);
    });
  for (auto& thread : threads) thread.join();
  via::log::set_hook({});
  EXPECT_EQ(calls.load(), 2000);
  EXPECT_EQ(overlaps.load(), 0);
}

struct CMessages {
  std::vector<std::pair<int, std::string>> received;
};

void c_hook(void* context, int level, const char* line) {
  static_cast<CMessages*>(context)->received.emplace_back(level, line);
}

TEST(LogHook, TheCHookReceivesLevelAndLineWithItsContext) {
  CMessages messages;
  via::log::set_level(Level::warn);
  via_set_log_hook(c_hook, &messages);
  VIA_LOG(warn, "via", "to C %s", "code");
  VIA_LOG(info, "via", "not shown");
  via_set_log_hook(nullptr, nullptr);
  testing::internal::CaptureStderr();
  VIA_LOG(warn, "via", "back on stderr");
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(messages.received.size(), 1u);
  EXPECT_EQ(messages.received[0].first, VIA_LOG_WARN);
  EXPECT_TRUE(std::regex_search(messages.received[0].second, std::regex(prefix_pattern("via", "warn") + "to C code$")))
      << messages.received[0].second;
  EXPECT_NE(err.find("warn: back on stderr\n"), std::string::npos) << err;
}

// The checks below need a process of their own: VIASTACK_LOG and the rest of
// the environment are read once per process. Each runs in a child started
// afresh (the threadsafe death test style), which exits 0 when all is well and
// otherwise says on stderr what it saw.
class LogProcess : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

[[noreturn]] void exit_checked(bool ok, const std::string& what) {
  if (!ok) std::fprintf(stderr, "CHECK FAILED: %s\n", what.c_str());
  std::exit(ok ? 0 : 1);
}

TEST_F(LogProcess, VariableSetsTheLevel) {
  EXPECT_EXIT(
      {
        setenv("VIASTACK_LOG", "debug", 1);
        exit_checked(via::log::level() == Level::debug && via::log::enabled(Level::debug), "level debug");
      },
      testing::ExitedWithCode(0), "^$");
  EXPECT_EXIT(
      {
        setenv("VIASTACK_LOG", "error", 1);
        exit_checked(via::log::level() == Level::error && !via::log::enabled(Level::warn), "level error");
      },
      testing::ExitedWithCode(0), "^$");
  EXPECT_EXIT(
      {
        unsetenv("VIASTACK_LOG");
        exit_checked(via::log::level() == Level::warn && !via::log::enabled(Level::info), "default level warn");
      },
      testing::ExitedWithCode(0), "^$");
}

TEST_F(LogProcess, ABadValueIsAWarningAndTheDefault) {
  // The whole environment is checked at the first read of any variable; a bad
  // VIASTACK_LOG does not stop the program as a bad value of another would.
  EXPECT_EXIT(
      {
        setenv("VIASTACK_LOG", "loud", 1);
        const bool default_level = via::log::level() == Level::warn;
        via::config::validate_environment();
        exit_checked(default_level, "default level after a bad value");
      },
      testing::ExitedWithCode(0),
      "^viastack\\[via pid [0-9]+\\] warn: VIASTACK_LOG=loud: expected one of: error warn info debug \\(.*\\); "
      "using the default, warn\n$");
  EXPECT_EXIT(
      {
        setenv("VIASTACK_LOG", "loud", 1);
        exit_checked(via::config::text("VIASTACK_LOG") == "warn", "the reader gives the default");
      },
      testing::ExitedWithCode(0), "warn: VIASTACK_LOG=loud: expected one of");
}

TEST(LogConfig, ABadLogValueIsAFindingWarningNotAnError) {
  setenv("VIASTACK_LOG", "verbose", 1);
  const auto findings = via::config::check_environment();
  unsetenv("VIASTACK_LOG");
  EXPECT_TRUE(findings.errors.empty());
  ASSERT_EQ(findings.warnings.size(), 1u);
  EXPECT_EQ(findings.warnings[0].rfind("VIASTACK_LOG=verbose: expected one of: error warn info debug (", 0), 0u)
      << findings.warnings[0];
  EXPECT_TRUE(findings.warnings[0].ends_with("; using the default, warn")) << findings.warnings[0];
}

TEST_F(LogProcess, TheConfigurationsWarningGoesThroughTheHook) {
  EXPECT_EXIT(
      {
        setenv("VIASTACK_SPINUS", "5", 1);  // a typo: not a viastack variable
        std::vector<std::string> lines;
        via::log::set_hook([&lines](Level level, std::string_view line) {
          if (level == Level::warn) lines.emplace_back(line);
        });
        via::config::integer("VIASTACK_SPIN_US");
        exit_checked(lines.size() == 1 && std::regex_search(lines[0], std::regex("^viastack\\[via pid [0-9]+\\] warn: "
                                                                                "VIASTACK_SPINUS is set but is not a "
                                                                                "viastack variable")),
                     lines.empty() ? "no line" : lines[0]);
      },
      testing::ExitedWithCode(0), "^$");
}

TEST_F(LogProcess, BeforeTheBootstrapThePidAfterItTheRank) {
  EXPECT_EXIT(
      {
        setenv("VIASTACK_RANK", "3", 1);
        setenv("VIASTACK_SIZE", "4", 1);
        unsetenv("VIASTACK_DIRECTORY");
        std::vector<std::string> lines;
        via::log::set_hook([&lines](Level, std::string_view line) { lines.emplace_back(line); });
        VIA_LOG(warn, "via", "before");
        std::string error;
        const bool joined = via::job_bootstrap(error) != nullptr;
        VIA_LOG(warn, "utcp", "after");
        const std::string pid = std::to_string(getpid());
        exit_checked(joined && lines.size() == 2 && lines[0] == "viastack[via pid " + pid + "] warn: before" &&
                         lines[1] == "viastack[utcp rank 3] warn: after",
                     error + (lines.size() == 2 ? lines[0] + " / " + lines[1] : "lines"));
      },
      testing::ExitedWithCode(0), "^$");
}

TEST(LogLibrary, AFailedOpenOfTheNicSaysWhyThroughTheHook) {
  Collector collector(Level::warn);
  VIP_NIC_HANDLE nic = nullptr;
  EXPECT_EQ(VipOpenNic("shm:seven", &nic), VIP_INVALID_PARAMETER);
  const auto messages = collector.messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].level, Level::error);
  EXPECT_TRUE(std::regex_search(messages[0].line,
                                std::regex(prefix_pattern("via", "error") + "bad device name 'shm:seven' \\(expected "
                                                                            "shm:N\\)$")))
      << messages[0].line;
}

}  // namespace
