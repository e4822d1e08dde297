#include "ladder/launch_record.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "backends/cuda/gpu_ceilings.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/util.h"
#include "ladder/nvidia.h"

namespace vb::ladder {
namespace fs = std::filesystem;

namespace {

std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

// $VB_LAUNCH_RECORD, else vladbud-launch-record next to the running executable, else in the
// build tree (tests); "" when none is found.
std::string find_recorder() {
  if (const char* e = std::getenv("VB_LAUNCH_RECORD"); e && *e) return e;
  std::error_code ec;
  auto p = self_exe_dir() / "vladbud-launch-record";
  if (fs::exists(p, ec)) return p.string();
#ifdef VB_BINARY_DIR
  p = fs::path(VB_BINARY_DIR) / "vladbud-launch-record";
  if (fs::exists(p, ec)) return p.string();
#endif
  return "";
}

// "sm_90a" -> {9, 0}; "sm_121a" -> {12, 1}.
std::pair<int, int> compute_capability(const std::string& isa) {
  static const std::regex re(R"(sm_(\d+?)(\d)[af]?)");
  std::smatch m;
  if (!std::regex_match(isa, m, re))
    throw std::invalid_argument("not an NVIDIA GPU architecture: \"" + isa + "\"");
  return {std::stoi(m[1].str()), std::stoi(m[2].str())};
}

nlohmann::json tensors_json(const std::vector<TensorDesc>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& t : v) a.push_back({{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}});
  return a;
}

}  // namespace

