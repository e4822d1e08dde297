#include "research/knowledge.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "core/paths.h"
#include "targets/ceilings.h"
#include "targets/cpu_info.h"
#include "backends/cuda/gpu_ceilings.h"
#include "targets/nvidia_detect.h"

namespace vb {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void say(const CardOptions& o, std::string msg) {
  if (o.progress) o.progress(std::move(msg));
}

fs::path knowledge_dir() {
  return vladbud_home() / "data" / "knowledge";
}

json knowledge_index() {
  const fs::path p = knowledge_dir() / "index.json";
  try {
    return json::parse(read_file(p));
  } catch (const json::exception& e) {
    throw std::runtime_error(p.string() + ": not valid JSON: " + e.what());
  }
}

// The spec DB, loaded once per process (the files do not change while VladBud runs).
const std::vector<TargetSpec>& spec_db() {
  static std::mutex mu;
  static std::optional<std::vector<TargetSpec>> db;
  std::lock_guard<std::mutex> lock(mu);
  if (!db) db = load_spec_db();
  return *db;
}

// A number at dotted path `path` of `j`, or nullopt.
std::optional<double> num_at(const json& j, const std::string& path) {
  const json* cur = &j;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t dot = path.find('.', start);
    const std::string key =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object() || !cur->contains(key)) return std::nullopt;
    cur = &(*cur)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (!cur->is_number()) return std::nullopt;
  return cur->get<double>();
}

std::string str_at(const json& j, const std::string& key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

std::string spec_field(const TargetSpec& s, const std::string& field) {
  return fmt::format(
      "{} {}",
      s.path.empty() ? std::string("derived spec") : ("data/targets/" + s.path.filename().string()),
      field);
}

bool is_nvidia_gpu(const TargetSpec& s) {
  return s.kind == "gpu" && s.vendor == "NVIDIA";
}

json cpu_json(const CpuInfo& cpu) {
  return json{{"vendor", cpu.vendor},
              {"model", cpu.model},
              {"arch", cpu.arch},
              {"logical_cores", cpu.logical_cores},
              {"l1d_bytes", cpu.l1d_bytes},
              {"l2_bytes", cpu.l2_bytes},
              {"llc_bytes", cpu.llc_bytes},
              {"isa", cpu.isa},
              {"machine_id", machine_id(cpu)}};
}

// Local CPU ceilings: cached ones always; measured when asked (calibrate) or allowed.
json cpu_ceilings_json(const CpuInfo& cpu, const CardOptions& o) {
  const bool cached = fs::exists(ceilings_cache_path(machine_id(cpu)));
  if (!o.calibrate && !cached && !o.measure_local)
    return json{{"measured", false},
                {"note",
                 "not measured yet: run `vladbud targets --calibrate` or `vladbud research "
                 "local --calibrate`"}};
  try {
    json j = local_cpu_ceilings(o.calibrate, o.progress);
    j["measured"] = true;
    return j;
  } catch (const std::exception& e) {
    return json{{"measured", false}, {"error", e.what()}};
  }
}

json gpu_ceilings_json(const GpuInfo& g, const CardOptions& o) {
  const bool cached = fs::exists(ceilings_cache_path(gpu_machine_id(g)));
  if (!o.calibrate && !cached && !o.measure_local)
    return json{{"measured", false}, {"note", "not measured yet"}};
  try {
    json j = local_gpu_ceilings(g, o.calibrate, o.progress);
    j["measured"] = true;
    return j;
  } catch (const std::exception& e) {
    return json{{"measured", false}, {"error", e.what()}};
  }
}

json capability_group(ProbeIsa isa, const std::string& arch, const std::string& source,
                      const CardOptions& o, std::vector<CapabilityResult>* out) {
  say(o, fmt::format("capability probes: {} {} ...", probe_isa_name(isa), arch));
  std::vector<CapabilityResult> rs = probe_capabilities(isa, arch, o.refresh_probes);
  json results = json::array();
  for (const auto& r : rs) results.push_back(r);
  if (out) out->insert(out->end(), rs.begin(), rs.end());
  return json{
      {"isa", probe_isa_name(isa)}, {"arch", arch}, {"source", source}, {"results", results}};
}

ProbeIsa host_probe_isa(const std::string& arch) {
  return arch == "aarch64" ? ProbeIsa::kAarch64 : ProbeIsa::kX86;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : sep) + a;
  return s;
}

}  // namespace

