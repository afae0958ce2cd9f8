// VIASTACK_TRACE: which layers write a pcap trace, and where.
//
//   VIASTACK_TRACE=FILE               utcp's IP packets to FILE (the original form)
//   VIASTACK_TRACE=LAYERS:FILE        each layer of LAYERS, a comma-separated
//                                     list of `via` and `utcp`, to a file of its own
//
// `via` traces the VIA frames every VI of the process sends and receives,
// the RDMA it moves without frames (single copy) and the connection events,
// in a pcap of link type DLT_USER0 (147) that tools/wireshark/viastack.lua
// decodes; `utcp` traces utcp's IP packets (LINKTYPE_RAW). With one layer,
// it writes FILE itself; with several, each writes FILE with its name before
// the extension (run.pcap: run.via.pcap, run.utcp.pcap). In a job of several
// ranks, each rank writes its own: ".rankN" before the extension
// (run.via.rank1.pcap). The text before the first ':' is a layer list when it
// is made of lowercase letters and commas only: a file whose name has a ':'
// takes a layer list in front of it (utcp:odd:name.pcap).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace via::trace {

enum class Layer { via, utcp };

struct Setting {
  bool via = false;
  bool utcp = false;
  std::filesystem::path file;
  bool selects(Layer layer) const { return layer == Layer::via ? via : utcp; }
  // More than one layer: each writes a file named after it.
  bool several() const { return via && utcp; }
};

// Parses a VIASTACK_TRACE value (not empty); false with the reason in `error`
// on a bad one (an unknown layer, no file).
bool parse_setting(std::string_view text, Setting& out, std::string& error);

// The file `layer` writes under `setting`, before any rank is added; none
// when the setting does not select the layer.
std::optional<std::filesystem::path> layer_file(const Setting& setting, Layer layer);

// The file a rank writes: `file` itself in a one-rank job, else
// "<stem>.rank<N><extension>" beside it, so that ranks do not write over
// each other.
std::filesystem::path file_for_rank(const std::filesystem::path& file, int rank, int size);

// VIASTACK_TRACE parsed (a bad value stops the program with one line, as every
// VIASTACK_* variable's); none when unset or empty.
std::optional<Setting> setting_from_environment();

}  // namespace via::trace
