// The Split-C tests' check: a failed condition is reported with the rank and
// counted, and the test goes on; the job's ranks sum `failures` at the end.
#pragma once

#include <splitc/splitc.hpp>

#include <cstdio>

namespace splitc_test {
inline int failures = 0;
}  // namespace splitc_test

#define CHECK(cond)                                                                                  \
  do {                                                                                               \
    if (!(cond)) {                                                                                   \
      std::fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", MYPROC, __FILE__, __LINE__, #cond); \
      ++splitc_test::failures;                                                                       \
    }                                                                                                \
  } while (0)
