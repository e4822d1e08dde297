#include "targets/spec_db.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <set>

namespace vb {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A path for messages: relative to vladbud_home() when below it, else as given.
std::string display_path(const fs::path& p) {
  std::error_code ec;
  const fs::path home = fs::weakly_canonical(vladbud_home(), ec);
  const fs::path abs = fs::weakly_canonical(p, ec);
  if (!home.empty() && !abs.empty()) {
    const fs::path rel = abs.lexically_relative(home);
    if (!rel.empty() && *rel.begin() != "..") return rel.string();
  }
  return p.string();
}

std::string show(const json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

const std::set<std::string>& peak_keys() {
  static const std::set<std::string> k = {"fp64",      "fp64_matrix", "fp32", "fp32_matrix", "tf32",
                                          "fp16",      "bf16",        "fp8",  "fp6",         "fp4",
                                          "block_fp8", "int8",        "int4"};
  return k;
}

const std::set<std::string>& top_keys() {
  static const std::set<std::string> k = {"id",
                                          "name",
                                          "vendor",
                                          "family",
                                          "kind",
                                          "isa",
                                          "author_surfaces",
                                          "peak_tflops",
                                          "memory_bandwidth_gbs",
                                          "memory_gb",
                                          "memory_type",
                                          "compute_units",
                                          "clock_ghz",
                                          "boost_clock_ghz",
                                          "caches",
                                          "on_chip_memory",
                                          "register_file",
                                          "vector_width",
                                          "limits",
                                          "matrix_instructions",
                                          "isa_extensions",
                                          "match",
                                          "rungs",
                                          "sources",
                                          "notes",
                                          "unverified",
                                          "derived"};
  return k;
}

// Validates one document; every failure throws SpecError(path, field, ...).
class Validator {
 public:
  Validator(const json& doc, fs::path path) : doc_(doc), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& expected,
                         const json* got) const {
    throw SpecError(display_path(path_), field,
                    fmt::format("expected {}, got {}", expected,
                                got ? show(*got) : std::string("nothing (field missing)")));
  }

  const json* get(const json& obj, const std::string& key) const {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  std::string str(const json& obj, const std::string& key, const std::string& field,
                  bool required = true) const {
    const json* v = get(obj, key);
    if (!v) {
      if (required) fail(field, "a non-empty string", nullptr);
      return {};
    }
    if (!v->is_string() || v->get<std::string>().empty()) fail(field, "a non-empty string", v);
    return v->get<std::string>();
  }

  double positive(const json& obj, const std::string& key, const std::string& field,
                  bool required = true) const {
    const json* v = get(obj, key);
    if (!v) {
      if (required) fail(field, "a positive number", nullptr);
      return 0;
    }
    if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>()))
      fail(field, "a positive number", v);
    return v->get<double>();
  }

