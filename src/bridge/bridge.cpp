// The PyTorch bridge, C++ side: subprocess contract, profile analysis, extraction.
#include "bridge/bridge.h"
#include "bridge/kernelbench.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include "backends/backend.h"
#include "core/paths.h"
#include "core/process.h"

namespace vb {

namespace fs = std::filesystem;
using nlohmann::json;

std::string bridge_python() {
  return project_python();
}

namespace {
std::string tail(const std::string& s, std::size_t n) {
  return s.size() <= n ? s : "..." + s.substr(s.size() - n);
}
// Lines starting with "error: " from the Python side (its BridgeError), else the whole tail.
std::string python_error(const std::string& err) {
  std::string out;
  std::size_t pos = 0;
  while (pos < err.size()) {
    std::size_t end = err.find('\n', pos);
    if (end == std::string::npos) end = err.size();
    const std::string line = err.substr(pos, end - pos);
    if (line.rfind("error: ", 0) == 0) out += (out.empty() ? "" : "\n") + line.substr(7);
    pos = end + 1;
  }
  return out.empty() ? tail(err, 3000) : out;
}
}  // namespace

json run_bridge(const std::string& module, const json& request, const fs::path& scratch_dir,
                std::chrono::seconds timeout) {
  fs::create_directories(scratch_dir);
  const fs::path req = scratch_dir / (module + "_request.json");
  const fs::path res = scratch_dir / (module + "_result.json");
  write_file_atomic(req, request.dump(1));
  std::error_code ec;
  fs::remove(res, ec);
  // PYTHONPATH: the bridge package of this tree first (works without `pip install -e`).
  const std::string pkg = (vladbud_home() / "python").string();
  const char* old = std::getenv("PYTHONPATH");
  const std::string pp = pkg + (old && *old ? ":" + std::string(old) : "");
  ::setenv("PYTHONPATH", pp.c_str(), 1);
  // OpenMP threads that spin between parallel regions (GNU libgomp's default) are ruinous when
  // a process holds two OpenMP runtimes (torch's bundled libgomp and the system one of a CPU
  // kernel library) or when other work shares the cores: measured on this 2-core machine with
  // one other busy process, GPT-2 small 1x64 fp32 eager took a median 1464-1508 ms per forward
  // by default and 312-344 ms with OMP_WAIT_POLICY=PASSIVE (minima 249-253 ms either way, i.e.
  // no cost when the cores are free). Both sides of every comparison run in this one process, so
  // the setting is the same for PyTorch and for VladBud's kernels. A user's own value wins.
  const char* old_wait = std::getenv("OMP_WAIT_POLICY");
  if (!old_wait) ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  const std::string py = bridge_python();
  if (!have_program(py)) {
    if (old) ::setenv("PYTHONPATH", old, 1); else ::unsetenv("PYTHONPATH");
    if (!old_wait) ::unsetenv("OMP_WAIT_POLICY");
    throw std::runtime_error("no Python interpreter '" + py +
                             "'; run scripts/setup.sh (it makes .venv with torch) or set VB_PYTHON");
  }
  ProcessResult r = run_process({py, "-m", "vladbud." + module, req.string(), res.string()},
                                std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
  if (old) ::setenv("PYTHONPATH", old, 1); else ::unsetenv("PYTHONPATH");
  if (!old_wait) ::unsetenv("OMP_WAIT_POLICY");
  if (r.timed_out)
    throw std::runtime_error(fmt::format("python -m vladbud.{} timed out after {} s", module,
                                         timeout.count()));
  if (r.exit_code == 2) throw BridgeUsageError(python_error(r.err));
  if (!r.ok()) {
    std::string hint;
    if (r.err.find("No module named 'torch'") != std::string::npos)
      hint = "\n(" + py + " has no torch: run scripts/setup.sh, or point VB_PYTHON at a Python with torch)";
    throw std::runtime_error(fmt::format("python -m vladbud.{} failed (exit {}{}):\n{}{}", module,
                                         r.exit_code,
                                         r.term_signal ? ", " + signal_description(r.term_signal) : "",
                                         tail(r.err, 4000), hint));
  }
  std::ifstream in(res);
  if (!in) throw std::runtime_error("python -m vladbud." + module + " wrote no result " + res.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw std::runtime_error("result " + res.string() + " is not JSON: " + e.what());
  }
}

Roof device_roof(const std::string& device, DType dtype) {
  const Backend* b = backend_for_torch_device(device);
  if (!b)
    throw std::invalid_argument("no backend runs on torch device '" + device +
                                "' (devices: " + torch_device_names() + ")");
  return b->device().model_roof(dtype);
}

namespace {
// Dimension names of each type in the order DESIGN §2 writes its shapes (labels and tables).
// flash_attention's HKV (KV heads, GQA) is present only when the profile saw fewer KV heads
// than query heads: "model-B1xH8xHKV2xS256xD64".
std::vector<std::string> dim_order(const std::string& type) {
  static const std::map<std::string, std::vector<std::string>> order = {
      {"matmul", {"M", "N", "K"}},           {"softmax", {"R", "C"}},
      {"layernorm", {"B", "D"}},             {"rmsnorm", {"M", "N"}},
      {"flash_attention", {"B", "H", "HKV", "S", "D"}}, {"fused_mlp", {"B", "D", "H"}},
      {"cross_entropy", {"B", "V"}},         {"rotary_embedding", {"B", "H", "S", "D"}},
      {"reduce", {"M", "N"}}};
  const auto it = order.find(type);
  return it == order.end() ? std::vector<std::string>{} : it->second;
}

// The keys of `dims` in the type's order, then any others (alphabetical).
std::vector<std::string> ordered_keys(const std::string& type, const json& dims) {
  std::vector<std::string> keys;
  for (const auto& k : dim_order(type))
    if (dims.contains(k)) keys.push_back(k);
  for (auto it = dims.begin(); it != dims.end(); ++it)
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
  return keys;
}
}  // namespace

Size model_size(const KernelType& kt, const json& dims, const json& attrs) {
  if (!dims.is_object() || dims.empty())
    throw std::invalid_argument("dims must be an object of the type's dimensions");
  Size s;
  s.label = "model";
  bool first = true;
  for (const auto& k : ordered_keys(kt.name(), dims)) {
    // A whole number: 2.5, "2", true, null or an integer past int64 name the dimension instead
    // of being truncated or wrapped (nlohmann's get<int64_t> casts a float silently).
    const json& v = dims.at(k);
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() &&
         v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)))
      throw std::invalid_argument(fmt::format(
          "dimension '{}' must be a whole number (an integer within int64), got {}", k, v.dump()));
    s.dims[k] = v.get<std::int64_t>();
    s.label += (first ? "-" : "x") + k + std::to_string(s.dims[k]);
    first = false;
  }
  for (auto it = attrs.begin(); it != attrs.end(); ++it) {
    if (it.key() == "batch") continue;  // a batched matmul: the type times one 2-D product
    s.attrs[it.key()] = it.value().get<double>();
    s.label += fmt::format("-{}{}", it.key(), s.attrs[it.key()]);
  }
  (void)kt.make_problem(s, DType::F32);  // validates: throws std::invalid_argument naming the field
  return s;
}

