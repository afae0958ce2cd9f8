// What the bootstrap implementations share: their constructors, called by
// job_bootstrap() when the environment names them, and small helpers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "via/bootstrap.hpp"

namespace via::bootstrap {

// Each opens its process manager's client or returns nullptr with the reason.
std::unique_ptr<Bootstrap> open_viarun(std::string& error);
std::unique_ptr<Bootstrap> open_pmix(std::string& error);
std::unique_ptr<Bootstrap> open_pmi1(std::string& error);
std::unique_ptr<Bootstrap> open_pmi2(std::string& error);
std::unique_ptr<Bootstrap> open_singleton(std::string& error);

// The value of a process manager's environment variable (PMI_*, PMIX_*,
// SLURM_*), nothing when unset or empty; viastack's own are read through
// via/config.hpp.
std::optional<std::string> environment(const char* name);
// A non-negative decimal number, all of `text`.
std::optional<int> parse_count(std::string_view text);


}  // namespace via::bootstrap