std::optional<ProbeTarget> probe_target_for(const TargetSpec& spec) {
  static const std::regex sm(R"(^sm_(\d+)a?$)");
  static const std::regex gfx(R"(^gfx[0-9a-f]+$)");
  std::smatch m;
  if (spec.vendor == "NVIDIA" && spec.kind == "gpu" && std::regex_match(spec.isa, m, sm))
    return ProbeTarget{ProbeIsa::kNvptx, "sm_" + m[1].str(), "spec isa (" + spec.isa + ")"};
  if (std::regex_match(spec.isa, gfx)) return ProbeTarget{ProbeIsa::kAmdgcn, spec.isa, "spec isa"};
  try {
    const json idx = knowledge_index();
    if (idx.contains("toolchain_arch") && idx["toolchain_arch"].contains(spec.id)) {
      const json& e = idx["toolchain_arch"][spec.id];
      const std::string isa = str_at(e, "isa");
      const std::string arch = str_at(e, "arch");
      if (!arch.empty() && (isa == "x86" || isa == "aarch64"))
        return ProbeTarget{isa == "x86" ? ProbeIsa::kX86 : ProbeIsa::kAarch64, arch,
                           "data/knowledge/index.json"};
    }
  } catch (const std::exception&) {
    // no index: fall through to the spec's own isa
  }
  if (spec.kind == "cpu" && spec.isa.rfind("x86-64", 0) == 0)
    return ProbeTarget{ProbeIsa::kX86, spec.isa, "spec isa as -march"};
  return std::nullopt;
}

std::optional<Playbook> playbook_for_family(const std::string& family) {
  const json idx = knowledge_index();
  if (!idx.contains("playbooks") || !idx["playbooks"].is_array()) return std::nullopt;
  for (const auto& p : idx["playbooks"]) {
    if (!p.contains("families") || !p["families"].is_array()) continue;
    for (const auto& f : p["families"])
      if (f.is_string() && f.get<std::string>() == family) {
        Playbook pb;
        pb.title = str_at(p, "title");
        pb.path = knowledge_dir() / str_at(p, "file");
        pb.text = read_file(pb.path);
        return pb;
      }
  }
  return std::nullopt;
}

