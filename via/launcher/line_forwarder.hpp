// Forwards one rank's output stream to one of viarun's own, whole lines at a
// time, so that lines of different ranks never interleave.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace viarun {

class LineForwarder {
 public:
  // An empty prefix forwards the bytes exactly as the rank wrote them.
  LineForwarder(int out_fd, std::string prefix) : out_fd_(out_fd), prefix_(std::move(prefix)) {}

  void feed(std::string_view bytes);
  // At end of stream: forwards the unterminated last line, if any.
  void finish();
  // True once writing failed, e.g. the reader of viarun's stdout went away.
  bool output_gone() const { return output_gone_; }

 private:
  void emit_lines(std::string_view complete_lines);
  void emit_unterminated(std::string_view text);
  void write(std::string_view text);

  int out_fd_;
  std::string prefix_;
  std::string partial_line_;
  bool output_gone_ = false;
};

}  // namespace viarun
