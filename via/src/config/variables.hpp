// The table behind via/config.hpp.
#pragma once

#include <vector>

#include "via/config.hpp"

namespace via::config {

const std::vector<Variable>& declarations();

}  // namespace via::config
