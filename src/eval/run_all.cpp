#include "eval/run_all.h"

#include <fmt/format.h>
#include <sstream>

#include "backends/backend.h"
#include "eval/report.h"
#include "research/corpus.h"
#include "targets/spec_db.h"

namespace vb {

using json = nlohmann::json;

std::optional<TargetResults> run_local(
    const Backend& backend, const std::vector<const KernelType*>& types, const EvalOptions& opts,
    const std::function<void(std::size_t, EvalReport&)>& on_done, std::string* why_none) {
  const Device& dev = backend.device();
  if (const std::string why = dev.unavailable(); !why.empty()) {
    if (why_none) *why_none = why;
    return std::nullopt;
  }
  TargetResults t;
  t.id = dev.local_target_id();
  t.name = dev.local_name();
  t.spec_id = dev.local_spec_id();
  t.backend = backend.name();
  t.local = true;
  t.rung = 5;
  bool have_ceilings = static_cast<bool>(opts.ceilings);
  if (!have_ceilings) {
    try {
      t.ceilings = dev.local_ceilings(false, opts.progress);  // measure up front if needed
      have_ceilings = true;
    } catch (const std::exception& e) {
      if (opts.progress)
        opts.progress(dev.name() + " ceilings not measured: " + std::string(e.what()));
    }
  }
  for (std::size_t i = 0; i < types.size(); ++i) {
    const KernelType& kt = *types[i];
    t.kernels.push_back(evaluate(kt, backend, backend.starter_source(kt.name()), opts));
    if (on_done) on_done(i, t.kernels.back());
  }
  if (opts.ceilings) {
    t.ceilings = *opts.ceilings;
  } else if (have_ceilings) {
    // The evaluator may have re-measured stale ceilings; show the ones in force now.
    try {
      t.ceilings = dev.local_ceilings(false, opts.progress);
    } catch (const std::exception&) {
    }
  }
  if (have_ceilings)
    for (auto& r : t.kernels)
      if (r.timing && r.verdict == "PASS")
        r.timing->roofline = roofline_point(t.ceilings, r.timing->dtype, r.timing->flops,
                                            r.timing->bytes, r.timing->median_us * 1e-6);
  return t;
}

namespace {

std::string stage_cell(const EvalReport& r, const char* name) {
  for (const auto& s : r.stages)
    if (s.name == name) return s.status;
  return "-";
}

std::string accuracy_cell(const EvalReport& r) {
  // Accuracy = shape sweep + edge shapes, with the worst relative error seen.
  std::string st = "PASS";
  double err = 0;
  for (const auto& s : r.stages) {
    if (s.name == "smoke" || s.name == "shape_sweep" || s.name == "edge") {
      if (s.status == "FAIL")
        st = "FAIL";
      else if (s.status == "NOT RUN" && st == "PASS")
        st = "NOT RUN";
      err = std::max(err, s.max_rel_error);
    }
  }
  return err > 0 ? fmt::format("{} ({:.1e})", st, err) : st;
}

std::string perf_cell(const EvalReport& r) {
  if (!r.timing) return "-";
  const auto& t = *r.timing;
  if (t.roofline.bound == "memory") return fmt::format("{:.1f} GB/s", t.roofline.achieved_gbs);
  return fmt::format("{:.1f} GFLOP/s", t.roofline.achieved_tflops * 1000);
}

// "1 other task" / "2 other tasks".
std::string others(int n) { return fmt::format("{} other task{}", n, n == 1 ? "" : "s"); }

}  // namespace

bool timed_under_contention(const EvalReport& r) {
  return r.timing && r.timing->other_runnable >= 1;
}

std::string format_run_table(const std::vector<TargetResults>& targets, bool markdown) {
  std::ostringstream o;
  for (const auto& t : targets) {
    const auto& c = t.ceilings;
    o << (markdown ? "### " : "") << "target " << t.id << " (" << t.name << ", "
      << (t.local ? "local" : "remote") << ", backend " << t.backend << ", rung " << t.rung
      << ")\n";
    o << fmt::format(
        "measured ceilings: memory {:.1f} GB/s; fp32 {:.3f} TFLOP/s, fp16 {:.3f}, bf16 {:.3f}, "
        "fp64 {:.3f}\n",
        c.mem_bw_gbs, c.peak_tflops.count(DType::F32) ? c.peak_tflops.at(DType::F32) : 0.0,
        c.peak_tflops.count(DType::F16) ? c.peak_tflops.at(DType::F16) : 0.0,
        c.peak_tflops.count(DType::BF16) ? c.peak_tflops.at(DType::BF16) : 0.0,
        c.peak_tflops.count(DType::F64) ? c.peak_tflops.at(DType::F64) : 0.0);
    if (markdown) o << "\n";
    const std::vector<std::string> head{"kernel",       "correctness", "accuracy",   "stability",
                                        "determinism",  "size",        "latency_us", "performance",
                                        "% of ceiling", "bound",      "vs PyTorch"};
    std::vector<std::vector<std::string>> rows;
    std::string busy;  // the rows timed under contention, for the footnote
    for (const auto& r : t.kernels) {
      // A figure timed while other work competed for the cores carries the mark (footnote below).
      const bool contended = timed_under_contention(r);
      const std::string mark = contended ? "*" : "";
      if (contended)
        busy += (busy.empty() ? "" : ", ") + r.kernel + ": " + others(r.timing->other_runnable);
      std::vector<std::string> row{
          r.kernel,
          r.verdict,
          accuracy_cell(r),
          stage_cell(r, "stability"),
          stage_cell(r, "determinism"),
          r.timing ? r.timing->size_label + " " + std::string(dtype_name(r.timing->dtype)) : "-",
          r.timing ? fmt::format("{:.1f}", r.timing->median_us) + mark : "-",
          r.timing ? perf_cell(r) + mark : "-",
          r.timing ? fmt::format("{:.1f}%", r.timing->roofline.pct_peak) + mark : "-",
          r.timing ? r.timing->roofline.bound : "-",
          r.timing && r.pytorch_us
              ? fmt::format("{:.2f}x", *r.pytorch_us / r.timing->median_us) + mark
              : "n/a"};
      rows.push_back(row);
    }
    if (markdown) {
      o << "|";
      for (const auto& h : head) o << " " << h << " |";
      o << "\n|";
      for (std::size_t i = 0; i < head.size(); ++i) o << "---|";
      o << "\n";
      for (const auto& row : rows) {
        o << "|";
        for (const auto& c2 : row) o << " " << c2 << " |";
        o << "\n";
      }
    } else {
      std::vector<std::size_t> w(head.size());
      for (std::size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
      for (const auto& row : rows)
        for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
      auto line = [&](const std::vector<std::string>& cells) {
        for (std::size_t i = 0; i < cells.size(); ++i)
          o << cells[i] << std::string(w[i] - cells[i].size() + 2, ' ');
        o << "\n";
      };
      line(head);
      for (const auto& row : rows) line(row);
    }
    if (!busy.empty())
      o << (markdown ? "\n\\* " : "* ")
        << "timed while other work competed for the cores (" << busy
        << "): latency, performance, % of ceiling and vs PyTorch are not trustworthy; re-run on "
           "a quiet machine\n";
    o << (markdown ? "\n" : "")
      << "corpus reference (published baselines, `vladbud research --kernel TYPE`):\n";
    for (const auto& r : t.kernels) {
      const std::string ref = corpus_reference(r.kernel, t.spec_id);
      o << (markdown ? "- " : "  ") << r.kernel << ": "
        << (ref.empty() ? "none published for this target" : ref) << "\n";
    }
    if (markdown) o << "\n";
    for (const auto& r : t.kernels)
      if (r.verdict != "PASS")
        o << fmt::format("{}: {} at stage {} ({} {}), guard {}: {}\n", r.kernel, r.verdict,
                         r.failed_stage, r.failed_size, r.failed_dtype, r.guard, r.reason);
    o << "\n";
  }
  return o.str();
}

std::string run_contention_warning(const std::vector<TargetResults>& targets) {
  std::vector<std::string> rows;
  std::string one;  // the bench command for the first of them
  // `vladbud bench`'s default backend is the registry's first: no --backend for it.
  const std::string default_backend = all_backends().empty() ? "" : all_backends().front()->name();
  for (const auto& t : targets)
    for (const auto& r : t.kernels) {
      if (!timed_under_contention(r)) continue;
      rows.push_back(fmt::format("{} on {} ({})", r.kernel, t.id, others(r.timing->other_runnable)));
      if (one.empty())
        one = "vladbud bench --kernel " + r.kernel +
              (r.backend.empty() || r.backend == default_backend ? "" : " --backend " + r.backend) +
              (r.timing->dtype == DType::F32 ? ""
                                             : " --dtype " + std::string(dtype_name(r.timing->dtype)));
    }
  if (rows.empty()) return "";
  std::string list;
  for (std::size_t i = 0; i < rows.size(); ++i)
    list += (i == 0 ? "" : i + 1 == rows.size() ? " and " : ", ") + rows[i];
  return fmt::format(
      "warning: {} {} timed while other work competed for the cores: {} latency, "
      "% of ceiling and vs PyTorch are not trustworthy; re-run on a quiet machine, or "
      "time one kernel again with `{}`",
      list, rows.size() == 1 ? "was" : "were", rows.size() == 1 ? "its" : "their", one);
}

json ceilings_summary_json(const Ceilings& c) {
  json peaks = json::object();
  for (const auto& [d, v] : c.peak_tflops) peaks[std::string(dtype_name(d))] = v;
  json methods = json::object();
  for (const auto& [d, v] : c.peak_method) methods[std::string(dtype_name(d))] = v;
  return {{"memory_bandwidth_gb_s", c.mem_bw_gbs},
          {"bandwidth_probes_gb_s", c.bw_probes_gbs},
          {"peak_tflops", peaks},
          {"peak_method", methods},
          {"measured_at", c.measured_at},
          {"machine_id", c.machine_id},
          {"compiler", c.compiler}};
}

json run_to_json(const std::vector<TargetResults>& targets) {
  json ts = json::array();
  for (const auto& t : targets) {
    json ks = json::array();
    for (const auto& r : t.kernels) {
      ks.push_back(report_to_json(r));
      ks.back()["corpus_reference"] = corpus_reference(r.kernel, t.spec_id);
    }
    ts.push_back({{"id", t.id},
                  {"name", t.name},
                  {"backend", t.backend},
                  {"local", t.local},
                  {"rung", t.rung},
                  {"ceilings", ceilings_summary_json(t.ceilings)},
                  {"kernels", ks}});
  }
  json out = {{"targets", ts}};
  if (const std::string w = run_contention_warning(targets); !w.empty())
    out["warnings"] = json::array({w});
  return out;
}

}  // namespace vb
