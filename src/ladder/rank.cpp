#include "ladder/rank.h"

#include "ladder/cpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "backends/backend.h"
#include "core/paths.h"
#include "core/util.h"
#include "targets/ceilings.h"
#include "targets/cpu_info.h"
#include "targets/nvidia_detect.h"
#include "targets/spec_db.h"

namespace vb::ladder {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<VariantParam> parse_variant_params(const std::string& source) {
  std::vector<VariantParam> out;
  static const std::regex decl(
      R"(^\s*//\s*@vb-param\s+([A-Z][A-Z0-9_]*)\s+(-?\d+)(\s+\{([-0-9,\s]*)\})?\s*(.*)$)");
  std::istringstream in(source);
  std::string line;
  int no = 0;
  std::smatch m;
  while (std::getline(in, line)) {
    ++no;
    if (line.find("@vb-param") == std::string::npos) continue;
    if (!std::regex_match(line, m, decl))
      throw std::invalid_argument(fmt::format(
          "line {}: malformed @vb-param (expected '// @vb-param NAME DEFAULT {{V1,V2}} text')", no));
    VariantParam p;
    p.name = m[1];
    p.default_value = std::stoll(m[2]);
    if (m[4].matched) {
      std::istringstream vs(m[4].str());
      std::string v;
      while (std::getline(vs, v, ','))
        if (v.find_first_not_of(" \t") != std::string::npos) p.allowed.push_back(std::stoll(v));
    }
    p.description = m[5];
    if (source.find("#define " + p.name + " ") == std::string::npos)
      throw std::invalid_argument(fmt::format("line {}: @vb-param {} has no '#define {} ...' fallback",
                                              no, p.name, p.name));
    out.push_back(p);
  }
  return out;
}

std::map<std::string, long long> target_params(const TargetSpec& t) {
  std::map<std::string, long long> p;
  const json& r = t.raw;
  if (r.contains("vector_width") && r["vector_width"].contains("bits"))
    p["VEC_BYTES"] = r["vector_width"]["bits"].get<long long>() / 8;
  if (r.contains("caches")) {
    const json& c = r["caches"];
    if (c.contains("l1d_kb_per_core")) p["L1D_BYTES"] = static_cast<long long>(c["l1d_kb_per_core"].get<double>() * 1024);
    if (c.contains("l2_kb_per_core")) p["L2_BYTES"] = static_cast<long long>(c["l2_kb_per_core"].get<double>() * 1024);
    if (c.contains("l3_mb")) p["LLC_BYTES"] = static_cast<long long>(c["l3_mb"].get<double>() * 1048576);
  }
  if (t.compute_units > 0) p["CORES"] = t.compute_units;
  return p;
}

std::string instantiate_variant(const std::string& source, const TargetSpec& target) {
  const auto params = parse_variant_params(source);
  const auto card = target_params(target);
  std::string out = source;
  std::string header = "// Instantiated for target " + target.id + " (vladbud variants):";
  for (const auto& p : params) {
    long long v = p.default_value;
    std::string why = "default (the card has no value)";
    auto it = card.find(p.name);
    if (it != card.end()) {
      if (p.allowed.empty()) {
        v = it->second;
        why = "card";
      } else {
        std::vector<long long> a = p.allowed;
        std::sort(a.begin(), a.end());
        v = a.front();
        for (long long x : a)
          if (x <= it->second) v = x;
        why = fmt::format("card {} -> allowed {}", it->second, v);
      }
    }
    const std::regex def("#define " + p.name + " -?\\d+");
    out = std::regex_replace(out, def, fmt::format("#define {} {}", p.name, v),
                             std::regex_constants::format_first_only);
    header += fmt::format(" {}={} ({});", p.name, v, why);
  }
  return header + "\n" + out;
}

Variant starter_variant(const Backend& backend, const KernelType& type) {
  Variant v;
  v.name = "starter";
  v.source = backend.starter_source(type.name());
  v.backend = backend.name();
  v.description = "the " + backend.name() + " starter " + v.source.filename().string();
  if (!fs::is_regular_file(v.source))
    throw std::invalid_argument("no " + backend.name() + " starter for " + type.name() + ": " +
                                v.source.string() + " does not exist");
  return v;
}

std::vector<Variant> default_variants(const std::string& type) {
  std::vector<Variant> out;
  std::string looked;
  for (const Backend* b : all_backends()) {
    const fs::path dir = b->variants_dir(type);
    looked += (looked.empty() ? "" : ", ") + dir.string();
    if (!fs::is_directory(dir)) continue;
    for (auto& v : load_variants(dir)) out.push_back(std::move(v));
  }
  if (out.empty())
    throw std::invalid_argument("no variants of " + type + " (none of " + looked +
                                " exists); give --variants DIR with one kernel source per variant");
  std::sort(out.begin(), out.end(), [](const Variant& a, const Variant& b) { return a.name < b.name; });
  return out;
}

std::vector<Variant> load_variants(const fs::path& dir) {
  if (!fs::is_directory(dir))
    throw std::invalid_argument("variants directory " + dir.string() +
                                " does not exist (give --variants DIR with one kernel source per "
                                "variant: .cpp for CPU targets, .cu for NVIDIA ones, .py (Triton) "
                                "for NVIDIA and AMD ones)");
  std::vector<Variant> v;
  for (const auto& e : fs::directory_iterator(dir)) {
    // A variant's backend is the registered backend of its file extension.
    const Backend* be = backend_for_extension(e.path().extension().string());
    if (!be) continue;
    Variant x;
    x.name = e.path().stem().string();
    x.source = e.path();
    x.backend = be->name();
    // Description: the first line of the leading comment ("// ..." in C++, "# ..." or the
    // module docstring in Python).
    std::istringstream in(read_file(e.path()));
    std::string line;
    while (std::getline(in, line)) {
      std::size_t skip = 0;
      if (line.rfind("//", 0) == 0) skip = 2;
      else if (line.rfind("\"\"\"", 0) == 0) skip = 3;
      else if (line.rfind("#", 0) == 0) skip = 1;
      else break;
      std::string t = line.substr(skip);
      t.erase(0, t.find_first_not_of(" "));
      if (const auto q = t.find("\"\"\""); q != std::string::npos) t.erase(q);
      if (t.empty() || t.rfind("Instantiated for", 0) == 0 || t.rfind("!", 0) == 0) continue;
      x.description = t;
      break;
    }
    v.push_back(x);
  }
  if (v.empty())
    throw std::invalid_argument("variants directory " + dir.string() +
                                " holds no .cpp or .cu variant (nor a .py Triton one; put one kernel "
                                "source per variant there)");
  std::sort(v.begin(), v.end(), [](const Variant& a, const Variant& b) { return a.name < b.name; });
  return v;
}

std::vector<Variant> instantiate_variants(const std::vector<Variant>& variants,
                                          const TargetSpec& target, const fs::path& out_dir) {
  fs::create_directories(out_dir);
  std::vector<Variant> out;
  for (const auto& v : variants) {
    Variant w = v;
    w.source = out_dir / (v.name + v.source.extension().string());
    const std::string text = instantiate_variant(read_file(v.source), target);
    std::error_code ec;
    if (!fs::exists(w.source, ec) || read_file(w.source) != text) write_file_atomic(w.source, text);
    out.push_back(w);
  }
  return out;
}

TargetSpec resolve_target(const std::string& id) {
  if (id == "local" || id == "local-cpu")
    return derive_cpu_spec(detect_cpu(), local_cpu_ceilings(false));
  const auto db = load_spec_db();
  const TargetSpec* t = find_target(db, id);
  if (!t) {
    std::string known = "local";
    for (const auto& s : db)
      if (climber_for(s)) known += ", " + s.id;
    throw std::invalid_argument("unknown target '" + id + "'; known targets with a climber: " + known);
  }
  return *t;
}

MeasuredTimes load_measured_times(const fs::path& file, const std::string& type) {
  json j;
  try {
    j = json::parse(read_file(file));
  } catch (const std::exception& e) {
    throw std::invalid_argument("--calibration " + file.string() + ": cannot read it as JSON (" +
                                e.what() + "); give a file written by bench/ranking_cuda.sh --measure");
  }
  if (!j.is_object() || !j.contains("target") || !j.contains("types") || !j["types"].is_object())
    throw std::invalid_argument("--calibration " + file.string() +
                                ": not a measured-times file (want {\"target\", \"types\": {TYPE: "
                                "{VARIANT: {\"median_us\"}}}}, as bench/ranking_cuda.sh --measure writes)");
  MeasuredTimes m;
  m.file = file.string();
  m.target_id = j["target"].get<std::string>();
  m.date = j.value("date", std::string());
  m.machine = j.value("machine", std::string());
  if (j["types"].contains(type))
    for (const auto& [v, r] : j["types"][type].items()) {
      const std::string verdict = r.value("verdict", std::string());
      if ((verdict == "PASS" || verdict == "UNVERIFIED") && r.contains("median_us") &&
          r["median_us"].is_number() && r["median_us"].get<double>() > 0)
        m.median_us[v] = r["median_us"].get<double>();
    }
  if (m.median_us.empty())
    throw std::invalid_argument("--calibration " + file.string() + ": no passing measured time of " +
                                type + " in it (types measured: " + [&] {
                                  std::string t;
                                  for (const auto& [k, _] : j["types"].items()) t += (t.empty() ? "" : ", ") + k;
                                  return t;
                                }() + ")");
  return m;
}

std::vector<RankingTrust> ranking_trust(const std::string& family, const std::string& kernel,
                                        const std::string& backend) {
  const fs::path f = vladbud_home() / "data" / "ranking_trust.json";
  std::error_code ec;
  if (!fs::exists(f, ec)) return {};
  std::vector<RankingTrust> own, all;
  try {
    const json j = json::parse(read_file(f));
    for (const auto& s : j.at("studies")) {
      if (s.at("family").get<std::string>() != family) continue;
      if (!backend.empty() && s.contains("backend") && s["backend"].get<std::string>() != backend)
        continue;
      RankingTrust t{s.at("family"), s.at("kernel"), s.value("model", std::string()),
                     s.at("study"),  s.at("tau"),    s.value("regret", 0.0),
                     s.at("pairs"),  s.value("blind", false)};
      if (t.kernel == kernel) own.push_back(t);
      else if (t.kernel == "all") all.push_back(t);
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(f.string() + " is malformed: " + e.what());
  }
  // Newest model first (the ranking is made with the newest); within a model the kernel's own
  // record before the study's "all" (a review found model 3's softmax record printed above
  // model 4's, whose study did not measure softmax).
  own.insert(own.end(), all.begin(), all.end());
  std::stable_sort(own.begin(), own.end(), [](const RankingTrust& a, const RankingTrust& b) {
    if (a.model != b.model) return a.model > b.model;
    return (a.kernel != "all") > (b.kernel != "all");
  });
  return own;
}

namespace {

// Measured times as rung-5 evidence of the climbs of their target (file measurements).
void attach_measured(std::vector<ClimbResult>& climbs, const MeasuredTimes& m) {
  for (auto& r : climbs) {
    auto it = m.median_us.find(r.variant);
    if (it == m.median_us.end() || r.rejected) continue;
    std::erase_if(r.evidence, [](const RungEvidence& e) { return e.rung == kRealHardware; });
    RungEvidence e;
    e.rung = kRealHardware;
    e.status = "pass";
    e.tool = "measured times from " + m.file;
    e.tool_version = m.date;
    e.data = {{"measured_us", it->second}, {"file", m.file}, {"date", m.date}, {"machine", m.machine}};
    e.summary = fmt::format("measured {:.4g} us ({}, {})", it->second, m.file, m.date);
    r.evidence.push_back(e);
    Estimate est;
    est.time_us = est.low_us = est.high_us = it->second;
    est.rung = kRealHardware;
    est.basis = "measured (" + m.file + ")";
    r.estimate = est;
    r.highest_rung = kRealHardware;
    r.confidence = "measured";
    r.stop_reason = "measured";
  }
}

}  // namespace

std::vector<TargetRanking> rank_variants(const KernelType& type,
                                         const std::vector<Variant>& variants,
                                         const std::vector<TargetSpec>& targets,
                                         const ClimbOptions& opts,
                                         const std::vector<MeasuredTimes>& measured) {
  for (const auto& m : measured)
    if (std::none_of(targets.begin(), targets.end(),
                     [&](const TargetSpec& t) { return t.id == m.target_id; }))
      throw std::invalid_argument("--calibration " + m.file + " measures " + m.target_id +
                                  ": add it to --targets so that its estimates can be compared");
  if (variants.empty()) throw std::invalid_argument("no variants to rank");
  std::vector<std::vector<ClimbResult>> climbs(targets.size());
  for (std::size_t ti = 0; ti < targets.size(); ++ti) {
    const TargetSpec& t = targets[ti];
    if (!climber_for(t))
      throw std::invalid_argument("no ladder climber handles target " + t.id + " (kind " + t.kind +
                                  "); climbers: " + climber_names());
    // CPU targets: the .cpp variants instantiated from the target's card; GPU targets: the
    // variants as written (a .cu variant #includes the starter by a path relative to itself).
    // Each variant goes to the target's climber for its backend (NVIDIA GPUs: .cu and .py).
    const bool gpu = t.kind == "gpu";
    std::vector<Variant> mine;
    for (const auto& v : variants)
      if (climber_for(t, v.backend)->accepts(v.backend)) mine.push_back(v);
    if (mine.empty())
      throw std::invalid_argument("no " + climber_extensions_for(t) + " variant for target " + t.id +
                                  " among the " + std::to_string(variants.size()) + " given");
    const fs::path dir = cache_dir() / "variants" / t.id / type.name();
    const auto inst = gpu ? mine : instantiate_variants(mine, t, dir);
    for (std::size_t vi = 0; vi < inst.size(); ++vi) {
      if (opts.progress)
        opts.progress(fmt::format("[{}/{}] {} on {}", vi + 1, inst.size(), inst[vi].name, t.id));
      climbs[ti].push_back(climber_for(t, inst[vi].backend)->climb(type, inst[vi], t, opts));
    }
    for (const auto& m : measured)
      if (m.target_id == t.id) attach_measured(climbs[ti], m);
  }
  // When and where a target's rung-5 times come from: a file's date and name, else now.
  auto measured_when = [&](std::size_t si) {
    for (const auto& m : measured)
      if (m.target_id == targets[si].id) return m.date + ", " + m.file;
    return utc_now_iso8601();
  };
  std::vector<TargetRanking> out;
  for (std::size_t ti = 0; ti < targets.size(); ++ti) {
    TargetRanking tr;
    tr.target = targets[ti];
    for (std::size_t si = 0; si < targets.size(); ++si) {
      if (si == ti || targets[si].family != targets[ti].family) continue;
      auto cal = calibration_from(climbs[si], targets[si].family, measured_when(si));
      if (!cal) continue;
      for (auto& r : climbs[ti]) apply_calibration(r, *cal);
      tr.calibration_applied = cal;
      break;
    }
    // No sibling measured: a measured target of the same vendor, across families, with the
    // band widened (heuristic: the families' efficiencies differ more than siblings').
    for (std::size_t si = 0; !tr.calibration_applied && si < targets.size(); ++si) {
      if (si == ti || targets[si].vendor != targets[ti].vendor ||
          targets[si].family == targets[ti].family)
        continue;
      auto cal = calibration_from(climbs[si], targets[si].family, measured_when(si));
      if (!cal) continue;
      cal->source += fmt::format(" (cross-family: {} -> {}; band widened x0.8 low, x1.25 high)",
                                 targets[si].family, targets[ti].family);
      for (auto& r : climbs[ti]) {
        const bool applies = r.estimate && r.estimate->rung < kRealHardware;
        apply_calibration(r, *cal);
        if (applies) {
          r.estimate->low_us *= 0.8;
          r.estimate->high_us *= 1.25;
        }
      }
      tr.calibration_applied = cal;
    }
    // The studies of the ranked sources' backend (the first variant's; rank --backend picks one).
    tr.trust = ranking_trust(tr.target.family, type.name(),
                             climbs[ti].empty() ? std::string() : climbs[ti].front().backend);
    tr.ranking = rank_climbs(climbs[ti]);
    out.push_back(std::move(tr));
  }
  return out;
}

namespace {
std::string tie_label(int g) {
  if (g <= 0) return "-";
  std::string s;
  for (int x = g; x > 0; x = (x - 1) / 26) s.insert(s.begin(), static_cast<char>('a' + (x - 1) % 26));
  return s;
}
}  // namespace

std::string format_rankings(const std::vector<TargetRanking>& rankings, const std::string& kernel) {
  std::string o;
  for (const auto& tr : rankings) {
    o += fmt::format("\n== {} on {} ({}, family {}) ==\n", kernel, tr.target.id, tr.target.name,
                     tr.target.family);
    if (tr.calibration_applied) o += "   calibrated by: " + tr.calibration_applied->source + "\n";
    if (tr.trust.empty())
      o += "   trust: no study has measured a ranking of " + kernel + " for family " +
           tr.target.family +
           (tr.ranking.empty() ? std::string() : " with " + tr.ranking.front().result.backend + " sources") +
           ": the order is untested; read ties and bands, not positions\n";
    for (const auto& t : tr.trust)
      o += fmt::format("   trust: {} Kendall tau {:.2f} over {} pairs, top-1 regret {:.2f} ({} {}, {})\n",
                       t.blind ? "blind" : "post-hoc (not blind)", t.tau, t.pairs, t.regret,
                       t.kernel == kernel ? kernel : "all kernels", t.model, t.study);
    o += fmt::format("{:>3} {:>3}  {:<22} {:>4}  {:<20} {:>12}  {:<25}\n", "#", "tie", "variant",
                     "rung", "confidence", "estimate_us", "band_us");
    for (const auto& rv : tr.ranking) {
      const auto& r = rv.result;
      std::string est = "-", band = "-";
      if (r.estimate) {
        est = fmt::format("{:.4g}", r.estimate->time_us);
        band = fmt::format("[{:.4g}, {:.4g}]", r.estimate->low_us, r.estimate->high_us);
      }
      o += fmt::format("{:>3} {:>3}  {:<22} {:>4}  {:<20} {:>12}  {:<25}\n", rv.position,
                       tie_label(rv.tie_group), r.variant, r.highest_rung, r.confidence, est, band);
      for (const auto& e : r.evidence)
        o += fmt::format("          r{} {:<11} {}\n", e.rung, e.status, e.summary);
      if (r.rejected || !r.stop_reason.empty())
        o += fmt::format("          stop: {}\n", r.stop_reason);
    }
  }
  return o;
}

json rankings_to_json(const std::vector<TargetRanking>& rankings, const std::string& kernel,
                      DType dtype) {
  json j;
  j["kernel"] = kernel;
  j["dtype"] = std::string(dtype_name(dtype));
  j["targets"] = json::array();
  for (const auto& tr : rankings) {
    json t;
    t["id"] = tr.target.id;
    t["name"] = tr.target.name;
    t["family"] = tr.target.family;
    t["local"] = tr.target.id == "local-cpu";
    t["calibration"] = tr.calibration_applied
                           ? json{{"by", tr.calibration_applied->target_id},
                                  {"factor", tr.calibration_applied->factor},
                                  {"samples", tr.calibration_applied->samples},
                                  {"source", tr.calibration_applied->source}}
                           : json(nullptr);
    t["trust"] = json::array();
    for (const auto& x : tr.trust)
      t["trust"].push_back({{"kernel", x.kernel}, {"tau", x.tau}, {"pairs", x.pairs},
                            {"regret", x.regret}, {"blind", x.blind}, {"model", x.model},
                            {"study", x.study}});
    t["ranking"] = ranking_to_json(tr.ranking);
    j["targets"].push_back(t);
  }
  return j;
}

}  // namespace vb::ladder

namespace vb::ladder {

std::vector<TargetSpec> remote_cpu_targets() {
  std::vector<TargetSpec> out;
  const CpuInfo host = detect_cpu();
  for (const auto& t : load_spec_db()) {
    if (t.kind != "cpu" || !climber_for(t)) continue;
    if (match_cpu(std::vector<TargetSpec>{t}, host)) continue;  // this machine: measured locally
    try {
      (void)cpu_target_config(t);
    } catch (const std::invalid_argument&) {
      continue;  // no llvm-mca CPU recorded: nothing to climb with
    }
    out.push_back(t);
  }
  return out;
}

std::vector<TargetSpec> remote_targets_for(const std::string& backend) {
  std::vector<TargetSpec> out;
  for (const TargetClimber* c : all_climbers())
    if (c->accepts(backend))
      for (auto& t : c->remote_targets()) out.push_back(std::move(t));
  return out;
}

std::string target_family(const TargetSpec& t) {
  if (t.kind == "cpu") return "cpu";
  std::string v = t.vendor;
  for (char& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return v;
}

std::vector<std::pair<std::string, std::vector<TargetSpec>>> remote_targets_by_family() {
  std::vector<std::pair<std::string, std::vector<TargetSpec>>> out;
  std::set<std::string> seen;
  for (const TargetClimber* c : all_climbers())
    for (auto& t : c->remote_targets()) {
      if (!seen.insert(t.id).second) continue;
      const std::string f = target_family(t);
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == f; });
      if (it == out.end()) it = out.insert(out.end(), {f, {}});
      it->second.push_back(std::move(t));
    }
  return out;
}

std::vector<TargetSpec> remote_nvidia_targets() {
  std::string why;
  std::set<std::string> local_arch;
  const auto db = load_spec_db();
  for (const auto& g : detect_nvidia_gpus(&why))
    local_arch.insert(resolve_nvidia_device(db, device_attributes(g)).isa);
  std::vector<TargetSpec> out;
  std::set<std::string> seen;
  for (const auto& t : db) {
    if (t.kind != "gpu" || t.vendor != "NVIDIA" || !climber_for(t)) continue;
    if (local_arch.count(t.isa) || !seen.insert(t.isa).second) continue;
    out.push_back(t);
  }
  return out;
}

std::vector<std::vector<ClimbResult>> climb_kernels(const std::vector<KernelToClimb>& kernels,
                                                    const std::vector<TargetSpec>& targets,
                                                    const ClimbOptions& opts) {
  std::vector<std::vector<ClimbResult>> out(targets.size());
  for (std::size_t ti = 0; ti < targets.size(); ++ti) {
    const TargetSpec& t = targets[ti];
    if (!climber_for(t))
      throw std::invalid_argument("no ladder climber handles target " + t.id + " (kind " + t.kind +
                                  "); climbers: " + climber_names());
    const bool gpu = t.kind == "gpu";
    for (const auto& k : kernels) {
      const TargetClimber* c = climber_for(t, k.variant.backend);
      if (!c->accepts(k.variant.backend)) {
        ClimbResult r;
        r.target_id = t.id;
        r.kernel = k.type->name();
        r.variant = k.variant.name;
        r.backend = k.variant.backend;
        r.rejected = true;
        r.confidence = "rejected";
        r.stop_reason = "a " + k.variant.backend + " source cannot run on " + t.id + " (" +
                        (gpu ? "a GPU" : "a CPU") + ": needs a " + climber_extensions_for(t) +
                        " source)";
        out[ti].push_back(std::move(r));
        continue;
      }
      if (opts.progress)
        opts.progress(fmt::format("[remote {}] {}{}", t.id, k.type->name(),
                                  k.variant.name == "starter" ? "" : " (" + k.variant.name + ")"));
      ClimbOptions o = opts;
      o.size = k.size;
      o.dtype = k.dtype;
      out[ti].push_back(c->climb(*k.type, k.variant, t, o));
    }
  }
  return out;
}

std::vector<std::vector<ClimbResult>> climb_starters(const std::vector<const KernelType*>& types,
                                                     const std::vector<TargetSpec>& targets,
                                                     const ClimbOptions& opts,
                                                     const std::string& backend) {
  if (!backend.empty()) (void)require_backend(backend);  // names the registered ones
  // Each target climbs the starters of `backend`, else of its default climber's backend
  // (kernels/<backend>/<type><ext>); climb_kernels rejects those no climber of the target takes.
  std::vector<std::vector<ClimbResult>> out(targets.size());
  for (std::size_t ti = 0; ti < targets.size(); ++ti) {
    const TargetClimber* c = climber_for(targets[ti]);
    if (!c)
      throw std::invalid_argument("no ladder climber handles target " + targets[ti].id +
                                  " (kind " + targets[ti].kind + "); climbers: " + climber_names());
    const Backend& be = require_backend(backend.empty() ? c->backend() : backend);
    std::vector<KernelToClimb> starters;
    for (const auto* kt : types)
      starters.push_back({kt, Variant{"starter", be.starter_source(kt->name()), be.name(),
                                      "the starter kernel"},
                          std::nullopt, opts.dtype});
    out[ti] = std::move(climb_kernels(starters, {targets[ti]}, opts)[0]);
  }
  return out;
}

namespace {

// The backend whose sources a target's climber compiled in `results` (the climber for their
// backend, else the target's default; "" when no climber handles it).
std::string climber_backend(const TargetSpec& t, const std::vector<ClimbResult>& results) {
  const TargetClimber* c = results.empty() ? climber_for(t) : climber_for(t, results.front().backend);
  return c ? c->backend() : std::string();
}

}  // namespace

json remote_targets_json(const std::vector<TargetSpec>& targets,
                         const std::vector<std::vector<ClimbResult>>& results) {
  json a = json::array();
  for (std::size_t ti = 0; ti < targets.size(); ++ti) {
    json t = {{"id", targets[ti].id},
              {"name", targets[ti].name},
              {"backend", climber_backend(targets[ti], results[ti])},
              {"local", false}, {"family", targets[ti].family}, {"kernels", json::array()}};
    for (const auto& r : results[ti]) {
      json k = {{"kernel", r.kernel}, {"variant", r.variant}, {"rung", r.highest_rung},
                {"rung_name", r.highest_rung >= 0 ? rung_name(r.highest_rung) : "none"},
                {"confidence", r.confidence}, {"rejected", r.rejected},
                {"stop_reason", r.stop_reason}};
      k["estimate_us"] = r.estimate ? json(r.estimate->time_us) : json(nullptr);
      k["low_us"] = r.estimate ? json(r.estimate->low_us) : json(nullptr);
      k["high_us"] = r.estimate ? json(r.estimate->high_us) : json(nullptr);
      t["kernels"].push_back(k);
    }
    a.push_back(t);
  }
  return a;
}

std::string format_remote_table(const std::vector<TargetSpec>& targets,
                                const std::vector<std::vector<ClimbResult>>& results,
                                const std::vector<std::string>& row_labels) {
  std::string o = "\nRemote targets (not this machine; the confidence ladder, no measurement):\n";
  std::vector<std::string> backends;  // whose sources were climbed, for the reader
  for (const auto& per_target : results)
    for (const auto& r : per_target)
      if (!r.rejected && !r.backend.empty() &&
          std::find(backends.begin(), backends.end(), r.backend) == backends.end())
        backends.push_back(r.backend);
  if (!backends.empty()) {
    std::string b;
    for (const auto& x : backends) b += (b.empty() ? "" : ", ") + x;
    o += "sources climbed: " + b + "\n";
  }
  o += fmt::format("{:<17}", "kernel");
  for (const auto& t : targets) o += fmt::format(" {:>26}", t.id);
  o += "\n";
  if (results.empty() || results[0].empty()) return o;
  for (std::size_t k = 0; k < results[0].size(); ++k) {
    o += fmt::format("{:<17}", k < row_labels.size() ? row_labels[k] : results[0][k].kernel);
    for (std::size_t ti = 0; ti < targets.size(); ++ti) {
      const auto& r = results[ti][k];
      std::string cell = r.rejected ? "rejected (r" + std::to_string(r.evidence.empty() ? 0 : r.evidence.back().rung) + ")"
                         : r.estimate ? fmt::format("r{} {:.3g} us [{:.2g}-{:.2g}]", r.highest_rung,
                                                    r.estimate->time_us, r.estimate->low_us, r.estimate->high_us)
                                      : fmt::format("r{} -", r.highest_rung);
      o += fmt::format(" {:>26}", cell);
    }
    o += "\n";
  }
  o += "(rN = highest rung reached: 1 static signals, 2 correctness, 3 analytical; estimate with its band)\n";
  std::vector<std::string> reasons;  // why cells were rejected, each reason once
  for (const auto& per_target : results)
    for (const auto& r : per_target)
      if (r.rejected && !r.stop_reason.empty() &&
          std::find(reasons.begin(), reasons.end(), r.stop_reason) == reasons.end())
        reasons.push_back(r.stop_reason);
  for (std::size_t i = 0; i < reasons.size() && i < 5; ++i) o += "rejected: " + reasons[i] + "\n";
  if (reasons.size() > 5)
    o += fmt::format("rejected: ... {} more reasons (--json has each)\n", reasons.size() - 5);
  return o;
}

}  // namespace vb::ladder
