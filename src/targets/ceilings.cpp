#include "targets/ceilings.h"
#include "core/util.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "backends/cpu/toolchain.h"
#include "core/paths.h"
#include "core/process.h"
#include "targets/cpu_info.h"

namespace vb {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool positive_finite(double x) {
  return std::isfinite(x) && x > 0;
}

DType dtype_key(const std::string& name) {
  const auto t = parse_dtype(name);
  if (!t) throw std::invalid_argument("ceilings: unknown dtype '" + name + "'");
  return *t;
}

fs::path probe_source() {
  return vladbud_home() / "src" / "targets" / "probes" / "cpu_ceilings.cpp";
}

std::string probe_id_of(const std::string& text) {
  return cpu_probe_id_of(text, cpu_toolchain(), vladbud_home());
}

std::string read_probe_source() {
  try {
    return read_file(probe_source());
  } catch (const std::exception&) {
    throw std::runtime_error("ceiling probe source not found: " + probe_source().string() +
                             " (set VLADBUD_HOME to the VladBud source tree)");
  }
}

// Builds the probe once per (source, compiler) and returns the executable's path.
fs::path build_probe(const std::function<void(std::string)>& progress) {
  const fs::path src = probe_source();
  const std::string text = read_probe_source();
  const CpuToolchain& tc = cpu_toolchain();
  const fs::path dir = cache_dir() / "probes" / probe_id_of(text);
  const fs::path exe = dir / "cpu_ceilings";
  if (fs::exists(exe)) return exe;

  fs::create_directories(dir);
  const fs::path tmp = dir / fmt::format("cpu_ceilings.tmp.{}", ::getpid());
  std::vector<std::string> argv{tc.cxx};
  argv.insert(argv.end(), tc.flags.begin(), tc.flags.end());
  argv.insert(argv.end(), {src.string(), "-o", tmp.string()});
  say(progress, "compiling the ceiling probe: " + tc.command_line());
  const ProcessResult r = run_process(argv, std::chrono::minutes(3));
  if (!r.ok()) {
    std::error_code ec;
    fs::remove(tmp, ec);
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw std::runtime_error(fmt::format(
        "building the ceiling probe failed ({}):\n  {}\n{}{}",
        r.timed_out ? "timed out" : fmt::format("exit code {}", r.exit_code), cmd, r.err, r.out));
  }
  fs::rename(tmp, exe);  // atomic: concurrent builders all end with a complete executable
  return exe;
}

}  // namespace

double Ceilings::peak_for(DType t) const {
  DType key = t;
  if (t == DType::I64) key = DType::F64;
  auto it = peak_tflops.find(key);
  if ((it == peak_tflops.end() || !positive_finite(it->second)) &&
      (t == DType::F16 || t == DType::BF16))
    it = peak_tflops.find(DType::F32);
  if (it == peak_tflops.end() || !positive_finite(it->second))
    throw std::invalid_argument(
        fmt::format("no peak compute ceiling recorded for {}", dtype_name(t)));
  return it->second;
}

void to_json(json& j, const Ceilings& c) {
  json peaks = json::object(), methods = json::object();
  for (const auto& [t, v] : c.peak_tflops) peaks[std::string(dtype_name(t))] = v;
  for (const auto& [t, m] : c.peak_method) methods[std::string(dtype_name(t))] = m;
  j = json{{"machine_id", c.machine_id},
           {"cpu_model", c.cpu_model},
           {"measured_at", c.measured_at},
           {"compiler", c.compiler},
           {"mem_bw_gbs", c.mem_bw_gbs},
           {"bw_probes_gbs", c.bw_probes_gbs},
           {"peak_tflops", peaks},
           {"peak_method", methods},
           {"probe_seconds", c.probe_seconds},
           {"threads", c.threads},
           {"quick", c.quick}};
  if (!c.probe.empty()) j["probe"] = c.probe;
}

