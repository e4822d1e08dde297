#include "bridge/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "backends/backend.h"
#include "core/parallel.h"
#include "core/paths.h"
#include "ladder/rank.h"
#include "optimize/report_md.h"

namespace vb {

namespace fs = std::filesystem;
using json = nlohmann::json;

void check_profile_request(const ProfileRequest& a) {
  auto bad = [](const std::string& m) { throw BridgeUsageError(m); };
  if (a.model.empty() && a.module.empty())
    bad("pass --model FILE.py --class-name CLASS (e.g. --model models/gpt2.py --class-name GPT2), "
        "or --module transformers --class-name AutoModelForCausalLM --config CONFIG");
  if (!a.model.empty() && fs::is_directory(a.model))
    bad("--model '" + a.model + "' is a folder; pass the Python file that defines the model, "
        "e.g. " + (vladbud_home() / "models" / "gpt2.py").string());
  if (!a.model.empty() && !fs::is_regular_file(a.model))
    bad("model file '" + a.model + "' does not exist; the bundled models are " +
        (vladbud_home() / "models").string() + "/{gpt2,llama,bert,custom_template}.py");
  if (a.class_name.empty()) bad("--class-name is required (the nn.Module class to build)");
  const auto dt = parse_dtype(a.dtype);
  if (!dt || !is_floating(*dt) || *dt == DType::F64)
    bad("--dtype must be fp32, fp16 or bf16 (got '" + a.dtype + "')");
  if (!backend_for_torch_device(a.device))
    bad("--device must be " + torch_device_names() + " (got '" + a.device + "')");
  json margs;
  try {
    margs = json::parse(a.model_args);
  } catch (const json::exception&) {
    bad("--model-args is not valid JSON; pass an object, e.g. '{\"n_layer\": 2}'");
  }
  if (!margs.is_object()) bad("--model-args must be a JSON object");
  // B,S: two positive integers (checked here so the error comes before torch starts).
  const auto comma = a.input_shape.find(',');
  bool ok = comma != std::string::npos;
  try {
    std::size_t p1 = 0, p2 = 0;
    if (ok) {
      const long b = std::stol(a.input_shape.substr(0, comma), &p1);
      const long s = std::stol(a.input_shape.substr(comma + 1), &p2);
      ok = b > 0 && s > 0 && p1 == comma && p2 == a.input_shape.size() - comma - 1;
    }
  } catch (const std::exception&) {
    ok = false;
  }
  if (!ok)
    bad("--input-shape must be BATCH,SEQ with two positive integers, e.g. 1,128 (got '" +
        a.input_shape + "')");
  if (a.warmup < 0) bad("--warmup must be >= 0");
  if (a.iters < 1) bad("--iters must be >= 1");
}

ProfileOutcome profile_model(const ProfileRequest& a) {
  check_profile_request(a);
  const auto dt = parse_dtype(a.dtype);
  const fs::path ws = a.workspace;
  fs::create_directories(ws);
  const fs::path model_abs = a.model.empty() ? fs::path() : fs::absolute(a.model);
  const json req = {
      {"model", model_abs.string()},
      {"class_name", a.class_name},
      {"module", a.module},
      {"config", !a.config.empty() && fs::exists(a.config) ? fs::absolute(a.config).string() : a.config},
      {"model_args", json::parse(a.model_args)},
      {"input_shape", a.input_shape},
      {"dtype", a.dtype},
      {"device", a.device},
      {"warmup", a.warmup},
      {"iters", a.iters},
      {"export_trace", a.export_trace ? fs::absolute(ws / "trace.json").string() : ""}};
  const json raw = run_bridge("profile", req, ws / ".bridge");
  if (raw.value("records", 0) == 0 || !raw.contains("entries") || raw["entries"].empty() ||
      raw.value("profiled_us", 0.0) <= 0)
    throw EmptyProfileError(
        "the profiler recorded no operator time for " + a.class_name +
        " (empty trace: the forward may run outside PyTorch operators, e.g. in a compiled graph or "
        "on another device); nothing written");
  ProfileOutcome out;
  out.roof = device_roof(a.device, *dt);
  out.profile = analyze_profile(raw, out.roof);
  out.written = ws / "profile.json";
  write_file_atomic(out.written, out.profile.dump(1) + "\n");
  return out;
}

std::string format_profile_summary(const ProfileOutcome& p, const ProfileRequest& a, int rows) {
  const json& prof = p.profile;
  const Roof& roof = p.roof;
  const auto& m = prof["model"];
  std::string s = fmt::format(
      "model: {} ({:.1f}M parameters, depth {}), input {} {}, dtype {}, device {} ({})\n",
      a.class_name, m.value("parameters", 0) / 1e6, m.value("depth", 0), m["input"]["shape"].dump(),
      m["input"].value("dtype", ""), a.dtype, a.device, prof.value("device_name", ""));
  s += fmt::format(
      "forward: {:.2f} ms (median, unprofiled); profiled {:.2f} ms per forward over {} forwards "
      "after {} warm-up; torch {} ({} threads)\n",
      prof.value("forward_ms", 0.0), prof.value("profiled_us", 0.0) / 1e3, a.iters, a.warmup,
      prof.value("torch", ""), prof.value("threads", 0));
  s += fmt::format("roof: {:.3g} TFLOP/s ({}), {:.0f} GB/s, ridge {:.1f} FLOP/B ({})\n",
                   roof.peak_tflops, a.dtype, roof.bandwidth_gbs, roof.ridge(), roof.source);
  s += format_profile_table(prof, rows);
  s += fmt::format(
      "in the nine kernel types: {:.1f}% of the time; Amdahl bound if all of it took no time: "
      "{:.2f}x\n",
      100 * prof.value("typed_share", 0.0), prof.value("amdahl_max_all", 1.0));
  for (const auto& w : prof.value("warnings", json::array()))
    s += "warning: " + w.get<std::string>() + "\n";
  return s;
}

namespace {

// The kernel folders of a workspace (kernels/* holding problem.json), sorted by name.
std::vector<fs::path> kernel_folders(const fs::path& ws) {
  const fs::path kd = ws / "kernels";
  if (!fs::is_directory(kd))
    throw BridgeUsageError(kd.string() + " does not exist; run `vladbud extract --top N` first");
  std::vector<fs::path> dirs;
  for (const auto& d : fs::directory_iterator(kd))
    if (d.is_directory() && fs::exists(d.path() / "problem.json")) dirs.push_back(d.path());
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty())
    throw BridgeUsageError("no kernel folder with problem.json in " + kd.string() +
                           "; run `vladbud extract`");
  return dirs;
}

// The best source of a kernel folder: best/<type><ext> when the optimizer kept a version, else
// the folder's own source.
fs::path best_source(const fs::path& dir, const ModelProblem& mp, const Backend& be,
                     bool* improved) {
  const std::string type = mp.type->name();
  fs::path src = dir / "best" / (type + be.source_extension());
  *improved = fs::exists(src);
  if (!*improved) src = dir / mp.doc.value("source", type + be.source_extension());
  if (!fs::exists(src))
    throw BridgeUsageError("kernel source " + src.string() + " is missing; re-run `vladbud extract`");
  return src;
}

// PyTorch's median at a folder's own shape over the kernel's best median there (both from the
// optimizer: problem.json's pytorch_us, orchestration.json's best_us for that folder), or null
// when either was not measured or the best's figure was timed under contention
// (best_figure_contended): verify's own-shape screen then leaves the decision to the in-model
// rounds.
json own_shape_speedup(const fs::path& ws, const fs::path& dir, const json& problem) {
  const double pt = problem.value("pytorch_us", 0.0);
  if (pt <= 0 || !fs::exists(ws / "orchestration.json")) return nullptr;
  if (best_figure_contended(dir)) {
    fmt::print("  {}: its best was timed while other work competed for the cores: no own-shape "
               "figure, the in-model rounds decide\n",
               dir.filename().string());
    return nullptr;
  }
  try {
    const json orch = json::parse(read_file(ws / "orchestration.json"));
    for (const auto& k : orch.value("kernels", json::array()))
      if (k.value("dir", "") == dir.filename().string() && k.value("best_us", 0.0) > 0)
        return pt / k["best_us"].get<double>();
  } catch (const std::exception& e) {
    // Not fatal: the in-model rounds still decide, only the own-shape screen is lost.
    fmt::print(stderr,
               "warning: {} is unreadable ({}); the own-shape screen is skipped for {} (rerun "
               "`vladbud optimize` to rewrite it)\n",
               (ws / "orchestration.json").string(), e.what(), dir.filename().string());
  }
  return nullptr;
}

}  // namespace