json generation_constraints(const TargetSpec& spec, const std::vector<CapabilityResult>& probes,
                            const json& local) {
  const json raw = spec.raw.is_object() ? spec.raw : json::object();
  json c = json::object();
  const bool nvidia = is_nvidia_gpu(spec);
  const bool amd_gpu = spec.kind == "gpu" && spec.vendor == "AMD";
  const bool gpu = spec.kind == "gpu";
  const bool cpu = spec.kind == "cpu";
  const bool have_local = local.is_object();

  auto accepted = [&](const std::string& id) {
    for (const auto& r : probes)
      if (r.probe == id && r.status == CapStatus::kAccepted) return true;
    return false;
  };
  auto probed = [&](const std::string& id) {
    for (const auto& r : probes)
      if (r.probe == id && (r.status == CapStatus::kAccepted || r.status == CapStatus::kRejected))
        return true;
    return false;
  };

  // compile target
  if (nvidia) {
    std::string isa = spec.isa;
    if (have_local && local.contains("sm_arch")) {
      isa = local["sm_arch"].get<std::string>();
      if (isa == "sm_90" || isa == "sm_100" || isa == "sm_103" || isa == "sm_110" ||
          isa == "sm_120" || isa == "sm_121")
        isa += "a";
    }
    const std::string cc = isa.substr(3);
    c["compile_target"] = {
        {"value", isa},
        {"flags", fmt::format("-gencode arch=compute_{0},code=sm_{0}", cc)},
        {"source", have_local ? "detected compute capability" : spec_field(spec, "isa")}};
  } else if (amd_gpu) {
    c["compile_target"] = {{"value", spec.isa},
                           {"flags", "--offload-arch=" + spec.isa},
                           {"source", spec_field(spec, "isa")}};
  } else if (cpu) {
    std::string arch, flag;
    std::string source;
    for (const auto& r : probes)
      if (r.isa == "x86" || r.isa == "aarch64") {
        arch = r.arch;
        flag = (r.isa == "x86" ? "-march=" : "-mcpu=") + r.arch;
        source = "capability probe target";
        if (r.note.find(" knows ") != std::string::npos)
          source += "; " + r.note.substr(0, r.note.find(';'));
        break;
      }
    if (arch.empty()) {
      arch = spec.isa;
      source = spec_field(spec, "isa");
    }
    c["compile_target"] = {{"value", arch}, {"flags", flag}, {"source", source}};
  } else {
    c["compile_target"] = {{"value", spec.isa},
                           {"author_surfaces", spec.author_surfaces},
                           {"source", spec_field(spec, "isa")}};
  }
  // Can the toolchain here compile for that target? Only a probe verdict says so.
  if (!probes.empty()) {
    bool verdict = false;
    std::string why;
    for (const auto& r : probes) {
      if (r.status == CapStatus::kAccepted || r.status == CapStatus::kRejected) verdict = true;
      if (why.empty() && r.status == CapStatus::kUnavailable) why = r.reason;
    }
    c["compile_target"]["usable_here"] = verdict;
    if (!verdict) c["compile_target"]["why_not"] = why;
  }
  c["author_surfaces"] = spec.author_surfaces;

  // SIMD group (warp / wavefront / sub-group / vector lanes)
  {
    const json vw = raw.value("vector_width", json::object());
    std::string name = str_at(vw, "name");
    std::optional<double> width;
    std::string source = spec_field(spec, "vector_width");
    if (have_local && local.contains("warp_size") && local["warp_size"].get<int>() > 0) {
      width = local["warp_size"].get<int>();
      name = "warp";
      source = "detected (CU_DEVICE_ATTRIBUTE_WARP_SIZE)";
    } else if (auto w = num_at(raw, "limits.warp_size"); w && gpu) {
      width = w;
      source = spec_field(spec, "limits.warp_size");
    } else if (auto l = num_at(vw, "lanes")) {
      width = *l * num_at(vw, "sublanes").value_or(1.0);
    } else if (auto f = num_at(vw, "fp32_lanes")) {
      width = f;
      name += " (fp32 lanes)";
    }
    if (width)
      c["simd_group"] = {{"name", name.empty() ? "vector" : name},
                         {"width", static_cast<int>(*width)},
                         {"source", source}};
    else
      c["simd_group"] = {{"name", name}, {"width", nullptr}, {"source", "not in the spec"}};
  }

  // vector width in bytes
  if (gpu) {
    c["vector_width_bytes"] = {
        {"value", 16},
        {"source", nvidia ? "largest per-thread vector access: PTX ld/st .v4.b32 (16 B)"
                          : (amd_gpu ? "largest per-lane vector access: global_load_dwordx4 (16 B)"
                                     : "per-work-item 16-byte vector access")}};
  } else if (cpu) {
    std::optional<int> bytes;
    std::string source;
    if (accepted("avx512f")) {
      bytes = 64;
      source = "capability probe avx512f accepted";
    } else if (accepted("avx2_fma")) {
      bytes = 32;
      source = "capability probe avx2_fma accepted (avx512f rejected)";
    } else if (accepted("sve") || accepted("neon_fma")) {
      bytes = static_cast<int>(num_at(raw, "vector_width.bits").value_or(128) / 8);
      source = accepted("sve")
                   ? "SVE accepted; vector length from " + spec_field(spec, "vector_width.bits")
                   : "NEON accepted (128-bit)";
    } else if (auto b = num_at(raw, "vector_width.bits")) {
      bytes = static_cast<int>(*b / 8);
      source = spec_field(spec, "vector_width.bits") + " (no capability probe could run)";
    }
    c["vector_width_bytes"] = {{"value", bytes ? json(*bytes) : json(nullptr)},
                               {"source", bytes ? source : "unknown"}};
  } else {
    std::optional<double> bytes;
    std::string source = spec_field(spec, "vector_width");
    if (auto b = num_at(raw, "vector_width.bits")) {
      bytes = *b / 8;
    } else if (auto l = num_at(raw, "vector_width.lanes")) {
      bytes = *l * num_at(raw, "vector_width.sublanes").value_or(1.0) * 4;
      source += " (lanes x sublanes x 4 B)";
    }
    c["vector_width_bytes"] = {{"value", bytes ? json(static_cast<int>(*bytes)) : json(nullptr)},
                               {"source", bytes ? source : "not in the spec"}};
  }

  // on-chip memory budget per block / workgroup / core
  {
    const json oc = raw.value("on_chip_memory", json::object());
    std::string name = str_at(oc, "name");
    std::optional<double> bytes;
    std::string source;
    if (nvidia) {
      name = "shared memory per block (opt-in maximum)";
      if (have_local && local.value("smem_per_block_optin_bytes", 0) > 0) {
        bytes = local["smem_per_block_optin_bytes"].get<double>();
        source = "detected (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)";
      } else if (auto kb = num_at(raw, "limits.max_shared_memory_per_block_kb")) {
        bytes = *kb * 1024;
        source = spec_field(spec, "limits.max_shared_memory_per_block_kb");
      }
    } else if (cpu) {
      name = "L2 per core (tile budget)";
      if (have_local && local.value("l2_bytes", 0) > 0) {
        bytes = local["l2_bytes"].get<double>();
        source = "detected (sysfs cache index2)";
      } else if (auto kb = num_at(raw, "caches.l2_kb_per_core")) {
        bytes = *kb * 1024;
        source = spec_field(spec, "caches.l2_kb_per_core");
      } else if (auto mb = num_at(raw, "caches.l2_mb")) {
        bytes = *mb * 1024 * 1024;
        source = spec_field(spec, "caches.l2_mb") + " (shared)";
      }
    } else {
      static const std::pair<const char*, double> keys[] = {
          {"kb_per_cu", 1024.0},   {"kb_per_xe_core", 1024.0}, {"kb_per_sm", 1024.0},
          {"kb_per_core", 1024.0}, {"mb_per_core", 1048576.0}, {"ub_kb", 1024.0},
          {"l1_kb", 1024.0}};
      for (const auto& [k, scale] : keys)
        if (auto v = num_at(oc, k)) {
          bytes = *v * scale;
          source = spec_field(spec, std::string("on_chip_memory.") + k);
          break;
        }
    }
    c["on_chip_memory_per_block_bytes"] = {
        {"value", bytes ? json(static_cast<long long>(*bytes)) : json(nullptr)},
        {"name", name},
        {"source", bytes ? source : "not in the spec"}};
  }

  if (auto r = num_at(raw, "limits.max_registers_per_thread"))
    c["registers_per_thread_max"] = {
        {"value", static_cast<int>(*r)},
        {"source", spec_field(spec, "limits.max_registers_per_thread")}};

  // matrix instructions
  {
    std::vector<std::string> fams;
    std::set<std::string> base_accepted;
    std::string base_arch;
    for (const auto& r : probes)
      if (r.status == CapStatus::kAccepted && !r.matrix_family.empty() &&
          (r.arch.empty() || r.arch.back() != 'a' || r.isa != "nvptx"))
        base_accepted.insert(r.matrix_family);
    for (const auto& r : probes) {
      if (r.status != CapStatus::kAccepted || r.matrix_family.empty()) continue;
      std::string f = r.matrix_family;
      if (r.isa == "nvptx" && !r.arch.empty() && r.arch.back() == 'a') {
        if (base_accepted.count(f)) continue;
        f += " (" + r.arch + ")";
      }
      if (std::find(fams.begin(), fams.end(), f) == fams.end()) fams.push_back(f);
    }
    bool any_verdict = false;
    for (const auto& r : probes)
      if (!r.matrix_family.empty() &&
          (r.status == CapStatus::kAccepted || r.status == CapStatus::kRejected))
        any_verdict = true;
    if (any_verdict) {
      std::string tool;
      for (const auto& r : probes)
        if (!r.tool.empty()) {
          tool = r.tool;
          break;
        }
      c["matrix_instructions"] = {{"value", fams}, {"source", "capability probes (" + tool + ")"}};
    } else {
      std::vector<std::string> spec_list;
      if (raw.contains("matrix_instructions") && raw["matrix_instructions"].is_array())
        for (const auto& m : raw["matrix_instructions"])
          if (m.is_string()) spec_list.push_back(m.get<std::string>());
      c["matrix_instructions"] = {
          {"value", spec_list},
          {"source", spec_field(spec, "matrix_instructions") +
                         (probes.empty() ? " (no local toolchain to probe)"
                                         : " (no capability probe gave a verdict)")}};
    }
  }

  std::vector<std::string> acc;
  for (const auto& r : probes)
    if (r.status == CapStatus::kAccepted)
      acc.push_back(r.arch.empty() ? r.probe : r.probe + "@" + r.arch);
  c["accepted_features"] = acc;
  (void)probed;
  return c;
}

