#include "wire.hpp"

namespace am::wire {

const char* describe(ParseError e) {
  switch (e) {
    case ParseError::none: return "no error";
    case ParseError::too_short: return "message shorter than an AM header";
    case ParseError::bad_kind: return "unknown message kind";
    case ParseError::too_many_args: return "more than 4 arguments";
    case ParseError::too_many_acks: return "more acknowledgements than one message may carry";
    case ParseError::bad_length: return "message length does not match its header";
    case ParseError::payload_too_large: return "payload larger than am_max_size()";
    case ParseError::bad_run: return "a run of requests with a payload, or longer than a bundle holds";
  }
  return "unknown parse error";
}

}  // namespace am::wire
