// `vladbud kernelbench list | setup | bench | score`: KernelBench problems as VladBud workspaces,
// evaluated by KernelBench's protocol with VladBud's guards, scored by fast_p (issue 19).
#include <fmt/format.h>

#include <iostream>

#include "bridge/bridge.h"
#include "bridge/kernelbench.h"
#include "cli/commands.h"
#include "core/paths.h"

namespace vb::cli {

namespace {

struct KbArgs {
  std::string kb_root, workspace = "workspace", problems = "all", backend = "cpu", markdown;
  int level = 0;
  bool json = false, progress = false, setup_missing = false;
  KbBenchOptions bench;
};

[[noreturn]] void usage_error(const std::string& verb, const std::string& msg) {
  std::cerr << "vladbud kernelbench " << verb << ": " << msg << "\n";
  throw CLI::RuntimeError(kUsage);
}

// Runs `fn`, turning the library's usage errors into exit code 2 with the message.
template <class F>
auto guarded(const std::string& verb, F&& fn) {
  try {
    return fn();
  } catch (const BridgeUsageError& e) {
    usage_error(verb, e.what());
  } catch (const std::invalid_argument& e) {
    usage_error(verb, e.what());
  }
}

std::string num(const nlohmann::json& v, const char* f) {
  return v.is_number() ? fmt::format(fmt::runtime(f), v.get<double>()) : "n/a";
}

void run_list(const KbArgs& a) {
  const auto ps = guarded("list", [&] { return kb_list(a.kb_root, a.level); });
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : ps) {
    const auto dir = kb_folder(a.workspace, p);
    std::string setup = "-";
    if (std::filesystem::exists(dir / "problem.json")) {
      const auto pj = nlohmann::json::parse(read_file(dir / "problem.json"));
      setup = pj.value("mapped", false) ? pj.value("kernel", "?") : "agent";
    }
    out.push_back({{"level", p.level}, {"id", p.id}, {"name", p.name}, {"file", p.file.string()},
                   {"setup", setup}});
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("{:<6} {:>4}  {:<60} {}\n", "level", "id", "name", "setup (workspace)");
  for (const auto& r : out)
    std::cout << fmt::format("{:<6} {:>4}  {:<60} {}\n", r["level"].get<int>(), r["id"].get<int>(),
                             r["name"].get<std::string>(), r["setup"].get<std::string>());
  std::cout << ps.size() << " problems\n";
}

void run_setup(const KbArgs& a) {
  const auto ps = guarded("setup", [&] { return kb_select(a.kb_root, a.level, a.problems); });
  const auto ms = guarded("setup", [&] { return kb_setup(ps, {a.workspace, a.backend}); });
  nlohmann::json all = nlohmann::json::array();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const auto& p = ps[i];
    const auto& m = ms[i];
    all.push_back(m);
    if (a.json) continue;
    if (m.value("mapped", false)) {
      std::cout << fmt::format("{}: {} ({}, {})\n", p.label(), m["type"].get<std::string>(),
                               m.value("size_label", ""),
                               m["dtype"].get<std::string>());
      for (const auto& s : m["layout_steps"]) std::cout << "  layout: " << s.get<std::string>() << "\n";
    } else {
      std::cout << fmt::format("{}: not mapped ({}); ModelNew candidate for an agent\n", p.label(),
                               m.value("reason", ""));
    }
    std::cout << "  wrote " << m["folder"].get<std::string>() << "/\n";
  }
  if (a.json) std::cout << all.dump(2) << "\n";
}

void print_bench(const nlohmann::json& r) {
  std::cout << "problem: " << r.value("label", "") << "\n";
  std::cout << "candidate: " << r.value("candidate", "") << "\n";
  if (r.contains("kernel")) std::cout << "kernel: " << r["kernel"].value("type", "") << " " << r["kernel"].value("source", "") << "\n";
  if (r.value("precision", "fp32") == "tf32")
    std::cout << "precision: TF32 (fp32 operands rounded to TF32 on tensor cores; admitted by KernelBench's "
                 "tolerance, not VladBud's fp32 contract)\n";
  std::cout << "device: " << r.value("device", "") << "\n";
  std::cout << "correctness: " << r.value("verdict", "FAIL") << "\n";
  if (r.contains("kb_correct"))
    std::cout << "kernelbench_correct: " << (r["kb_correct"].is_boolean() ? (r["kb_correct"].get<bool>() ? "yes" : "no") : "n/a") << "\n";
  if (r["guard"].is_string()) {
    std::cout << "guard: " << r["guard"].get<std::string>() << "\n";
    std::cout << "reason: " << r.value("reason", "") << "\n";
  }
  if (r.contains("diagnostics")) std::cout << r["diagnostics"].get<std::string>() << "\n";
  if (r.contains("fp64")) {
    const auto& f = r["fp64"];
    std::cout << "fp64_rel_err: " << num(f["rel_err"], "{:.3e}") << " (reference's own "
              << num(f["reference_rel_err"], "{:.3e}") << ", bound " << num(f["threshold"], "{:.1e}")
              << (f.value("pass", false) ? ", within" : ", ABOVE") << ")\n";
    if (f.contains("rule") && f["rule"].is_string()) std::cout << "fp64_rule: " << f["rule"].get<std::string>() << "\n";
    if (f.contains("note")) std::cout << "fp64_note: " << f["note"].get<std::string>() << "\n";
  }
  if (r.contains("timing")) {
    const auto& t = r["timing"];
    std::cout << "model_us: " << num(t["ref"]["median_us"], "{:.2f}") << "\n";
    std::cout << "model_new_us: " << num(t["new"]["median_us"], "{:.2f}") << "\n";
    if (t.contains("compile")) std::cout << "compile_us: " << num(t["compile"]["median_us"], "{:.2f}") << "\n";
    std::cout << "timing: " << t.value("method", "") << ", median of " << t["new"].value("reps", 0) << " calls\n";
  }
  if (r.contains("speedup")) std::cout << "speedup: " << num(r["speedup"], "{:.3f}") << "\n";
  if (r.contains("speedup_vs_compile"))
    std::cout << "speedup_vs_compile: " << num(r["speedup_vs_compile"], "{:.3f}") << "\n";
  if (r.contains("guards_checked")) {
    std::string g;
    for (const auto& x : r["guards_checked"]) g += (g.empty() ? "" : ", ") + x.get<std::string>();
    std::cout << "guards_checked: " << g << "\n";
  }
  for (const auto& w : r.value("warnings", nlohmann::json::array()))
    std::cout << "warning: " << w.get<std::string>() << "\n";
}

KbBenchOptions bench_options(const KbArgs& a) {
  KbBenchOptions o = a.bench;
  o.workspace = a.workspace;
  o.backend = a.backend;
  return o;
}

void run_bench(const KbArgs& a) {
  const auto ps = guarded("bench", [&] { return kb_select(a.kb_root, a.level, a.problems); });
  if (ps.size() != 1) usage_error("bench", "bench takes one --problem (use `score` for several)");
  const auto r = guarded("bench", [&] { return kb_bench(ps[0], bench_options(a)); });
  if (a.json)
    std::cout << r.dump(2) << "\n";
  else
    print_bench(r);
  if (r.value("verdict", "FAIL") != "PASS") throw CLI::RuntimeError(kFail);
}

void run_score(const KbArgs& a) {
  const auto ps = guarded("score", [&] { return kb_select(a.kb_root, a.level, a.problems); });
  const auto o = bench_options(a);
  if (a.setup_missing) {
    std::vector<KbProblem> todo;
    for (const auto& p : ps)
      if (!std::filesystem::exists(kb_folder(a.workspace, p) / "model_new.py")) todo.push_back(p);
    if (!todo.empty()) guarded("score", [&] { return kb_setup(todo, {a.workspace, a.backend}); });
  }
  auto progress = progress_printer(a.progress);
  const auto s = kb_score(ps, o, progress);
  const std::string md = kb_score_markdown(s);
  if (!a.markdown.empty()) {
    write_file_atomic(a.markdown, "# KernelBench score\n\n" + md);
    auto js = std::filesystem::path(a.markdown).replace_extension(".json");
    write_file_atomic(js, s.dump(2) + "\n");
  }
  if (a.json)
    std::cout << s.dump(2) << "\n";
  else
    std::cout << md;
}

void common(CLI::App* c, KbArgs& a, bool problems) {
  c->add_option("--kb-root", a.kb_root,
                "a KernelBench checkout (git clone https://github.com/ScalingIntelligence/KernelBench): "
                "its KernelBench/level1..4/*.py are the problems");
  c->add_option("--level", a.level, "KernelBench level 1..4")->capture_default_str();
  c->add_option("--workspace", a.workspace, "workspace folder (problems go to WS/kernelbench/levelL/NAME/)")
      ->capture_default_str();
  c->add_flag("--json", a.json, "print JSON");
  if (problems)
    c->add_option("--problem,--problems", a.problems,
                  "problem ids or file names, comma-separated (\"1,2,23\"), or \"all\"")
        ->capture_default_str();
}

void bench_flags(CLI::App* c, KbArgs& a) {
  KbBenchOptions& o = a.bench;
  c->add_option("--backend", a.backend,
                "backend building a mapped problem's kernel; its device (cpu, cuda) runs both models")
      ->capture_default_str();
  c->add_option("--trials", o.trials, "correctness trials (KernelBench: 5)")->capture_default_str();
  c->add_option("--reps", o.reps, "timed calls per model (0: 100 on a GPU, 10 on the CPU; -1: no timing)")
      ->capture_default_str();
  c->add_option("--warmup", o.warmup, "warm-up calls per model")->capture_default_str();
  c->add_option("--max-time", o.max_time_s, "seconds of timed calls per model at most")->capture_default_str();
  c->add_option("--atol", o.atol, "allclose atol (KernelBench v0.1: 1e-2)")->capture_default_str();
  c->add_option("--rtol", o.rtol, "allclose rtol (KernelBench v0.1: 1e-2)")->capture_default_str();
  c->add_option("--seed", o.seed, "KernelBench's seed")->capture_default_str();
  c->add_flag("--compile", o.compile, "also time torch.compile(Model): speedup_vs_compile");
  c->add_flag("--strict", o.strict, "fail a candidate whose error against the float64 oracle is above the bound");
  c->add_flag("!--no-fp64", o.fp64, "skip the float64 oracle (huge problems)");
  c->add_option("--timeout", o.timeout_s, "seconds per problem")->capture_default_str();
  c->add_flag("--inputs-on-device", o.inputs_on_device,
              "draw get_inputs() on the GPU (same seeds, the device's generator) instead of on the host as "
              "KernelBench does: Level 1 inputs reach 8 GB");
  c->add_flag("!--no-tf32", o.allow_tf32,
              "build fp32 matmul problems in true fp32 (default: their TF32 tensor-core path, which "
              "KernelBench's tolerance admits; the report says TF32)");
}

}  // namespace