json research_card(const std::string& target_id, const CardOptions& o) {
  const std::vector<TargetSpec>& db = spec_db();
  if (target_id == "local") {
    json card = {{"target", "local"}, {"name", "this machine"}, {"kind", "machine"}};
    json local = {{"present", true}};
    json caps = json::array();
    json constraints = json::object();

    const CpuInfo cpu = detect_cpu();
    local["cpu"] = cpu_json(cpu);
    const TargetSpec* cpu_spec = match_cpu(db, cpu);
    local["cpu_spec"] = cpu_spec ? json(cpu_spec->id) : json(nullptr);
    local["cpu_ceilings"] = cpu_ceilings_json(cpu, o);
    std::vector<CapabilityResult> cpu_probes;
    if (o.probes)
      caps.push_back(capability_group(host_probe_isa(cpu.arch), "native",
                                      "this machine's CPU (-march/-mcpu=native)", o, &cpu_probes));
    TargetSpec cpu_t;
    if (cpu_spec) {
      cpu_t = *cpu_spec;
    } else {
      cpu_t.id = "local-cpu";
      cpu_t.kind = "cpu";
      cpu_t.vendor = cpu.vendor;
      cpu_t.name = cpu.model;
      cpu_t.isa = cpu.arch;
      cpu_t.author_surfaces = {"cpp-simd"};
      cpu_t.derived = true;
    }
    constraints["cpu"] = generation_constraints(cpu_t, cpu_probes, local["cpu"]);

    std::string why;
    const std::vector<GpuInfo> gpus = detect_nvidia_gpus(&why);
    local["gpus"] = json::array();
    local["gpu_status"] = gpus.empty() ? why : (why.empty() ? "ok" : why);
    constraints["gpus"] = json::array();
    std::set<std::string> probed_arch;
    for (const auto& g : gpus) {
      const TargetSpec spec = resolve_nvidia_device(db, device_attributes(g));
      json gj = {{"info", g},
                 {"spec", spec.id},
                 {"derived", spec.derived},
                 {"ceilings", gpu_ceilings_json(g, o)}};
      local["gpus"].push_back(gj);
      std::vector<CapabilityResult> gp;
      if (o.probes && probed_arch.insert(g.sm_arch()).second)
        caps.push_back(capability_group(ProbeIsa::kNvptx, g.sm_arch(), "detected GPU", o, &gp));
      else if (o.probes)
        gp = probe_capabilities(ProbeIsa::kNvptx, g.sm_arch(), false);
      json gjson = g;
      constraints["gpus"].push_back(generation_constraints(spec, gp, gjson));
    }
    card["local"] = local;
    card["capabilities"] = caps;
    card["constraints"] = constraints;
    card["playbook"] = nullptr;
    // The CPU's family: its spec's, else one chosen from the detected ISA extensions.
    std::string family = cpu_spec ? cpu_spec->family : "";
    if (family.empty() && cpu.arch == "x86_64")
      family = cpu.has("amx_bf16")  ? "x86-sapphirerapids"
               : cpu.has("avx512f") ? "x86-zen4"
                                    : "x86-zen3";
    if (family.empty() && cpu.arch == "aarch64")
      family = cpu.has("sve2") ? "arm-neoverse-v2" : "arm-neoverse-n1";
    if (auto pb = playbook_for_family(family))
      card["playbook"] = {{"title", pb->title},
                          {"file", pb->path.string()},
                          {"text", pb->text},
                          {"chosen_by", cpu_spec ? "spec family" : "detected ISA extensions"}};
    return card;
  }

  const TargetSpec* spec = find_target(db, target_id);
  if (!spec) {
    std::vector<std::string> ids;
    for (const auto& s : db) ids.push_back(s.id);
    throw UnknownTargetError(
        fmt::format("unknown target '{}'; known targets: {} (or 'local' for this machine)",
                    target_id, join(ids, ", ")));
  }

  json card = {{"target", spec->id},
               {"name", spec->name},
               {"vendor", spec->vendor},
               {"family", spec->family},
               {"kind", spec->kind},
               {"isa", spec->isa},
               {"spec_path", spec->path.string()},
               {"spec", spec->raw}};

  // Local facts: is this target the machine we run on?
  json local = {{"present", false}};
  json local_device = nullptr;
  if (spec->kind == "cpu") {
    const CpuInfo cpu = detect_cpu();
    const TargetSpec* m = match_cpu(db, cpu);
    if (m && m->id == spec->id) {
      local = {{"present", true}, {"cpu", cpu_json(cpu)}, {"ceilings", cpu_ceilings_json(cpu, o)}};
      local_device = local["cpu"];
    } else {
      local["why"] = fmt::format("this machine's CPU is '{}' ({})", cpu.model,
                                 m ? "spec " + m->id : "not in the spec DB");
    }
  } else if (is_nvidia_gpu(*spec)) {
    std::string why;
    const std::vector<GpuInfo> gpus = detect_nvidia_gpus(&why);
    json present = json::array();
    std::vector<std::string> others;
    for (const auto& g : gpus) {
      const TargetSpec* m = match_nvidia_device(db, g.name, g.cc_major, g.cc_minor);
      if (m && m->id == spec->id) {
        present.push_back({{"info", g}, {"ceilings", gpu_ceilings_json(g, o)}});
        if (local_device.is_null()) local_device = g;
      } else {
        others.push_back(g.name);
      }
    }
    if (!present.empty()) {
      local = {{"present", true}, {"gpus", present}};
    } else {
      local["why"] = gpus.empty()
                         ? why
                         : "this machine's GPUs are not " + spec->id + ": " + join(others, ", ");
    }
  } else {
    local["why"] = "no local detection for " + spec->kind + "s of vendor " + spec->vendor;
  }
  card["local"] = local;

  // Capability probes.
  std::vector<CapabilityResult> results;
  json caps = json::array();
  const std::optional<ProbeTarget> pt = probe_target_for(*spec);
  if (o.probes && pt) caps.push_back(capability_group(pt->isa, pt->arch, pt->source, o, &results));
  card["capabilities"] = caps;
  if (!pt)
    card["capabilities_note"] =
        "no capability probes: no local toolchain compiles for " + spec->isa +
        " (validation without the hardware: " +
        (spec->rungs.count("rung2") ? spec->rungs.at("rung2") : std::string("none")) + ")";

  card["constraints"] = generation_constraints(*spec, results, local_device);
  card["playbook"] = nullptr;
  if (auto pb = playbook_for_family(spec->family))
    card["playbook"] = {{"title", pb->title}, {"file", pb->path.string()}, {"text", pb->text}};
  return card;
}

