// The PMI-1 client (MPICH's Hydra, mpiexec.hydra): the "simple" line
// protocol on PMI_FD, or on a TCP connection to PMI_PORT with PMI_ID
// (mpiexec -pmi-port). reference/mpi.md 5.1 has the exchange.
//
// Keys are scoped by the rank that puts them ("<key>-<rank>"), and keys and
// values are encoded (pmi_wire.hpp) so that any printable value passes.
#include <algorithm>

#include "bootstrap/bootstrap_impl.hpp"
#include "bootstrap/pmi_client.hpp"

namespace via::bootstrap {
namespace {

using pmi::Message;

class Pmi1Bootstrap final : public pmi::Client {
 public:
  Pmi1Bootstrap() : Client("PMI-1") {}

  bool open(std::string& error) {
    int rank = 0, size = 0;
    if (const auto fd = environment("PMI_FD")) {
      channel_ = pmi::Channel::from_fd(*fd, error);
      if (!channel_) return false;
      const auto rank_text = environment("PMI_RANK"), size_text = environment("PMI_SIZE");
      const auto r = rank_text ? parse_count(*rank_text) : std::nullopt;
      const auto s = size_text ? parse_count(*size_text) : std::nullopt;
      if (!r || !s) {
        error = "PMI_RANK/PMI_SIZE ('" + rank_text.value_or("") + "', '" + size_text.value_or("") +
                "') are not numbers";
        return false;
      }
      rank = *r;
      size = *s;
      if (size > pmi::kMaxRanks) {
        error = "PMI_SIZE=" + *size_text + " is more ranks than viastack supports";
        return false;
      }
    } else if (const auto port = environment("PMI_PORT")) {
      channel_ = pmi::Channel::connect(*port, error);
      if (!channel_ || !handshake(rank, size, error)) return false;
    } else {
      error = "neither PMI_FD nor PMI_PORT is set: no PMI-1 process manager started this process";
      return false;
    }

    Message reply;
    if (!request(Message{"init"}.add("pmi_version", "1").add("pmi_subversion", "1"), "response_to_init", reply,
                 error))
      return false;
    initialized_ = true;
    if (!request(Message{"get_maxes"}, "maxes", reply, error)) return false;
    const auto key_max = pmi::number_field(reply, "keylen_max", error);
    const auto value_max = key_max ? pmi::number_field(reply, "vallen_max", error) : std::nullopt;
    if (!value_max) return false;
    // The limits count a C string's NUL.
    key_max_ = std::min<std::size_t>(std::size_t(std::max(*key_max, 1)), pmi::kMaxKeyLength) - 1;
    value_max_ = std::min<std::size_t>(std::size_t(std::max(*value_max, 1)), pmi::kMaxValueLength) - 1;
    if (!request(Message{"get_my_kvsname"}, "my_kvsname", reply, error)) return false;
    const std::string* kvsname = reply.find("kvsname");
    if (!kvsname || kvsname->empty()) {
      error = "the process manager's my_kvsname names no KVS";
      return false;
    }
    kvsname_ = *kvsname;

    std::vector<int> node_of_rank;
    if (!node_map(size, node_of_rank, error)) return false;
    return set_layout(rank, size, std::move(node_of_rank), kvsname_, error);
  }

  ~Pmi1Bootstrap() override { finalize(Message{"finalize"}, "finalize_ack"); }

  const char* name() const override { return "pmi1"; }

  bool put(const std::string& key, const std::string& value, std::string& error) override {
    const std::string scoped = scoped_key(key, rank());
    const std::string encoded = pmi::encode_value(value);
    if (!check_lengths(key, scoped, encoded, error)) return false;
    Message reply;
    return request(Message{"put"}.add("kvsname", kvsname_).add("key", scoped).add("value", encoded), "put_result",
                   reply, error);
  }

  bool fence(std::string& error) override {
    Message reply;
    return request(Message{"barrier_in"}, "barrier_out", reply, error);
  }

