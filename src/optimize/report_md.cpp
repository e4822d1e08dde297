#include "optimize/report_md.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "bridge/pipeline.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/util.h"
#include "optimize/orchestrator.h"

namespace vb::opt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Row {
  int experiment = 0, exp_in_kernel = 0;
  std::string tag, kernel, correctness, description, speedup_vs_pytorch;
  double latency_us = 0, pct_peak = 0;
};

std::vector<std::string> split_tab(const std::string& l) {
  std::vector<std::string> out;
  std::string f;
  std::istringstream in(l);
  while (std::getline(in, f, '\t')) out.push_back(f);
  return out;
}

double num(const std::string& s) {
  try {
    return std::stod(s);
  } catch (...) {
    return 0;
  }
}

// The verify result (python/vladbud/verify.py's RESULT) as Markdown lines.
std::string verify_section(const json& v) {
  std::string md = fmt::format("* verdict: {}\n", v.value("verdict", "FAIL"));
  const json seeds = v.value("seeds", json::array());
  double worst = 0;
  for (const auto& x : seeds) worst = std::max(worst, x.value("rel_error", 0.0));
  if (!seeds.empty())
    md += fmt::format("* worst relative error over {} seed(s): {:.3g} (tolerance {:.3g}: {})\n",
                      seeds.size(), worst, v.value("tolerance", 0.0), v.value("tolerance_rule", ""));
  const json e = v.value("end_to_end", json::object());
  const auto ms = [&](const char* k) {
    return e.contains(k) && e[k].is_number() ? fmt::format("{:.2f}", e[k].get<double>()) : std::string("-");
  };
  if (!e.empty())
    md += fmt::format(
        "* per forward ({}): eager {} ms, torch.compile {} ms, VladBud {} ms, VladBud + compile {} ms\n",
        e.value("protocol", ""), ms("eager_ms"), ms("compile_ms"), ms("vladbud_ms"),
        ms("vladbud_compile_ms"));
  const std::string in = handed_over_list(v);
  md += "* handed over: " + (in.empty() ? std::string("nothing (the baseline model unchanged)") : in) + "\n";
  if (v.contains("speedup"))
    md += fmt::format("* end-to-end speedup of what is handed over: {:.3f}x vs {}\n",
                      v.value("speedup", 0.0), e.value("baseline", "eager"));
  const json cands = v.value("candidates", json::array());
  if (!cands.empty()) {
    md += "\n| candidate | source | in model | decision | why |\n|---|---|---|---|---|\n";
    for (const auto& c : cands) {
      std::string why = c.value("reason", "");
      if (c.contains("compiled_reason")) why += "; " + c["compiled_reason"].get<std::string>();
      if (c.contains("combination_note")) why += "; " + c["combination_note"].get<std::string>();
      if (c.contains("shape_note") && c["shape_note"].is_string())
        why += "; " + c["shape_note"].get<std::string>();
      md += fmt::format("| {} | `{}` | {} | {} | {} |\n", c.value("type", ""), c.value("source", ""),
                        c.contains("in_model_speedup") && c["in_model_speedup"].is_number()
                            ? fmt::format("{:.3f}x", c["in_model_speedup"].get<double>())
                            : std::string("-"),
                        c.value("handed_over", false) ? "in" : "dropped", why);
    }
    md += "\n";
  }
  for (const auto& w : v.value("warnings", json::array()))
    md += "* warning: " + w.get<std::string>() + "\n";
  for (const auto& d : v.value("diagnose", json::array()))
    md += fmt::format("* diagnose {} alone: relative error {:.3g}, {}\n", d.value("type", ""),
                      d.value("rel_error", 0.0), d.value("pass", false) ? "ok" : "breaks the output");
  return md;
}

