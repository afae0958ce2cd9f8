// Test support for the tcp provider: a job key and a job directory for this
// process, as viarun gives its ranks, so that tcp NICs opened here find each
// other by rank. Needs Asio (link the test against `test_support_tcp`).
#pragma once

#include <cstdlib>

#include "providers/tcp/directory.hpp"

namespace testing_support {

inline void use_job_directory() {
  static const via::tcp::JobKey key = via::tcp::random_key();
  static via::tcp::DirectoryServer directory(key, asio::ip::address_v4::loopback());
  setenv("VIASTACK_JOB_KEY", via::tcp::key_to_hex(key).c_str(), 1);
  setenv("VIASTACK_DIRECTORY", directory.address().c_str(), 1);
}

}  // namespace testing_support