  int positive_int(const json& obj, const std::string& key, const std::string& field,
                   bool required = true) const {
    const json* v = get(obj, key);
    if (!v) {
      if (required) fail(field, "a positive integer", nullptr);
      return 0;
    }
    if (!v->is_number_integer() || v->get<long long>() <= 0 ||
        v->get<long long>() > 1'000'000'000LL)
      fail(field, "a positive integer", v);
    return static_cast<int>(v->get<long long>());
  }

  std::vector<std::string> strings(const json& obj, const std::string& key,
                                   const std::string& field, bool required, bool non_empty) const {
    const json* v = get(obj, key);
    const char* what =
        non_empty ? "a non-empty array of non-empty strings" : "an array of non-empty strings";
    if (!v) {
      if (required) fail(field, what, nullptr);
      return {};
    }
    if (!v->is_array() || (non_empty && v->empty())) fail(field, what, v);
    std::vector<std::string> out;
    for (std::size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (!e.is_string() || e.get<std::string>().empty())
        fail(fmt::format("{}[{}]", field, i), "a non-empty string", &e);
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  const json& object(const json& obj, const std::string& key, const std::string& field,
                     bool required, bool non_empty = false) const {
    static const json kEmpty = json::object();
    const json* v = get(obj, key);
    const char* what = non_empty ? "a non-empty object" : "an object";
    if (!v) {
      if (required) fail(field, what, nullptr);
      return kEmpty;
    }
    if (!v->is_object() || (non_empty && v->empty())) fail(field, what, v);
    return *v;
  }

  std::map<std::string, std::string> string_map(const json& obj, const std::string& key,
                                                bool required) const {
    const json& o = object(obj, key, key, required, required);
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : o.items()) {
      const std::string f = key + "." + k;
      if (!v.is_string() || v.get<std::string>().empty()) fail(f, "a non-empty string", &v);
      out[k] = v.get<std::string>();
    }
    return out;
  }

  // Objects whose members are scalars: positive numbers, strings, booleans or arrays of strings.
  void scalar_object(const std::string& key) const {
    const json& o = object(doc_, key, key, false);
    for (const auto& [k, v] : o.items()) {
      const std::string f = key + "." + k;
      if (v.is_number()) {
        if (!(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
          fail(f, "a positive number", &v);
      } else if (v.is_string()) {
        if (v.get<std::string>().empty()) fail(f, "a non-empty string", &v);
      } else if (v.is_array()) {
        strings(o, k, f, false, false);
      } else if (!v.is_boolean()) {
        fail(f, "a positive number or a string", &v);
      }
    }
  }

  // Every numeric leaf (dotted path) of `v`, skipping sources and notes.
  void numeric_leaves(const json& v, const std::string& prefix,
                      std::vector<std::pair<std::string, const json*>>& out) const {
    if (v.is_object()) {
      for (const auto& [k, e] : v.items()) {
        if (prefix.empty() && (k == "sources" || k == "notes")) continue;
        numeric_leaves(e, prefix.empty() ? k : prefix + "." + k, out);
      }
    } else if (v.is_array()) {
      for (std::size_t i = 0; i < v.size(); ++i)
        numeric_leaves(v[i], prefix + "." + std::to_string(i), out);
    } else if (v.is_number()) {
      out.emplace_back(prefix, &v);
    }
  }

  // True when dotted path `field` names an existing member of the document.
  bool field_exists(const std::string& field) const {
    const json* cur = &doc_;
    std::size_t start = 0;
    while (start <= field.size()) {
      const std::size_t dot = field.find('.', start);
      const std::string part =
          field.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (cur->is_object()) {
        auto it = cur->find(part);
        if (it == cur->end()) return false;
        cur = &*it;
      } else if (cur->is_array()) {
        if (part.empty() || !std::all_of(part.begin(), part.end(), ::isdigit)) return false;
        const std::size_t i = std::stoul(part);
        if (i >= cur->size()) return false;
        cur = &(*cur)[i];
      } else {
        return false;
      }
      if (dot == std::string::npos) return true;
      start = dot + 1;
    }
    return true;
  }

  // True for a schema field name that may be absent from a file: a top-level key, or
  // "peak_tflops.<dtype key>".
  static bool known_field_name(const std::string& field) {
    const std::size_t dot = field.find('.');
    const std::string head = field.substr(0, dot);
    if (!top_keys().count(head)) return false;
    if (dot == std::string::npos) return true;
    return head == "peak_tflops" && peak_keys().count(field.substr(dot + 1)) > 0;
  }

  TargetSpec run() {
    if (!doc_.is_object()) throw SpecError(display_path(path_), "", "expected a JSON object");
    for (const auto& [k, v] : doc_.items()) {
      (void)v;
      if (!top_keys().count(k)) {
        std::string known;
        for (const auto& t : top_keys()) known += (known.empty() ? "" : ", ") + t;
        fail(k, "one of the known fields (" + known + ")", &doc_[k]);
      }
    }
    TargetSpec t;
    t.path = path_;
    t.raw = doc_;
    t.id = str(doc_, "id", "id");
    if (t.id != path_.stem().string())
      fail("id", fmt::format("the file name \"{}\"", path_.stem().string()), &doc_["id"]);
    t.name = str(doc_, "name", "name");
    t.vendor = str(doc_, "vendor", "vendor");
    t.family = str(doc_, "family", "family");
    t.kind = str(doc_, "kind", "kind");
    if (t.kind != "gpu" && t.kind != "cpu" && t.kind != "accelerator")
      fail("kind", "one of \"gpu\", \"cpu\", \"accelerator\"", &doc_["kind"]);
    t.isa = str(doc_, "isa", "isa");
    t.author_surfaces = strings(doc_, "author_surfaces", "author_surfaces", true, true);

    const json& peaks = object(doc_, "peak_tflops", "peak_tflops", true, true);
    for (const auto& [k, v] : peaks.items()) {
      (void)v;
      if (!peak_keys().count(k)) {
        std::string known;
        for (const auto& p : peak_keys()) known += (known.empty() ? "" : ", ") + p;
        fail("peak_tflops." + k, "a known dtype key (" + known + ")", &peaks[k]);
      }
      t.peak_tflops[k] = positive(peaks, k, "peak_tflops." + k);
    }
    t.memory_bandwidth_gbs = positive(doc_, "memory_bandwidth_gbs", "memory_bandwidth_gbs");
    t.memory_gb = positive(doc_, "memory_gb", "memory_gb");
    str(doc_, "memory_type", "memory_type", false);

    const json& cu = object(doc_, "compute_units", "compute_units", true);
    t.compute_units = positive_int(cu, "count", "compute_units.count");
    t.compute_unit_kind = str(cu, "kind", "compute_units.kind");
    for (const auto& [k, v] : cu.items())
      if (k != "count" && k != "kind")
        fail("compute_units." + k, "only \"count\" and \"kind\"", &v);

    t.clock_ghz = positive(doc_, "clock_ghz", "clock_ghz", false);
    positive(doc_, "boost_clock_ghz", "boost_clock_ghz", false);
    for (const char* k : {"caches", "on_chip_memory", "register_file", "vector_width", "limits"})
      scalar_object(k);
    strings(doc_, "matrix_instructions", "matrix_instructions", false, false);
    strings(doc_, "isa_extensions", "isa_extensions", false, false);

    const json& match = object(doc_, "match", "match", false);
    for (const auto& [k, v] : match.items()) {
      if (k == "compute_capability") {
        static const std::regex cc_re("^[0-9]+\\.[0-9]+$");
        if (!v.is_string() || !std::regex_match(v.get<std::string>(), cc_re))
          fail("match.compute_capability", "a string \"<major>.<minor>\" such as \"9.0\"", &v);
        t.compute_capability = v.get<std::string>();
      } else if (k == "name_tokens") {
        t.name_tokens = strings(match, k, "match." + k, false, true);
      } else if (k == "exclude_tokens") {
        t.exclude_tokens = strings(match, k, "match." + k, false, false);
      } else if (k == "cpu_model_tokens") {
        t.cpu_model_tokens = strings(match, k, "match." + k, false, true);
      } else {
        fail("match." + k,
             "one of compute_capability, name_tokens, exclude_tokens, cpu_model_tokens", &v);
      }
    }

    if (t.kind == "gpu" && t.vendor == "NVIDIA") {
      if (t.compute_capability.empty())
        fail("match.compute_capability", "a string such as \"9.0\" (required for NVIDIA GPUs)",
             match.contains("compute_capability") ? &match["compute_capability"] : nullptr);
      if (t.name_tokens.empty())
        fail("match.name_tokens", "a non-empty array of strings (required for NVIDIA GPUs)",
             match.contains("name_tokens") ? &match["name_tokens"] : nullptr);
      const json& lim = object(doc_, "limits", "limits", true);
      GpuLimits g;
      g.warp_size = positive_int(lim, "warp_size", "limits.warp_size");
      g.max_threads_per_sm = positive_int(lim, "max_threads_per_sm", "limits.max_threads_per_sm");
      g.max_blocks_per_sm = positive_int(lim, "max_blocks_per_sm", "limits.max_blocks_per_sm");
      g.registers_per_sm = positive_int(lim, "registers_per_sm", "limits.registers_per_sm");
      g.max_registers_per_thread =
          positive_int(lim, "max_registers_per_thread", "limits.max_registers_per_thread", false);
      g.max_shared_memory_per_sm_kb =
          positive(lim, "max_shared_memory_per_sm_kb", "limits.max_shared_memory_per_sm_kb");
      g.max_shared_memory_per_block_kb =
          positive(lim, "max_shared_memory_per_block_kb", "limits.max_shared_memory_per_block_kb");
      g.l2_mb = positive(lim, "l2_mb", "limits.l2_mb", false);
      t.limits = g;
    }

    const json& rungs = object(doc_, "rungs", "rungs", true);
    for (const char* r : {"rung0", "rung1", "rung2"}) str(rungs, r, std::string("rungs.") + r);
    for (const auto& [k, v] : rungs.items()) {
      static const std::regex rung_re("^rung[0-5]$");
      if (!std::regex_match(k, rung_re)) fail("rungs." + k, "a key rung0 .. rung5", &v);
      t.rungs[k] = str(rungs, k, "rungs." + k);
    }

    t.sources = string_map(doc_, "sources", true);
    t.notes = string_map(doc_, "notes", false);
    for (const auto& [k, v] : t.sources)
      if (k != "*" && !field_exists(k))
        fail("sources." + k, "a key naming a field of this file (or \"*\")", &doc_["sources"][k]);
    // A note may explain why a known field is absent ("caches": "L2 size not published").
    for (const auto& [k, v] : t.notes)
      if (k != "*" && !field_exists(k) && !known_field_name(k))
        fail("notes." + k, "a key naming a field of this file or of the schema", &doc_["notes"][k]);
    t.unverified = strings(doc_, "unverified", "unverified", false, false);
    for (std::size_t i = 0; i < t.unverified.size(); ++i)
      if (!field_exists(t.unverified[i]))
        fail(fmt::format("unverified[{}]", i), "the name of a field of this file",
             &doc_["unverified"][i]);
    if (const json* d = get(doc_, "derived")) {
      if (!d->is_boolean()) fail("derived", "a boolean", d);
      t.derived = d->get<bool>();
    }

    // Every number: positive, finite, and covered by a source.
    std::vector<std::pair<std::string, const json*>> leaves;
    numeric_leaves(doc_, "", leaves);
    for (const auto& [field, v] : leaves) {
      if (!(v->get<double>() > 0) || !std::isfinite(v->get<double>()))
        fail(field, "a positive number", v);
      if (!t.source_for(field))
        fail(field,
             fmt::format("a number covered by a source (a \"sources\" key \"{}\", a prefix of "
                         "it, or \"*\")",
                         field),
             v);
    }
    return t;
  }

 private:
  const json& doc_;
  fs::path path_;
};

bool contains_all(const std::vector<std::string>& hay, const std::vector<std::string>& needles) {
  for (const auto& n : needles) {
    for (const auto& tok : name_tokens_of(n))
      if (std::find(hay.begin(), hay.end(), tok) == hay.end()) return false;
  }
  return true;
}

bool contains_any(const std::vector<std::string>& hay, const std::vector<std::string>& needles) {
  for (const auto& n : needles) {
    const auto toks = name_tokens_of(n);
    if (!toks.empty() && contains_all(hay, {n})) return true;
  }
  return false;
}

std::size_t token_count(const std::vector<std::string>& v) {
  std::size_t n = 0;
  for (const auto& s : v) n += name_tokens_of(s).size();
  return n;
}

std::string slug(std::string_view s) {
  std::string out;
  for (const auto& t : name_tokens_of(s)) {
    std::string clean;
    for (char c : t) clean += (c == '+') ? 'p' : c;
    out += (out.empty() ? "" : "-") + clean;
  }
  return out.empty() ? "unknown" : out;
}

// FMA lanes per SM by compute capability: CUDA C++ Programming Guide, "Arithmetic Instructions"
// (throughput of 32-bit and 64-bit floating-point add/multiply/multiply-add per clock per SM).
// 0 when not tabulated here.
int fp32_lanes_per_sm(int major, int minor) {
  if (major == 5) return 128;
  if (major == 6) return minor == 0 ? 64 : 128;
  if (major == 7) return 64;
  if (major == 8) return minor == 0 ? 64 : 128;
  if (major >= 9 && major <= 12) return 128;
  return 0;
}
int fp64_lanes_per_sm(int major, int minor) {
  if (major == 6) return minor == 0 ? 32 : 4;
  if (major == 7) return minor == 0 ? 32 : 2;
  if (major == 8) return minor == 0 ? 32 : 2;
  if (major == 9 && minor == 0) return 64;
  if (major == 10) return 64;
  if (major == 11 || major == 12) return 2;
  return 0;
}

std::string nvidia_family(int major, int minor) {
  if (major == 7) return minor == 5 ? "nvidia-turing" : "nvidia-volta";
  if (major == 8) return minor == 9 ? "nvidia-ada" : "nvidia-ampere";
  if (major == 9) return "nvidia-hopper";
  if (major == 10) return "nvidia-blackwell-sm10x";
  if (major == 11) return "nvidia-blackwell-sm11x";
  if (major == 12) return "nvidia-blackwell-sm12x";
  return fmt::format("nvidia-sm_{}{}", major, minor);
}

double round_to(double x, int digits) {
  const double s = std::pow(10.0, digits);
  return std::round(x * s) / s;
}

std::string x86_level(const CpuInfo& cpu) {
  auto all = [&](std::initializer_list<const char*> fl) {
    for (const char* f : fl)
      if (!cpu.has(f)) return false;
    return true;
  };
  if (all({"avx512f", "avx512bw", "avx512vl", "avx2", "fma"})) return "x86-64-v4";
  if (all({"avx2", "fma"})) return "x86-64-v3";
  if (all({"sse4_2"}) || all({"sse4.2"})) return "x86-64-v2";
  return "x86-64";
}

}  // namespace

SpecError::SpecError(std::string path, std::string field, const std::string& message)
    : std::runtime_error(field.empty() ? fmt::format("{}: {}", path, message)
                                       : fmt::format("{}: field \"{}\": {}", path, field, message)),
      path_(std::move(path)),
      field_(std::move(field)) {}

std::optional<double> TargetSpec::peak(std::string_view key) const {
  auto it = peak_tflops.find(std::string(key));
  if (it == peak_tflops.end()) return std::nullopt;
  return it->second;
}

std::optional<double> TargetSpec::peak_for(DType t) const {
  auto best = [&](const char* a, const char* b) -> std::optional<double> {
    auto x = peak(a), y = peak(b);
    if (x && y) return std::max(*x, *y);
    return x ? x : y;
  };
  switch (t) {
    case DType::F64:
    case DType::I64:
      return best("fp64", "fp64_matrix");
    case DType::F32:
      return best("fp32", "fp32_matrix");
    case DType::F16:
      if (auto p = peak("fp16")) return p;
      return best("fp32", "fp32_matrix");
    case DType::BF16:
      if (auto p = peak("bf16")) return p;
      return best("fp32", "fp32_matrix");
  }
  return std::nullopt;
}

const std::string* TargetSpec::source_for(std::string_view field) const {
  std::string f(field);
  while (true) {
    auto it = sources.find(f);
    if (it != sources.end()) return &it->second;
    const std::size_t dot = f.rfind('.');
    if (dot == std::string::npos) break;
    f.resize(dot);
  }
  auto it = sources.find("*");
  return it == sources.end() ? nullptr : &it->second;
}

TargetSpec parse_target_spec(const json& doc, const fs::path& path) {
  Validator v(doc, path);
  return v.run();
}

std::vector<TargetSpec> load_spec_db(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw SpecError(display_path(dir), "", "spec database directory not found");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<TargetSpec> db;
  std::map<std::string, fs::path> seen;
  for (const auto& f : files) {
    json doc;
    try {
      doc = json::parse(read_file(f));
    } catch (const json::parse_error& e) {
      throw SpecError(display_path(f), "", fmt::format("not valid JSON ({})", e.what()));
    }
    TargetSpec t = parse_target_spec(doc, f);
    auto [it, inserted] = seen.emplace(t.id, f);
    if (!inserted)
      throw SpecError(display_path(f), "id",
                      fmt::format("expected an id unique in the database, got \"{}\" (also in {})",
                                  t.id, display_path(it->second)));
    db.push_back(std::move(t));
  }
  std::sort(db.begin(), db.end(),
            [](const TargetSpec& a, const TargetSpec& b) { return a.id < b.id; });
  return db;
}

const TargetSpec* find_target(const std::vector<TargetSpec>& db, std::string_view id) {
  for (const auto& t : db)
    if (t.id == id) return &t;
  return nullptr;
}

std::vector<std::string> name_tokens_of(std::string_view name) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '+') {
      cur += static_cast<char>(std::tolower(u));
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

const TargetSpec* match_nvidia_device(const std::vector<TargetSpec>& db,
                                      std::string_view device_name, int cc_major, int cc_minor) {
  const std::string cc = fmt::format("{}.{}", cc_major, cc_minor);
  const auto toks = name_tokens_of(device_name);
  const TargetSpec* best = nullptr;
  std::size_t best_n = 0;
  for (const auto& t : db) {
    if (t.vendor != "NVIDIA" || t.kind != "gpu" || t.compute_capability != cc) continue;
    if (t.name_tokens.empty() || !contains_all(toks, t.name_tokens)) continue;
    if (contains_any(toks, t.exclude_tokens)) continue;
    const std::size_t n = token_count(t.name_tokens);
    if (!best || n > best_n || (n == best_n && t.id < best->id)) {
      best = &t;
      best_n = n;
    }
  }
  return best;
}

TargetSpec derive_nvidia_spec(const NvidiaDeviceAttributes& dev) {
  const std::string kDriver = "CUDA driver attributes of this device (cuDeviceGetAttribute)";
  json j;
  j["id"] = slug(dev.name) + "-derived";
  j["name"] = dev.name.empty() ? "unknown NVIDIA GPU" : dev.name;
  j["vendor"] = "NVIDIA";
  j["family"] = nvidia_family(dev.cc_major, dev.cc_minor);
  j["kind"] = "gpu";
  j["isa"] = fmt::format("sm_{}{}", dev.cc_major, dev.cc_minor);
  j["author_surfaces"] = {"cuda", "triton"};
  j["derived"] = true;
  json sources = {{"*", kDriver}};
  json notes = json::object();

  const double clock_ghz = dev.max_clock_mhz / 1000.0;
  json peaks = json::object();
  if (dev.sm_count > 0 && clock_ghz > 0) {
    if (int l = fp32_lanes_per_sm(dev.cc_major, dev.cc_minor); l > 0)
      peaks["fp32"] = round_to(dev.sm_count * l * 2.0 * clock_ghz / 1000.0, 3);
    if (int l = fp64_lanes_per_sm(dev.cc_major, dev.cc_minor); l > 0)
      peaks["fp64"] = round_to(dev.sm_count * l * 2.0 * clock_ghz / 1000.0, 3);
    sources["peak_tflops"] =
        "derived from the driver's SM count and max clock with the FMA lanes per SM of the CUDA "
        "C++ Programming Guide's arithmetic instruction throughput table";
    notes["peak_tflops"] = fmt::format(
        "fp32 = {} SMs x {} lanes x 2 FLOP x {:.3f} GHz. Tensor Core peaks (tf32/fp16/bf16/fp8) "
        "cannot be derived from driver attributes and are absent: consumers fall back to fp32.",
        dev.sm_count, fp32_lanes_per_sm(dev.cc_major, dev.cc_minor), clock_ghz);
  }
  j["peak_tflops"] = peaks;
  if (dev.memory_clock_mhz > 0 && dev.memory_bus_width_bits > 0) {
    j["memory_bandwidth_gbs"] =
        round_to(2.0 * dev.memory_clock_mhz * 1e6 * dev.memory_bus_width_bits / 8.0 / 1e9, 1);
    notes["memory_bandwidth_gbs"] =
        "2 x memory clock x bus width / 8 (DDR formula of the CUDA bandwidthTest sample)";
  }
  if (dev.memory_bytes > 0) j["memory_gb"] = round_to(dev.memory_bytes / 1e9, 2);
  if (dev.sm_count > 0) j["compute_units"] = {{"count", dev.sm_count}, {"kind", "SM"}};
  if (clock_ghz > 0) j["clock_ghz"] = round_to(clock_ghz, 3);
  if (dev.l2_bytes > 0) j["caches"] = {{"l2_mb", round_to(dev.l2_bytes / (1024.0 * 1024.0), 2)}};
  if (dev.shared_memory_per_sm_bytes > 0)
    j["on_chip_memory"] = {{"name", "shared memory"},
                           {"kb_per_sm", dev.shared_memory_per_sm_bytes / 1024.0}};
  if (dev.warp_size > 0) j["vector_width"] = {{"name", "warp"}, {"lanes", dev.warp_size}};

  GpuLimits g;
  g.warp_size = dev.warp_size;
  g.max_threads_per_sm = dev.max_threads_per_sm;
  g.max_blocks_per_sm = dev.max_blocks_per_sm;
  g.registers_per_sm = dev.registers_per_sm;
  g.max_shared_memory_per_sm_kb = dev.shared_memory_per_sm_bytes / 1024.0;
  g.max_shared_memory_per_block_kb = dev.shared_memory_per_block_optin_bytes / 1024.0;
  g.l2_mb = dev.l2_bytes / (1024.0 * 1024.0);
  json lim = json::object();
  if (g.warp_size > 0) lim["warp_size"] = g.warp_size;
  if (g.max_threads_per_sm > 0) lim["max_threads_per_sm"] = g.max_threads_per_sm;
  if (g.max_blocks_per_sm > 0) lim["max_blocks_per_sm"] = g.max_blocks_per_sm;
  if (g.registers_per_sm > 0) lim["registers_per_sm"] = g.registers_per_sm;
  if (g.max_shared_memory_per_sm_kb > 0)
    lim["max_shared_memory_per_sm_kb"] = g.max_shared_memory_per_sm_kb;
  if (g.max_shared_memory_per_block_kb > 0)
    lim["max_shared_memory_per_block_kb"] = g.max_shared_memory_per_block_kb;
  if (g.l2_mb > 0) lim["l2_mb"] = round_to(g.l2_mb, 2);
  j["limits"] = lim;
  j["match"] = {{"compute_capability", fmt::format("{}.{}", dev.cc_major, dev.cc_minor)},
                {"name_tokens", json::array({dev.name})}};
  const std::string sm = j["isa"].get<std::string>();
  j["rungs"] = {{"rung0", fmt::format("nvcc/ptxas -arch={} (CUDA toolkit)", sm)},
                {"rung1", fmt::format("ptxas -v for {} + cuobjdump/nvdisasm SASS mix", sm)},
                {"rung2", "triton interpreter for Triton kernels"},
                {"rung3", "roofline from this derived spec"},
                {"rung5", "this device (local)"}};
  j["sources"] = sources;
  j["notes"] = notes;

  TargetSpec t;
  t.id = j["id"].get<std::string>();
  t.name = j["name"].get<std::string>();
  t.vendor = "NVIDIA";
  t.family = j["family"].get<std::string>();
  t.kind = "gpu";
  t.isa = sm;
  t.author_surfaces = {"cuda", "triton"};
  for (const auto& [k, v] : peaks.items()) t.peak_tflops[k] = v.get<double>();
  t.memory_bandwidth_gbs = j.value("memory_bandwidth_gbs", 0.0);
  t.memory_gb = j.value("memory_gb", 0.0);
  t.compute_units = dev.sm_count;
  t.compute_unit_kind = "SM";
  t.clock_ghz = clock_ghz;
  for (const auto& [k, v] : j["rungs"].items()) t.rungs[k] = v.get<std::string>();
  for (const auto& [k, v] : sources.items()) t.sources[k] = v.get<std::string>();
  for (const auto& [k, v] : notes.items()) t.notes[k] = v.get<std::string>();
  t.compute_capability = fmt::format("{}.{}", dev.cc_major, dev.cc_minor);
  t.name_tokens = {dev.name};
  t.limits = g;
  t.derived = true;
  t.raw = std::move(j);
  return t;
}

TargetSpec resolve_nvidia_device(const std::vector<TargetSpec>& db,
                                 const NvidiaDeviceAttributes& dev) {
  if (const TargetSpec* t = match_nvidia_device(db, dev.name, dev.cc_major, dev.cc_minor))
    return *t;
  return derive_nvidia_spec(dev);
}

const TargetSpec* match_cpu(const std::vector<TargetSpec>& db, const CpuInfo& cpu) {
  const auto toks = name_tokens_of(cpu.model);
  const TargetSpec* best = nullptr;
  std::size_t best_n = 0;
  for (const auto& t : db) {
    if (t.kind != "cpu" || t.cpu_model_tokens.empty()) continue;
    if (!contains_all(toks, t.cpu_model_tokens)) continue;
    const std::size_t n = token_count(t.cpu_model_tokens);
    if (!best || n > best_n || (n == best_n && t.id < best->id)) {
      best = &t;
      best_n = n;
    }
  }
  return best;
}

TargetSpec derive_cpu_spec(const CpuInfo& cpu, const Ceilings& c) {
  const std::string kProbe = fmt::format(
      "measured on this machine by the vladbud ceilings probe ({}, {})", c.measured_at, c.compiler);
  TargetSpec t;
  t.id = "local-cpu";
  t.name = cpu.model;
  t.vendor = cpu.vendor;
  t.kind = "cpu";
  t.derived = true;
  if (cpu.arch == "x86_64") {
    t.isa = x86_level(cpu);
  } else if (cpu.arch == "aarch64") {
    t.isa = "armv8-a";
    if (cpu.has("sve")) t.isa += "+sve";
    if (cpu.has("sve2")) t.isa += "+sve2";
  } else {
    t.isa = cpu.arch.empty() ? "unknown" : cpu.arch;
  }
  t.family = "local-" + (cpu.arch.empty() ? std::string("cpu") : cpu.arch);
  t.author_surfaces = {"cpp-simd"};
  for (const auto& [d, v] : c.peak_tflops) t.peak_tflops[std::string(dtype_name(d))] = v;
  t.memory_bandwidth_gbs = c.mem_bw_gbs;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) t.memory_gb = static_cast<double>(pages) * page / 1e9;
  t.compute_units = cpu.logical_cores;
  t.compute_unit_kind = "logical core";
  t.rungs = {{"rung0", "the host compiler (-march=native)"},
             {"rung1", "compiler vectorization report + llvm-mca for the host CPU"},
             {"rung2", "native"},
             {"rung3", "roofline from the measured ceilings"},
             {"rung5", "native (this machine)"}};
  t.sources = {{"peak_tflops", kProbe},
               {"memory_bandwidth_gbs", kProbe},
               {"memory_gb", "sysconf(_SC_PHYS_PAGES) x page size"},
               {"caches", "sysfs /sys/devices/system/cpu/cpu0/cache"},
               {"compute_units", "std::thread::hardware_concurrency()"},
               {"isa_extensions", "/proc/cpuinfo flags"}};
  t.notes = {{"peak_tflops", "measured, not datasheet: the ceiling the local % of peak uses"}};

  json j;
  j["id"] = t.id;
  j["name"] = t.name;
  j["vendor"] = t.vendor;
  j["family"] = t.family;
  j["kind"] = t.kind;
  j["isa"] = t.isa;
  j["author_surfaces"] = t.author_surfaces;
  j["peak_tflops"] = t.peak_tflops;
  j["memory_bandwidth_gbs"] = t.memory_bandwidth_gbs;
  j["memory_gb"] = round_to(t.memory_gb, 2);
  j["compute_units"] = {{"count", t.compute_units}, {"kind", t.compute_unit_kind}};
  json caches = json::object();
  if (cpu.l1d_bytes) caches["l1d_kb_per_core"] = cpu.l1d_bytes / 1024.0;
  if (cpu.l2_bytes) caches["l2_kb"] = cpu.l2_bytes / 1024.0;
  if (cpu.llc_bytes) caches["llc_mb"] = cpu.llc_bytes / (1024.0 * 1024.0);
  j["caches"] = caches;
  j["isa_extensions"] = cpu.isa;
  j["rungs"] = t.rungs;
  j["sources"] = t.sources;
  j["notes"] = t.notes;
  j["derived"] = true;
  t.raw = std::move(j);
  return t;
}

NvidiaDeviceAttributes device_attributes(const GpuInfo& g) {
  NvidiaDeviceAttributes a;
  a.name = g.name;
  a.cc_major = g.cc_major;
  a.cc_minor = g.cc_minor;
  a.sm_count = g.sm_count;
  a.max_clock_mhz = g.clock_khz / 1000.0;
  a.memory_bytes = static_cast<double>(g.total_mem_bytes);
  a.memory_clock_mhz = g.mem_clock_khz / 1000.0;
  a.memory_bus_width_bits = g.mem_bus_width_bits;
  a.l2_bytes = static_cast<double>(g.l2_bytes);
  a.shared_memory_per_sm_bytes = g.smem_per_sm_bytes;
  a.shared_memory_per_block_optin_bytes = g.smem_per_block_optin_bytes;
  a.max_threads_per_sm = g.max_threads_per_sm;
  a.max_blocks_per_sm = g.max_blocks_per_sm;
  a.registers_per_sm = g.regs_per_sm;
  a.warp_size = g.warp_size;
  return a;
}

}  // namespace vb
