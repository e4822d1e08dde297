#include "targets/amd_detect.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "core/paths.h"
#include "core/process.h"

namespace vb {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A reported string value; "" for a missing, non-string or "N/A" one.
std::string text_of(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key) || !o[key].is_string()) return "";
  std::string s = o[key].get<std::string>();
  return s == "N/A" ? "" : s;
}

int int_of(const json& o, const char* key) {
  if (!o.is_object() || !o.contains(key)) return 0;
  const json& v = o[key];
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_string()) {
    try {
      return std::stoi(v.get<std::string>());
    } catch (const std::exception&) {
    }
  }
  return 0;
}

// "gfx942:sramecc+:xnack-" -> "gfx942"; anything not starting with "gfx" -> "".
std::string clean_arch(const std::string& a) {
  if (a.rfind("gfx", 0) != 0) return "";
  return a.substr(0, a.find(':'));
}

json parse_json(const std::string& text, const char* what) {
  try {
    return json::parse(text);
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("{}: not JSON ({})", what, e.what()));
  }
}

// `name` in the ':'-separated `path` as an executable, or "".
std::string find_in(const std::string& path, const std::string& name) {
  std::istringstream in(path);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    if (dir.empty()) continue;
    const fs::path p = fs::path(dir) / name;
    if (::access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p)) return p.string();
  }
  return "";
}

// The torch probe: torch.version.hip and, on a ROCm build, each device's name and gfx arch.
constexpr const char* kTorchProbe = R"(import json
import torch
hip = getattr(torch.version, "hip", None)
devices = []
if hip and torch.cuda.is_available():
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        devices.append({"index": i, "name": p.name, "gcnArchName": getattr(p, "gcnArchName", ""),
                        "multi_processor_count": p.multi_processor_count})
print(json.dumps({"hip": hip, "devices": devices}))
)";

}  // namespace

void to_json(json& j, const AmdGpuInfo& g) {
  j = {{"index", g.index},
       {"name", g.name},
       {"gfx_arch", g.gfx_arch},
       {"compute_units", g.compute_units},
       {"detected_by", g.detected_by}};
}

std::vector<AmdGpuInfo> parse_amd_smi_static(const std::string& text) {
  const json j = parse_json(text, "amd-smi static --asic --json");
  const json* list = &j;
  if (j.is_object() && j.contains("gpu_data")) list = &j["gpu_data"];
  if (!list->is_array())
    throw std::invalid_argument(
        "amd-smi static --asic --json: expected a list of GPUs (or one under \"gpu_data\")");
  std::vector<AmdGpuInfo> out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& g = (*list)[i];
    if (!g.is_object() || !g.contains("asic") || !g["asic"].is_object()) continue;
    const json& a = g["asic"];
    AmdGpuInfo info;
    info.index = g.contains("gpu") && g["gpu"].is_number_integer() ? g["gpu"].get<int>()
                                                                   : static_cast<int>(i);
    info.name = text_of(a, "market_name");
    info.gfx_arch = clean_arch(text_of(a, "target_graphics_version"));
    info.compute_units = int_of(a, "num_compute_units");
    info.detected_by = "amd-smi static --asic --json";
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<AmdGpuInfo> parse_rocm_smi_product(const std::string& text) {
  const json j = parse_json(text, "rocm-smi --showproductname --json");
  if (!j.is_object())
    throw std::invalid_argument("rocm-smi --showproductname --json: expected an object of cardN");
  std::vector<AmdGpuInfo> out;
  for (const auto& [key, card] : j.items()) {
    if (key.rfind("card", 0) != 0 || !card.is_object()) continue;
    AmdGpuInfo info;
    try {
      info.index = std::stoi(key.substr(4));
    } catch (const std::exception&) {
      continue;  // not a "cardN" key
    }
    info.name = text_of(card, "Card Series");
    info.gfx_arch = clean_arch(text_of(card, "GFX Version"));
    info.detected_by = "rocm-smi --showproductname --json";
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const AmdGpuInfo& a, const AmdGpuInfo& b) { return a.index < b.index; });
  return out;
}

