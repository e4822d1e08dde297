#include "backends/cuda/gpu_ceilings.h"
#include "core/util.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "core/paths.h"
#include "core/process.h"

namespace vb {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

// First line of `nvcc --version` that names the release ("Cuda compilation tools, release
// 13.0, V13.0.88"); cached per nvcc path.
std::string nvcc_version(const std::string& nvcc) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(nvcc); it != cache.end()) return it->second;
  std::string v = "unknown";
  try {
    const ProcessResult r = run_process({nvcc, "--version"}, std::chrono::seconds(30));
    const auto pos = r.out.find("release");
    if (pos != std::string::npos) {
      const auto bol = r.out.rfind('\n', pos);
      const auto eol = r.out.find('\n', pos);
      v = r.out.substr(bol == std::string::npos ? 0 : bol + 1,
                       eol == std::string::npos ? std::string::npos : eol - bol - 1);
    }
  } catch (const std::exception&) {
  }
  cache[nvcc] = v;
  return v;
}

fs::path probe_source() {
  return vladbud_home() / "src" / "backends" / "cuda" / "probes" / "cuda_ceilings.cu";
}

// Builds the probe with the given target flags; cached by (source, nvcc version, flags).
fs::path build_with_flags(const std::vector<std::string>& arch_flags,
                          const std::function<void(std::string)>& progress) {
  const std::string nvcc = find_nvcc();
  if (nvcc.empty())
    throw std::runtime_error(
        "nvcc not found (set VB_NVCC or put the CUDA toolkit's bin/ in PATH): the GPU ceilings "
        "probe is compiled at run time");
  const fs::path src = probe_source();
  std::string text;
  try {
    text = read_file(src);
  } catch (const std::exception&) {
    throw std::runtime_error("GPU ceiling probe source not found: " + src.string() +
                             " (set VLADBUD_HOME to the VladBud source tree)");
  }
  std::vector<std::string> argv{nvcc, "-O3", "-std=c++17"};
  argv.insert(argv.end(), arch_flags.begin(), arch_flags.end());
  const std::string version = nvcc_version(nvcc);
  const std::uint64_t h = fnv1a(version + "\n" + join(argv) + "\n", fnv1a(text));
  const fs::path dir = cache_dir() / "probes" / fmt::format("{:016x}", h);
  const fs::path exe = dir / "cuda_ceilings";
  if (fs::exists(exe)) return exe;
  fs::create_directories(dir);
  const fs::path tmp = dir / fmt::format("cuda_ceilings.tmp.{}", ::getpid());
  argv.insert(argv.end(), {src.string(), "-o", tmp.string()});
  say(progress, "compiling the GPU ceiling probe: " + join(argv));
  const ProcessResult r = run_process(argv, std::chrono::minutes(5));
  if (!r.ok()) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw std::runtime_error(
        fmt::format("building the GPU ceiling probe failed ({}):\n  {}\n{}{}",
                    r.timed_out ? "timed out" : fmt::format("exit code {}", r.exit_code),
                    join(argv), r.err, r.out));
  }
  fs::rename(tmp, exe);
  return exe;
}

DType dtype_key(const std::string& name) {
  const auto t = parse_dtype(name);
  if (!t) throw std::invalid_argument("GPU ceilings: unknown dtype '" + name + "'");
  return *t;
}

json parse_probe_json(const ProcessResult& r) {
  const std::size_t brace = r.out.find('{');
  if (brace == std::string::npos) throw std::invalid_argument("no JSON object in the output");
  return json::parse(r.out.substr(brace));
}

std::string failure_text(const ProcessResult& r) {
  return r.timed_out     ? std::string("timed out")
         : r.term_signal ? signal_description(r.term_signal)
                         : fmt::format("exit code {}", r.exit_code);
}

}  // namespace

