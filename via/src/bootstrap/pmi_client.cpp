#include "bootstrap/pmi_client.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "via/log.hpp"

namespace via::bootstrap::pmi {

bool Client::request(const Message& message, std::string_view expected, Message& reply, std::string& error) {
  std::lock_guard guard(mutex_);
  std::string why;
  reply = Message{};
  if (exchange(message, reply, why) && check_reply(reply, expected, why)) return true;
  error = protocol_;
  error += ' ';
  error += message.command;
  error += ": ";
  error += why;
  return false;
}

void Client::finalize(const Message& finalize, std::string_view expected) {
  std::lock_guard guard(mutex_);
  Message reply;
  std::string ignored;
  if (initialized_ && owner_ == getpid() && exchange(finalize, reply, ignored)) check_reply(reply, expected, ignored);
}

void Client::abort_job(int status, const std::string& message, const std::string& abort_bytes) {
  VIA_LOG(error, "via", "%s", message.c_str());
  // The launcher forwards this rank's output; the job it is about to end
  // must not take the message with it.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    std::lock_guard guard(mutex_);
    std::string ignored;
    if (channel_ && !abort_bytes.empty() && channel_->send(abort_bytes, ignored)) channel_->wait_for_close(std::chrono::seconds(10));
  }
  std::_Exit(status ? status : 1);
}

std::string Client::scoped_key(const std::string& key, int rank) {
  std::string scoped = encode_key(key);
  scoped += '-';
  scoped += std::to_string(rank);
  return scoped;
}

bool Client::decode_fetched(const std::string* encoded, const std::string& key, int rank, std::string& value,
                            std::string& error) {
  auto decoded = encoded ? decode_value(*encoded) : std::nullopt;
  if (!decoded) {
    error = "the value '" + key + "' from rank " + std::to_string(rank) + " is not one viastack wrote";
    return false;
  }
  value = std::move(*decoded);
  return true;
}

}  // namespace via::bootstrap::pmi