std::vector<AmdGpuInfo> parse_torch_hip_probe(const std::string& text) {
  const json j = parse_json(text, "the torch probe");
  if (!j.is_object() || !j.contains("hip") || !j.contains("devices") || !j["devices"].is_array())
    throw std::invalid_argument("the torch probe: expected {\"hip\": ..., \"devices\": [...]}");
  std::vector<AmdGpuInfo> out;
  if (!j["hip"].is_string() || j["hip"].get<std::string>().empty()) return out;
  const std::string by = "torch " + j["hip"].get<std::string>() +
                         " (torch.version.hip; torch.cuda.get_device_properties)";
  for (const auto& d : j["devices"]) {
    AmdGpuInfo info;
    info.index = int_of(d, "index");
    info.name = text_of(d, "name");
    info.gfx_arch = clean_arch(text_of(d, "gcnArchName"));
    info.compute_units = int_of(d, "multi_processor_count");
    info.detected_by = by;
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<AmdGpuInfo> detect_amd_gpus(std::string* why_none, const AmdDetectOptions& opts) {
  std::vector<std::string> notes;
  auto none = [&](std::vector<AmdGpuInfo> v) {
    if (why_none) {
      std::string s = "no AMD GPU:";
      for (std::size_t i = 0; i < notes.size(); ++i) s += (i ? "; " : " ") + notes[i];
      *why_none = s;
    }
    return v;
  };
  const char* env_path = std::getenv("PATH");
  const std::string path = !opts.path.empty() ? opts.path : (env_path ? env_path : "");
  struct Tool {
    const char* name;
    std::vector<std::string> args;
    std::vector<AmdGpuInfo> (*parse)(const std::string&);
  };
  const Tool tools[] = {{"amd-smi", {"static", "--asic", "--json"}, parse_amd_smi_static},
                        {"rocm-smi", {"--showproductname", "--json"}, parse_rocm_smi_product}};
  bool any_tool = false;
  for (const Tool& t : tools) {
    const std::string exe = find_in(path, t.name);
    if (exe.empty()) continue;
    any_tool = true;
    std::vector<std::string> argv{exe};
    argv.insert(argv.end(), t.args.begin(), t.args.end());
    try {
      const ProcessResult r = run_process(argv, std::chrono::seconds(30));
      if (!r.ok()) {
        notes.push_back(fmt::format("{} exited with {}{}", t.name, r.exit_code,
                                    r.err.empty() ? "" : ": " + r.err.substr(0, 200)));
        continue;
      }
      auto found = t.parse(r.out);
      if (!found.empty()) return found;
      notes.push_back(std::string(t.name) + " reported no GPU");
    } catch (const std::exception& e) {
      notes.push_back(std::string(t.name) + ": " + e.what());
    }
  }
  if (!any_tool) notes.push_back("neither amd-smi nor rocm-smi is on PATH");
  if (!fs::exists(opts.kfd)) {
    notes.push_back(opts.kfd.string() + " (the ROCm kernel driver) does not exist");
    return none({});
  }
  const std::string py = opts.python.empty() ? project_python() : opts.python;
  try {
    const ProcessResult r = run_process({py, "-c", kTorchProbe}, std::chrono::seconds(30));
    if (!r.ok()) {
      notes.push_back(fmt::format("the torch probe ({}) exited with {}", py, r.exit_code));
      return none({});
    }
    auto found = parse_torch_hip_probe(r.out);
    if (!found.empty()) return found;
    notes.push_back("torch (" + py + ") is not a ROCm build or sees no device");
  } catch (const std::exception& e) {
    notes.push_back(std::string("the torch probe: ") + e.what());
  }
  return none({});
}

const TargetSpec* match_amd_device(const std::vector<TargetSpec>& db, const AmdGpuInfo& g) {
  if (g.name.empty()) return nullptr;
  const auto toks = name_tokens_of(g.name);
  auto has = [&](const std::string& s) {
    for (const auto& t : name_tokens_of(s))
      if (std::find(toks.begin(), toks.end(), t) == toks.end()) return false;
    return true;
  };
  const TargetSpec* best = nullptr;
  std::size_t best_n = 0;
  for (const auto& t : db) {
    if (t.vendor != "AMD" || t.kind != "gpu" || t.name_tokens.empty()) continue;
    if (!g.gfx_arch.empty() && t.isa != g.gfx_arch) continue;
    if (!std::all_of(t.name_tokens.begin(), t.name_tokens.end(), has)) continue;
    if (std::any_of(t.exclude_tokens.begin(), t.exclude_tokens.end(), has)) continue;
    std::size_t n = 0;
    for (const auto& s : t.name_tokens) n += name_tokens_of(s).size();
    if (!best || n > best_n || (n == best_n && t.id < best->id)) best = &t, best_n = n;
  }
  return best;
}

}  // namespace vb