json analyze_profile(const json& raw, const Roof& roof) {
  json out = raw;
  const double total = raw.value("profiled_us", 0.0);
  const std::string dtype_s = raw.value("dtype", "fp32");
  double typed = 0;
  for (auto& e : out["entries"]) {
    const double us = e.value("us", 0.0);
    const double share = total > 0 ? us / total : 0;
    e["share"] = share;
    e["amdahl_max"] = share < 1 ? 1.0 / (1.0 - share) : INFINITY;
    e["bound"] = "n/a";
    if (e["type"].is_null()) continue;
    typed += us;
    const KernelType* kt = find_kernel_type(e["type"].get<std::string>());
    if (!kt || e["dims"].is_null()) continue;
    const auto dt = parse_dtype(e.value("dtype", dtype_s));
    try {
      const Size s = model_size(*kt, e["dims"], e.value("attrs", json::object()));
      const Problem p = kt->make_problem(s, dt.value_or(DType::F32));
      double batch = 1;
      if (e.contains("attrs") && e["attrs"].contains("batch")) batch = e["attrs"]["batch"].get<double>();
      const double flops = kt->flops(p) * batch, bytes = kt->min_bytes(p) * batch;
      const double ai = bytes > 0 ? flops / bytes : INFINITY;
      e["size_label"] = s.label;
      e["flops"] = flops;
      e["bytes"] = bytes;
      e["arithmetic_intensity"] = ai;
      if (roof.ridge() > 0) e["bound"] = ai >= roof.ridge() ? "compute" : "memory";
      // Achieved rate of the PyTorch call at the profiled time (per call).
      const double calls = std::max(1.0, e.value("calls", 1.0));
      if (us > 0) {
        e["achieved_tflops"] = flops * calls / (us * 1e-6) / 1e12;
        e["achieved_gbs"] = bytes * calls / (us * 1e-6) / 1e9;
      }
    } catch (const std::exception& ex) {
      e["note"] = std::string("shapes do not fit the type: ") + ex.what();
    }
  }
  const double typed_share = total > 0 ? typed / total : 0;
  out["typed_share"] = typed_share;
  out["amdahl_max_all"] = typed_share < 1 ? 1.0 / (1.0 - typed_share) : INFINITY;
  out["roof"] = {{"peak_tflops", roof.peak_tflops}, {"bandwidth_gbs", roof.bandwidth_gbs},
                 {"ridge_flop_per_byte", roof.ridge()}, {"source", roof.source}};
  return out;
}

