// KernelBench problems, workspaces, bench and score (issue 19); see kernelbench.h.
#include "bridge/kernelbench.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <cctype>
#include <map>
#include <sstream>

#include "backends/backend.h"
#include "bridge/bridge.h"
#include "core/paths.h"

namespace vb {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
const char* kGetProblems =
    "get the problems with `git clone https://github.com/ScalingIntelligence/KernelBench` and pass "
    "--kb-root PATH/TO/KernelBench (the checkout; its problems are KernelBench/level1..4/*.py)";

// The leading "<digits>_" of a file name, or -1.
int leading_id(const std::string& stem) {
  std::size_t i = 0;
  while (i < stem.size() && std::isdigit(static_cast<unsigned char>(stem[i]))) ++i;
  if (i == 0 || i >= stem.size() || stem[i] != '_' || i > 6) return -1;
  return std::stoi(stem.substr(0, i));
}

fs::path scratch_dir() {
  return fs::temp_directory_path() / ("vladbud-kb-" + std::to_string(::getpid()));
}
}  // namespace

fs::path kb_levels_dir(const fs::path& kb_root) {
  if (kb_root.empty())
    throw BridgeUsageError(std::string("no KernelBench problems: ") + kGetProblems);
  if (!fs::is_directory(kb_root))
    throw BridgeUsageError("--kb-root " + kb_root.string() + " is not a directory; " + kGetProblems);
  for (const fs::path& d : {kb_root / "KernelBench", kb_root})
    for (int l = 1; l <= 4; ++l)
      if (fs::is_directory(d / ("level" + std::to_string(l)))) return d;
  throw BridgeUsageError("--kb-root " + kb_root.string() +
                         " holds no KernelBench/level1..4 folder; " + kGetProblems);
}

std::vector<KbProblem> kb_list(const fs::path& kb_root, int level) {
  if (level < 0 || level > 4)
    throw BridgeUsageError(fmt::format("--level must be 1, 2, 3 or 4 (got {})", level));
  const fs::path base = kb_levels_dir(kb_root);
  std::vector<KbProblem> out;
  for (int l = (level ? level : 1); l <= (level ? level : 4); ++l) {
    const fs::path d = base / ("level" + std::to_string(l));
    if (!fs::is_directory(d)) {
      if (level) throw BridgeUsageError(d.string() + " does not exist (this checkout has no level " +
                                        std::to_string(l) + "); " + kGetProblems);
      continue;
    }
    for (const auto& e : fs::directory_iterator(d)) {
      if (!e.is_regular_file() || e.path().extension() != ".py") continue;
      const std::string stem = e.path().stem().string();
      const int id = leading_id(stem);
      if (id < 0) continue;
      out.push_back({l, id, stem, e.path()});
    }
  }
  std::sort(out.begin(), out.end(), [](const KbProblem& a, const KbProblem& b) {
    return a.level != b.level ? a.level < b.level : a.id < b.id;
  });
  return out;
}

std::vector<KbProblem> kb_select(const fs::path& kb_root, int level, const std::string& spec) {
  if (level < 1 || level > 4)
    throw BridgeUsageError(fmt::format("--level must be 1, 2, 3 or 4 (got {})", level));
  const auto all = kb_list(kb_root, level);
  if (spec == "all") return all;
  std::vector<KbProblem> out;
  std::stringstream ss(spec);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    tok.erase(0, tok.find_first_not_of(" \t"));
    tok.erase(tok.find_last_not_of(" \t") + 1);
    if (tok.empty()) continue;
    const bool numeric = std::all_of(tok.begin(), tok.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    auto it = std::find_if(all.begin(), all.end(), [&](const KbProblem& p) {
      return numeric ? p.id == std::stoi(tok) : (p.name == tok || p.name + ".py" == tok);
    });
    if (it == all.end())
      throw BridgeUsageError(fmt::format("no problem '{}' in {} (`vladbud kernelbench list --kb-root "
                                         "... --level {}` lists them)",
                                         tok, (kb_levels_dir(kb_root) / ("level" + std::to_string(level))).string(), level));
    out.push_back(*it);
  }
  if (out.empty())
    throw BridgeUsageError("--problem needs ids or names (\"1,2,23\", \"23_Softmax\") or \"all\"");
  return out;
}

