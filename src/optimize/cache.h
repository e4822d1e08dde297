// The replayable cache of measured configurations (as Kernel Tuner's cache file): one JSON
// object per line, keyed by the content hash of the candidate source + the problem's size +
// dtype + machine (+ the baseline's hash for comparisons). A re-run that proposes the same
// candidates replays their outcomes instead of measuring again.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace vb::opt {

/// A JSON-lines cache file. Lines are appended with one write(2) on an O_APPEND descriptor, so a
/// killed run leaves at most a torn last line, which load skips.
class MeasurementCache {
 public:
  /// Opens (and reads) `path`; a missing file is an empty cache.
  explicit MeasurementCache(std::filesystem::path path);
  /// The entry stored under `key`, or nullopt.
  std::optional<nlohmann::json> get(const std::string& key) const;
  /// Stores `value` under `key` (in memory and appended to the file). Throws std::runtime_error
  /// naming the file when it cannot be written.
  void put(const std::string& key, const nlohmann::json& value);
  std::size_t size() const { return map_.size(); }

 private:
  std::filesystem::path path_;
  std::map<std::string, nlohmann::json> map_;
};

/// 16 hex digits of FNV-1a 64 over `text` (content hashes of sources).
std::string content_hash(const std::string& text);

}  // namespace vb::opt
