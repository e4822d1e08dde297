#include "eval/report.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "backends/backend.h"
#include "core/paths.h"

namespace vb {

using json = nlohmann::json;

namespace {
std::string tsv_clean(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}
}  // namespace

std::string format_key_values(const EvalReport& r) {
  std::ostringstream o;
  // Values may carry candidate-provided text (error messages): escape line breaks and control
  // characters so a kernel cannot forge extra "key: value" lines.
  auto kv = [&](const std::string& k, const std::string& v) {
    o << k << ": ";
    for (unsigned char ch : v) {
      if (ch == '\n')
        o << "\\n";
      else if (ch == '\r')
        o << "\\r";
      else if (ch < 0x20 || ch == 0x7f)
        o << fmt::format("\\x{:02x}", ch);
      else
        o << ch;
    }
    o << "\n";
  };
  kv("kernel", r.kernel);
  kv("backend", r.backend);
  kv("source", r.source.string());
  if (r.build.ok) {
    kv("build", r.build.cached
                    ? "ok (cached " + r.build.cache_key + ")"
                    : fmt::format("ok ({:.1f} s, {})", r.build.seconds, r.build.cache_key));
    int in_source = 0, widest = 0;
    for (const auto& l : r.build.vectorized_loops) {
      if (l.file.find("vb_kernel.h") == std::string::npos) ++in_source;
      widest = std::max(widest, l.vector_bytes);
    }
    // The compiler's vectorization report, for backends whose compiler writes one.
    const Backend* be = find_backend(r.backend);
    if (be && be->has_vectorization_report())
      kv("vectorized_loops", fmt::format("{} in the kernel source, {} in all (widest {} bytes)",
                                         in_source, r.build.vectorized_loops.size(), widest));
  } else if (r.failed_stage == "build") {
    kv("build", "FAILED");
  }
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    const auto& s = r.stages[i];
    std::string v = s.status;
    const bool failed = s.status == "FAIL" || s.status == "TIMEOUT" || s.status == "CRASH";
    if (failed)
      v += fmt::format(" at {} {} (guard {}, after {} case(s))", r.failed_size, r.failed_dtype,
                       r.guard, s.cases - 1);
    else if (s.cases)
      v += fmt::format(" ({} cases, max rel err {:.2e})", s.cases, s.max_rel_error);
    if (!s.detail.empty() && s.status != "FAIL") v += " [" + s.detail + "]";
    kv(fmt::format("stage{}_{}", i + 1, s.name), v);
  }
  kv("correctness", r.correct() ? "PASS" : r.verdict);
  kv("verdict", r.verdict);
  if (r.verdict != "PASS") {
    kv("failed_stage", r.failed_stage);
    if (!r.failed_size.empty()) kv("failed_size", r.failed_size);
    if (!r.failed_dtype.empty()) kv("failed_dtype", r.failed_dtype);
    kv("guard", r.guard);
    kv("reason", r.reason);
  }
  kv("seeds", fmt::format("{} and fresh {}", r.seed, r.fresh_seed));
  for (const auto& w : r.warnings) kv("warning", w);
  if (r.timing) {
    const auto& t = *r.timing;
    kv("size", t.size_label);
    kv("dtype", std::string(dtype_name(t.dtype)));
    kv("latency_us", fmt::format("{:.3f}", t.median_us));
    kv("latency_p10_p90_us", fmt::format("{:.3f} {:.3f}", t.p10_us, t.p90_us));
    kv("noise_mad_pct", fmt::format("{:.2f}", t.noise * 100));
    kv("reps", std::to_string(t.reps));
    kv("rotation",
       fmt::format("{} sets, {:.0f} MiB", t.rotation_sets, t.rotation_bytes / 1048576.0));
    kv("throughput_tflops", fmt::format("{:.4f}", t.roofline.achieved_tflops));
    kv("bandwidth_gb_s", fmt::format("{:.2f}", t.roofline.achieved_gbs));
    kv("arithmetic_intensity", fmt::format("{:.3f}", t.roofline.arithmetic_intensity));
    kv("ridge_point", fmt::format("{:.3f}", t.roofline.ridge_point));
    kv("bound", t.roofline.bound);
    kv("ceiling", fmt::format("{:.4g} {}", t.roofline.ceiling,
                              t.roofline.bound == "memory" ? "GB/s" : "TFLOP/s"));
    kv("ceiling_source", t.ceiling_source);
    kv("pct_peak", fmt::format("{:.1f}", t.roofline.pct_peak));
    kv("load_average", fmt::format("{:.2f}", t.load_average));
    kv("other_runnable_tasks", std::to_string(t.other_runnable));
    if (t.other_runnable >= 1)
      kv("warning", fmt::format("{} other task(s) competed for the cores while timing: latency "
                                "and % of peak are not trustworthy; rerun when the machine is "
                                "quiet",
                                t.other_runnable));
  }
  kv("eval_seconds", fmt::format("{:.1f}", r.seconds));
  return o.str();
}