fs::path kb_folder(const fs::path& workspace, const KbProblem& p) {
  return workspace / "kernelbench" / ("level" + std::to_string(p.level)) / p.name;
}

namespace {
json write_setup(const KbProblem& p, const json& m, const Backend& bk, const KbSetupOptions& o);
}  // namespace

json kb_setup(const KbProblem& p, const KbSetupOptions& o) { return kb_setup(std::vector<KbProblem>{p}, o).at(0); }

std::vector<json> kb_setup(const std::vector<KbProblem>& ps, const KbSetupOptions& o) {
  const Backend* be = find_backend(o.backend);
  if (!be) throw BridgeUsageError("unknown backend '" + o.backend + "'; available: " + backend_names());
  json list = json::array();
  for (const auto& p : ps) list.push_back({{"problem", fs::absolute(p.file).string()}, {"label", p.label()}});
  const json res = run_bridge("kernelbench", {{"action", "map"}, {"problems", list}}, scratch_dir(),
                              std::chrono::seconds(600 + 60 * ps.size()));
  std::vector<json> out;
  for (std::size_t i = 0; i < ps.size(); ++i) out.push_back(write_setup(ps[i], res.at("results").at(i), *be, o));
  return out;
}

namespace {
// Writes the folder of problem `p` from its mapping `m` (python's "map" result).
json write_setup(const KbProblem& p, const json& m, const Backend& bk, const KbSetupOptions& o) {
  const Backend* be = &bk;
  const fs::path dir = kb_folder(o.workspace, p);
  fs::create_directories(dir);
  // A re-run replaces what setup wrote and keeps the optimizer's kept versions (best/, history/).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "results.tsv") fs::remove(e.path(), ec);
  write_file_atomic(dir / "model_new.py", m.at("model_new").get<std::string>());
  write_file_atomic(dir / "program_kb.md", m.at("program_kb").get<std::string>());
  const json kb = {{"level", p.level}, {"id", p.id}, {"name", p.name},
                   {"file", fs::absolute(p.file).string()},
                   {"layout", m.value("layout", json::object())},
                   {"layout_steps", m.value("layout_steps", json::array())},
                   {"ops", m.value("ops", json::array())}, {"inputs", m.value("inputs", json::array())}};
  json prob;
  if (m.value("mapped", false)) {
    const std::string type = m.at("type").get<std::string>();
    const KernelType* kt = find_kernel_type(type);
    if (!kt) throw std::runtime_error("the mapping named an unknown kernel type '" + type + "'");
    const Size s = model_size(*kt, m.at("dims"), m.value("attrs", json::object()));
    const fs::path starter = be->starter_source(type);
    if (!fs::exists(starter))
      throw BridgeUsageError("backend " + o.backend + " has no starter kernel " + starter.string());
    const fs::path src = dir / (type + be->source_extension());
    fs::copy_file(starter, src, fs::copy_options::overwrite_existing);
    prob = {{"kernel", type}, {"dims", m.at("dims")}, {"attrs", m.value("attrs", json::object())},
            {"dtype", m.at("dtype")}, {"size_label", s.label}, {"backend", o.backend},
            {"source", src.filename().string()}, {"starter", starter.string()},
            {"device", be->device().torch_device()}, {"mapped", true},
            {"time_share", 1.0},  // the problem's forward is this one kernel
            {"kernelbench", kb}};
    if (m.contains("precision")) prob["precision"] = m["precision"];
  } else {
    prob = {{"mapped", false}, {"reason", m.value("reason", "")}, {"backend", o.backend},
            {"device", be->device().torch_device()}, {"kernelbench", kb}};
  }
  write_file_atomic(dir / "problem.json", prob.dump(2) + "\n");
  json out = {{"mapped", m.value("mapped", false)}, {"folder", dir.string()},
              {"size_label", prob.value("size_label", "")},
              {"ops", m.value("ops", json::array())}, {"label", p.label()}};
  for (const char* k : {"type", "dims", "attrs", "dtype", "layout_steps", "reason", "precision"})
    if (m.contains(k)) out[k] = m[k];
  return out;
}
}  // namespace

