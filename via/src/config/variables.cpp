// The declaration of every VIASTACK_* environment variable viastack reads.
// README.md's "### Environment" table lists the same names (config_test
// checks), and viarun --info prints this table.
#include "config/variables.hpp"

namespace via::config {

namespace {

constexpr std::int64_t kRanks = 1 << 20;  // more than any job viarun or a process manager starts
constexpr std::int64_t kTiB = std::int64_t(1) << 40;
constexpr std::int64_t kDayMs = 24 * 3600 * 1000;

Variable integer_variable(std::string_view name, std::int64_t min, std::int64_t max, std::string_view unit,
                          std::string_view default_value, std::string_view layer, std::string_view meaning) {
  return {name, Type::integer, default_value, layer, meaning, min, max, unit, {}};
}

Variable typed(std::string_view name, Type type, std::string_view default_value, std::string_view layer,
               std::string_view meaning) {
  return {name, type, default_value, layer, meaning, 0, 0, {}, {}};
}

Variable word_variable(std::string_view name, std::string_view words, std::string_view default_value,
                       std::string_view layer, std::string_view meaning) {
  return {name, Type::word, default_value, layer, meaning, 0, 0, {}, words};
}

Variable warning_only(Variable variable) {
  variable.bad_value_warns = true;
  return variable;
}

}  // namespace

const std::vector<Variable>& declarations() {
  static const std::vector<Variable> table = {
      // Choosing the provider and the process manager.
      // Any name: the engine checks it against the providers registered, a plugin's included.
      typed("VIASTACK_PROVIDER", Type::text, "auto", "via, viarun, benchmarks",
            "the VIA provider: shm on one machine, tcp anywhere, mixed for shm within a node and tcp between "
            "nodes, auto for mixed when the job spans nodes, else shm, or one VIASTACK_PROVIDER_PLUGIN registers; "
            "viarun starts ranks on shm unless told"),
      typed("VIASTACK_PROVIDER_PLUGIN", Type::text, "-", "via, viarun",
            "a shared library loaded before the first NIC opens, whose static initializers register providers "
            "(via::register_provider) that VIASTACK_PROVIDER may then name"),
      word_variable("VIASTACK_BOOTSTRAP", "viarun|pmix|pmi1|pmi2|singleton", "-", "via",
                    "where a process learns its place in the job; unset: told by the variables its launcher set"),
      // The log (via/log.hpp).
      warning_only(word_variable("VIASTACK_LOG", "error|warn|info|debug", "warn", "via, mpi, utcp",
                                 "the most detailed level of message the libraries write, to stderr or to the "
                                 "program's hook; a bad value warns and the default applies")),
      // The engine and the shm provider.
      typed("VIASTACK_SHM_CMA", Type::boolean, "1", "via",
            "1: single-copy transfers through Linux CMA where available; 0: all data through the rings"),
      integer_variable("VIASTACK_DIRECT_THRESHOLD", 0, kTiB, "bytes", "16777216", "via",
                       "sends and RDMA of at least this many bytes use CMA when available"),
      integer_variable("VIASTACK_DIRECT_READ_THRESHOLD", 0, kTiB, "bytes", "16777216", "via",
                       "RDMA reads of at least this many bytes (or of VIASTACK_DIRECT_THRESHOLD, if lower) use CMA "
                       "when available; smaller ones from VIASTACK_ADAPTIVE_READ_MIN go the way measured faster, the rest "
                       "through the rings, served by the target's engine"),
      integer_variable("VIASTACK_ADAPTIVE_READ_MIN", 0, kTiB, "bytes", "65536", "via",
                       "RDMA reads from this many bytes up to VIASTACK_DIRECT_READ_THRESHOLD go through the rings or "
                       "by CMA, whichever this process measured faster for reads of their size (4 in every 64 the other "
                       "way, to see a change), from 256 KiB by CMA where reads go both ways; at or above that threshold, never; unset: the default, but 1 MiB where ranks "
                       "outnumber the job's CPUs on the host"),
      integer_variable("VIASTACK_READ_TAKEOVER_US", 0, 1000000, "microseconds", "20", "via",
                       "an RDMA read through the rings whose target's engine has been quiet this long (8 times as "
                       "long once it sent a part; its process computing elsewhere) is copied by the reader with CMA "
                       "when available, past the parts the target committed; 0: the reader always waits for the target"),
      integer_variable("VIASTACK_DIRECT_READ_SHARE", 0, 90, "percent", "50", "via",
                       "the share of such a CMA read offered to the target's engine to write itself while the reader "
                       "copies the rest (whichever end claims it first copies it); 0: the reader copies it all"),
      typed("VIASTACK_FAULTS", Type::fault_plan, "-", "via",
            "injected loss, duplication, reordering and delay of data frames on unreliable VIs, reproducible "
            "from the seed"),
      integer_variable("VIASTACK_SPIN_US", 0, 10'000'000, "microseconds", "20", "via",
                       "how long a wait spins before it yields"),
      integer_variable("VIASTACK_YIELD_US", 0, 10'000'000, "microseconds", "1000", "via",
                       "how long a wait then polls, yielding the core, before it sleeps (both phases start again when it finds work); "
                       "unset where ranks outnumber the job's CPUs here, 100, growing up to 1000 to cover twice the NIC's last 8 waits while none "
                       "of them took longer"),
      // The job: set by viarun for its ranks.
      typed("VIASTACK_JOB", Type::text, "-", "via",
            "the job id that scopes shared-memory segment names; set by viarun"),
      typed("VIASTACK_JOB_KEY", Type::job_key, "-", "via",
            "the job's secret; set by viarun, under other process managers rank 0 makes it"),
      typed("VIASTACK_DIRECTORY", Type::endpoint, "-", "via", "the job directory's address:port; set by viarun"),
      integer_variable("VIASTACK_RANK", 0, kRanks - 1, "", "0", "via, utcp", "this process's rank; set by viarun"),
      integer_variable("VIASTACK_SIZE", 1, kRanks, "", "1", "via, utcp", "the number of ranks; set by viarun"),
      integer_variable("VIASTACK_LOCAL_RANK", 0, kRanks - 1, "", "-", "programs",
                       "this rank's place among the ranks on its host; set by viarun"),
      integer_variable("VIASTACK_LOCAL_SIZE", 1, kRanks, "", "-", "programs",
                       "the number of ranks on this rank's host; set by viarun"),
      integer_variable("VIASTACK_NODES", 1, kRanks, "", "1", "via",
                       "how many hosts viarun placed the ranks on, round-robin; set by viarun"),
      integer_variable("VIASTACK_NODE_CPUS", 1, 1 << 20, "", "-", "via",
                       "the CPUs the job may use on this host (viarun's own); with more ranks here than that, "
                       "waits yield at once instead of spinning; set by viarun"),
      typed("VIASTACK_LAUNCHER", Type::text, "-", "programs", "the launcher that started the process; set by viarun"),
      {"VIASTACK_TIMEOUT", Type::decimal, "-", "viarun",
       "viarun ends the job after this long, fractions allowed; unset: no limit; --timeout overrides it", 0,
       1'000'000'000, "seconds", {}},
      integer_variable("VIASTACK_PMI_TIMEOUT", 1, 24 * 3600, "seconds", "300", "via",
                       "how long an exchange with a PMI-1/PMI-2 process manager may take"),
      // The tcp provider.
      typed("VIASTACK_TCP_ADDRESS", Type::ipv4, "-", "via",
            "where a tcp NIC listens; unset: the local address that reaches the job's directory, else in a job "
            "spanning nodes the first IPv4 address of an interface that is up, else 127.0.0.1"),
      integer_variable("VIASTACK_TCP_PORT", 0, 65535, "", "0", "via",
                       "the port a tcp NIC listens on; 0: one the kernel picks"),
      integer_variable("VIASTACK_TCP_TIMEOUT_MS", 1, kDayMs, "milliseconds", "10000", "via",
                       "a tcp connection whose peer stops answering breaks after about this long"),
      integer_variable("VIASTACK_TCP_LOCAL_SNDBUF", 0, 64 << 20, "bytes", "262144", "via",
                       "the send buffer (SO_SNDBUF) of a tcp connection whose two ends are on one host; 0: the "
                       "kernel sizes it as for any connection"),
      integer_variable("VIASTACK_TCP_AUTH_TIMEOUT_MS", 1, kDayMs, "milliseconds", "3000", "via",
                       "how long a new tcp connection has to prove it belongs to the job"),
      integer_variable("VIASTACK_TCP_RESOLVE_TIMEOUT_MS", 1, kDayMs, "milliseconds", "60000", "via",
                       "how long looking up another rank waits for it to publish its address"),
      // Active Messages and Split-C.
      word_variable("VIASTACK_AM_RELIABILITY", "reliable|unreliable", "reliable", "am",
                    "the VIs AM runs on; on unreliable ones AM retransmits and acknowledges itself"),
      integer_variable("VIASTACK_AM_DEPTH", 1, 1024, "", "32", "am", "outstanding requests per peer"),
      integer_variable("VIASTACK_AM_TIMEOUT_MS", 0, kTiB, "milliseconds", "10000", "am",
                       "a peer that answers nothing for this long is unreachable; 0: never"),
      integer_variable("VIASTACK_AM_RETRANSMIT_MS", 1, 1 << 30, "milliseconds", "20", "am",
                       "the first retransmission of an unanswered request on unreliable VIs, doubling up to 1 s"),
      integer_variable("VIASTACK_AM_SEGMENT", 64, kTiB, "bytes", "16777216", "am, splitc",
                       "the size of each rank's AM segment; Split-C's default is 67108864"),
      // MPI.
      integer_variable("VIASTACK_MPI_EAGER_LIMIT", 64, 60 * 1024, "bytes", "16384", "mpi",
                       "messages up to this size go eagerly, larger ones by rendezvous; at most one shm frame; unset with the tcp provider: 61440"),
      integer_variable("VIASTACK_MPI_ALLREDUCE_RING_BYTES", 0, kTiB, "bytes", "65536", "mpi",
                       "allreduce of at least this much data reduces and scatters, then gathers (by halving and doubling on a power of "
                       "two from 4 ranks, else the ring), below it recursive doubling"),
      integer_variable("VIASTACK_MPI_ALLGATHER_RING_BYTES", 0, kTiB, "bytes", "65536", "mpi",
                       "allgather(v) of at least this much in all uses the ring, below it Bruck's"),
      integer_variable("VIASTACK_MPI_ALLTOALL_PAIRWISE_BYTES", 0, kTiB, "bytes", "65536", "mpi",
                       "alltoall(v) with blocks of at least this size exchanges pairwise, below it all at once; unset where ranks "
                       "outnumber the job's CPUs on the host: all at once at every size"),
      // The user-level TCP/IP stack.
      integer_variable("VIASTACK_UTCP_MTU", 68, 65535, "bytes", "9000", "utcp", "the MTU of utcp's links over VIA"),
      integer_variable("VIASTACK_UTCP_RECEIVE_BUFFERS", 2, 4096, "", "32", "utcp",
                       "receive buffers of one MTU utcp's VIA link posts per peer: the packets in flight to a rank"),
      typed("VIASTACK_UTCP_NETWORK", Type::network, "10.0.0.0/16", "utcp",
            "the network utcp's ranks take their addresses from; rank r is the network's host r + 1"),
      word_variable("VIASTACK_UTCP_CC", "newreno|cubic|bbr", "bbr", "utcp",
                    "the congestion control of utcp's TCP sockets that choose none themselves"),
      typed("VIASTACK_TRACE", Type::trace, "-", "via, utcp",
            "pcap traces: FILE for utcp's packets, LAYERS:FILE (via, utcp or via,utcp) for VIA frames and "
            "connection events, utcp's packets or both (FILE.via.pcap, FILE.utcp.pcap); file.rankN.pcap per rank"),
      // The test script.
      typed("VIASTACK_SKIP_SANITIZERS", Type::boolean, "0", "scripts/test.sh",
            "1: skip the sanitizer builds and their tests"),
      typed("VIASTACK_SKIP_FUZZ", Type::boolean, "0", "scripts/test.sh", "1: skip building and running the fuzzers"),
  };
  return table;
}

}  // namespace via::config
