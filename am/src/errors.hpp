// AM's error model: a call returns a Status, and the text of the last error
// (am_last_error) says what went wrong.
#pragma once

#include <string>

#include "am/am.hpp"

namespace am::detail {

// Records `why` as the last error and returns `s`. Cold: the paths that
// call it leave the way of the calls that succeed.
[[gnu::cold]] Status error(Status s, std::string why);
const char* last_error_message();

}  // namespace am::detail