bool kb_precision_tf32(const json& prob, const fs::path& file) {
  if (!prob.contains("precision")) return false;
  const json& v = prob["precision"];
  const std::string pr = v.is_string() ? v.get<std::string>() : v.dump();
  if (pr == "fp32") return false;
  if (pr != "tf32")
    throw BridgeUsageError(file.string() + ": \"precision\": " + v.dump() +
                           " is unknown; the only other precision is \"tf32\" (KernelBench mode, fp32 matmul)");
  if (!prob.contains("kernelbench"))
    throw BridgeUsageError(file.string() + ": \"precision\": \"tf32\" is KernelBench mode only (written by "
                           "`vladbud kernelbench setup`, whose allclose(1e-2) admits TF32); VladBud's fp32 is true "
                           "fp32 (DESIGN §2): remove the field");
  if (prob.value("kernel", "") != "matmul" || prob.value("dtype", "") != "fp32")
    throw BridgeUsageError(file.string() + ": \"precision\": \"tf32\" applies to an fp32 matmul only (this is " +
                           prob.value("kernel", "?") + " " + prob.value("dtype", "?") + "); remove the field");
  return true;
}

fs::path kb_tf32_source(const fs::path& src, const fs::path& scratch) {
  const std::string text = "// vladbud kernelbench bench: precision tf32 (KernelBench mode), a copy of the folder's " +
                           src.filename().string() + "\n#define VB_PRECISION_TF32 1\n#line 1\n" + read_file(src);
  // Named by content: the same source in several folders (and processes) is one file at one path,
  // so the backend's build cache (keyed by the preprocessed text, path markers included) builds it once.
  const fs::path dir = scratch / fmt::format("{:016x}", std::hash<std::string>{}(text));
  fs::create_directories(dir);
  const fs::path out = dir / ("tf32_" + src.filename().string());
  if (!fs::exists(out) || read_file(out) != text) write_file_atomic(out, text);
  return out;
}

