// VIASTACK_TRACE's value (via/trace.hpp).
#include <algorithm>

#include "via/config.hpp"
#include "via/trace.hpp"

namespace via::trace {

namespace {

bool looks_like_layer_list(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == ','; });
}

}  // namespace

bool parse_setting(std::string_view text, Setting& out, std::string& error) {
  Setting setting;
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos || !looks_like_layer_list(text.substr(0, colon))) {
    setting.utcp = true;  // the original form: a file for utcp's packets
    setting.file = std::string(text);
  } else {
    std::string_view layers = text.substr(0, colon);
    while (true) {
      const std::size_t comma = layers.find(',');
      const std::string_view layer = layers.substr(0, comma);
      if (layer == "via") {
        setting.via = true;
      } else if (layer == "utcp") {
        setting.utcp = true;
      } else {
        error = "unknown layer '" + std::string(layer) + "' (known: via, utcp)";
        return false;
      }
      if (comma == std::string_view::npos) break;
      layers.remove_prefix(comma + 1);
    }
    setting.file = std::string(text.substr(colon + 1));
  }
  if (setting.file.empty()) {
    error = "no file after the layers";
    return false;
  }
  out = std::move(setting);
  return true;
}

std::optional<std::filesystem::path> layer_file(const Setting& setting, Layer layer) {
  if (!setting.selects(layer)) return std::nullopt;
  if (!setting.several()) return setting.file;
  std::filesystem::path file = setting.file;
  const std::string extension = file.extension().string();
  file.replace_filename(file.stem().string() + (layer == Layer::via ? ".via" : ".utcp") + extension);
  return file;
}

std::filesystem::path file_for_rank(const std::filesystem::path& file, int rank, int size) {
  if (size <= 1) return file;
  std::filesystem::path named = file;
  named.replace_filename(file.stem().string() + ".rank" + std::to_string(rank) + file.extension().string());
  return named;
}

std::optional<Setting> setting_from_environment() {
  const auto text = config::text_if_set("VIASTACK_TRACE");
  if (!text) return std::nullopt;
  Setting setting;
  std::string error;
  parse_setting(*text, setting, error);  // the table checked it: a bad value stopped the program
  return setting;
}

}  // namespace via::trace