std::vector<json> research_all(const CardOptions& o) {
  std::vector<json> out;
  for (const auto& s : spec_db()) out.push_back(research_card(s.id, o));
  return out;
}

std::string format_card(const json& card, bool with_playbook) {
  std::string s;
  const std::string id = card.value("target", "");
  if (id == "local") {
    const json& l = card["local"];
    const json& cpu = l["cpu"];
    s += fmt::format(
        "local — this machine\n  CPU: {} ({}, {} logical cores; L2 {} KiB, LLC {} MiB)"
        " — spec: {}\n",
        cpu.value("model", ""), cpu.value("arch", ""), cpu.value("logical_cores", 0),
        cpu.value("l2_bytes", 0) / 1024, cpu.value("llc_bytes", 0) >> 20,
        l["cpu_spec"].is_null() ? "not in the DB" : l["cpu_spec"].get<std::string>());
    const json& cc = l["cpu_ceilings"];
    if (cc.value("measured", false))
      s += fmt::format(
          "  CPU ceilings (measured {}): memory {:.1f} GB/s; fp32 {:.3f}, fp64 {:.3f} "
          "TFLOP/s\n",
          cc.value("measured_at", ""), cc.value("mem_bw_gbs", 0.0),
          cc["peak_tflops"].value("fp32", 0.0), cc["peak_tflops"].value("fp64", 0.0));
    else
      s += "  CPU ceilings: " + cc.value("note", cc.value("error", std::string("?"))) + "\n";
    if (l["gpus"].empty()) s += "  GPU: " + l.value("gpu_status", "") + "\n";
    for (const auto& g : l["gpus"]) {
      const json& i = g["info"];
      s += fmt::format(
          "  GPU {}: {} ({}, {} SMs, {:.0f} GB, L2 {} MiB, smem/block {} KiB) — spec: "
          "{}{}\n",
          i.value("ordinal", 0), i.value("name", ""), i.value("sm_arch", ""),
          i.value("sm_count", 0), i.value("total_mem_bytes", 0.0) / 1e9,
          i.value("l2_bytes", 0) >> 20, i.value("smem_per_block_optin_bytes", 0) / 1024,
          g.value("spec", ""), g.value("derived", false) ? " (derived)" : "");
      const json& gc = g["ceilings"];
      if (gc.value("measured", false)) {
        s += fmt::format("    measured: memory {:.0f} GB/s", gc.value("mem_bw_gbs", 0.0));
        for (const auto& [k, v] : gc["peak_tflops"].items())
          s += fmt::format(", {} {:.1f}", k, v.get<double>());
        s += " TFLOP/s\n";
      } else {
        s += "    ceilings: " + gc.value("note", gc.value("error", std::string("?"))) + "\n";
      }
    }
  } else {
    s += fmt::format("{} — {} [{}; family {}; {}; isa {}]\n", id, card.value("name", ""),
                     card.value("vendor", ""), card.value("family", ""), card.value("kind", ""),
                     card.value("isa", ""));
    const json& spec = card["spec"];
    std::string peaks;
    if (spec.contains("peak_tflops"))
      for (const auto& [k, v] : spec["peak_tflops"].items())
        peaks += fmt::format("{}{} {}", peaks.empty() ? "" : ", ", k, v.dump());
    s += fmt::format("  spec: peaks (dense TFLOP/s) {}; memory {} GB/s, {} GB; {} {}s ({})\n",
                     peaks, spec.value("memory_bandwidth_gbs", 0.0), spec.value("memory_gb", 0.0),
                     num_at(spec, "compute_units.count").value_or(0),
                     spec.contains("compute_units") ? str_at(spec["compute_units"], "kind") : "",
                     card.value("spec_path", ""));
    const json& l = card["local"];
    if (l.value("present", false)) {
      s += "  local: PRESENT on this machine\n";
      const json& ce =
          l.contains("ceilings")
              ? l["ceilings"]
              : (l.contains("gpus") && !l["gpus"].empty() ? l["gpus"][0]["ceilings"] : json());
      if (ce.is_object() && ce.value("measured", false)) {
        s += fmt::format("    measured ceilings: memory {:.1f} GB/s (datasheet {} GB/s)",
                         ce.value("mem_bw_gbs", 0.0), spec.value("memory_bandwidth_gbs", 0.0));
        for (const auto& [k, v] : ce["peak_tflops"].items())
          s += fmt::format(", {} {:.2f}", k, v.get<double>());
        s += " TFLOP/s\n";
      }
    } else {
      s += "  local: not this machine (" + l.value("why", std::string("")) + ")\n";
    }
  }

  for (const auto& g : card["capabilities"]) {
    const json& rs = g["results"];
    std::size_t cached = 0;
    for (const auto& r : rs) cached += r.value("cached", false) ? 1 : 0;
    s += fmt::format("  capability probes ({} {}, from {}; {} of {} cached):\n", g.value("isa", ""),
                     g.value("arch", ""), g.value("source", ""), cached, rs.size());
    for (const auto& r : rs) {
      std::string why = r.value("status", "") == "accepted" ? "" : r.value("reason", "");
      const auto nl = why.find('\n');
      if (nl != std::string::npos) why = why.substr(0, nl);
      if (why.size() > 110) why = why.substr(0, 107) + "...";
      s += fmt::format("    {:<8} {:<21} {:<11} {}\n", r.value("arch", ""), r.value("probe", ""),
                       r.value("status", ""), why);
    }
    if (!rs.empty()) s += "    tool: " + rs[0].value("tool", std::string("")) + "\n";
  }
  if (card.contains("capabilities_note"))
    s += "  " + card["capabilities_note"].get<std::string>() + "\n";

  auto show_constraints = [&](const json& c, const std::string& label) {
    s += "  generation constraints" + label + ":\n";
    if (c.contains("compile_target"))
      s += fmt::format("    compile target: {} {} ({}){}\n", c["compile_target"].value("value", ""),
                       c["compile_target"].value("flags", ""),
                       c["compile_target"].value("source", ""),
                       c["compile_target"].value("usable_here", true)
                           ? ""
                           : " — not usable with the toolchains here");
    if (c.contains("simd_group") && !c["simd_group"]["width"].is_null())
      s += fmt::format("    simd group: {} of {}\n", c["simd_group"].value("name", ""),
                       c["simd_group"]["width"].dump());
    if (c.contains("vector_width_bytes"))
      s += fmt::format("    vector width: {} B ({})\n", c["vector_width_bytes"]["value"].dump(),
                       c["vector_width_bytes"].value("source", ""));
    if (c.contains("on_chip_memory_per_block_bytes"))
      s += fmt::format("    on-chip memory budget: {} B, {} ({})\n",
                       c["on_chip_memory_per_block_bytes"]["value"].dump(),
                       c["on_chip_memory_per_block_bytes"].value("name", ""),
                       c["on_chip_memory_per_block_bytes"].value("source", ""));
    if (c.contains("matrix_instructions")) {
      std::vector<std::string> m;
      for (const auto& x : c["matrix_instructions"]["value"]) m.push_back(x.get<std::string>());
      s += fmt::format("    matrix instructions: {} ({})\n", m.empty() ? "none" : join(m, "; "),
                       c["matrix_instructions"].value("source", ""));
    }
  };
  const json& c = card["constraints"];
  if (id == "local") {
    show_constraints(c["cpu"], " (CPU)");
    for (std::size_t i = 0; i < c["gpus"].size(); ++i)
      show_constraints(c["gpus"][i], fmt::format(" (GPU {})", i));
  } else {
    show_constraints(c, "");
  }

  if (card["playbook"].is_object()) {
    s += fmt::format("  playbook: {} ({})\n", card["playbook"].value("title", ""),
                     card["playbook"].value("file", ""));
    if (with_playbook) {
      std::string text = card["playbook"].value("text", "");
      std::string indented = "    ";
      for (char ch : text) {
        indented += ch;
        if (ch == '\n') indented += "    ";
      }
      s += indented + "\n";
    }
  } else {
    s += "  playbook: none curated for this family yet\n";
  }
  return s;
}

}  // namespace vb