std::string find_nvcc() {
  if (const char* e = std::getenv("VB_NVCC"); e && *e) return have_program(e) ? e : "";
  if (have_program("nvcc")) return "nvcc";
  if (have_program("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return "";
}

std::vector<std::string> nvcc_arch_flags(int cc_major, int cc_minor) {
  const std::string cc =
      fmt::format("{}{}{}", cc_major, cc_minor, (cc_major == 9 && cc_minor == 0) ? "a" : "");
  return {"-gencode", fmt::format("arch=compute_{},code=sm_{}", cc, cc)};
}

fs::path build_gpu_probe(int cc_major, int cc_minor, std::function<void(std::string)> progress) {
  return build_with_flags(nvcc_arch_flags(cc_major, cc_minor), progress);
}

Ceilings measure_gpu_ceilings(const GpuInfo& gpu, std::function<void(std::string)> progress) {
  std::vector<std::string> flags = nvcc_arch_flags(gpu.cc_major, gpu.cc_minor);
  fs::path exe;
  try {
    exe = build_with_flags(flags, progress);
  } catch (const std::runtime_error& e) {
    if (find_nvcc().empty()) throw;
    say(progress, fmt::format("nvcc could not build for {} ({}); retrying with -arch=native",
                              gpu.sm_arch(), std::string(e.what()).substr(0, 200)));
    flags = {"-arch=native"};
    exe = build_with_flags(flags, progress);
  }
  const bool quick = quick_requested();
  std::vector<std::string> argv{exe.string(), "--device", std::to_string(gpu.ordinal)};
  if (quick) argv.push_back("--quick");
  say(progress,
      fmt::format("measuring GPU ceilings on {} ({}) ...", gpu.name, quick ? "quick" : "~10-30 s"));
  const ProcessResult r = run_process(argv, std::chrono::minutes(5));
  if (!r.ok())
    throw std::runtime_error(fmt::format("the GPU ceiling probe {} failed ({}):\n{}{}",
                                         exe.string(), failure_text(r), r.err, r.out));
  Ceilings c;
  json probes;
  try {
    const json j = parse_probe_json(r);
    c.bw_probes_gbs = j.at("bw_gbs").get<std::map<std::string, double>>();
    for (const auto& [k, v] : j.at("peak_tflops").items())
      c.peak_tflops[dtype_key(k)] = v.get<double>();
    for (const auto& [k, v] : j.at("peak_method").items())
      c.peak_method[dtype_key(k)] = v.get<std::string>();
    probes = j.value("probes_tflops", json::object());
    c.quick = j.at("quick").get<bool>();
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("cannot parse the GPU ceiling probe's output ({}):\n{}{}",
                                         e.what(), r.out, r.err));
  }
  double seconds = r.seconds;
  if (probes.contains("fp64_dfma") && probes.contains("fp64_dmma"))
    c.peak_method[DType::F64] +=
        fmt::format(" (DFMA {:.2f}, DMMA {:.2f} TFLOP/s)", probes["fp64_dfma"].get<double>(),
                    probes["fp64_dmma"].get<double>());

  // Compute capability 9.0: the wgmma path (sm_90a) in its own process.
  if (gpu.cc_major == 9 && gpu.cc_minor == 0 && flags.size() == 2) {
    std::vector<std::string> wargv{exe.string(), "--device", std::to_string(gpu.ordinal), "--mode",
                                   "wgmma"};
    if (quick) wargv.push_back("--quick");
    say(progress, "measuring the wgmma (sm_90a) tensor-core peak ...");
    const ProcessResult w = run_process(wargv, std::chrono::minutes(2));
    seconds += w.seconds;
    std::string note;
    if (!w.ok()) {
      note = fmt::format("wgmma probe failed ({}): {}", failure_text(w),
                         (w.err + w.out).substr(0, 300));
    } else {
      try {
        const json j = parse_probe_json(w);
        for (const auto& [k, v] : j.at("peak_tflops").items()) {
          const DType t = dtype_key(k);
          const double mma = c.peak_tflops.count(t) ? c.peak_tflops[t] : 0.0;
          const double wg = v.get<double>();
          if (wg > mma) {
            c.peak_tflops[t] = wg;
            c.peak_method[t] = j.at("peak_method").at(k).get<std::string>() +
                               fmt::format(" (mma.sync {:.1f} TFLOP/s)", mma);
          } else {
            c.peak_method[t] += fmt::format(" (wgmma {:.1f} TFLOP/s, not faster)", wg);
          }
        }
      } catch (const std::exception& e) {
        note = std::string("wgmma probe output unreadable: ") + e.what();
      }
    }
    if (!note.empty()) {
      say(progress, note);
      for (DType t : {DType::F16, DType::BF16})
        if (c.peak_method.count(t)) c.peak_method[t] += "; " + note;
    }
  }

  for (const auto& [name, v] : c.bw_probes_gbs) c.mem_bw_gbs = std::max(c.mem_bw_gbs, v);
  c.machine_id = gpu_machine_id(gpu);
  c.cpu_model = gpu.name;
  c.measured_at = utc_now_iso8601();
  const std::string nvcc = find_nvcc();
  c.compiler = fmt::format("{} -O3 -std=c++17 {} ({})", nvcc, join(flags), nvcc_version(nvcc));
  c.probe_seconds = seconds;
  c.threads = gpu.sm_count;
  try {
    json j = c;
    (void)j.get<Ceilings>();
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format(
        "the GPU ceiling probe reported implausible values ({}):\n{}", e.what(), r.out));
  }
  say(progress, fmt::format("{}: memory {:.0f} GB/s, fp32 {:.1f}, bf16 {:.1f} TFLOP/s", gpu.name,
                            c.mem_bw_gbs, c.peak_tflops[DType::F32],
                            c.peak_tflops.count(DType::BF16) ? c.peak_tflops[DType::BF16] : 0.0));
  return c;
}

Ceilings local_gpu_ceilings(const GpuInfo& gpu, bool recalibrate,
                            std::function<void(std::string)> progress) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::string id = gpu_machine_id(gpu);
  const fs::path path = ceilings_cache_path(id);
  if (!recalibrate && fs::exists(path)) {
    try {
      Ceilings c = json::parse(read_file(path)).get<Ceilings>();
      if (c.machine_id != id)
        say(progress, "cached GPU ceilings " + path.string() + " belong to " + c.machine_id +
                          "; re-measuring");
      else if (c.quick && !quick_requested())
        say(progress, "cached GPU ceilings " + path.string() + " are quick; re-measuring");
      else
        return c;
    } catch (const std::exception& e) {
      say(progress, "ignoring unreadable cached GPU ceilings " + path.string() + ": " + e.what());
    }
  }
  Ceilings c = measure_gpu_ceilings(gpu, progress);
  try {
    write_file_atomic(path, json(c).dump(2) + "\n");
  } catch (const std::exception& e) {
    say(progress, std::string("cannot cache the GPU ceilings: ") + e.what());
  }
  return c;
}

}  // namespace vb
