#include "analysis/source_params.h"

#include <cctype>
#include <cstdlib>

namespace vb::analysis {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string_view next_word(std::string_view& s) {
  s = trim(s);
  std::size_t end = 0;
  while (end < s.size() && !std::isspace(static_cast<unsigned char>(s[end]))) ++end;
  const std::string_view w = s.substr(0, end);
  s.remove_prefix(end);
  return w;
}

}  // namespace

std::vector<SourceParam> parse_source_params(std::string_view source) {
  std::vector<SourceParam> out;
  std::size_t pos = 0;
  int lineno = 0;
  while (pos <= source.size()) {
    std::size_t eol = source.find('\n', pos);
    if (eol == std::string_view::npos) eol = source.size();
    std::string_view line = source.substr(pos, eol - pos);
    pos = eol + 1;
    ++lineno;
    const std::size_t at = line.find("@vb-param");
    if (at == std::string_view::npos) {
      if (eol == source.size()) break;
      continue;
    }
    std::string_view rest = line.substr(at + 9);
    SourceParam p;
    p.line = lineno;
    p.name = std::string(next_word(rest));
    p.default_value = std::string(next_word(rest));
    rest = trim(rest);
    if (!rest.empty() && rest.front() == '{') {
      const std::size_t close = rest.find('}');
      const std::string_view list =
          rest.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1);
      std::size_t s = 0;
      while (s <= list.size()) {
        std::size_t c = list.find(',', s);
        if (c == std::string_view::npos) c = list.size();
        const std::string_view v = trim(list.substr(s, c - s));
        if (!v.empty()) p.values.emplace_back(v);
        s = c + 1;
      }
      rest = close == std::string_view::npos ? std::string_view{} : rest.substr(close + 1);
    }
    p.description = std::string(trim(rest));
    if (!p.name.empty() && !p.default_value.empty()) out.push_back(std::move(p));
    if (eol == source.size()) break;
  }
  return out;
}

std::optional<int> declared_block_threads(const std::vector<SourceParam>& params,
                                          std::string* name_out) {
  for (const char* want : {"BLOCK_THREADS", "THREADS", "NUM_THREADS", "BLOCK_SIZE",
                           "THREADS_PER_BLOCK"}) {
    for (const auto& p : params) {
      if (p.name != want) continue;
      char* end = nullptr;
      const long v = std::strtol(p.default_value.c_str(), &end, 10);
      if (end && *end == '\0' && v > 0 && v <= 1 << 20) {
        if (name_out) *name_out = p.name;
        return static_cast<int>(v);
      }
    }
  }
  return std::nullopt;
}

}  // namespace vb::analysis
