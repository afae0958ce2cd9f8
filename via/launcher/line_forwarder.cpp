#include "line_forwarder.hpp"

#include "posix_io.hpp"

namespace viarun {
namespace {

// A line longer than this is forwarded in pieces, so that a rank writing
// without newlines cannot make viarun hold unbounded memory.
constexpr size_t kMaxHeldLine = 1 << 20;

}  // namespace

void LineForwarder::feed(std::string_view bytes) {
  partial_line_.append(bytes);
  size_t last_newline = partial_line_.rfind('\n');
  if (last_newline != std::string::npos) {
    emit_lines(std::string_view(partial_line_).substr(0, last_newline + 1));
    partial_line_.erase(0, last_newline + 1);
  }
  if (partial_line_.size() >= kMaxHeldLine) {
    emit_unterminated(partial_line_);
    partial_line_.clear();
  }
}

void LineForwarder::finish() {
  if (!partial_line_.empty()) emit_unterminated(partial_line_);
  partial_line_.clear();
}

void LineForwarder::emit_lines(std::string_view complete_lines) {
  if (prefix_.empty()) {
    write(complete_lines);
    return;
  }
  std::string tagged;
  tagged.reserve(complete_lines.size() + prefix_.size() * 16);
  while (!complete_lines.empty()) {
    size_t line_end = complete_lines.find('\n') + 1;
    tagged += prefix_;
    tagged += complete_lines.substr(0, line_end);
    complete_lines.remove_prefix(line_end);
  }
  write(tagged);
}

// Untagged output stays byte-exact; tagged output ends the piece with a
// newline so that every line viarun prints starts with its rank's tag.
void LineForwarder::emit_unterminated(std::string_view text) {
  if (prefix_.empty()) {
    write(text);
  } else {
    write(prefix_ + std::string(text) + '\n');
  }
}

void LineForwarder::write(std::string_view text) {
  if (!output_gone_ && !write_all(out_fd_, text)) output_gone_ = true;
}

}  // namespace viarun
