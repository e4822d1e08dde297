#include "optimize/params.h"

#include <fmt/format.h>

#include <cctype>
#include <set>
#include <sstream>
#include <stdexcept>


namespace vb::opt {

namespace {

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::string line;
  std::istringstream in(s);
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

std::optional<long long> to_int(const std::string& v) {
  try {
    std::size_t pos = 0;
    long long x = std::stoll(v, &pos, 0);
    if (pos == v.size()) return x;
  } catch (...) {
  }
  return std::nullopt;
}

}  // namespace

std::vector<TunableParam> parse_params(const std::string& source, const ParamSyntax& syntax) {
  std::vector<TunableParam> out;
  std::set<std::string> names;
  const auto lines = split_lines(source);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto pos = lines[i].find("@vb-param");
    if (pos == std::string::npos) continue;
    const int ln = static_cast<int>(i + 1);
    std::string rest = lines[i].substr(pos + 9);
    std::istringstream in(rest);
    TunableParam p;
    p.line = ln;
    in >> p.name >> p.default_value;
    if (!is_identifier(p.name))
      throw std::invalid_argument(fmt::format(
          "line {}: @vb-param needs 'NAME DEFAULT {{V1,V2,...}} description', got '{}'", ln,
          trim(rest)));
    const auto lb = rest.find('{'), rb = rest.find('}');
    if (lb == std::string::npos || rb == std::string::npos || rb < lb)
      throw std::invalid_argument(
          fmt::format("line {}: @vb-param {} has no domain {{V1,V2,...}}", ln, p.name));
    std::string dom = rest.substr(lb + 1, rb - lb - 1);
    std::istringstream ds(dom);
    std::string v;
    while (std::getline(ds, v, ',')) {
      v = trim(v);
      if (!v.empty()) p.domain.push_back(v);
    }
    if (p.domain.empty())
      throw std::invalid_argument(fmt::format("line {}: @vb-param {} has an empty domain", ln, p.name));
    if (std::find(p.domain.begin(), p.domain.end(), p.default_value) == p.domain.end())
      throw std::invalid_argument(fmt::format(
          "line {}: @vb-param {}: default {} is not in its domain {{{}}}", ln, p.name,
          p.default_value, dom));
    if (!names.insert(p.name).second)
      throw std::invalid_argument(fmt::format("line {}: @vb-param {} declared twice", ln, p.name));
    p.description = trim(rest.substr(rb + 1));
    out.push_back(std::move(p));
  }
  // A language that cannot prepend a binding needs one line per parameter to rewrite.
  std::set<std::string> bound;
  for (const auto& line : lines)
    if (const auto b = syntax.binding(line)) bound.insert(b->first);
  for (const auto& p : out)
    if (!bound.count(p.name) && !syntax.prepended(p.name, p.default_value))
      throw std::invalid_argument(fmt::format(
          "line {}: @vb-param {} has no binding to rewrite: add {}", p.line, p.name,
          syntax.how_to_declare()));
  return out;
}

Config current_config(const std::string& source, const std::vector<TunableParam>& params,
                      const ParamSyntax& syntax) {
  Config cfg;
  for (const auto& p : params) cfg[p.name] = p.default_value;
  std::set<std::string> seen;
  for (const auto& line : split_lines(source)) {
    const auto b = syntax.binding(line);
    if (b && cfg.count(b->first) && seen.insert(b->first).second) cfg[b->first] = trim(b->second);
  }
  return cfg;
}

std::string apply_config(const std::string& source, const Config& cfg, const ParamSyntax& syntax) {
  auto lines = split_lines(source);
  std::set<std::string> done;
  for (auto& line : lines) {
    const auto b = syntax.binding(line);
    if (!b) continue;
    const std::string& n = b->first;
    auto it = cfg.find(n);
    if (it == cfg.end() || done.count(n)) continue;
    line = syntax.rebind(line, n, it->second);
    done.insert(n);
  }
  std::string head;
  for (const auto& [n, v] : cfg) {
    if (done.count(n)) continue;
    const auto pre = syntax.prepended(n, v);
    if (!pre)
      throw std::invalid_argument(fmt::format("cannot set {}={}: the source has no binding of {} "
                                              "to rewrite (add {})",
                                              n, v, n, syntax.how_to_declare()));
    head += *pre + "\n";
  }
  std::string out = head;
  for (const auto& l : lines) {
    out += l;
    out += '\n';
  }
  return out;
}

