#include "research/corpus.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace vb {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void bad(const fs::path& path, const std::string& field, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}: {}", path.string(), field, what));
}

std::string need_string(const json& j, const char* key, const fs::path& path,
                        const std::string& where) {
  const std::string field = where.empty() ? key : where + "." + key;
  if (!j.contains(key) || !j.at(key).is_string() || j.at(key).get<std::string>().empty())
    bad(path, field, "expected a non-empty string");
  return j.at(key).get<std::string>();
}

std::string opt_string(const json& j, const char* key, const fs::path& path,
                       const std::string& where) {
  if (!j.contains(key)) return "";
  if (!j.at(key).is_string()) bad(path, where + "." + key, "expected a string");
  return j.at(key).get<std::string>();
}

std::optional<double> opt_number(const json& j, const char* key, const fs::path& path,
                                 const std::string& where) {
  if (!j.contains(key)) return std::nullopt;
  const json& v = j.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
    bad(path, where + "." + key, "expected a positive number");
  return v.get<double>();
}

bool is_url(const std::string& s) {
  return s.rfind("http://", 0) == 0 || s.rfind("https://", 0) == 0;
}

std::string number(double v) {
  std::string s = fmt::format("{:.3g}", v);
  if (s.find('e') != std::string::npos) s = fmt::format("{:.0f}", v);
  return s;
}

std::string value_text(const CorpusBaseline& b) {
  std::string v = number(b.value);
  if (b.value_low && b.value_high)
    v = number(*b.value_low) + "-" + number(*b.value_high);
  else if (b.value_low)
    v = number(*b.value_low) + "-" + number(b.value);
  else if (b.value_high)
    v = number(b.value) + "-" + number(*b.value_high);
  std::string s = v + " " + b.unit;
  if (b.pct_of_peak) s += fmt::format(" ({}% of peak)", number(*b.pct_of_peak));
  return s;
}

}  // namespace

fs::path corpus_dir() {
  return vladbud_home() / "data" / "corpus";
}

KernelCorpus load_corpus(const std::string& type, const fs::path& dir) {
  const fs::path path = dir / (type + ".json");
  if (!fs::exists(path))
    throw std::runtime_error(
        fmt::format("no corpus for kernel type '{}': {} does not exist", type, path.string()));
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
  }
  if (!j.is_object()) bad(path, "(top level)", "expected an object");
  KernelCorpus c;
  c.path = path;
  c.raw = j;
  c.kernel_type = need_string(j, "kernel_type", path, "");
  if (c.kernel_type != path.stem().string())
    bad(path, "kernel_type",
        fmt::format("expected \"{}\" (the file name), got \"{}\"", path.stem().string(),
                    c.kernel_type));
  c.algorithm = need_string(j, "algorithm", path, "");
  if (j.contains("references")) {
    if (!j["references"].is_array()) bad(path, "references", "expected an array");
    for (std::size_t i = 0; i < j["references"].size(); ++i) {
      const std::string w = fmt::format("references[{}]", i);
      const json& r = j["references"][i];
      if (!r.is_object()) bad(path, w, "expected an object {title, url}");
      c.references.emplace_back(need_string(r, "title", path, w), need_string(r, "url", path, w));
    }
  }
  if (!j.contains("baselines") || !j["baselines"].is_array() || j["baselines"].empty())
    bad(path, "baselines", "expected a non-empty array of cited baselines");
  bool any_url = false;
  for (std::size_t i = 0; i < j["baselines"].size(); ++i) {
    const std::string w = fmt::format("baselines[{}]", i);
    const json& o = j["baselines"][i];
    if (!o.is_object()) bad(path, w, "expected an object");
    CorpusBaseline b;
    b.implementation = need_string(o, "implementation", path, w);
    b.hardware = need_string(o, "hardware", path, w);
    if (o.contains("targets")) {
      if (!o["targets"].is_array()) bad(path, w + ".targets", "expected an array of target ids");
      for (const auto& t : o["targets"]) {
        if (!t.is_string()) bad(path, w + ".targets", "expected an array of target ids");
        b.targets.push_back(t.get<std::string>());
      }
    }
    b.dtype = opt_string(o, "dtype", path, w);
    b.metric = need_string(o, "metric", path, w);
    const auto value = opt_number(o, "value", path, w);
    if (!value) bad(path, w + ".value", "expected a positive number");
    b.value = *value;
    b.value_low = opt_number(o, "value_low", path, w);
    b.value_high = opt_number(o, "value_high", path, w);
    b.unit = need_string(o, "unit", path, w);
    b.pct_of_peak = opt_number(o, "pct_of_peak", path, w);
    b.shape = opt_string(o, "shape", path, w);
    b.claim = need_string(o, "claim", path, w);
    b.source = need_string(o, "source", path, w);
    b.note = opt_string(o, "note", path, w);
    any_url = any_url || is_url(b.source);
    c.baselines.push_back(std::move(b));
  }
  if (!any_url) bad(path, "baselines", "expected at least one baseline whose source is a URL");
  return c;
}

std::vector<std::string> corpus_types(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".json")
      out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<CorpusBaseline> corpus_baselines_for(const KernelCorpus& c,
                                                 const std::string& target_id) {
  std::vector<CorpusBaseline> out;
  for (const auto& b : c.baselines)
    if (std::find(b.targets.begin(), b.targets.end(), target_id) != b.targets.end())
      out.push_back(b);
  return out;
}

std::string corpus_reference(const std::string& type, const std::string& target_id) {
  try {
    const KernelCorpus c = load_corpus(type);
    const auto bs = corpus_baselines_for(c, target_id);
    if (bs.empty()) return "";
    const CorpusBaseline& b = bs.front();
    return fmt::format("{} {}, {} [{}]", b.implementation, value_text(b), b.hardware, b.source);
  } catch (const std::exception&) {
    return "";
  }
}

std::string format_corpus(const KernelCorpus& c, const std::string& target_id) {
  std::string s = fmt::format("{} — reference corpus ({})\n\nalgorithm:\n  {}\n", c.kernel_type,
                              c.path.string(), c.algorithm);
  if (!c.references.empty()) {
    s += "\nreferences:\n";
    for (const auto& [title, url] : c.references) s += fmt::format("  - {}: {}\n", title, url);
  }
  std::vector<const CorpusBaseline*> order;
  for (const auto& b : c.baselines)
    if (!target_id.empty() &&
        std::find(b.targets.begin(), b.targets.end(), target_id) != b.targets.end())
      order.push_back(&b);
  const std::size_t matched = order.size();
  for (const auto& b : c.baselines)
    if (std::find(order.begin(), order.end(), &b) == order.end()) order.push_back(&b);
  s += fmt::format("\npublished baselines ({}{}):\n", c.baselines.size(),
                   target_id.empty() ? "" : fmt::format(", {} for {}", matched, target_id));
  for (std::size_t i = 0; i < order.size(); ++i) {
    const CorpusBaseline& b = *order[i];
    s += fmt::format("  {} {}: {} on {}{}{}\n", i < matched ? "*" : "-", b.implementation,
                     value_text(b), b.hardware, b.dtype.empty() ? "" : " (" + b.dtype + ")",
                     b.shape.empty() ? "" : ", " + b.shape);
    s += fmt::format("      \"{}\"\n      source: {}\n", b.claim, b.source);
    if (!b.note.empty()) s += fmt::format("      note: {}\n", b.note);
  }
  return s;
}

}  // namespace vb
