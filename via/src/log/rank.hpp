// What the log needs from the bootstrap: this process's rank, for the prefix
// of every line once it is known.
#pragma once

namespace via::log {

// This process's rank in its job; a forked child shows its pid again until
// its own bootstrap sets its rank.
void set_rank(int rank);

}  // namespace via::log