namespace {
std::string dims_text(const json& e) {
  if (!e["dims"].is_null()) {
    std::string s;
    for (const auto& k : ordered_keys(e["type"].is_string() ? e["type"].get<std::string>() : "", e["dims"])) {
      if (!s.empty()) s += ' ';
      s += k + "=" + std::to_string(e["dims"][k].get<long long>());
    }
    if (e.contains("attrs") && e["attrs"].contains("causal"))
      s += e["attrs"]["causal"].get<double>() != 0 ? " causal" : " non-causal";
    return s;
  }
  std::string s;
  for (const auto& sh : e.value("shapes", json::array())) {
    if (!sh.is_array() || sh.empty()) continue;
    std::string d;
    for (const auto& x : sh) {
      if (!d.empty()) d += 'x';
      d += std::to_string(x.get<long long>());
    }
    if (!s.empty()) s += ',';
    s += d;
    if (s.size() > 40) break;
  }
  return s;
}
}  // namespace

std::string format_profile_table(const json& p, int rows) {
  std::string out;
  out += fmt::format("{:>4} {:>7} {:>11} {:>6}  {:<17} {:<34} {:<28} {:<5} {:<8} {:>8}\n", "rank",
                     "share", "us/forward", "calls", "type", "op", "shape", "dtype", "bound",
                     "amdahl");
  int i = 0;
  for (const auto& e : p["entries"]) {
    if (i >= rows) break;
    ++i;
    std::string op = e.value("op", "");
    if (op.size() > 34) op = op.substr(0, 31) + "...";
    std::string shape = dims_text(e);
    if (shape.size() > 28) shape = shape.substr(0, 25) + "...";
    out += fmt::format("{:>4} {:>6.1f}% {:>11.1f} {:>6g}  {:<17} {:<34} {:<28} {:<5} {:<8} {:>7.2f}x\n",
                       i, 100 * e.value("share", 0.0), e.value("us", 0.0), e.value("calls", 0.0),
                       e["type"].is_null() ? "-" : e["type"].get<std::string>(), op, shape,
                       e.value("dtype", ""), e.value("bound", "n/a"), e.value("amdahl_max", 1.0));
  }
  return out;
}