void add_kernelbench(CLI::App& app) {
  auto a = std::make_shared<KbArgs>();
  auto* kb = app.add_subcommand(
      "kernelbench",
      "KernelBench problems (a checkout's KernelBench/level1..4/*.py): list them, set one up as a "
      "VladBud workspace (its kernel type at its shapes, or a ModelNew file for an agent), bench a "
      "ModelNew by KernelBench's protocol plus VladBud's guards, score a level by fast_p.");
  kb->require_subcommand(1);
  auto* l = kb->add_subcommand("list", "List the problems of a level (or all levels) and which are set up");
  common(l, *a, false);
  l->callback([a] { run_list(*a); });
  auto* s = kb->add_subcommand(
      "setup", "Map problems to VladBud kernel types and write WS/kernelbench/levelL/NAME/ "
               "(problem.json + the starter kernel when mapped; model_new.py, program_kb.md)");
  common(s, *a, true);
  s->add_option("--backend", a->backend, "backend of the starter kernel (cpu, cuda)")->capture_default_str();
  s->callback([a] { run_setup(*a); });
  auto* b = kb->add_subcommand(
      "bench", "Evaluate one problem's ModelNew (the folder's model_new.py, or --candidate) against "
               "its Model. Exit 0 PASS, 1 FAIL (guard named), 2 bad usage");
  common(b, *a, true);
  b->add_option("--candidate", a->bench.candidate, "a file defining ModelNew (default: the folder's model_new.py)");
  bench_flags(b, *a);
  b->callback([a] { run_bench(*a); });
  auto* sc = kb->add_subcommand(
      "score", "Bench every listed problem's ModelNew and report fast_p at p = 0, 1, 1.5, 2, 3, 5 "
               "(against Model, and torch.compile(Model) with --compile), per-problem correctness, "
               "speedup and the guard that fired");
  common(sc, *a, true);
  bench_flags(sc, *a);
  sc->add_flag("--setup", a->setup_missing, "set up the problems that have no folder yet");
  sc->add_option("--markdown", a->markdown, "also write the report to this .md file (and the JSON next to it)");
  sc->add_flag("--progress", a->progress, "one line per problem on stderr");
  sc->callback([a] { run_score(*a); });
}

}  // namespace vb::cli