namespace {
// `dir`/best/best.json (the optimizer's record of the folder's best) as an object, or nothing
// when it is missing, unreadable or not an object.
std::optional<json> read_best_json(const fs::path& dir) {
  const fs::path bj = dir / "best" / "best.json";
  if (!fs::exists(bj)) return std::nullopt;
  try {
    json b = json::parse(read_file(bj));
    if (b.is_object()) return b;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// b[key] when it is a boolean, else false.
bool flag(const json& b, const char* key) {
  return b.contains(key) && b[key].is_boolean() && b[key].get<bool>();
}
}  // namespace

// Unreadable or malformed records: the figure is taken as it is (the in-model rounds still decide).
bool best_figure_contended(const fs::path& dir) {
  const auto b = read_best_json(dir);
  if (!b) return false;
  const json& e = (*b)["experiment"];
  if (!e.is_null() && !e.is_number()) return false;
  const bool starter = e.is_null() || e.get<double>() == 0;
  if (starter) return flag(*b, "baseline_contended");
  return flag(*b, "kept_contended");
}

bool baseline_figure_contended(const fs::path& dir) {
  const auto b = read_best_json(dir);
  return b && flag(*b, "baseline_contended");
}

json verify_model(const VerifyRequest& a) {
  const fs::path ws = a.workspace, pj = ws / "profile.json";
  if (!fs::exists(pj))
    throw BridgeUsageError(pj.string() +
                           " does not exist; run `vladbud profile ...` then `vladbud extract` first");
  if (!fs::is_directory(ws / "kernels"))
    throw BridgeUsageError((ws / "kernels").string() +
                           " does not exist; run `vladbud extract --top N` first");
  json prof;
  try {
    prof = json::parse(read_file(pj));
  } catch (const std::exception& e) {
    throw BridgeUsageError(pj.string() + " is not valid JSON (" + e.what() +
                           "); re-run `vladbud profile`");
  }
  if (a.reps < 6)
    throw BridgeUsageError(fmt::format(
        "--reps must be >= 6 (got {}): fewer paired rounds give no 95 % interval for the decision "
        "(n rounds cover the median with 1 - 2^(1-n)); the default is 9", a.reps));
  // What the bridge needs from the profile, checked before any kernel is built.
  if (!prof.contains("model") || !prof["model"].is_object() || !prof.contains("input_shape") ||
      !prof["input_shape"].is_array() || prof["input_shape"].size() != 2 ||
      !prof["input_shape"][0].is_number_integer() || !prof["input_shape"][1].is_number_integer() ||
      !prof.contains("entries") || !prof["entries"].is_array() || prof["entries"].empty())
    throw BridgeUsageError(pj.string() +
                           " lacks the model, its input_shape or the profiled entries (the intercept "
                           "check needs them); re-run `vladbud profile ...` then `vladbud extract`");
  if (a.seeds.empty()) throw BridgeUsageError("--seeds needs at least one seed");
  // The best kernel of each extracted type: the folder with the largest share (lowest NN) of
  // that type.
  struct Chosen {
    fs::path dir, src;
    std::string type, backend;
    const Backend* be;
    json problem;
    std::vector<Problem> shapes;  ///< what the library must serve (problem.json's shape)
    BuildResult br;
  };
  std::vector<Chosen> chosen;
  for (const auto& d : kernel_folders(ws)) {
    const auto mp = read_model_problem(d);
    const std::string type = mp->type->name();
    if (std::any_of(chosen.begin(), chosen.end(), [&](const Chosen& c) { return c.type == type; }))
      continue;
    const std::string backend = a.backend.empty() ? mp->doc.value("backend", "cpu") : a.backend;
    const Backend* be = find_backend(backend);
    if (!be) throw BridgeUsageError("unknown backend '" + backend + "'; available: " + backend_names());
    bool improved = false;
    const fs::path src = best_source(d, *mp, *be, &improved);
    chosen.push_back({d, src, type, backend, be, mp->doc, {mp->type->make_problem(mp->size, mp->dtype)}, {}});
  }
  // Every other extracted folder of a chosen type, with its own best kernel: verify's per-shape
  // screen (python/vladbud/verify.py, shape_selection) serves each shape where that kernel beat
  // PyTorch with it.
  struct ShapeRow {
    std::size_t chosen;  ///< index into `chosen`
    fs::path dir, src;
    json problem;
    std::vector<Problem> shapes;
    BuildResult br;
  };
  std::vector<ShapeRow> rows;
  for (const auto& d : kernel_folders(ws)) {
    const auto mp = read_model_problem(d);
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      if (chosen[i].type != mp->type->name() || chosen[i].dir == d) continue;
      if (mp->doc.value("backend", "cpu") != chosen[i].backend && a.backend.empty()) continue;
      bool improved = false;
      rows.push_back({i, d, best_source(d, *mp, *chosen[i].be, &improved), mp->doc,
                      {mp->type->make_problem(mp->size, mp->dtype)}, {}});
    }
  }
  // Everything builds in parallel (nvcc takes tens of seconds per kernel; each source has its
  // own cache key and folder, and an identical source is one cached build).
  const std::int64_t n_builds = static_cast<std::int64_t>(chosen.size() + rows.size());
  parallel_for(n_builds, 1, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) {
      if (i < static_cast<std::int64_t>(chosen.size())) {
        auto& c = chosen[i];
        c.br = c.be->needs_build_problems() ? c.be->build_for(c.src, c.shapes) : c.be->build(c.src);
      } else {
        auto& r = rows[i - chosen.size()];
        const Backend* be = chosen[r.chosen].be;
        r.br = be->needs_build_problems() ? be->build_for(r.src, r.shapes) : be->build(r.src);
      }
    }
  });
  json kernels = json::array();
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const auto& c = chosen[i];
    if (!c.br.ok) throw KernelBuildError("building " + c.src.string() + " failed", c.br.diagnostics);
    // The type's folders: dims, PyTorch's median over the folder's own best kernel there, and
    // that kernel (a folder whose best does not build is listed without one: not measured).
    json shapes = json::array();
    const json own = own_shape_speedup(ws, c.dir, c.problem);
    shapes.push_back({{"folder", c.dir.string()}, {"dims", c.problem.value("dims", json::object())},
                      {"own_shape_speedup", own},
                      {"source", c.src.string()},
                      {"library", fs::absolute(c.br.library).string()}});
    for (const auto& r : rows) {
      if (r.chosen != i) continue;
      json row = {{"folder", r.dir.string()}, {"dims", r.problem.value("dims", json::object())},
                  {"own_shape_speedup", r.br.ok ? own_shape_speedup(ws, r.dir, r.problem) : json(nullptr)},
                  {"source", r.src.string()}};
      if (r.br.ok) row["library"] = fs::absolute(r.br.library).string();
      else row["build_error"] = r.br.diagnostics.substr(0, 300);
      shapes.push_back(row);
    }
    kernels.push_back({{"type", c.type}, {"library", fs::absolute(c.br.library).string()},
                       {"source", c.src.string()}, {"backend", c.backend},
                       {"torch_device", c.be->device().torch_device()}, {"folder", c.dir.string()},
                       {"own_shape_speedup", own},
                       {"shapes", shapes}});
  }
  const auto& m = prof.at("model");
  const auto shape = prof.at("input_shape");
  const json req = {{"model", m.value("file", "")},
                    {"class_name", m.value("class_name", "")},
                    {"module", m.value("module", "")},
                    {"config", m.value("config", "")},
                    {"model_args", m.value("model_args", json::object())},
                    {"input_shape", fmt::format("{},{}", shape[0].get<int>(), shape[1].get<int>())},
                    {"dtype", prof.value("dtype", "fp32")},
                    {"device", prof.value("device", "cpu")},
                    {"kernels", kernels},
                    {"seeds", a.seeds},
                    {"reps", a.reps},
                    {"compile", a.compile},
                    {"select", a.select},
                    {"profile_entries", prof.value("entries", json::array())},
                    {"diagnose", a.diagnose}};
  json res = run_bridge("verify", req, ws / ".bridge");
  write_file_atomic(ws / "verify.json", res.dump(1) + "\n");
  return res;
}