std::vector<fs::path> extract_kernels(const json& profile, int top, const std::string& backend,
                                      const fs::path& workspace) {
  const Backend* be = find_backend(backend);
  if (!be) throw BridgeUsageError("unknown backend '" + backend + "'; available: " + backend_names());
  if (top < 1) throw BridgeUsageError("--top must be at least 1");
  std::vector<const json*> typed;
  for (const auto& e : profile.at("entries"))
    if (!e["type"].is_null() && !e["dims"].is_null() && e.contains("flops")) typed.push_back(&e);
  if (typed.empty())
    throw BridgeUsageError("workspace/profile.json has no entry of the nine kernel types; nothing "
                           "to extract (profile a model that uses matmul, attention, norms, ...)");
  std::stable_sort(typed.begin(), typed.end(), [](const json* a, const json* b) {
    return a->value("us", 0.0) > b->value("us", 0.0);
  });
  for (int i = 0; i < top && i < static_cast<int>(typed.size()); ++i) {
    const fs::path starter = be->starter_source((*typed[i])["type"].get<std::string>());
    if (!fs::exists(starter))
      throw BridgeUsageError("backend " + backend + " has no starter kernel " + starter.string() +
                             "; choose another --backend");
  }
  const fs::path kdir = workspace / "kernels";
  std::error_code ec;
  fs::remove_all(kdir, ec);
  fs::create_directories(kdir);
  std::vector<fs::path> out;
  for (int i = 0; i < top && i < static_cast<int>(typed.size()); ++i) {
    const json& e = *typed[i];
    const std::string type = e["type"].get<std::string>();
    const fs::path dir = kdir / fmt::format("{:02d}_{}", i + 1, type);
    fs::create_directories(dir);
    const fs::path starter = be->starter_source(type);
    const fs::path src = dir / (type + be->source_extension());
    fs::copy_file(starter, src, fs::copy_options::overwrite_existing);
    json prob = {{"kernel", type},
                 {"dims", e["dims"]},
                 {"attrs", e.value("attrs", json::object())},
                 {"dtype", e.value("dtype", profile.value("dtype", "fp32"))},
                 {"size_label", e.value("size_label", "")},
                 {"share", e.value("share", 0.0)},
                 {"us_per_forward", e.value("us", 0.0)},
                 {"calls_per_forward", e.value("calls", 0.0)},
                 {"op", e.value("op", "")},
                 {"evidence", e.value("evidence", "")},
                 {"bound", e.value("bound", "n/a")},
                 {"amdahl_max", e.value("amdahl_max", 1.0)},
                 {"flops", e.value("flops", 0.0)},
                 {"bytes", e.value("bytes", 0.0)},
                 {"backend", backend},
                 {"source", src.filename().string()},
                 {"starter", starter.string()},
                 {"device", profile.value("device", "cpu")},
                 {"model", profile.value("model", json::object())}};
    if (e.contains("note") && !e["note"].get<std::string>().empty()) prob["note"] = e["note"];
    write_file_atomic(dir / "problem.json", prob.dump(2) + "\n");
    out.push_back(dir);
  }
  return out;
}

json pytorch_baseline(const Problem& p, const std::string& device, int rotation_sets,
                       double rotation_bytes, bool quick) {
  json dims = json::object(), attrs = json::object();
  for (const auto& [k, v] : p.size.dims) dims[k] = v;
  for (std::size_t i = 0; i < p.attrs.size() && i < p.attr_names.size(); ++i)
    attrs[p.attr_names[i]] = p.attrs[i];
  const json req = {{"kernel", p.kernel},
                    {"dims", dims},
                    {"attrs", attrs},
                    {"dtype", std::string(dtype_name(p.dtype))},
                    {"device", device},
                    {"rotation_sets", std::max(1, rotation_sets)},
                    {"rotation_bytes", rotation_bytes},
                    {"min_reps", quick ? 3 : 10},
                    {"min_time_s", quick ? 0.1 : 0.5},
                    {"max_time_s", quick ? 1.0 : 4.0}};
  const fs::path scratch =
      fs::temp_directory_path() / ("vladbud-baseline-" + std::to_string(::getpid()));
  json res = run_bridge("baseline", req, scratch, std::chrono::seconds(300));
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return res;
}

std::optional<ModelProblem> read_model_problem(const fs::path& dir) {
  const fs::path f = dir / "problem.json";
  if (!fs::exists(f)) return std::nullopt;
  ModelProblem mp;
  try {
    mp.doc = json::parse(read_file(f));
    const std::string k = mp.doc.at("kernel").get<std::string>();
    mp.type = find_kernel_type(k);
    if (!mp.type) throw BridgeUsageError(f.string() + ": unknown kernel '" + k + "'");
    const auto dt = parse_dtype(mp.doc.at("dtype").get<std::string>());
    if (!dt || !is_floating(*dt) || *dt == DType::F64)
      throw BridgeUsageError(f.string() + ": dtype must be fp16, bf16 or fp32");
    mp.dtype = *dt;
    mp.size = model_size(*mp.type, mp.doc.at("dims"), mp.doc.value("attrs", json::object()));
    // "precision": "tf32" is KernelBench mode only (its bench builds the TF32 path); the
    // evaluator here always judges fp32 as true fp32 (DESIGN §2).
    (void)kb_precision_tf32(mp.doc, f);
  } catch (const BridgeUsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw BridgeUsageError(f.string() + " is malformed (" + e.what() +
                           "); fix that field, or re-run `vladbud extract` to rewrite the file");
  }
  return mp;
}

}  // namespace vb