json report_to_json(const EvalReport& r) {
  json j;
  j["kernel"] = r.kernel;
  j["backend"] = r.backend;
  j["source"] = r.source.string();
  j["verdict"] = r.verdict;
  j["correctness"] = r.correct() ? "PASS" : r.verdict;
  if (r.verdict != "PASS") {
    j["failed_stage"] = r.failed_stage;
    j["failed_size"] = r.failed_size;
    j["failed_dtype"] = r.failed_dtype;
    j["guard"] = r.guard;
    j["reason"] = r.reason;
  }
  if (!r.warnings.empty()) j["warnings"] = r.warnings;
  j["build"] = {{"ok", r.build.ok},
                {"cached", r.build.cached},
                {"cache_key", r.build.cache_key},
                {"command", r.build.command},
                {"compiler", r.build.compiler_version},
                {"vectorized_loops", r.build.vectorized_loops.size()}};
  if (!r.build.ok) j["build"]["diagnostics"] = r.build.diagnostics;
  j["stages"] = json::object();
  for (const auto& s : r.stages)
    j["stages"][s.name] = {{"status", s.status},
                           {"cases", s.cases},
                           {"max_rel_error", s.max_rel_error},
                           {"detail", s.detail}};
  j["seed"] = r.seed;
  j["fresh_seed"] = r.fresh_seed;
  j["eval_seconds"] = r.seconds;
  if (r.timing) {
    const auto& t = *r.timing;
    j["size"] = t.size_label;
    j["dtype"] = dtype_name(t.dtype);
    j["latency_us"] = t.median_us;
    j["latency_p10_us"] = t.p10_us;
    j["latency_p90_us"] = t.p90_us;
    j["noise"] = t.noise;
    j["reps"] = t.reps;
    j["rotation_sets"] = t.rotation_sets;
    j["rotation_bytes"] = t.rotation_bytes;
    j["flops"] = t.flops;
    j["bytes"] = t.bytes;
    j["throughput_tflops"] = t.roofline.achieved_tflops;
    j["bandwidth_gb_s"] = t.roofline.achieved_gbs;
    j["arithmetic_intensity"] = t.roofline.arithmetic_intensity;
    j["ridge_point"] = t.roofline.ridge_point;
    j["bound"] = t.roofline.bound;
    j["ceiling"] = t.roofline.ceiling;
    j["ceiling_source"] = t.ceiling_source;
    j["pct_peak"] = t.roofline.pct_peak;
    j["load_average"] = t.load_average;
    j["other_runnable_tasks"] = t.other_runnable;
    // Other work competed for the cores while timing: the latency and % of peak are suspect.
    j["contended"] = t.other_runnable >= 1;
  } else {
    j["latency_us"] = nullptr;
    j["pct_peak"] = nullptr;
  }
  if (r.pytorch_us && r.timing) {
    j["pytorch_latency_us"] = *r.pytorch_us;
    j["pytorch_op"] = r.pytorch_op;
    j["speedup_vs_pytorch"] = *r.pytorch_us / r.timing->median_us;
  }
  return j;
}

ResultsRow results_row(const EvalReport& r, const std::string& target, const std::string& tag) {
  ResultsRow row;
  row.tag = tag;
  row.kernel_type = r.kernel;
  row.correctness = r.verdict;
  row.target = target;
  row.backend = r.backend;
  std::string d = "source=" + r.source.string();
  if (r.timing) {
    row.throughput_tflops = r.timing->roofline.achieved_tflops;
    row.latency_us = r.timing->median_us;
    row.pct_peak = r.timing->roofline.pct_peak;
    row.bandwidth_gb_s = r.timing->roofline.achieved_gbs;
    d += " size=" + r.timing->size_label + " dtype=" + std::string(dtype_name(r.timing->dtype));
    if (r.pytorch_us)
      row.speedup_vs_pytorch = fmt::format("{:.3f}", *r.pytorch_us / r.timing->median_us);
  }
  if (r.verdict != "PASS") d += " failed=" + r.failed_stage + " guard=" + r.guard;
  if (r.timing && r.timing->other_runnable >= 1)  // its figures are suspect: say so in the row
    d += fmt::format(" contended={}", r.timing->other_runnable);
  row.description = d;
  return row;
}

std::string results_header() {
  return "experiment\ttag\tkernel_type\tthroughput_tflops\tlatency_us\tpct_peak\tspeedup_vs_"
         "pytorch\t"
         "correctness\tpeak_vram_mb\tdescription\ttarget\tbackend\trung\tbandwidth_gb_s";
}

int append_results_row(const std::filesystem::path& path, const ResultsRow& row) {
  if (!path.parent_path().empty()) std::filesystem::create_directories(path.parent_path());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + path.string() + " for appending");
  if (::flock(fd, LOCK_EX) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot lock " + path.string());
  }
  std::string existing;
  {
    char buf[65536];
    ::lseek(fd, 0, SEEK_SET);
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) existing.append(buf, static_cast<std::size_t>(n));
  }
  const std::string header = results_header();
  int lines = 0;
  for (char c : existing) lines += c == '\n';
  if (!existing.empty() && existing.compare(0, header.size(), header) != 0) {
    ::close(fd);
    throw std::runtime_error(path.string() +
                             " exists but is not a results.tsv (its first line is not the "
                             "header); move it away or pass --results with another path");
  }
  std::string out;
  if (existing.empty()) out = header + "\n";
  if (!existing.empty() && existing.back() != '\n') out += "\n";  // a torn line from a crash
  const int experiment = existing.empty() ? 1 : lines;            // header is line 1
  out += fmt::format("{}\t{}\t{}\t{:.6f}\t{:.3f}\t{:.2f}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.3f}\n",
                     experiment, tsv_clean(row.tag), tsv_clean(row.kernel_type),
                     row.throughput_tflops, row.latency_us, row.pct_peak,
                     tsv_clean(row.speedup_vs_pytorch), tsv_clean(row.correctness),
                     tsv_clean(row.peak_vram_mb), tsv_clean(row.description), tsv_clean(row.target),
                     tsv_clean(row.backend), row.rung, row.bandwidth_gb_s);
  const ssize_t w = ::write(fd, out.data(), out.size());
  ::close(fd);
  if (w != static_cast<ssize_t>(out.size()))
    throw std::runtime_error("short write to " + path.string());
  return experiment;
}

}  // namespace vb