// The kernel folder of results.tsv's "kdir=" token in workspace `ws`: ws/kernels/KDIR, or the
// workspace itself for a single folder optimized with --kernel outside a kernels/ folder.
fs::path kernel_folder(const fs::path& ws, const std::string& kdir) {
  const fs::path in = ws / "kernels" / kdir;
  if (fs::is_directory(in)) return in;
  return fs::absolute(ws).lexically_normal().filename() == kdir ? ws : in;
}

}  // namespace

std::string handed_over_list(const json& v) {
  std::string in;
  if (!v.is_object() || !v.contains("kernels_in") || !v["kernels_in"].is_array()) return in;
  const json sel = v.contains("shape_selection") && v["shape_selection"].is_object()
                       ? v["shape_selection"] : json::object();
  for (const auto& t : v["kernels_in"]) {
    if (!t.is_string()) continue;
    const std::string name = t.get<std::string>();
    in += (in.empty() ? "" : ", ") + name;
    if (!sel.contains(name) || !sel[name].is_array()) continue;
    std::string keys;
    for (const auto& k : sel[name])
      if (k.is_array() && k.size() == 2 && k[0].is_number_integer() && k[1].is_number_integer())
        keys += fmt::format("{}N{}xK{}", keys.empty() ? "" : ", ", k[0].get<long long>(),
                            k[1].get<long long>());
    if (!keys.empty()) in += " (only at " + keys + ")";
  }
  return in;
}

