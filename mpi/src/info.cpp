#include "info.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "errors.hpp"
#include "runtime.hpp"

namespace viastack::mpi {

namespace {

// The standard's suggested MPI_INFO_ENV keys that this process can tell (MPI 3.1, 8.7.2).
Hints environment() {
  Hints env;
  std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string arg; std::getline(cmdline, arg, '\0');) args.push_back(arg);
  if (!args.empty()) {
    env.emplace_back("command", args.front());
    std::string rest;
    for (std::size_t i = 1; i < args.size(); ++i) rest += (i > 1 ? " " : "") + args[i];
    env.emplace_back("argv", rest);
  }
  if (life_stage() == LifeStage::running) env.emplace_back("maxprocs", std::to_string(runtime().world_size()));
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) env.emplace_back("host", host);
  utsname names;
  if (uname(&names) == 0) env.emplace_back("arch", names.machine);
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd)) env.emplace_back("wdir", cwd);
  env.emplace_back("thread_level", "MPI_THREAD_SERIALIZED");
  for (auto& [key, value] : env) value.resize(std::min<std::size_t>(value.size(), MPI_MAX_INFO_VAL));
  return env;
}

const Info& environment_info() {
  static const Info env(environment());
  return env;
}

}  // namespace

void check_info_key(const char* key) {
  require(key != nullptr, MPI_ERR_INFO_KEY, "null key");
  const std::size_t length = strnlen(key, MPI_MAX_INFO_KEY + 1);
  require(length > 0, MPI_ERR_INFO_KEY, "empty key");
  require(length <= MPI_MAX_INFO_KEY, MPI_ERR_INFO_KEY, "the key is longer than MPI_MAX_INFO_KEY characters");
}

void Info::set(const char* key, const char* value) {
  check_info_key(key);
  require(value != nullptr, MPI_ERR_INFO_VALUE, "null value");
  const std::size_t length = strnlen(value, MPI_MAX_INFO_VAL + 1);
  require(length > 0, MPI_ERR_INFO_VALUE, "empty value");
  require(length <= MPI_MAX_INFO_VAL, MPI_ERR_INFO_VALUE, "the value is longer than MPI_MAX_INFO_VAL characters");
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == key; });
  if (it != entries_.end())
    it->second = value;
  else
    entries_.emplace_back(key, value);
}

const std::string* Info::find(const char* key) const {
  check_info_key(key);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == key; });
  return it == entries_.end() ? nullptr : &it->second;
}

void Info::erase(const char* key) {
  check_info_key(key);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e.first == key; });
  require(it != entries_.end(), MPI_ERR_INFO_NOKEY, "no such key");
  entries_.erase(it);
}

const Info& info_of(MPI_Info handle) {
  if (handle == MPI_INFO_ENV) return environment_info();
  require(handle != nullptr && handle != MPI_INFO_NULL && handle->kind == HandleKind::info, MPI_ERR_INFO,
          "invalid info (MPI_INFO_NULL, freed, or not an info)");
  return *static_cast<const Info*>(handle);
}

Info& mutable_info_of(MPI_Info handle) {
  require(handle != MPI_INFO_ENV, MPI_ERR_INFO, "MPI_INFO_ENV cannot be changed or freed");
  return const_cast<Info&>(info_of(handle));
}

Hints hints_of(MPI_Info handle) { return handle == MPI_INFO_NULL ? Hints{} : info_of(handle).entries(); }

Hints updated_hints(Hints kept, const Info& info) {
  for (const auto& [key, value] : info.entries()) {
    auto it = std::find_if(kept.begin(), kept.end(), [&](const auto& e) { return e.first == key; });
    if (it != kept.end())
      it->second = value;
    else
      kept.emplace_back(key, value);
  }
  return kept;
}

}  // namespace viastack::mpi