LaunchRecord record_launches(const fs::path& source, const Problem& p, const TargetSpec& target,
                             const std::map<std::string, KernelResources>& kernels) {
  if (!target.limits || target.compute_units <= 0)
    throw std::invalid_argument("launch record: target " + target.id +
                                " needs occupancy limits and an SM count");
  LaunchRecord r;
  const std::string nvcc = find_nvcc();
  const std::string recorder = find_recorder();
  if (nvcc.empty()) {
    r.why = "nvcc not found (set VB_NVCC or add the CUDA toolkit's bin/ to PATH)";
    return r;
  }
  if (recorder.empty()) {
    r.why = "vladbud-launch-record is not built (the CUDA toolkit's cuda_runtime_api.h was not "
            "found when VladBud was configured; install the toolkit and re-run scripts/setup.sh)";
    return r;
  }
  const auto [major, minor] = compute_capability(target.isa);
  const analysis::SmLimits lim = analysis::SmLimits::from_spec(target);

  // ---- the recording build: the host code linked against no CUDA runtime -------------------
  // The host code is the same for every target (device answers come at run time), so one build
  // per source serves all targets: device code as compute_80 PTX only (no ptxas: fast), or, when
  // the source does not compile for compute_80, as the target's own architecture.
  auto build = [&](const std::string& gencode, fs::path* lib, std::string* err) {
    const std::vector<std::string> flags{
        "-std=c++17", "-O3", "-Xcompiler", "-fPIC", "-shared", "-cudart", "none", gencode,
        "-I" + (vladbud_home() / "kernels" / "include").string()};
    std::string material = "vb-launch-record-v1\n" + read_file(source) + "\n--sdk--\n" +
                           cuda_sdk_headers_text() + "\n--nvcc--\n" + nvcc + "\n";
    for (const auto& f : flags) material += f + " ";
    const fs::path dir = cache_dir() / "nvidia-launch" / hex64(fnv1a(material));
    *lib = dir / "kernel.so";
    std::error_code ec;
    fs::create_directories(dir, ec);
    r.command = nvcc;
    for (const auto& a : flags) r.command += " " + a;
    r.command += " " + fs::absolute(source).string() + " -o " + lib->string();
    if (fs::exists(*lib, ec)) return true;
    const fs::path tmp = dir / fmt::format("kernel.{}.{:x}.so", ::getpid(),
                                           std::hash<std::thread::id>{}(std::this_thread::get_id()));
    std::vector<std::string> argv{nvcc};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {fs::absolute(source).string(), "-o", tmp.string()});
    const ProcessResult b = run_process(argv, std::chrono::minutes(5), dir);
    if (!b.ok()) {
      fs::remove(tmp, ec);
      *err = b.timed_out ? std::string("nvcc timed out") : b.err.substr(0, 400);
      return false;
    }
    fs::rename(tmp, *lib, ec);
    if (ec) *err = "cannot place the recording build in " + dir.string() + ": " + ec.message();
    return !ec;
  };
  fs::path lib;
  std::string err;
  if (!build("-gencode=arch=compute_80,code=compute_80", &lib, &err) &&
      !build(nvcc_gencode_for_isa(target.isa), &lib, &err)) {
    r.why = "the recording build failed: " + err;
    return r;
  }
  const fs::path dir = lib.parent_path();
  std::error_code ec;
  r.available = true;

  // ---- the request: the target's answers and the problem's tensors -------------------------
  nlohmann::json attrs{{"1", lim.max_threads_per_block},
                       {"2", 1024}, {"3", 1024}, {"4", 64},
                       {"5", 2147483647}, {"6", 65535}, {"7", 65535},
                       {"8", 48 * 1024},
                       {"10", lim.warp_size},
                       {"12", lim.registers_per_block},
                       {"16", target.compute_units},
                       {"38", static_cast<long>(target.limits->l2_mb * 1024 * 1024)},
                       {"39", lim.max_warps_per_sm * lim.warp_size},
                       {"75", major},
                       {"76", minor},
                       {"81", lim.shared_memory_per_sm_bytes},
                       {"82", lim.registers_per_sm},
                       {"97", lim.shared_memory_per_block_bytes},
                       {"106", lim.max_blocks_per_sm},
                       {"120", major >= 9 ? 1 : 0}};
  if (target.clock_ghz > 0) attrs["13"] = static_cast<int>(target.clock_ghz * 1e6);
  nlohmann::json ks = nlohmann::json::object();
  for (const auto& [name, k] : kernels)
    ks[name] = {{"registers", k.registers}, {"smem_bytes", k.smem_bytes},
                {"local_bytes", k.local_bytes}, {"max_threads", k.max_threads}};
  const nlohmann::json req{
      {"library", lib.string()},
      {"inputs", tensors_json(p.inputs)},
      {"outputs", tensors_json(p.outputs)},
      {"attrs", p.attrs},
      {"device_attributes", attrs},
      {"limits",
       {{"warp_size", lim.warp_size}, {"max_warps_per_sm", lim.max_warps_per_sm},
        {"max_blocks_per_sm", lim.max_blocks_per_sm}, {"registers_per_sm", lim.registers_per_sm},
        {"registers_per_block", lim.registers_per_block},
        {"max_registers_per_thread", lim.max_registers_per_thread},
        {"shared_memory_per_sm_bytes", lim.shared_memory_per_sm_bytes},
        {"shared_memory_per_block_bytes", lim.shared_memory_per_block_bytes},
        {"reserved_shared_memory_per_block_bytes", lim.reserved_shared_memory_per_block_bytes},
        {"max_threads_per_block", lim.max_threads_per_block}}},
      {"kernels", ks}};
  const std::string req_text = req.dump();
  // The recorder's build is part of the key (its size and modification time): a rebuilt
  // recorder (another stand-in runtime, another sandbox) records afresh.
  std::string recorder_build = recorder;
  {
    std::error_code e1, e2;
    const auto size = fs::file_size(recorder, e1);
    const auto mtime = fs::last_write_time(recorder, e2);
    if (!e1 && !e2)
      recorder_build += "|" + std::to_string(size) + "|" +
                        std::to_string(mtime.time_since_epoch().count());
  }
  const fs::path result =
      dir / ("record-" + hex64(fnv1a(req_text + recorder_build)) + ".json");
  nlohmann::json out;
  if (fs::exists(result, ec)) {
    try {
      out = nlohmann::json::parse(read_file(result));
      r.cached = true;
    } catch (const std::exception&) {
      out = nullptr;
    }
  }
  if (out.is_null()) {
    // A private name: threads of one process (two targets climbed at once) and processes
    // (ctest -j) may record the same build at once.
    const fs::path req_file =
        dir / fmt::format("request.{}.{:x}.json", ::getpid(),
                          std::hash<std::thread::id>{}(std::this_thread::get_id()));
    write_file_atomic(req_file, req_text);
    const ProcessResult run = run_process({recorder, req_file.string()}, std::chrono::seconds(60), dir);
    fs::remove(req_file, ec);
    if (run.timed_out || run.term_signal != 0 || run.exit_code != 0) {
      r.ok = false;
      r.error = run.timed_out ? "the launcher did not return within 60 s under the stand-in runtime"
                : run.term_signal != 0
                    ? "the launcher crashed under the stand-in runtime: " +
                          signal_description(run.term_signal) +
                          " (host code reading device memory?)"
                    : "vladbud-launch-record failed: " + run.err.substr(0, 300);
      return r;
    }
    try {
      out = nlohmann::json::parse(run.out);
    } catch (const std::exception& e) {
      r.error = std::string("vladbud-launch-record printed no JSON: ") + e.what();
      return r;
    }
    {  // atomically, under a thread-private name (write_file_atomic's temp name is per process)
      const fs::path tmp = result.string() + fmt::format(".{:x}", std::hash<std::thread::id>{}(
                                                                     std::this_thread::get_id()));
      write_file_atomic(tmp, out.dump());
      fs::rename(tmp, result, ec);
    }
  }
  r.ok = out.value("ok", false);
  r.error = out.value("error", std::string());
  for (const auto& l : out.value("launches", nlohmann::json::array())) {
    KernelLaunch k;
    k.kernel = l.at("kernel").get<std::string>();
    for (int i = 0; i < 3; ++i) {
      k.grid[i] = l.at("grid")[i].get<long>();
      k.block[i] = l.at("block")[i].get<long>();
      k.cluster[i] = l.at("cluster")[i].get<long>();
    }
    k.dynamic_smem = l.at("dynamic_smem").get<long>();
    r.launches.push_back(k);
  }
  for (const auto& m : out.value("memsets", nlohmann::json::array())) r.memset_bytes += m.at("bytes").get<long>();
  for (const auto& m : out.value("allocations", nlohmann::json::array()))
    r.allocated_bytes += m.at("bytes").get<long>();
  for (const auto& u : out.value("unanswered", nlohmann::json::array())) r.unanswered.push_back(u.get<std::string>());
  return r;
}

nlohmann::json to_json(const LaunchRecord& r) {
  nlohmann::json ls = nlohmann::json::array();
  for (const auto& l : r.launches)
    ls.push_back({{"kernel", l.kernel}, {"grid", l.grid}, {"block", l.block},
                  {"cluster", l.cluster}, {"dynamic_smem", l.dynamic_smem}});
  nlohmann::json j{{"available", r.available}, {"ok", r.ok}, {"launches", ls},
                   {"memset_bytes", r.memset_bytes}, {"allocated_bytes", r.allocated_bytes},
                   {"unanswered", r.unanswered}, {"command", r.command}};
  if (!r.why.empty()) j["why"] = r.why;
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

}  // namespace vb::ladder