ReportFiles write_report(const fs::path& ws, const std::string& python) {
  const fs::path results = ws / "results.tsv";
  if (!fs::exists(results))
    throw std::runtime_error(results.string() + " does not exist: run `vladbud optimize` first");
  std::map<std::string, std::vector<Row>> by_kdir;
  {
    std::ifstream in(results);
    std::string line;
    std::getline(in, line);  // header
    static const std::regex kd(R"(kdir=(\S+) exp=(\d+) )");
    while (std::getline(in, line)) {
      const auto c = split_tab(line);
      if (c.size() < 14) continue;
      std::smatch m;
      if (!std::regex_search(c[9], m, kd)) continue;
      Row r;
      r.experiment = static_cast<int>(num(c[0]));
      r.exp_in_kernel = std::stoi(m[2]);
      r.tag = c[1];
      r.kernel = c[2];
      r.latency_us = num(c[4]);
      r.pct_peak = num(c[5]);
      r.speedup_vs_pytorch = c[6];
      r.correctness = c[7];
      r.description = c[9];
      by_kdir[m[1]].push_back(r);
    }
  }
  std::vector<KernelEntry> entries;
  try {
    entries = load_entries(ws);
  } catch (const std::exception&) {
    // A single folder run with --kernel: the workspace may hold no kernels/ folder.
  }
  // The orchestrator's last word on each kernel (budget, plateau, error ...), as `vladbud status`.
  try {
    if (fs::exists(ws / "orchestration.json")) {
      const json orch = json::parse(read_file(ws / "orchestration.json"));
      for (auto& e : entries)
        for (const auto& k : orch.value("kernels", json::array()))
          if (k.value("dir", "") == e.dir) e.status = k.value("status", e.status);
    }
  } catch (const std::exception&) {
  }
  std::string md = "# VladBud report\n\n";
  md += fmt::format("Workspace `{}`, written {}.\n\n", fs::absolute(ws).string(), utc_now_iso8601());
  md += "## Kernels\n\n| kernel | baseline (us) | best (us) | speedup vs starter | speedup vs "
        "PyTorch | % of ceiling | experiments | kept | keep rate |\n|---|---|---|---|---|---|---|---|---|\n";
  json progress = json::object();
  bool marked = false;  // a figure timed under contention: "*" and the footnote below the table
  for (const auto& [kdir, rows] : by_kdir) {
    double base = 0, best = 0, pct = 0;
    int exps = 0, kept = 0;
    std::string vs_pt = "n/a";
    json pts = json::array();
    // Speedups from the ratios measured back to back (load drift cancels): a kept version's
    // interleaved best/candidate ratio multiplies the chain; other rows are shown relative to
    // the best of their time.
    static const std::regex inter(R"(interleaved \d+ rounds: best ([0-9.]+) us, candidate ([0-9.]+) us)");
    static const std::regex screen(R"(quick screen: ([0-9.]+) us vs best ([0-9.]+) us)");
    static const std::regex recheck(
        R"(contended keep (confirmed|reverted): starting source ([0-9.]+) us, best ([0-9.]+) us)");
    double chain = 1;
    for (const auto& r : rows) {
      std::smatch rc;
      if (r.tag == "baseline" && std::regex_search(r.description, rc, recheck)) {
        // A quiet re-check of a keep decided under contention: its figures replace the chain's.
        base = num(rc[2]);
        best = num(rc[3]);
        pct = r.pct_peak;
        chain = best > 0 ? base / best : 1;
        if (rc[1] == "reverted") kept = 0, chain = 1;
        continue;
      }
      if (r.tag == "baseline") {
        // The first start's baseline, then any re-measurement of it ("baseline re-measured":
        // only while nothing is kept, so the best is still the starting source). A later start
        // (best/ removed) does not replace the first, as before.
        const bool remeasured = r.description.find("baseline re-measured") != std::string::npos;
        if (base <= 0 || (remeasured && kept == 0)) base = best = r.latency_us, pct = r.pct_peak;
        if (r.speedup_vs_pytorch != "n/a") vs_pt = r.speedup_vs_pytorch;
        continue;
      }
      ++exps;
      const bool keep = r.tag == "keep";
      double rel = 0;
      std::smatch m;
      if (std::regex_search(r.description, m, inter) && num(m[2]) > 0)
        rel = num(m[1]) / num(m[2]);
      else if (std::regex_search(r.description, m, screen) && num(m[1]) > 0)
        rel = num(m[2]) / num(m[1]);
      if (keep) {
        ++kept;
        best = r.latency_us, pct = r.pct_peak;
        if (rel > 0) chain *= rel;
        if (r.speedup_vs_pytorch != "n/a") vs_pt = r.speedup_vs_pytorch;
      }
      pts.push_back({{"experiment", r.exp_in_kernel},
                     {"latency_us", r.latency_us},
                     {"speedup", keep ? chain : rel > 0 ? chain * rel : 0.0},
                     {"best_speedup", chain},
                     {"kind", keep ? "kept" : r.correctness == "PASS" ? "reverted" : "failed"}});
    }
    for (auto& e : entries)
      if (e.dir == kdir) {
        if (e.baseline_us <= 0) e.baseline_us = base;
        if (kept > 0 || e.best_us <= 0) e.best_us = best;
        if (kept > 0) e.speedup_x = chain;
        if (e.pct_peak <= 0) e.pct_peak = pct;
      }
    // best.json's flags (bridge/pipeline.h): the best figure and the ratio to PyTorch it gives,
    // and the starter's figure, timed while other work competed for the cores.
    const fs::path folder = kernel_folder(ws, kdir);
    const bool best_busy = best_figure_contended(folder), base_busy = baseline_figure_contended(folder);
    const std::string best_mark = best_busy ? "*" : "", base_mark = base_busy ? "*" : "";
    marked = marked || best_busy || base_busy;
    md += fmt::format("| {} | {:.2f}{} | {:.2f}{} | {:.3f}x | {} | {:.1f}% | {} | {} | {:.0f}% |\n",
                      kdir, base, base_mark, best, best_mark, chain,
                      vs_pt == "n/a" ? vs_pt : vs_pt + "x" + best_mark, pct, exps, kept,
                      exps ? 100.0 * kept / exps : 0.0);
    progress[kdir] = {{"baseline_us", base}, {"baseline_contended", base_busy}, {"points", pts}};
  }
  if (marked) md += "\n\\" + contended_footnote() + ".\n";
  md += "\nSpeedups are medians of interleaved timings against the previous best at the model's "
        "shape and dtype (problem.json); a kept version passed all five correctness stages.\n";
  if (!entries.empty()) {
    md += "\n## Amdahl breakdown\n\n| kernel | share of model time | speedup | share after | "
          "status |\n|---|---|---|---|---|\n";
    double covered = 0;
    for (const auto& e : entries) {
      covered += e.time_share;
      md += fmt::format("| {} | {:.1f}% | {:.3f}x | {:.1f}% | {} |\n", e.dir, 100 * e.time_share,
                        e.speedup(), 100 * e.time_share / std::max(e.speedup(), 1e-9), e.status);
    }
    // Not "expected end-to-end speedup": users read that as contradicting verify's measured
    // speedup vs eager PyTorch below.
    md += fmt::format(
        "| rest of the model | {:.1f}% | 1.000x | {:.1f}% | not optimized |\n\nModel-level "
        "speedup implied by the optimizer's keeps over the starter kernels: **{:.3f}x** (Amdahl "
        "over each folder's speedup over its starter: 1 / (rest + sum of share / speedup)). It "
        "is not a comparison with PyTorch: the end-to-end speedup measured against PyTorch is "
        "verify's, under End-to-end verification below.\n",
        100 * std::max(0.0, 1 - covered), 100 * std::max(0.0, 1 - covered), amdahl_speedup(entries));
  }
  md += "\n## End-to-end verification\n\n";
  if (fs::exists(ws / "verify.json")) {
    try {
      md += verify_section(json::parse(read_file(ws / "verify.json")));
    } catch (const std::exception& e) {
      md += fmt::format("verify.json is not readable: {}\n", e.what());
    }
  } else {
    md += "Not run: workspace/verify.json does not exist (run `vladbud verify`).\n";
  }
  if (fs::exists(ws / "rank.json")) {
    md += "\n## Remote targets (confidence ladder)\n\n";
    try {
      const json r = json::parse(read_file(ws / "rank.json"));
      md += "The best version of each kernel folder at the model's shape, climbed up the "
            "confidence ladder for targets that are not this machine (no measurement: rN is the "
            "highest rung reached, the estimate carries its band).\n\n```\n" +
            r.value("table", std::string()) + "```\n";
    } catch (const std::exception& e) {
      md += fmt::format("rank.json is not readable: {}\n", e.what());
    }
  }
  ReportFiles out;
  out.report_md = ws / "report.md";
  out.progress_json = ws / "progress.json";
  out.progress_png = ws / "progress.png";
  write_file_atomic(out.progress_json, progress.dump(1));
  // The plot.
  std::string py = python;
  if (py.empty()) {
    const fs::path venv = vladbud_home() / ".venv" / "bin" / "python";
    py = fs::exists(venv) ? venv.string() : "python3";
  }
  const fs::path script = vladbud_home() / "python" / "plot_progress.py";
  if (!fs::exists(script)) {
    out.png_note = script.string() + " is missing";
  } else if (!have_program(py)) {
    out.png_note = "no Python interpreter (" + py + "); run scripts/setup.sh";
  } else {
    const ProcessResult r = run_process({py, script.string(), out.progress_json.string(),
                                         out.progress_png.string()},
                                        std::chrono::seconds(120));
    if (r.ok()) out.png_written = true;
    else if (r.exit_code == 3)
      out.png_note = "matplotlib is not installed for " + py +
                     " (scripts/setup.sh installs it into .venv from scripts/requirements.txt)";
    else
      out.png_note = "plot_progress.py failed: " + r.err.substr(0, 300);
  }
  md += out.png_written ? "\n![progress](progress.png)\n"
                        : "\nNo progress.png: " + out.png_note + "\n";
  write_file_atomic(out.report_md, md);
  return out;
}

}  // namespace vb::opt
