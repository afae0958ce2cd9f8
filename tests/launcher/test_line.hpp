// The lines that viarun_test_rank prints in "lines" mode, so that the test can
// check every forwarded line byte for byte.
#pragma once

#include <string>

namespace viarun_test {

// Line `index` of `rank`, `length` bytes including the newline.
inline std::string test_line(int rank, int index, int length) {
  std::string line = "rank " + std::to_string(rank) + " line " + std::to_string(index) + " ";
  char filler = static_cast<char>('a' + (rank * 7 + index) % 26);
  if (static_cast<int>(line.size()) < length - 1) line.append(length - 1 - line.size(), filler);
  line += '\n';
  return line;
}

}  // namespace viarun_test
