#include "runner/protocol.h"

#include <cstdio>
#include <cstring>

namespace vb::runner {

namespace {

struct FlavourName {
  Flavour flavour;
  const char* name;
};

// The one table of runner flavours and their argv names.
constexpr FlavourName kFlavours[] = {{Flavour::Host, "cpu"}, {Flavour::Cuda, "cuda"}};

}  // namespace

std::string flavour_name(Flavour f) {
  for (const auto& x : kFlavours)
    if (x.flavour == f) return x.name;
  return "unknown";
}

std::optional<Flavour> parse_flavour(std::string_view name) {
  for (const auto& x : kFlavours)
    if (name == x.name) return x.flavour;
  return std::nullopt;
}

std::string flavour_names() {
  std::string s;
  for (const auto& x : kFlavours) s += (s.empty() ? "" : ", ") + std::string(x.name);
  return s;
}

std::uint64_t fnv1a64(const void* data, std::size_t n, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ULL;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace vb::runner