void from_json(const json& j, Ceilings& c) {
  Ceilings r;
  j.at("machine_id").get_to(r.machine_id);
  j.at("cpu_model").get_to(r.cpu_model);
  j.at("measured_at").get_to(r.measured_at);
  j.at("compiler").get_to(r.compiler);
  j.at("mem_bw_gbs").get_to(r.mem_bw_gbs);
  j.at("bw_probes_gbs").get_to(r.bw_probes_gbs);
  for (const auto& [k, v] : j.at("peak_tflops").items())
    r.peak_tflops[dtype_key(k)] = v.get<double>();
  for (const auto& [k, v] : j.at("peak_method").items())
    r.peak_method[dtype_key(k)] = v.get<std::string>();
  j.at("probe_seconds").get_to(r.probe_seconds);
  r.threads = j.value("threads", 0);
  r.quick = j.value("quick", false);
  r.probe = j.value("probe", std::string());
  if (r.machine_id.empty()) throw std::invalid_argument("ceilings: empty machine_id");
  if (!positive_finite(r.mem_bw_gbs))
    throw std::invalid_argument("ceilings: mem_bw_gbs must be positive");
  for (const auto& [name, v] : r.bw_probes_gbs)
    if (!positive_finite(v)) throw std::invalid_argument("ceilings: bad bandwidth for " + name);
  for (const auto& [t, v] : r.peak_tflops)
    if (!positive_finite(v))
      throw std::invalid_argument("ceilings: bad peak for " + std::string(dtype_name(t)));
  for (DType t : {DType::F64, DType::F32})
    if (!r.peak_tflops.count(t))
      throw std::invalid_argument("ceilings: missing peak for " + std::string(dtype_name(t)));
  c = std::move(r);
}

std::string cpu_probe_id_of(const std::string& text, const CpuToolchain& tc,
                            const fs::path& home) {
  // The command line with the checkout's location taken out: "-I/tmp/a/kernels/include" and
  // "-I/tmp/b/kernels/include" both read "-I$VLADBUD_HOME/kernels/include", so a second
  // checkout of the same tree reuses the first one's ceilings instead of re-probing (a new
  // user's did, overwriting the cache). The compiler, its version and every other flag stay.
  std::string root = home.lexically_normal().string();
  while (root.size() > 1 && root.back() == '/') root.pop_back();  // "/tmp/a/" -> "/tmp/a"
  std::string line = tc.cxx;
  for (const auto& f : tc.flags) {
    std::string g = f;
    if (!root.empty() && root != "/")
      for (auto p = g.find(root); p != std::string::npos; p = g.find(root, p)) {
        const std::size_t end = p + root.size();
        // Only a whole path component ("/tmp/ab" is not under "/tmp/a").
        if (end < g.size() && g[end] != '/') {
          p = end;
          continue;
        }
        g.replace(p, root.size(), "$VLADBUD_HOME");
        p += std::string_view("$VLADBUD_HOME").size();
      }
    line += " " + g;
  }
  return fmt::format("{:016x}", fnv1a(tc.version, fnv1a(line + "\n", fnv1a(text))));
}

std::string cpu_probe_id() { return probe_id_of(read_probe_source()); }