json kb_bench(const KbProblem& p, const KbBenchOptions& o) {
  const Backend* be = find_backend(o.backend);
  if (!be) throw BridgeUsageError("unknown backend '" + o.backend + "'; available: " + backend_names());
  if (const std::string why = be->device_unavailable(); !why.empty())
    throw BridgeUsageError("backend " + o.backend + " cannot run here: " + why);
  if (o.trials < 1) throw BridgeUsageError("--trials must be at least 1");
  const fs::path dir = kb_folder(o.workspace, p);
  fs::path cand = o.candidate.empty() ? dir / "model_new.py" : fs::path(o.candidate);
  if (!fs::exists(cand))
    throw BridgeUsageError(o.candidate.empty()
                               ? fmt::format("{} has no model_new.py; run `vladbud kernelbench setup --kb-root ... "
                                             "--level {} --problem {}` first, or pass --candidate FILE",
                                             dir.string(), p.level, p.id)
                               : "candidate " + cand.string() + " does not exist");
  json req = {{"action", "bench"}, {"problem", fs::absolute(p.file).string()},
              {"candidate", fs::absolute(cand).string()}, {"device", be->device().torch_device()},
              {"seed", o.seed}, {"trials", o.trials}, {"atol", o.atol}, {"rtol", o.rtol},
              {"warmup", o.warmup}, {"max_time_s", o.max_time_s}, {"compile", o.compile},
              {"strict", o.strict}, {"fp64", o.fp64}, {"inputs_on_device", o.inputs_on_device}};
  const bool gpu = be->device().kind() != DeviceKind::Host;
  req["reps"] = o.reps < 0 ? 0 : o.reps > 0 ? o.reps : (gpu ? 100 : 10);
  json kernel_info;
  // The folder's own ModelNew of a mapped problem calls the folder's kernel: build and bind it.
  if (fs::exists(dir / "problem.json") && fs::exists(dir / "model_new.py") &&
      fs::equivalent(cand, dir / "model_new.py")) {
    json prob = json::parse(read_file(dir / "problem.json"));
    if (prob.value("mapped", false)) {
      const std::string type = prob.at("kernel").get<std::string>();
      const std::string fb = prob.value("backend", o.backend);
      const Backend* kb = find_backend(fb);
      if (!kb) throw BridgeUsageError(dir.string() + "/problem.json names unknown backend '" + fb + "'");
      if (kb->device().torch_device() != be->device().torch_device())
        throw BridgeUsageError(fmt::format("{} was set up for backend {} (device {}); re-run setup with "
                                           "--backend {} or bench with --backend {}",
                                           dir.string(), fb, kb->device().torch_device(), o.backend, fb));
      fs::path src = dir / "best" / (type + kb->source_extension());
      if (!fs::exists(src)) src = dir / prob.value("source", type + kb->source_extension());
      // TF32 where the folder asks for it and the source has a TF32 path (mentions the define);
      // a source without one (the CPU starter) runs, and is reported, as true fp32.
      const bool tf32 = kb_precision_tf32(prob, dir / "problem.json") && o.allow_tf32 &&
                        read_file(src).find("VB_PRECISION_TF32") != std::string::npos;
      const fs::path built = tf32 ? kb_tf32_source(src, fs::temp_directory_path() / "vladbud-kb-tf32") : src;
      const BuildResult br = kb->build(built);
      kernel_info = {{"type", type}, {"source", src.string()}, {"precision", tf32 ? "tf32" : "fp32"}};
      if (tf32) req["precision"] = "tf32";
      if (!br.ok)
        return {{"verdict", "FAIL"}, {"correct", false}, {"guard", "build"},
                {"reason", "building " + src.string() + " failed"}, {"diagnostics", br.diagnostics},
                {"label", p.label()}, {"kernel", kernel_info}};
      kernel_info["library"] = fs::absolute(br.library).string();
      req["kernel"] = {{"type", type}, {"library", kernel_info["library"]},
                       {"device", kb->device().torch_device()}};
    }
  }
  json res = run_bridge("kernelbench", req, scratch_dir(), std::chrono::seconds(o.timeout_s));
  res["label"] = p.label();
  if (!kernel_info.is_null()) res["kernel"] = kernel_info;
  return res;
}

namespace {
std::string p_key(double p) { return p == 0 ? "0" : fmt::format("{:.1f}", p); }
}  // namespace

json kb_fast_p(const std::vector<json>& results) {
  const double n = static_cast<double>(results.size());
  json fp = json::object(), fpc = json::object();
  int correct = 0, with_compile = 0;
  for (const auto& r : results) {
    if (r.value("correct", false)) ++correct;
    if (r.contains("speedup_vs_compile") && r["speedup_vs_compile"].is_number()) ++with_compile;
  }
  for (double p : kFastP) {
    int k = 0, kc = 0;
    for (const auto& r : results) {
      if (!r.value("correct", false)) continue;
      const json s = r.value("speedup", json());
      if (s.is_number() ? s.get<double>() > p : p == 0) ++k;
      const json sc = r.value("speedup_vs_compile", json());
      if (sc.is_number() ? sc.get<double>() > p : false) ++kc;
    }
    fp[p_key(p)] = n > 0 ? k / n : 0.0;
    fpc[p_key(p)] = n > 0 ? kc / n : 0.0;
  }
  json out = {{"n", results.size()}, {"correct", correct}, {"fast_p", fp}};
  if (with_compile) out["fast_p_compile"] = fpc;
  return out;
}