std::string format_verify(const json& res, const json& prof, const fs::path& ws) {
  const json m = prof.value("model", json::object());
  const json shape = res.value("input_shape", json::array());
  std::string s = fmt::format(
      "model: {} {} on {}, input {}, depth {}\n", m.value("class_name", ""), res.value("dtype", ""),
      res.value("device", ""),
      shape.size() == 2 ? fmt::format("{},{}", shape[0].get<int>(), shape[1].get<int>()) : "?",
      res.value("depth", 0));
  s += "tolerance: " + res.value("tolerance_rule", "") +
       fmt::format(" = {:.3g}\n", res.value("tolerance", 0.0));
  const auto num = [](const json& j, const char* k) {
    return j.contains(k) && j[k].is_number() ? j[k].get<double>() : NAN;
  };
  const auto x = [](double v) { return std::isnan(v) ? std::string("-") : fmt::format("{:.3f}x", v); };
  s += "candidate replacements, each alone in the model (in: handed over; dropped: why):\n";
  s += fmt::format("  {:<17} {:>10} {:>10} {:>9} {:>10} {:>9}  {}\n", "kernel", "own shape", "in model",
                   "compiled", "rel_error", "calls/fwd", "decision");
  for (const auto& c : res.value("candidates", json::array())) {
    const bool in = c.value("handed_over", false);
    std::string why = c.value("reason", "");
    if (c.contains("compiled_reason")) why += "; " + c["compiled_reason"].get<std::string>();
    if (c.contains("combination_note")) why += "; " + c["combination_note"].get<std::string>();
    const double expected = num(c, "expected_calls");
    s += fmt::format("  {:<17} {:>10} {:>10} {:>9} {:>10.3g} {:>9}  {}: {}\n", c.value("type", ""),
                     x(num(c, "own_shape_speedup")), x(num(c, "in_model_speedup")),
                     x(num(c, "compiled_speedup")), c.value("rel_error", 0.0),
                     std::isnan(expected)
                         ? fmt::format("{:g}", c.value("calls_per_forward", 0.0))
                         : fmt::format("{:g}/{:g}", c.value("calls_per_forward", 0.0), expected),
                     in ? "IN" : "dropped", why);
    if (c.contains("shape_note")) s += "    shapes: " + c["shape_note"].get<std::string>() + "\n";
  }
  s += "  (own shape: vs PyTorch at the folder's shape, from the optimizer; in model: the model "
       "with this kernel vs without, median of paired rounds; calls/fwd: intercepted/profiled)\n";
  for (const auto& x2 : res.value("seeds", json::array()))
    s += fmt::format("  handed-over model, seed {}: rel_error {:.3g}  max_abs_diff {:.3g}  {}\n",
                     x2.value("seed", 0), x2.value("rel_error", 0.0), x2.value("max_abs_diff", 0.0),
                     x2.value("pass", false) ? "ok" : "FAIL");
  for (const auto& w : res.value("warnings", json::array()))
    s += "warning: " + w.get<std::string>() + "\n";
  for (const auto& w : res.value("intercept_failures", json::array()))
    s += "intercept check failed: " + w.get<std::string>() + "\n";
  if (res.contains("breaking")) {
    std::string names;
    for (const auto& b : res["breaking"]) names += (names.empty() ? "" : ", ") + b.get<std::string>();
    s += "wrong in the model (dropped; fix the kernel or remove its folder's best/): " + names + "\n";
  }
  if (res.contains("diagnose_note")) s += "  " + res["diagnose_note"].get<std::string>() + "\n";
  const json e = res.value("end_to_end", json::object());
  const auto ms = [&](const char* k) {
    const double v = num(e, k);
    return std::isnan(v) ? std::string("-") : fmt::format("{:.2f} ms", v);
  };
  s += fmt::format("end to end ({}): eager {}, torch.compile {}, VladBud {}, VladBud + compile {}\n",
                   e.value("protocol", ""), ms("eager_ms"), ms("compile_ms"), ms("vladbud_ms"),
                   ms("vladbud_compile_ms"));
  // A new user read "torch.compile -" with no reason: say it was not asked for, and how to.
  if (std::isnan(num(e, "compile_ms")))
    s += "  (torch.compile not timed: verify --compile / autotune --compile on times it; autotune's "
         "default, auto, does so on a GPU only)\n";
  const std::string in = opt::handed_over_list(res);
  const json ci = e.value("ci", json::array({1.0, 1.0}));
  const std::string base = e.value("baseline", "eager") == "compile" ? "torch.compile" : "eager PyTorch";
  s += in.empty()
           ? fmt::format("handed over: the {} model unchanged (no candidate made it faster beyond the "
                         "noise; the eager model's timing: 95 % interval +/-{:.1f} % of its median); end-to-end "
                         "speedup 1.000x vs {}\n",
                         e.value("baseline", "eager"), num(e, "noise_pct"), base)
           : fmt::format("handed over: {} in the {} model; end-to-end speedup {:.3f}x vs {} (95% CI "
                         "{:.3f}-{:.3f}x)\n",
                         in, e.value("baseline", "eager"), res.value("speedup", 0.0), base,
                         ci[0].get<double>(), ci[1].get<double>());
  s += "verify: " + res.value("verdict", "FAIL") + "\n";
  s += "wrote " + (ws / "verify.json").string() + "\n";
  return s;
}

