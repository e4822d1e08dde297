#include "optimize/cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

#include "core/util.h"

namespace vb::opt {

std::string content_hash(const std::string& text) { return fmt::format("{:016x}", fnv1a(text)); }

MeasurementCache::MeasurementCache(std::filesystem::path path) : path_(std::move(path)) {
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line)) {
    try {
      auto j = nlohmann::json::parse(line);
      if (j.is_object() && j.contains("key") && j["key"].is_string() && j.contains("value"))
        map_[j["key"].get<std::string>()] = j["value"];
    } catch (const nlohmann::json::exception&) {
      // a torn line from a killed run: skipped
    }
  }
}

std::optional<nlohmann::json> MeasurementCache::get(const std::string& key) const {
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

void MeasurementCache::put(const std::string& key, const nlohmann::json& value) {
  map_[key] = value;
  if (!path_.parent_path().empty()) std::filesystem::create_directories(path_.parent_path());
  const std::string line =
      nlohmann::json{{"key", key}, {"value", value}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace) +
      "\n";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open the measurement cache " + path_.string());
  const ssize_t w = ::write(fd, line.data(), line.size());
  ::close(fd);
  if (w != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("short write to the measurement cache " + path_.string());
}

}  // namespace vb::opt
