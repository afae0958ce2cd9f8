// Includes every public header and links with one object per public header
// (tests/headers/CMakeLists.txt): that it builds is most of the test; running
// it checks that the program that came out of them works against the library.
#include <cstdio>
#include <cstring>

#include "all_public_headers.hpp"

int main() {
  static_assert(PUBLIC_HEADER_COUNT > 0, "no public header was found");
  if (std::strcmp(via::describe(via::Result::timeout), "timed out") != 0) {
    std::printf("via::describe(timeout) is \"%s\"\n", via::describe(via::Result::timeout));
    return 1;
  }
  std::printf("%d public headers compiled alone and linked together\n", PUBLIC_HEADER_COUNT);
  return 0;
}