  bool get(int rank, const std::string& key, std::string& value, std::string& error) override {
    Message reply;
    std::string why;
    if (!request(Message{"get"}.add("kvsname", kvsname_).add("key", scoped_key(key, rank)), "get_result", reply,
                 why)) {
      error = "no value '" + key + "' from rank " + std::to_string(rank) + ": " + why;
      return false;
    }
    return decode_fetched(reply.find("value"), key, rank, value, error);
  }

  [[noreturn]] void abort(int status, const std::string& message) override {
    std::string line, ignored;
    if (!pmi::format_line(Message{"abort"}.add("exitcode", std::to_string(status)), line, ignored)) line.clear();
    abort_job(status, message, line);
  }

 private:
  // With PMI_PORT the server tells the rank and size after an initack.
  bool handshake(int& rank, int& size, std::string& error) {
    const auto id = environment("PMI_ID");
    if (!id) {
      error = "PMI_PORT is set but PMI_ID is not";
      return false;
    }
    std::string line;
    Message reply;
    if (!pmi::format_line(Message{"initack"}.add("pmiid", *id), line, error) || !channel_->send(line, error) ||
        !read(reply, error) || !pmi::check_reply(reply, "initack", error))
      return false;
    std::optional<int> r, s;
    for (int i = 0; i < 3; ++i) {  // set size=, set rank=, set debug=
      if (!read(reply, error) || !pmi::check_reply(reply, "set", error)) return false;
      if (reply.find("size")) s = pmi::number_field(reply, "size", error);
      if (reply.find("rank")) r = pmi::number_field(reply, "rank", error);
    }
    if (!r || !s || *s > pmi::kMaxRanks) {
      error = "the process manager's initack did not give both rank and size";
      return false;
    }
    rank = *r;
    size = *s;
    return true;
  }

  bool node_map(int size, std::vector<int>& node_of_rank, std::string& error) {
    Message reply;
    std::string missing;
    if (!request(Message{"get"}.add("kvsname", kvsname_).add("key", "PMI_process_mapping"), "get_result", reply,
                 missing)) {
      if (reply.command != "get_result") {
        error = missing;
        return false;
      }
      // Without a map, a rank cannot know who shares its node: every peer is
      // taken as remote, which is slower but always right.
      node_of_rank.resize(std::size_t(size));
      for (int r = 0; r < size; ++r) node_of_rank[std::size_t(r)] = r;
      return true;
    }
    const std::string* mapping = reply.find("value");
    return pmi::parse_process_mapping(mapping ? *mapping : "", size, node_of_rank, error);
  }

  bool check_lengths(const std::string& key, const std::string& scoped, const std::string& encoded,
                     std::string& error) const {
    if (scoped.size() > key_max_) {
      error = "key '" + key + "' is too long for the PMI-1 store (" + std::to_string(scoped.size()) +
              " bytes encoded, at most " + std::to_string(key_max_) + ")";
      return false;
    }
    if (encoded.size() > value_max_) {
      error = "the value of '" + key + "' is too long for the PMI-1 store (" + std::to_string(encoded.size()) +
              " bytes encoded, at most " + std::to_string(value_max_) + ")";
      return false;
    }
    return true;
  }

  bool read(Message& reply, std::string& error) {
    std::string line;
    return channel_->read_line(line, error) && pmi::parse_line(line, reply, error);
  }

  bool exchange(const Message& message, Message& reply, std::string& error) override {
    std::string line;
    return pmi::format_line(message, line, error) && channel_->send(line, error) && read(reply, error);
  }

  std::string kvsname_;
  std::size_t key_max_ = 0, value_max_ = 0;
};

}  // namespace

std::unique_ptr<Bootstrap> open_pmi1(std::string& error) {
  auto b = std::make_unique<Pmi1Bootstrap>();
  if (!b->open(error)) return nullptr;
  return b;
}

}  // namespace via::bootstrap