Ceilings measure_cpu_ceilings(std::function<void(std::string)> progress) {
  const CpuInfo cpu = detect_cpu();
  const fs::path exe = build_probe(progress);
  const bool quick = quick_requested();
  std::vector<std::string> argv{exe.string()};
  if (cpu.llc_bytes > 0) argv.insert(argv.end(), {"--llc-bytes", std::to_string(cpu.llc_bytes)});
  if (quick) argv.push_back("--quick");
  say(progress, fmt::format("measuring CPU ceilings on {} threads ({}) ...", cpu.logical_cores,
                            quick ? "quick, ~1-2 s" : "~7-15 s"));
  const ProcessResult r = run_process(argv, std::chrono::minutes(5));
  if (!r.ok()) {
    throw std::runtime_error(fmt::format("the ceiling probe {} failed ({}):\n{}{}", exe.string(),
                                         r.timed_out     ? "timed out"
                                         : r.term_signal ? signal_description(r.term_signal)
                                                         : fmt::format("exit code {}", r.exit_code),
                                         r.err, r.out));
  }

  Ceilings c;
  try {
    const std::size_t brace = r.out.find('{');
    if (brace == std::string::npos) throw std::invalid_argument("no JSON object in the output");
    const json j = json::parse(r.out.substr(brace));
    c.bw_probes_gbs = j.at("bw_gbs").get<std::map<std::string, double>>();
    for (const auto& [k, v] : j.at("peak_tflops").items())
      c.peak_tflops[dtype_key(k)] = v.get<double>();
    for (const auto& [k, v] : j.at("peak_method").items())
      c.peak_method[dtype_key(k)] = v.get<std::string>();
    c.threads = j.at("threads").get<int>();
    c.quick = j.at("quick").get<bool>();
  } catch (const std::exception& e) {
    throw std::runtime_error(
        fmt::format("cannot parse the ceiling probe's output ({}):\n{}{}", e.what(), r.out, r.err));
  }
  for (const auto& [name, v] : c.bw_probes_gbs) c.mem_bw_gbs = std::max(c.mem_bw_gbs, v);
  c.machine_id = machine_id(cpu);
  c.cpu_model = cpu.model;
  c.measured_at = utc_now_iso8601();
  const CpuToolchain& tc = cpu_toolchain();
  c.compiler = tc.command_line() + " (" + tc.version + ")";
  c.probe_seconds = r.seconds;
  c.probe = exe.parent_path().filename().string();

  // Validate through the same checks a cached file gets.
  try {
    json j = c;
    Ceilings check = j.get<Ceilings>();
    (void)check;
  } catch (const std::exception& e) {
    throw std::runtime_error(
        fmt::format("the ceiling probe reported implausible values ({}):\n{}", e.what(), r.out));
  }
  say(progress,
      fmt::format("memory {:.1f} GB/s, fp64 {:.3f}, fp32 {:.3f} TFLOP/s ({:.1f} s)", c.mem_bw_gbs,
                  c.peak_tflops[DType::F64], c.peak_tflops[DType::F32], c.probe_seconds));
  return c;
}

fs::path ceilings_cache_path(const std::string& machine_id) {
  return cache_dir() / "ceilings" / (machine_id + ".json");
}

void merge_best(Ceilings& into, const Ceilings& other) {
  into.mem_bw_gbs = std::max(into.mem_bw_gbs, other.mem_bw_gbs);
  for (const auto& [k, v] : other.bw_probes_gbs)
    into.bw_probes_gbs[k] = std::max(into.bw_probes_gbs[k], v);
  for (const auto& [d, v] : other.peak_tflops)
    if (v > into.peak_tflops[d]) {
      into.peak_tflops[d] = v;
      if (other.peak_method.count(d)) into.peak_method[d] = other.peak_method.at(d);
    }
  into.probe_seconds += other.probe_seconds;
}

Ceilings local_cpu_ceilings(bool recalibrate, std::function<void(std::string)> progress) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::string id = machine_id(detect_cpu());
  const fs::path path = ceilings_cache_path(id);
  if (!recalibrate && fs::exists(path)) {
    try {
      Ceilings c = json::parse(read_file(path)).get<Ceilings>();
      if (c.machine_id != id) {
        say(progress, "cached ceilings " + path.string() + " belong to machine " + c.machine_id +
                          "; re-measuring");
      } else if (c.probe != cpu_probe_id()) {
        say(progress, "cached ceilings " + path.string() +
                          (c.probe.empty() ? std::string(" predate the probe's id")
                                           : " were measured by another build of the probe (" +
                                                 c.probe + ")") +
                          "; re-measuring");
      } else if (c.quick && !quick_requested()) {
        say(progress,
            "cached ceilings " + path.string() + " are a quick measurement; re-measuring");
      } else {
        return c;
      }
    } catch (const std::exception& e) {
      say(progress, "ignoring unreadable cached ceilings " + path.string() + ": " + e.what());
    }
  }
  // Best of two measurements: a probe that shares the machine with other work reads low, and a
  // low ceiling inflates every later % of peak (or flags honest kernels INVALID).
  Ceilings c = measure_cpu_ceilings(progress);
  if (!c.quick) merge_best(c, measure_cpu_ceilings(progress));
  const double load = system_load_average();
  if (load > 0.5 * std::max(1, detect_cpu().logical_cores))
    say(progress,
        fmt::format("warning: the machine was busy while measuring (load average {:.1f}); "
                    "if the ceilings look low, rerun `vladbud targets --calibrate` when "
                    "it is quiet",
                    load));
  try {
    write_file_atomic(path, json(c).dump(2) + "\n");
  } catch (const std::exception& e) {
    say(progress, std::string("cannot cache the ceilings: ") + e.what());
  }
  return c;
}

}  // namespace vb
