// The configuration table and its typed parser (via/config.hpp): what each
// type accepts and refuses, how a bad value stops the program, and that the
// README's table and viarun --info list exactly the declared variables.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "via/config.hpp"

namespace {

using via::config::Type;
using via::config::Variable;

const Variable& declared(const char* name) {
  const Variable* variable = via::config::find(name);
  if (!variable) throw std::logic_error(std::string(name) + " is not declared");
  return *variable;
}

bool valid(const char* name, const std::string& value) { return via::config::valid(declared(name), value); }

// Sets a variable for one test, and restores it after.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    setenv(name, value, 1);
  }
  ~ScopedVariable() {
    if (saved_)
      setenv(name_, saved_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

TEST(ConfigParser, IntegersWithinTheirRange) {
  // VIASTACK_SPIN_US: 0 to 10000000.
  for (const char* good : {"0", "1", "20", "10000000"}) EXPECT_TRUE(valid("VIASTACK_SPIN_US", good)) << good;
  for (const char* bad : {"-1", "10000001", "-0x1", "0x10", "+5", " 5", "5 ", "5x", "20us", "1e3", "1.5", "-",
                          "99999999999999999999", "-99999999999999999999", "9223372036854775808",
                          "18446744073709551615"})
    EXPECT_FALSE(valid("VIASTACK_SPIN_US", bad)) << bad;
  // A range that does not start at 0.
  EXPECT_FALSE(valid("VIASTACK_AM_DEPTH", "0"));
  EXPECT_TRUE(valid("VIASTACK_AM_DEPTH", "1"));
  EXPECT_TRUE(valid("VIASTACK_AM_DEPTH", "1024"));
  EXPECT_FALSE(valid("VIASTACK_AM_DEPTH", "1025"));
  EXPECT_TRUE(valid("VIASTACK_TCP_PORT", "65535"));
  EXPECT_FALSE(valid("VIASTACK_TCP_PORT", "65536"));
  EXPECT_FALSE(valid("VIASTACK_TCP_PORT", "-1"));
}

TEST(ConfigParser, BooleansWordsAndDecimals) {
  EXPECT_TRUE(valid("VIASTACK_SHM_CMA", "0"));
  EXPECT_TRUE(valid("VIASTACK_SHM_CMA", "1"));
  for (const char* bad : {"yes", "no", "true", "2", "01", "-1", " 1"})
    EXPECT_FALSE(valid("VIASTACK_SHM_CMA", bad)) << bad;

  for (const char* good : {"viarun", "pmix", "pmi1", "pmi2", "singleton"})
    EXPECT_TRUE(valid("VIASTACK_BOOTSTRAP", good)) << good;
  for (const char* bad : {"PMIX", "pmi", "pmi12", "pmi1|pmi2", "slurm", " pmix"})
    EXPECT_FALSE(valid("VIASTACK_BOOTSTRAP", bad)) << bad;

  for (const char* good : {"0.3", "1", "2.5", "1e9"}) EXPECT_TRUE(valid("VIASTACK_TIMEOUT", good)) << good;
  for (const char* bad : {"0", "-1", "1e10", "inf", "nan", "soon", "1s", ".", "1,5"})
    EXPECT_FALSE(valid("VIASTACK_TIMEOUT", bad)) << bad;
}

TEST(ConfigParser, AddressesKeysAndPlans) {
  EXPECT_TRUE(valid("VIASTACK_TCP_ADDRESS", "10.1.2.3"));
  for (const char* bad : {"10.1.2", "10.1.2.256", "localhost", "::1", "10.1.2.3:80"})
    EXPECT_FALSE(valid("VIASTACK_TCP_ADDRESS", bad)) << bad;

  EXPECT_TRUE(valid("VIASTACK_DIRECTORY", "127.0.0.1:4000"));
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:-1", ":80",
                          "127.0.0.1:80x", "host:80"})
    EXPECT_FALSE(valid("VIASTACK_DIRECTORY", bad)) << bad;

  EXPECT_TRUE(valid("VIASTACK_UTCP_NETWORK", "10.0.0.0/16"));
  EXPECT_TRUE(valid("VIASTACK_UTCP_NETWORK", "192.168.4.0/24"));
  for (const char* bad : {"10.0.0.1/16", "10.0.0.0/31", "10.0.0.0/7", "10.0.0.0/", "10.0.0.0/-8", "10.0.0.0"})
    EXPECT_FALSE(valid("VIASTACK_UTCP_NETWORK", bad)) << bad;

  const std::string key(64, 'a');
  EXPECT_TRUE(valid("VIASTACK_JOB_KEY", key));
  EXPECT_TRUE(valid("VIASTACK_JOB_KEY", std::string(32, 'F') + std::string(32, '0')));
  EXPECT_FALSE(valid("VIASTACK_JOB_KEY", key.substr(1)));
  EXPECT_FALSE(valid("VIASTACK_JOB_KEY", key + "0"));
  EXPECT_FALSE(valid("VIASTACK_JOB_KEY", "g" + key.substr(1)));

  EXPECT_TRUE(valid("VIASTACK_FAULTS", "drop=0.01,dup=0.02,seed=3"));
  EXPECT_FALSE(valid("VIASTACK_FAULTS", "drop=lots"));
  EXPECT_FALSE(valid("VIASTACK_FAULTS", "loss=0.1"));
}

