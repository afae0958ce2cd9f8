// What the PMI-1 and PMI-2 clients share: the channel, one request at a time
// under a lock, finalizing when the process exits, aborting the job, and the
// rank-scoped, encoded keys and values. They differ in their wire format
// (exchange) and their command names.
#pragma once

#include <unistd.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "bootstrap/pmi_channel.hpp"
#include "bootstrap/pmi_wire.hpp"
#include "via/bootstrap.hpp"

namespace via::bootstrap::pmi {

class Client : public Bootstrap {
 public:
  // "PMI-1", "PMI-2": names the protocol in error messages.
  explicit Client(const char* protocol) : protocol_(protocol) {}

  std::string reachable_address() override { return channel_ ? channel_->local_address() : std::string(); }

 protected:
  // Sends one message and reads the reply, in the protocol's wire format.
  virtual bool exchange(const Message& message, Message& reply, std::string& error) = 0;

  // Sends one request and reads its reply, named `expected`, with rc 0;
  // otherwise the error names the protocol and the command.
  bool request(const Message& message, std::string_view expected, Message& reply, std::string& error);

  // For the destructor of each client (a base destructor cannot call
  // exchange): says `finalize` when the process exits, not in a forked child,
  // whose parent still speaks on this connection. A server that is gone ends
  // it at once.
  void finalize(const Message& finalize, std::string_view expected);

  // Prints the message, sends `abort_bytes` (the protocol's abort command,
  // formatted) and gives the process manager time to end this process, as it
  // does when it ends the job; then exits.
  [[noreturn]] void abort_job(int status, const std::string& message, const std::string& abort_bytes);

  // Keys are scoped by the rank that puts them, "<encoded key>-<rank>".
  static std::string scoped_key(const std::string& key, int rank);
  // Decodes a value `rank` published under `key`; false with the reason if
  // there is none or viastack did not write it.
  static bool decode_fetched(const std::string* encoded, const std::string& key, int rank, std::string& value,
                             std::string& error);

  std::unique_ptr<Channel> channel_;
  bool initialized_ = false;  // init succeeded: finalize is owed

 private:
  const char* protocol_;
  std::mutex mutex_;
  const pid_t owner_ = getpid();
};

}  // namespace via::bootstrap::pmi
