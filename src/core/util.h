// Small helpers shared by the probe, detection and capability code.
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <string>
#include <string_view>

namespace vb {

/// FNV-1a 64-bit hash of a string, byte by byte (Fowler, Noll, Vo); used for stable cache keys
/// and machine ids.
inline std::uint64_t fnv1a(std::string_view s, std::uint64_t h = 14695981039346656037ull) {
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

/// The current time as ISO-8601 UTC, "2026-11-30T12:00:00Z".
inline std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// True when VB_PROBE_QUICK is set to something other than "0" (short, cache-sized probes).
inline bool quick_requested() {
  const char* q = std::getenv("VB_PROBE_QUICK");
  return q && *q && std::string_view(q) != "0";
}

/// Sends a progress line when a progress callback is set.
inline void say(const std::function<void(std::string)>& progress, std::string msg) {
  if (progress) progress(std::move(msg));
}

}  // namespace vb
