// The PMI-2 client (Slurm's srun --mpi=pmi2): on PMI_FD, a PMI-1 style
// "cmd=init pmi_version=2" line, then length-prefixed "cmd=...;k=v;"
// commands (reference/mpi.md 5.2). The node map is the PMI_process_mapping
// job attribute; the job id is job-getid's.
//
// As with PMI-1, keys are scoped by the rank that puts them and keys and
// values are encoded (pmi_wire.hpp): Slurm's server has no escape for ';'.
#include "bootstrap/bootstrap_impl.hpp"
#include "bootstrap/pmi_client.hpp"

namespace via::bootstrap {
namespace {

using pmi::Message;

class Pmi2Bootstrap final : public pmi::Client {
 public:
  Pmi2Bootstrap() : Client("PMI-2") {}

  bool open(std::string& error) {
    const auto fd = environment("PMI_FD");
    if (!fd) {
      error = "PMI_FD is not set: no PMI-2 process manager started this process";
      return false;
    }
    channel_ = pmi::Channel::from_fd(*fd, error);
    if (!channel_) return false;

    std::string line, why;
    Message reply;
    if (!pmi::format_line(Message{"init"}.add("pmi_version", "2").add("pmi_subversion", "0"), line, why) ||
        !channel_->send(line, why) || !channel_->read_line(line, why) || !pmi::parse_line(line, reply, why) ||
        !pmi::check_reply(reply, "response_to_init", why)) {
      error = "PMI-2 init: " + why;
      return false;
    }
    Message fullinit{"fullinit"};
    if (const auto job = environment("PMI_JOBID")) fullinit.add("pmijobid", *job);
    if (const auto rank = environment("PMI_RANK")) fullinit.add("pmirank", *rank);
    fullinit.add("threaded", "FALSE");
    if (!request(fullinit, "fullinit-response", reply, error)) return false;
    initialized_ = true;
    const auto rank = pmi::number_field(reply, "rank", error);
    const auto size = rank ? pmi::number_field(reply, "size", error) : std::nullopt;
    if (!size) return false;
    if (*size > pmi::kMaxRanks) {
      error = "the process manager's job of " + std::to_string(*size) + " ranks is more than viastack supports";
      return false;
    }

    if (!request(Message{"job-getid"}, "job-getid-response", reply, error)) return false;
    const std::string* job = reply.find("jobid");
    if (!job || job->empty()) {
      error = "the process manager's job-getid-response names no job";
      return false;
    }
    jobid_ = *job;

    std::vector<int> node_of_rank;
    if (!request(Message{"info-getjobattr"}.add("key", "PMI_process_mapping"), "info-getjobattr-response", reply,
                 error))
      return false;
    const std::string* found = reply.find("found");
    const std::string* mapping = reply.find("value");
    if (found && *found == "TRUE" && mapping) {
      if (!pmi::parse_process_mapping(*mapping, *size, node_of_rank, error)) return false;
    } else {
      // Without a map every peer is taken as remote: slower, always right.
      for (int r = 0; r < *size; ++r) node_of_rank.push_back(r);
    }
    return set_layout(*rank, *size, std::move(node_of_rank), jobid_, error);
  }

  ~Pmi2Bootstrap() override { finalize(Message{"finalize"}, "finalize-response"); }

  const char* name() const override { return "pmi2"; }

  bool put(const std::string& key, const std::string& value, std::string& error) override {
    const std::string scoped = scoped_key(key, rank());
    const std::string encoded = pmi::encode_value(value);
    // The limits count a C string's NUL.
    if (scoped.size() >= pmi::kMaxKeyLength || encoded.size() >= pmi::kMaxValueLength) {
      error = "key '" + key + "' or its value is too long for the PMI-2 store (" + std::to_string(scoped.size()) +
              " and " + std::to_string(encoded.size()) + " bytes encoded, at most " +
              std::to_string(pmi::kMaxKeyLength - 1) + " and " + std::to_string(pmi::kMaxValueLength - 1) + ")";
      return false;
    }
    Message reply;
    return request(Message{"kvs-put"}.add("key", scoped).add("value", encoded), "kvs-put-response", reply, error);
  }

  bool fence(std::string& error) override {
    Message reply;
    return request(Message{"kvs-fence"}, "kvs-fence-response", reply, error);
  }

  bool get(int rank, const std::string& key, std::string& value, std::string& error) override {
    Message reply;
    std::string why;
    const Message ask =
        Message{"kvs-get"}.add("jobid", jobid_).add("srcid", std::to_string(rank)).add("key", scoped_key(key, rank));
    if (!request(ask, "kvs-get-response", reply, why)) {
      error = "no value '" + key + "' from rank " + std::to_string(rank) + ": " + why;
      return false;
    }
    const std::string* found = reply.find("found");
    const std::string* encoded = reply.find("value");
    if (!found || *found != "TRUE" || !encoded) {
      error = "no rank " + std::to_string(rank) + " published '" + key + "' before the last fence";
      return false;
    }
    return decode_fetched(encoded, key, rank, value, error);
  }

  [[noreturn]] void abort(int status, const std::string& message) override {
    // Slurm ends the step on an abort and sends no answer.
    std::string frame, ignored;
    if (!pmi::format_frame(Message{"abort"}.add("isworld", "TRUE").add("msg", pmi::encode_value(message)), frame,
                           ignored))
      frame.clear();
    abort_job(status, message, frame);
  }

 private:
  bool exchange(const Message& message, Message& reply, std::string& error) override {
    std::string frame, prefix, body;
    if (!pmi::format_frame(message, frame, error) || !channel_->send(frame, error) ||
        !channel_->read_exact(pmi::kLengthDigits, prefix, error))
      return false;
    const auto length = pmi::parse_length(prefix, error);
    return length && channel_->read_exact(*length, body, error) && pmi::parse_frame(body, reply, error);
  }

  std::string jobid_;
};

}  // namespace

std::unique_ptr<Bootstrap> open_pmi2(std::string& error) {
  auto b = std::make_unique<Pmi2Bootstrap>();
  if (!b->open(error)) return nullptr;
  return b;
}

}  // namespace via::bootstrap