json rank_workspace(const fs::path& ws, const RankWorkspaceOptions& opts) {
  std::vector<ladder::KernelToClimb> ks;
  std::vector<std::string> labels;
  json kernels = json::array();
  std::string backend;
  for (const auto& d : kernel_folders(ws)) {
    const auto mp = read_model_problem(d);
    const std::string be_name = mp->doc.value("backend", "cpu");
    const Backend* be = find_backend(be_name);
    if (!be)
      throw BridgeUsageError(d.string() + "/problem.json names backend '" + be_name +
                             "', which this vladbud does not know (available: " + backend_names() + ")");
    if (backend.empty()) backend = be_name;
    bool improved = false;
    const fs::path src = best_source(d, *mp, *be, &improved);
    const std::string dir = d.filename().string();
    ks.push_back({mp->type,
                  ladder::Variant{dir, src, be_name,
                                  improved ? "the optimizer's best version" : "the starter (no version kept)"},
                  mp->size, mp->dtype});
    labels.push_back(dir);
    kernels.push_back({{"dir", dir},
                       {"kernel", mp->type->name()},
                       {"source", src.string()},
                       {"improved", improved},
                       {"size", mp->size.label},
                       {"dtype", std::string(dtype_name(mp->dtype))}});
  }
  std::vector<TargetSpec> targets = opts.targets;
  if (targets.empty())
    targets = ladder::remote_targets_for(backend);
  ladder::ClimbOptions lo;
  lo.quick = true;
  lo.max_rung = opts.max_rung;
  lo.skip_emulation = !opts.emulate;
  lo.progress = opts.progress;
  const auto climbs = ladder::climb_kernels(ks, targets, lo);
  json doc = {{"kernels", kernels},
              {"targets", ladder::remote_targets_json(targets, climbs)},
              {"table", ladder::format_remote_table(targets, climbs, labels)}};
  write_file_atomic(ws / "rank.json", doc.dump(1) + "\n");
  return doc;
}

}  // namespace vb