json kb_score(const std::vector<KbProblem>& problems, const KbBenchOptions& o,
              const std::function<void(const std::string&)>& progress) {
  std::vector<json> results;
  for (const auto& p : problems) {
    json r;
    try {
      r = kb_bench(p, o);
    } catch (const std::exception& e) {
      r = {{"verdict", "FAIL"}, {"correct", false}, {"guard", "error"}, {"reason", e.what()},
           {"label", p.label()}};
    }
    if (progress)
      progress(fmt::format("{}: {} {}{}", p.label(), r.value("verdict", "FAIL"),
                           r["guard"].is_string() ? r["guard"].get<std::string>() : "",
                           r.contains("speedup") && r["speedup"].is_number()
                               ? fmt::format(" speedup {:.3f}x", r["speedup"].get<double>())
                               : ""));
    results.push_back(std::move(r));
  }
  json rows = json::array();
  for (const auto& r : results) {
    json row = {{"label", r.value("label", "")}, {"verdict", r.value("verdict", "FAIL")},
                {"correct", r.value("correct", false)}, {"guard", r.value("guard", json())},
                {"reason", r.value("reason", "")}, {"speedup", r.value("speedup", json())},
                {"speedup_vs_compile", r.value("speedup_vs_compile", json())},
                {"kb_correct", r.value("kb_correct", json())},
                {"precision", r.value("precision", "fp32")}};
    if (r.contains("fp64")) row["fp64_rel_err"] = r["fp64"].value("rel_err", json());
    if (r.contains("fp64") && r["fp64"].contains("note")) row["fp64_note"] = r["fp64"]["note"];
    if (r.contains("timing")) {
      row["ref_us"] = r["timing"]["ref"].value("median_us", json());
      row["new_us"] = r["timing"]["new"].value("median_us", json());
      if (r["timing"].contains("compile")) row["compile_us"] = r["timing"]["compile"].value("median_us", json());
    }
    if (r.contains("kernel")) row["kernel"] = r["kernel"].value("type", "");
    rows.push_back(row);
  }
  return {{"problems", rows}, {"score", kb_fast_p(results)}, {"details", results}};
}

std::string kb_score_markdown(const json& s) {
  const json& sc = s.at("score");
  std::string md = fmt::format("{} problems, {} correct.\n\n| baseline |", sc.value("n", 0), sc.value("correct", 0));
  for (double p : kFastP) md += fmt::format(" fast_{} |", p_key(p));
  md += "\n|---|";
  for (std::size_t i = 0; i < kFastP.size(); ++i) md += "---|";
  auto row = [&](const char* name, const json& fp) {
    md += fmt::format("\n| {} |", name);
    for (double p : kFastP) md += fmt::format(" {:.3f} |", fp.value(p_key(p), 0.0));
  };
  row("eager Model", sc.at("fast_p"));
  if (sc.contains("fast_p_compile")) row("torch.compile(Model)", sc["fast_p_compile"]);
  md += "\n\n| problem | kernel | correct | Model us | ModelNew us | speedup | vs compile | fp64 rel. err | guard | reason |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n";
  auto num = [](const json& v, const char* f) {
    return v.is_number() ? fmt::format(fmt::runtime(f), v.get<double>()) : std::string("-");
  };
  for (const auto& r : s.at("problems")) {
    std::string reason = r.value("reason", "");
    std::replace(reason.begin(), reason.end(), '|', '/');
    std::replace(reason.begin(), reason.end(), '\n', ' ');
    if (reason.size() > 160) reason = reason.substr(0, 157) + "...";
    const std::string kernel = r.value("kernel", "-") + (r.value("precision", "") == "tf32" ? " (TF32)" : "");
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r.value("label", ""),
                      kernel, r.value("correct", false) ? "yes" : "no",
                      num(r.value("ref_us", json()), "{:.1f}"), num(r.value("new_us", json()), "{:.1f}"),
                      num(r.value("speedup", json()), "{:.3f}x"),
                      num(r.value("speedup_vs_compile", json()), "{:.3f}x"),
                      num(r.value("fp64_rel_err", json()), "{:.2e}"),
                      r["guard"].is_string() ? r["guard"].get<std::string>() : "-", reason);
  }
  return md;
}

}  // namespace vb