TEST(ConfigParser, TheLineNamesTheVariableItsValueAndWhatIsExpected) {
  EXPECT_EQ(via::config::bad_value_line(declared("VIASTACK_SPIN_US"), "-1"),
            "VIASTACK_SPIN_US=-1: expected an integer from 0 to 10000000 microseconds (how long a wait spins before "
            "it yields)");
  EXPECT_EQ(via::config::bad_value_line(declared("VIASTACK_BOOTSTRAP"), "slurm").rfind(
                "VIASTACK_BOOTSTRAP=slurm: expected one of: viarun pmix pmi1 pmi2 singleton (", 0),
            0u);
  // A secret is not shown; a value stays on one line and is cut when long.
  const std::string key_line = via::config::bad_value_line(declared("VIASTACK_JOB_KEY"), "secret-value");
  EXPECT_EQ(key_line.find("secret-value"), std::string::npos) << key_line;
  EXPECT_NE(key_line.find("<12 characters, not shown>"), std::string::npos) << key_line;
  const std::string multi_line = via::config::bad_value_line(declared("VIASTACK_SPIN_US"), "1\n2\r3");
  EXPECT_EQ(multi_line.find_first_of("\n\r"), std::string::npos) << multi_line;
  const std::string long_line = via::config::bad_value_line(declared("VIASTACK_SPIN_US"), std::string(5000, '9'));
  EXPECT_LT(long_line.size(), 400u);
  EXPECT_NE(long_line.find("(5000 characters)"), std::string::npos);
}

TEST(ConfigReaders, ValueDefaultAndEmpty) {
  {
    ScopedVariable spin("VIASTACK_SPIN_US", "7");
    EXPECT_EQ(via::config::integer("VIASTACK_SPIN_US"), 7);
    EXPECT_EQ(via::config::integer_if_set("VIASTACK_SPIN_US"), 7);
  }
  {
    // An empty value counts as unset.
    ScopedVariable spin("VIASTACK_SPIN_US", "");
    EXPECT_EQ(via::config::integer("VIASTACK_SPIN_US"), 20);
    EXPECT_EQ(via::config::integer_if_set("VIASTACK_SPIN_US"), std::nullopt);
  }
  unsetenv("VIASTACK_SHM_CMA");
  EXPECT_TRUE(via::config::boolean("VIASTACK_SHM_CMA"));
  {
    ScopedVariable cma("VIASTACK_SHM_CMA", "0");
    EXPECT_FALSE(via::config::boolean("VIASTACK_SHM_CMA"));
  }
  unsetenv("VIASTACK_AM_RELIABILITY");
  EXPECT_EQ(via::config::text("VIASTACK_AM_RELIABILITY"), "reliable");
  unsetenv("VIASTACK_TCP_ADDRESS");
  EXPECT_EQ(via::config::text_if_set("VIASTACK_TCP_ADDRESS"), std::nullopt);
  {
    ScopedVariable timeout("VIASTACK_TIMEOUT", "0.25");
    EXPECT_EQ(via::config::decimal_if_set("VIASTACK_TIMEOUT"), 0.25);
  }
}

TEST(ConfigReadersDeathTest, ABadValueStopsTheProgramWithOneLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("VIASTACK_SPIN_US", "-1", 1);
        via::config::integer("VIASTACK_SPIN_US");
      },
      ::testing::ExitedWithCode(1),
      "^viastack\\[via pid [0-9]+\\] error: VIASTACK_SPIN_US=-1: expected an integer from 0 to 10000000 "
      "microseconds \\(how long a wait spins before it yields\\)\n$");
  EXPECT_EXIT(
      {
        setenv("VIASTACK_TCP_AUTH_TIMEOUT_MS", "99999999999999999999", 1);
        via::config::integer("VIASTACK_TCP_AUTH_TIMEOUT_MS");
      },
      ::testing::ExitedWithCode(1),
      "^viastack\\[via pid [0-9]+\\] error: VIASTACK_TCP_AUTH_TIMEOUT_MS=99999999999999999999: expected an integer");
}