std::string config_string(const Config& cfg) {
  std::string s;
  for (const auto& [n, v] : cfg) s += fmt::format("{}{}={}", s.empty() ? "" : " ", n, v);
  return s;
}

Pruner builtin_pruner(const std::vector<TunableParam>& params, const TargetLimits& limits) {
  return [params, limits](const std::string&, const Config& cfg) -> std::optional<std::string> {
    long long block_product = 1;
    bool any_block = false;
    for (const auto& p : params) {
      auto it = cfg.find(p.name);
      if (it == cfg.end()) continue;
      const std::string& v = it->second;
      if (std::find(p.domain.begin(), p.domain.end(), v) == p.domain.end())
        return fmt::format("{}={} is outside its declared domain", p.name, v);
      const auto x = to_int(v);
      if (!x) continue;
      const bool threads = p.name == "NUM_THREADS" || ends_with(p.name, "_THREADS");
      if (threads && limits.logical_cores > 0 && *x > limits.logical_cores)
        return fmt::format("{}={} exceeds the {} logical cores of this CPU", p.name, v,
                           limits.logical_cores);
      // GPU block size: every *_THREADS parameter is the size of one launch's block, so each
      // alone must fit (a kernel with several launch paths declares one per path); the
      // dimensions of ONE block (BLOCK_X/Y/Z or *_DIM_X/Y/Z) multiply.
      const bool blocks = limits.max_threads_per_block > 0;
      if (blocks && threads && *x > limits.max_threads_per_block)
        return fmt::format("{}={} threads per block exceed the limit of {}", p.name, v,
                           limits.max_threads_per_block);
      const bool dim = p.name == "BLOCK_X" || p.name == "BLOCK_Y" || p.name == "BLOCK_Z" ||
                       ends_with(p.name, "_DIM_X") || ends_with(p.name, "_DIM_Y") ||
                       ends_with(p.name, "_DIM_Z");
      if (blocks && dim) {
        any_block = true;
        block_product *= *x;
      }
      const bool vec_bytes = (p.name.rfind("VEC", 0) == 0 || p.name.rfind("VECTOR", 0) == 0) &&
                             ends_with(p.name, "_BYTES");
      // The device's widest access (a CPU's SIMD width; CUDA: 16 bytes per thread, LDG.128).
      const int vw = limits.vector_width_bytes;
      if (vec_bytes && vw > 0 && *x > vw)
        return fmt::format("{}={} exceeds the native vector width ({} bytes)", p.name, v, vw);
      const bool smem = (p.name.rfind("SMEM", 0) == 0 || p.name.rfind("SHARED", 0) == 0) &&
                        ends_with(p.name, "_BYTES");
      if (smem && limits.shared_memory_per_block_bytes > 0 &&
          *x > limits.shared_memory_per_block_bytes)
        return fmt::format("{}={} exceeds the shared memory per block ({} bytes)", p.name, v,
                           limits.shared_memory_per_block_bytes);
    }
    if (any_block && block_product > limits.max_threads_per_block)
      return fmt::format("{} threads per block exceed the limit of {}", block_product,
                         limits.max_threads_per_block);
    return std::nullopt;
  };
}

Pruner chain_pruners(std::vector<Pruner> pruners) {
  return [pruners](const std::string& src, const Config& cfg) -> std::optional<std::string> {
    for (const auto& p : pruners)
      if (p)
        if (auto r = p(src, cfg)) return r;
    return std::nullopt;
  };
}

}  // namespace vb::opt