TEST(ConfigReadersDeathTest, EveryVariableIsCheckedAtTheFirstRead) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Reading a good variable stops the program for the bad ones it never
  // reads: one line for each.
  const auto read_a_good_one = [] {
    setenv("VIASTACK_AM_DEPTH", "0", 1);
    setenv("VIASTACK_MPI_EAGER_LIMIT", "huge", 1);
    via::config::integer("VIASTACK_SPIN_US");
  };
  EXPECT_EXIT(read_a_good_one(), ::testing::ExitedWithCode(1),
              "viastack\\[via pid [0-9]+\\] error: VIASTACK_AM_DEPTH=0: expected an integer from 1 to 1024 "
              "\\(outstanding requests per peer\\)\n");
  EXPECT_EXIT(read_a_good_one(), ::testing::ExitedWithCode(1),
              "viastack\\[via pid [0-9]+\\] error: VIASTACK_MPI_EAGER_LIMIT=huge: expected an integer from 64 to "
              "61440 bytes");
}

TEST(ConfigEnvironment, AnUndeclaredVariableIsAWarning) {
  ScopedVariable typo("VIASTACK_SPIN_USS", "5");
  const auto findings = via::config::check_environment();
  ASSERT_EQ(findings.warnings.size(), 1u);
  EXPECT_EQ(findings.warnings[0].rfind("VIASTACK_SPIN_USS is set but is not a viastack variable", 0), 0u);
  EXPECT_TRUE(findings.errors.empty());
}

TEST(ConfigTable, EveryDeclarationIsWhole) {
  std::set<std::string> names;
  for (const Variable& variable : via::config::variables()) {
    const std::string name(variable.name);
    SCOPED_TRACE(name);
    EXPECT_TRUE(name.starts_with("VIASTACK_"));
    EXPECT_TRUE(names.insert(name).second) << "declared twice";
    EXPECT_FALSE(variable.meaning.empty());
    EXPECT_FALSE(variable.layer.empty());
    if (variable.type == Type::integer) {
      EXPECT_LE(variable.min, variable.max);
    }
    if (variable.type == Type::word) {
      EXPECT_FALSE(variable.words.empty());
    }
    if (variable.default_value != "-") {
      EXPECT_TRUE(via::config::valid(variable, variable.default_value)) << "default " << variable.default_value;
    }
  }
  // The three that issue 19 found missing from the README.
  for (const char* name : {"VIASTACK_TIMEOUT", "VIASTACK_PMI_TIMEOUT", "VIASTACK_LAUNCHER"})
    EXPECT_TRUE(names.contains(name)) << name;
}

std::set<std::string> declared_names() {
  std::set<std::string> names;
  for (const Variable& variable : via::config::variables()) names.emplace(variable.name);
  return names;
}

// The names in README.md's "### Environment" table.
std::set<std::string> readme_names() {
  std::ifstream readme(VIASTACK_README);
  std::set<std::string> names;
  bool in_section = false;
  const std::regex name("VIASTACK_[A-Z0-9_]+");
  for (std::string line; std::getline(readme, line);) {
    if (line.starts_with("#")) in_section = line == "### Environment";
    if (!in_section || !line.starts_with("|")) continue;
    for (auto match = std::sregex_iterator(line.begin(), line.end(), name); match != std::sregex_iterator(); ++match)
      names.insert(match->str());
  }
  return names;
}

TEST(ConfigTable, TheReadmeTableListsExactlyTheDeclaredVariables) {
  const std::set<std::string> declared = declared_names(), readme = readme_names();
  for (const std::string& name : declared) EXPECT_TRUE(readme.contains(name)) << name << " is not in README.md";
  for (const std::string& name : readme) EXPECT_TRUE(declared.contains(name)) << name << " is not declared";
}

TEST(ConfigTable, ViarunInfoListsEveryVariableOnceWithItsDefault) {
  FILE* pipe = popen(VIARUN_PATH " --info", "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0) << out;
  std::map<std::string, std::string> default_of;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name, default_value;
    fields >> name >> default_value;
    if (!name.starts_with("VIASTACK_")) continue;
    EXPECT_FALSE(default_of.contains(name)) << "listed twice: " << name;
    default_of[name] = default_value;
  }
  EXPECT_EQ(default_of.size(), via::config::variables().size()) << out;
  for (const Variable& variable : via::config::variables()) {
    const std::string name(variable.name);
    ASSERT_TRUE(default_of.contains(name)) << name << " missing from:\n" << out;
    EXPECT_EQ(default_of[name], variable.default_value) << name;
  }
}

}  // namespace
