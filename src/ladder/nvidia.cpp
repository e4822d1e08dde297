#include "ladder/nvidia.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <thread>
#include <tuple>

#include <unistd.h>

#include <fmt/format.h>

#include "analysis/gpu_estimate.h"
#include "analysis/occupancy.h"
#include "analysis/ptxas_report.h"
#include "analysis/sass_mix.h"
#include "analysis/source_params.h"
#include "backends/backend.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/util.h"
#include "eval/evaluator.h"
#include "ladder/launch_record.h"
#include "ladder/rank.h"
#include "backends/cuda/gpu_ceilings.h"
#include "targets/nvidia_detect.h"

namespace vb::ladder {
namespace fs = std::filesystem;
using analysis::Occupancy;
using analysis::PtxasFunction;
using analysis::PtxasReport;
using analysis::SassMix;

namespace {

constexpr int kDefaultBlockThreads = 256;
constexpr long kStaticSharedLimit = 48 * 1024;  // CUDA C++ Programming Guide: static __shared__

std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

std::string first_line_with(const std::string& text, std::string_view needle) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    if (line.find(needle) != std::string::npos) return line;
    pos = eol + 1;
  }
  const auto eol = text.find('\n');
  return text.substr(0, eol);
}

// `exe --version`, the line naming the release ("Cuda compilation tools, release 13.0, ..."),
// cached per executable.
std::string version_of(const std::string& exe) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(exe); it != cache.end()) return it->second;
  std::string v = "unknown version";
  try {
    const ProcessResult r = run_process({exe, "--version"}, std::chrono::seconds(30));
    const std::string text = r.out + r.err;
    if (!text.empty()) v = first_line_with(text, "release");
  } catch (const std::exception&) {
  }
  cache[exe] = v;
  return v;
}

std::string file_text_or_empty(const fs::path& p) {
  try {
    return read_file(p);
  } catch (const std::exception&) {
    return "";
  }
}

// The SDK headers a CUDA source includes (kernels/include), part of the cache key.
std::string sdk_headers_text() {
  std::string all;
  const fs::path inc = vladbud_home() / "kernels" / "include";
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(inc, ec)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) all += f.filename().string() + "\n" + file_text_or_empty(f);
  return all;
}

bool is_local_gpu(const TargetSpec& t) {
  static std::once_flag once;
  static std::vector<std::string> local_ids;
  std::call_once(once, [] {
    std::vector<GpuInfo> gpus = detect_nvidia_gpus();
    if (gpus.empty()) return;
    try {
      const auto db = load_spec_db();
      for (const auto& g : gpus)
        if (const TargetSpec* s = match_nvidia_device(db, g.name, g.cc_major, g.cc_minor))
          local_ids.push_back(s->id);
    } catch (const std::exception&) {
    }
  });
  return std::find(local_ids.begin(), local_ids.end(), t.id) != local_ids.end();
}

std::optional<GpuInfo> local_gpu_for(const TargetSpec& t) {
  const auto db = load_spec_db();
  for (const auto& g : detect_nvidia_gpus())
    if (const TargetSpec* s = match_nvidia_device(db, g.name, g.cc_major, g.cc_minor))
      if (s->id == t.id) return g;
  return std::nullopt;
}

// Storage type spelled in a demangled template argument list for `dt`.
bool template_args_match(std::string name, DType dt) {
  for (std::size_t p; (p = name.find("(anonymous namespace)")) != std::string::npos;)
    name.erase(p, 21);
  const auto lt = name.find('<');
  const auto paren = name.find('(');
  if (lt == std::string::npos || (paren != std::string::npos && lt > paren)) return false;
  const auto gt = name.rfind('>', paren == std::string::npos ? std::string::npos : paren);
  const std::string args = name.substr(lt, gt == std::string::npos ? std::string::npos : gt - lt);
  const bool h = args.find("__half") != std::string::npos;
  const bool b = args.find("__nv_bfloat16") != std::string::npos;
  switch (dt) {
    case DType::F16: return h;
    case DType::BF16: return b;
    case DType::F32: return !h && !b && args.find("float") != std::string::npos;
    default: return false;
  }
}

struct KernelView {
  const PtxasFunction* ptxas = nullptr;
  const SassMix* mix = nullptr;
  const analysis::KernelAttributes* attrs = nullptr;
};

RungEvidence unavailable(int rung, std::string tool, std::string summary) {
  RungEvidence e;
  e.rung = rung;
  e.status = "unavailable";
  e.tool = std::move(tool);
  e.summary = std::move(summary);
  e.data = nlohmann::json::object();
  return e;
}

class NvidiaClimber final : public TargetClimber {
 public:
  std::string name() const override { return "nvidia"; }
  bool handles(const TargetSpec& t) const override {
    return t.kind == "gpu" && t.vendor == "NVIDIA";
  }
  std::string backend() const override { return "cuda"; }
  std::vector<TargetSpec> remote_targets() const override { return remote_nvidia_targets(); }
  ClimbResult climb(const KernelType& type, const Variant& variant, const TargetSpec& target,
                    const ClimbOptions& opts) const override;
};

}  // namespace

std::string find_cuobjdump() {
  if (const char* e = std::getenv("VB_CUOBJDUMP"); e && *e) return have_program(e) ? e : "";
  if (have_program("cuobjdump")) return "cuobjdump";
  std::error_code ec;
  const fs::path lib = vladbud_home() / ".venv" / "lib";
  for (const auto& py : fs::directory_iterator(lib, ec)) {
    const fs::path p = py.path() / "site-packages" / "nvidia" / "cu13" / "bin" / "cuobjdump";
    if (have_program(p.string())) return p.string();
  }
  if (have_program("/usr/local/cuda/bin/cuobjdump")) return "/usr/local/cuda/bin/cuobjdump";
  return "";
}

std::string nvcc_gencode_for_isa(const std::string& isa) {
  static const std::regex re(R"(^sm_(\d+)([af]?)$)");
  std::smatch m;
  if (!std::regex_match(isa, m, re))
    throw std::invalid_argument("not an NVIDIA GPU architecture: \"" + isa +
                                "\" (want sm_<digits> with an optional a/f suffix, e.g. sm_90a)");
  const std::string xx = m[1].str() + m[2].str();
  return "-gencode=arch=compute_" + xx + ",code=sm_" + xx;
}

std::string cuda_sdk_headers_text() { return sdk_headers_text(); }

CudaStaticBuild compile_cuda_static(const fs::path& source, const std::string& isa) {
  const std::string text = read_file(source);  // throws naming the path
  CudaStaticBuild b;
  const std::string nvcc = find_nvcc();
  const std::string cuobjdump = find_cuobjdump();
  if (nvcc.empty()) {
    b.command = "nvcc not found (set VB_NVCC or add the CUDA toolkit's bin/ to PATH)";
    return b;
  }
  b.nvcc_version = version_of(nvcc);
  b.cuobjdump = cuobjdump.empty()
                    ? "cuobjdump not found (bash scripts/setup.sh installs it into .venv; "
                      "VB_CUOBJDUMP overrides)"
                    : cuobjdump + " (" + version_of(cuobjdump) + ")";
  const std::vector<std::string> flags{
      "-std=c++17", "-O3", "-cubin", nvcc_gencode_for_isa(isa), "-Xptxas", "-v",
      "-I" + (vladbud_home() / "kernels" / "include").string()};
  std::string material = "vb-nvidia-static-v1\n" + text + "\n--sdk--\n" + sdk_headers_text() +
                         "\n--tools--\n" + b.nvcc_version + "\n" + b.cuobjdump + "\n";
  for (const auto& f : flags) material += f + " ";
  b.cache_key = hex64(fnv1a(material));
  const fs::path dir = cache_dir() / "nvidia-static" / b.cache_key;
  const fs::path record = dir / "build.json";
  std::error_code ec;
  if (fs::exists(record, ec)) {
    try {
      const auto j = nlohmann::json::parse(read_file(record));
      b.ran = true;
      b.exit_code = j.at("exit_code").get<int>();
      b.command = j.at("command").get<std::string>();
      b.compiler_output = j.at("compiler_output").get<std::string>();
      b.have_sass = j.at("have_sass").get<bool>();
      b.sass = j.at("sass").get<std::string>();
      b.nv_info = j.at("nv_info").get<std::string>();
      b.cached = true;
      return b;
    } catch (const std::exception&) {
      // A damaged record: rebuild below and overwrite it.
    }
  }
  fs::create_directories(dir);
  const auto t0 = std::chrono::steady_clock::now();
  // A private name: two processes (ctest -j) may build the same key at once.
  const fs::path cubin =
      dir / fmt::format("kernel.{}.{:x}.cubin", ::getpid(),
                        std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::vector<std::string> argv{nvcc};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {fs::absolute(source).string(), "-o", cubin.string()});
  for (const auto& a : argv) b.command += (b.command.empty() ? "" : " ") + a;
  const ProcessResult r = run_process(argv, std::chrono::minutes(5), dir);
  b.ran = true;
  b.exit_code = r.timed_out ? -1 : r.exit_code;
  b.compiler_output = r.err + r.out;
  if (r.timed_out) b.compiler_output += "\nnvcc error: timed out after 300 s\n";
  if (r.ok() && !cuobjdump.empty()) {
    const ProcessResult s = run_process({cuobjdump, "--dump-sass", cubin.string()},
                                        std::chrono::minutes(2));
    const ProcessResult e = run_process({cuobjdump, "-elf", cubin.string()}, std::chrono::minutes(2));
    if (s.ok() && e.ok()) {
      b.have_sass = true;
      b.sass = s.out;
      b.nv_info = analysis::nv_info_sections(e.out);
    } else {
      b.cuobjdump += ": failed: " + first_line_with(s.err + e.err, "error");
    }
  }
  fs::remove(cubin, ec);
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json j{{"exit_code", b.exit_code}, {"command", b.command},
                   {"compiler_output", b.compiler_output}, {"have_sass", b.have_sass},
                   {"sass", b.sass}, {"nv_info", b.nv_info}};
  if (!r.timed_out) write_file_atomic(record, j.dump());
  return b;
}

namespace {

ClimbResult NvidiaClimber::climb(const KernelType& type, const Variant& variant,
                                 const TargetSpec& target, const ClimbOptions& opts) const {
  if (!handles(target))
    throw std::invalid_argument("the NVIDIA climber does not serve target " + target.id + " (" +
                                target.vendor + " " + target.kind + ")");
  auto progress = [&](const std::string& s) {
    if (opts.progress) opts.progress(s);
  };
  ClimbResult res;
  res.target_id = target.id;
  res.kernel = type.name();
  res.variant = variant.name;
  res.backend = variant.backend;
  auto finish = [&]() {
    res.highest_rung = -1;
    for (const auto& e : res.evidence)
      if (e.status == "pass") res.highest_rung = std::max(res.highest_rung, e.rung);
    if (res.rejected)
      res.confidence = "rejected";
    else if (res.highest_rung >= kRealHardware)
      res.confidence = "measured";
    else if (res.estimate)
      res.confidence = res.highest_rung >= kCorrectness &&
                               std::any_of(res.evidence.begin(), res.evidence.end(),
                                           [](const RungEvidence& e) {
                                             return e.rung == kCorrectness && e.status == "pass";
                                           })
                           ? "emulated+analytical"
                           : "analytical";
    else
      res.confidence = res.highest_rung >= kStaticSignals ? "static" : "none";
    return res;
  };
  // Takes the evidence by reference: `why` may alias e.summary, so it is copied first.
  auto reject = [&](RungEvidence& e, const std::string& why) {
    res.stop_reason = why;
    e.status = "reject";
    res.evidence.push_back(std::move(e));
    res.rejected = true;
    return finish();
  };

  // ---- rung 0: compile for the target -------------------------------------------------------
  RungEvidence r0;
  r0.rung = kStaticReject;
  r0.data = nlohmann::json::object();
  if (!accepts(variant.backend)) {
    r0.tool = "source screen";
    r0.summary = "backend \"" + variant.backend + "\" is not a CUDA source (want backend " +
                 backend() + ", a " + require_backend(backend()).source_extension() + " file)";
    return reject(r0, r0.summary);
  }
  if (!fs::exists(variant.source))
    throw std::runtime_error("CUDA source not found: " + variant.source.string());
  progress(fmt::format("[{} {}] nvcc {} -Xptxas -v", target.id, variant.name, target.isa));
  const CudaStaticBuild b = compile_cuda_static(variant.source, target.isa);
  if (!b.ran) {
    res.evidence.push_back(unavailable(kStaticReject, "nvcc", "unavailable: " + b.command));
    res.stop_reason = b.command;
    return finish();
  }
  r0.tool = "nvcc " + nvcc_gencode_for_isa(target.isa) + " -Xptxas -v";
  r0.tool_version = b.nvcc_version;
  r0.data["command"] = b.command;
  r0.data["cache_key"] = b.cache_key;
  r0.data["cached"] = b.cached;
  r0.data["seconds"] = b.seconds;
  const PtxasReport rep = analysis::parse_ptxas_report(b.compiler_output);
  if (rep.toolchain_lacks_arch()) {
    RungEvidence u = unavailable(kStaticReject, r0.tool,
                                 "unavailable: " + b.nvcc_version + " does not know " +
                                     target.isa + " (" + rep.first_error() + ")");
    u.tool_version = b.nvcc_version;
    res.evidence.push_back(std::move(u));
    res.stop_reason = "the installed CUDA toolkit cannot compile for " + target.isa;
    return finish();
  }
  if (b.exit_code != 0 || !rep.errors.empty()) {
    nlohmann::json errs = nlohmann::json::array();
    for (const auto& e : rep.errors) errs.push_back(analysis::to_json(e));
    r0.data["errors"] = errs;
    r0.data["exit_code"] = b.exit_code;
    std::string first = rep.first_error();
    if (first.empty()) first = "nvcc exited with " + std::to_string(b.exit_code) + ": " +
                               first_line_with(b.compiler_output, "error");
    r0.summary = "does not compile for " + target.isa + ": " + first;
    if (rep.errors.size() > 1) r0.summary += fmt::format(" (+{} more)", rep.errors.size() - 1);
    return reject(r0, r0.summary);
  }
  const analysis::SmLimits limits = analysis::SmLimits::from_spec(target);
  const std::vector<SassMix> mixes = b.have_sass ? analysis::parse_sass_mix(b.sass) : std::vector<SassMix>{};
  const std::vector<analysis::KernelAttributes> attrs = analysis::parse_kernel_attributes(b.nv_info);
  std::vector<KernelView> kernels;
  for (const PtxasFunction* f : rep.entries()) {
    KernelView k{f, nullptr, nullptr};
    for (const auto& m : mixes)
      if (m.function == f->mangled) k.mix = &m;
    for (const auto& a : attrs)
      if (a.function == f->mangled) k.attrs = &a;
    kernels.push_back(k);
  }
  if (kernels.empty()) {
    r0.summary = "no __global__ kernel in the source for " + target.isa;
    return reject(r0, r0.summary);
  }
  // Resource checks per kernel.
  for (const auto& k : kernels) {
    const PtxasFunction& f = *k.ptxas;
    std::string why;
    if (f.registers > limits.max_registers_per_thread)
      why = fmt::format("{} uses {} registers per thread, over the {} limit of {}", f.demangled,
                        f.registers, limits.max_registers_per_thread, target.isa);
    else if (f.smem_bytes > kStaticSharedLimit)
      why = fmt::format(
          "{} declares {} bytes of static shared memory, over the 48 KB (49152 bytes) a block may "
          "declare statically (CUDA C++ Programming Guide: larger allocations must be dynamic "
          "shared memory with cudaFuncSetAttribute)",
          f.demangled, f.smem_bytes);
    else if (f.smem_bytes > limits.shared_memory_per_block_bytes)
      why = fmt::format("{} uses {} bytes of shared memory, over the {} bytes per block of {}",
                        f.demangled, f.smem_bytes, limits.shared_memory_per_block_bytes, target.id);
    else if (k.attrs && k.attrs->max_threads && *k.attrs->max_threads > limits.max_threads_per_block)
      why = fmt::format("{} has __launch_bounds__({}), over the {} threads per block of {}",
                        f.demangled, *k.attrs->max_threads, limits.max_threads_per_block, target.id);
    if (!why.empty()) {
      r0.data["kernel"] = f.mangled;
      r0.summary = "rejected for " + target.isa + ": " + why;
      return reject(r0, r0.summary);
    }
  }
  r0.status = "pass";
  r0.summary = fmt::format("compiles for {} ({} kernel{})", target.isa, kernels.size(),
                           kernels.size() == 1 ? "" : "s");
  res.evidence.push_back(r0);
  if (opts.max_rung < kStaticSignals) {
    res.stop_reason = "max rung reached";
    return finish();
  }

  // ---- rung 1: ptxas numbers, SASS mix, occupancy -------------------------------------------
  RungEvidence r1;
  r1.rung = kStaticSignals;
  r1.tool = "ptxas -v + " + (b.have_sass ? std::string("cuobjdump --dump-sass/-elf") : std::string("(no cuobjdump)"));
  r1.tool_version = b.nvcc_version + (b.have_sass ? "; " + b.cuobjdump : "");
  // The kernel the estimate rests on (heuristic): among the entries instantiated for the ranked
  // dtype (all entries when none is a dtype template), the one with the newest tensor-core path
  // (wgmma / tcgen05 over mma.sync: a starter's mma.sync fallback has more MMA instructions
  // than its wgmma path, but on sm_90a the wgmma path runs), then the most tensor-core MMAs,
  // then the most asynchronous or >= 128-bit memory instructions (the fast path of a guarded
  // pair), then the most SASS instructions, then the most registers.
  std::vector<const KernelView*> cands;
  for (const auto& k : kernels)
    if (template_args_match(k.ptxas->demangled, opts.dtype)) cands.push_back(&k);
  const bool by_dtype = !cands.empty();
  if (!by_dtype)
    for (const auto& k : kernels) cands.push_back(&k);
  auto main_key = [](const KernelView* k) {
    const SassMix* m = k->mix;
    return std::make_tuple(m ? m->tensor_path_generation() : 0, m ? m->tensor_core() : 0L,
                           m ? m->ldgsts + m->tma + m->wide_global() : 0L, m ? m->total : 0L,
                           k->ptxas->registers);
  };
  const KernelView* main = *std::max_element(
      cands.begin(), cands.end(),
      [&](const KernelView* a, const KernelView* c) { return main_key(a) < main_key(c); });
  // The launch record (model 2): the host code run under a stand-in runtime answering for this
  // target says which kernels launch at the problem's size, with which grid. The main kernel is
  // then chosen among the launched ones (same key), and its geometry feeds rung 3.
  const Size rec_size = opts.size ? *opts.size : type.benchmark_size(DeviceKind::Gpu);
  std::map<std::string, KernelResources> resources;
  for (const auto& k : kernels)
    resources[k.ptxas->mangled] = {std::max(0, k.ptxas->registers), k.ptxas->smem_bytes,
                                   std::max(0L, k.ptxas->stack_frame_bytes),
                                   k.attrs && k.attrs->max_threads ? *k.attrs->max_threads : 1024};
  progress(fmt::format("[{} {}] launch record at {}", target.id, variant.name, rec_size.label));
  const LaunchRecord record =
      record_launches(variant.source, type.make_problem(rec_size, opts.dtype), target, resources);
  std::optional<analysis::LaunchGeometry> geometry;
  // Model 4: every distinct launched kernel, in first-launch order, with its own geometry.
  struct LaunchPart {
    const KernelView* kernel = nullptr;
    analysis::LaunchGeometry geometry;
    Occupancy occupancy;
  };
  std::vector<LaunchPart> launch_parts;
  if (record.available && record.ok && !record.launches.empty()) {
    std::vector<const KernelView*> launched;
    for (const auto& k : kernels)
      for (const auto& l : record.launches)
        if (l.kernel == k.ptxas->mangled) {
          launched.push_back(&k);
          break;
        }
    if (!launched.empty()) {
      main = *std::max_element(
          launched.begin(), launched.end(),
          [&](const KernelView* a, const KernelView* c) { return main_key(a) < main_key(c); });
      analysis::LaunchGeometry gm;
      long dyn = 0;
      for (const auto& l : record.launches)
        if (l.kernel == main->ptxas->mangled) {
          gm.blocks += l.blocks();
          gm.threads = static_cast<int>(l.threads());
          dyn = std::max(dyn, l.dynamic_smem);
        }
      gm.launches = static_cast<int>(record.launches.size());
      {
        const Problem rp = type.make_problem(rec_size, opts.dtype);
        if (!rp.inputs.empty() && !rp.inputs[0].shape.empty())
          gm.row_bytes = static_cast<double>(rp.inputs[0].shape.back()) *
                         static_cast<double>(dtype_size(rp.inputs[0].dtype));
        gm.operand_bytes_per_flop = type.operand_bytes_per_flop(rp, static_cast<double>(gm.blocks));
        gm.smem_per_block = static_cast<double>(main->ptxas->smem_bytes + dyn);
      }
      gm.memset_bytes = static_cast<double>(record.memset_bytes);
      gm.blocks_per_sm = analysis::compute_occupancy(
                             {gm.threads, std::max(0, main->ptxas->registers),
                              main->ptxas->smem_bytes, dyn},
                             limits)
                             .blocks_per_sm;
      geometry = gm;
      for (const auto& l : record.launches) {
        const KernelView* kv = nullptr;
        for (const auto& k : kernels)
          if (l.kernel == k.ptxas->mangled) kv = &k;
        if (!kv) {  // a launch of a kernel without ptxas numbers: no per-launch model
          launch_parts.clear();
          break;
        }
        auto it = std::find_if(launch_parts.begin(), launch_parts.end(),
                               [&](const LaunchPart& q) { return q.kernel == kv; });
        if (it == launch_parts.end()) {
          launch_parts.push_back({kv, gm, {}});
          it = std::prev(launch_parts.end());
          it->geometry.blocks = 0;
          it->geometry.smem_per_block = 0;
          it->geometry.memset_bytes = 0;
        }
        it->geometry.blocks += l.blocks();
        it->geometry.threads = static_cast<int>(l.threads());
        it->geometry.smem_per_block =
            std::max(it->geometry.smem_per_block,
                     static_cast<double>(kv->ptxas->smem_bytes + l.dynamic_smem));
      }
      for (auto& q : launch_parts) {
        const long qdyn = static_cast<long>(q.geometry.smem_per_block) - q.kernel->ptxas->smem_bytes;
        q.occupancy = analysis::compute_occupancy(
            {q.geometry.threads, std::max(0, q.kernel->ptxas->registers),
             q.kernel->ptxas->smem_bytes, std::max(0L, qdyn)},
            limits);
        q.geometry.blocks_per_sm = q.occupancy.blocks_per_sm;
      }
      if (!launch_parts.empty()) launch_parts.front().geometry.memset_bytes = gm.memset_bytes;
    }
  }
  // Block size.
  const std::string src_text = read_file(variant.source);
  const auto params = analysis::parse_source_params(src_text);
  std::string param_name;
  const auto declared = analysis::declared_block_threads(params, &param_name);
  int block = kDefaultBlockThreads;
  std::string block_source = "assumed 256 (no __launch_bounds__, no @vb-param BLOCK_THREADS)";
  bool assumed = true;
  if (geometry) {
    block = geometry->threads;
    block_source = "launch record";
    assumed = false;
  } else if (main->attrs && main->attrs->required_threads) {
    block = *main->attrs->required_threads;
    block_source = "required block size (.reqntid)";
    assumed = false;
  } else if (main->attrs && main->attrs->max_threads) {
    block = *main->attrs->max_threads;
    block_source = "__launch_bounds__ (EIATTR_MAX_THREADS)";
    assumed = false;
  } else if (declared) {
    block = *declared;
    block_source = "@vb-param " + param_name + " default";
    assumed = false;
  }
  long dyn_smem = 0;
  for (const auto& l : record.launches)
    if (geometry && l.kernel == main->ptxas->mangled) dyn_smem = std::max(dyn_smem, l.dynamic_smem);
  const Occupancy occ = analysis::compute_occupancy(
      {block, std::max(0, main->ptxas->registers), main->ptxas->smem_bytes, dyn_smem}, limits);
  nlohmann::json ks = nlohmann::json::array();
  bool any_spill = false;
  for (const auto& k : kernels) {
    nlohmann::json kj = analysis::to_json(*k.ptxas);
    kj["sass"] = k.mix ? analysis::to_json(*k.mix) : nlohmann::json(nullptr);
    kj["launch_bounds_max_threads"] = k.attrs && k.attrs->max_threads
                                          ? nlohmann::json(*k.attrs->max_threads)
                                          : nlohmann::json(nullptr);
    any_spill = any_spill || k.ptxas->spills();
    ks.push_back(kj);
  }
  // ptxas's "wgmma.mma_async instructions are serialized due to ..." lines, every one (those of
  // the kernels are also in each kernel's "wgmma_serialized_reason").
  nlohmann::json serializations = nlohmann::json::array();
  for (const auto& w : rep.wgmma_serializations) serializations.push_back(analysis::to_json(w));
  r1.data = {{"kernels", ks},
             {"main_kernel", main->ptxas->mangled},
             {"main_kernel_demangled", main->ptxas->demangled},
             {"main_kernel_choice", by_dtype ? "largest instantiation for " +
                                                   std::string(dtype_name(opts.dtype))
                                             : "largest kernel"},
             {"block_threads", block},
             {"block_threads_source", block_source},
             {"occupancy", analysis::to_json(occ)},
             {"dynamic_shared_memory", geometry ? nlohmann::json(dyn_smem)
                                                : nlohmann::json("unknown statically; counted as 0 bytes")},
             {"launch_record", to_json(record)},
             {"gmem_bytes", rep.gmem_bytes},
             {"spills", any_spill},
             {"wgmma_serializations", serializations},
             {"sass_available", b.have_sass}};
  if (!b.have_sass) r1.data["sass_missing"] = b.cuobjdump;
  if (!occ.cannot_launch.empty() && !assumed) {
    r1.summary = fmt::format("{} cannot launch with {} threads on {}: {}", main->ptxas->demangled,
                             block, target.id, occ.cannot_launch);
    return reject(r1, r1.summary);
  }
  const PtxasFunction& mf = *main->ptxas;
  std::string sass_part = "no SASS mix (" + b.cuobjdump + ")";
  if (main->mix) {
    const SassMix& m = *main->mix;
    sass_part = fmt::format(
        "{} instr: {} HMMA, {} HGMMA, {} FFMA, {} LDG ({} >=128-bit), {} LDGSTS, {} TMA, {} LDL/STL",
        m.total, m.hmma, m.hgmma, m.ffma, m.ldg, m.ldg_128 + m.ldg_256, m.ldgsts, m.tma,
        m.ldl + m.stl);
  }
  r1.summary = fmt::format(
      "{}: {} regs, {} B smem, spills {}/{} B; {} threads ({}): occupancy {:.0f}% ({}); {}",
      mf.demangled, mf.registers, mf.smem_bytes, std::max(0L, mf.spill_store_bytes),
      std::max(0L, mf.spill_load_bytes), block, assumed ? "assumed" : block_source,
      occ.occupancy * 100, occ.limiter(), sass_part);
  // Serialized wgmmas are a performance cliff the numbers above do not show: said in the summary
  // (the estimate of rung 3 does not use it).
  const auto code_reason = [](const std::string& code, const std::string& reason) {
    return code.empty() ? reason : code + ": " + reason;
  };
  if (mf.wgmma_serialized())
    r1.summary += "; wgmma SERIALIZED by ptxas (" +
                  code_reason(mf.wgmma_serialized_code, mf.wgmma_serialized_reason) + ")";
  int other_serialized = 0;
  for (const auto& f : rep.functions)
    if (&f != &mf && f.wgmma_serialized()) ++other_serialized;
  if (other_serialized > 0)
    r1.summary += fmt::format("; ptxas serialized the wgmmas of {} other function{}",
                              other_serialized, other_serialized == 1 ? "" : "s");
  for (const auto* w : rep.unattached_wgmma_serializations())
    r1.summary += "; wgmma serialized by ptxas" +
                  (w->function.empty() ? std::string() : " in " + w->function) + " (" +
                  code_reason(w->code, w->reason) + ")";
  r1.status = occ.blocks_per_sm > 0 ? "pass" : "reject";
  if (occ.blocks_per_sm == 0) {
    return reject(r1, "cannot launch: " + occ.cannot_launch);
  }
  res.evidence.push_back(r1);
  if (opts.max_rung < kCorrectness) {
    res.stop_reason = "max rung reached";
    return finish();
  }

  // ---- rung 2: correctness ------------------------------------------------------------------
  const bool local = is_local_gpu(target);
  const Backend* cuda = find_backend(backend());
  std::optional<EvalReport> eval;
  if (local && cuda) {
    progress(fmt::format("[{} {}] evaluator on the local GPU", target.id, variant.name));
    const auto gpu = local_gpu_for(target);
    EvalOptions eo;
    eo.quick = opts.quick;
    eo.timing = opts.max_rung >= kRealHardware;
    eo.timing_dtype = opts.dtype;
    eo.timing_size = opts.size;
    if (gpu) eo.ceilings = local_gpu_ceilings(*gpu);
    eval = evaluate(type, *cuda, variant.source, eo);
    RungEvidence r2;
    r2.rung = kCorrectness;
    r2.tool = "evaluator (cuda backend) on the local " + target.name;
    r2.tool_version = eval->build.compiler_version;
    r2.data = {{"verdict", eval->verdict}, {"failed_stage", eval->failed_stage},
               {"guard", eval->guard}, {"reason", eval->reason}};
    if (!eval->correct()) {
      r2.summary = "fails on the local GPU: " + eval->verdict + " at " + eval->failed_stage +
                   " (" + eval->reason + ")";
      return reject(r2, r2.summary);
    }
    r2.status = "pass";
    r2.summary = "correct on the local GPU (" + eval->verdict + ")";
    res.evidence.push_back(r2);
  } else {
    res.evidence.push_back(unavailable(
        kCorrectness, "none",
        local ? "unavailable: the target is the local GPU but no \"cuda\" backend is built in"
              : "unavailable: no NVIDIA GPU emulator here (functional correctness of CUDA needs "
                "the device)"));
  }
  if (opts.max_rung < kAnalytical) {
    res.stop_reason = "max rung reached";
    return finish();
  }

  // ---- rung 3: analytical -------------------------------------------------------------------
  const Size size = opts.size ? *opts.size : type.benchmark_size(DeviceKind::Gpu);
  const Problem p = type.make_problem(size, opts.dtype);
  analysis::GpuEstimateInput in;
  in.flops = type.flops(p);
  in.bytes = type.min_bytes(p);
  in.dtype = opts.dtype;
  if (main->mix) in.mix = *main->mix;
  in.occupancy = occ;
  in.block_size_assumed = assumed;
  in.arch = target.isa;
  in.launch = geometry;
  // Model 4: a call of several kernels whose type says how the work splits is estimated launch
  // by launch (analysis::estimate_gpu_call); otherwise the main kernel carries the whole call.
  std::vector<double> part_ctas;
  for (const auto& q : launch_parts) part_ctas.push_back(static_cast<double>(q.geometry.blocks));
  const auto work = launch_parts.size() > 1 ? type.launch_work(p, part_ctas)
                                            : std::vector<KernelType::LaunchWork>{};
  bool per_launch = work.size() == launch_parts.size() && !work.empty();
  for (const auto& q : launch_parts)
    if (q.occupancy.blocks_per_sm <= 0 || q.occupancy.active_warps <= 0) per_launch = false;
  std::vector<analysis::GpuEstimateInput> parts;
  if (per_launch) {
    for (std::size_t i = 0; i < launch_parts.size(); ++i) {
      analysis::GpuEstimateInput pi = in;
      pi.flops = work[i].flops;
      pi.bytes = work[i].bytes;
      pi.mix.reset();
      if (launch_parts[i].kernel->mix) pi.mix = *launch_parts[i].kernel->mix;
      pi.occupancy = launch_parts[i].occupancy;
      pi.launch = launch_parts[i].geometry;
      pi.launch->operand_bytes_per_flop = work[i].operand_bytes_per_flop;
      parts.push_back(std::move(pi));
    }
  }
  const analysis::GpuEstimate est =
      per_launch ? analysis::estimate_gpu_call(parts, target,
                                               static_cast<int>(record.launches.size()))
                 : analysis::estimate_gpu_time(in, target);
  RungEvidence r3;
  r3.rung = kAnalytical;
  r3.status = "pass";
  r3.tool = "roofline from the spec DB + rung-1 efficiency model";
  r3.tool_version = geometry ? "vb-nvidia-model-4" : "vb-nvidia-model-1";
  r3.data = analysis::to_json(est);
  r3.data["size"] = size.label;
  r3.data["dtype"] = std::string(dtype_name(opts.dtype));
  r3.data["flops"] = in.flops;
  r3.data["bytes"] = in.bytes;
  r3.summary = fmt::format("{:.4g} us [{:.4g}..{:.4g}] at {} {}: {}", est.time_us, est.low_us,
                           est.high_us, size.label, dtype_name(opts.dtype), est.basis);
  res.evidence.push_back(r3);
  Estimate out;
  out.time_us = est.time_us;
  out.low_us = est.low_us;
  out.high_us = est.high_us;
  out.rung = kAnalytical;
  out.basis = est.basis;
  res.estimate = out;
  if (opts.max_rung < kSimulation) {
    res.stop_reason = "max rung reached";
    return finish();
  }

  // ---- rung 4: simulation -------------------------------------------------------------------
  res.evidence.push_back(unavailable(
      kSimulation, "none",
      "unavailable: no GPU cycle simulator is packaged for Debian or PyPI (checked 2026-12-04: "
      "GPGPU-Sim and Accel-Sim are source-only builds; PyPI's \"accel-sim\" 0.1.0 is an unrelated "
      "op-level estimator)"));
  if (opts.max_rung < kRealHardware) {
    res.stop_reason = "max rung reached";
    return finish();
  }

  // ---- rung 5: real hardware ----------------------------------------------------------------
  if (eval && eval->timing) {
    RungEvidence r5;
    r5.rung = kRealHardware;
    r5.status = "pass";
    r5.tool = "evaluator timing (CUDA events) on the local " + target.name;
    r5.tool_version = eval->build.compiler_version;
    r5.data = {{"measured_us", eval->timing->median_us}, {"p10_us", eval->timing->p10_us},
               {"p90_us", eval->timing->p90_us}, {"size", eval->timing->size_label},
               {"pct_peak", eval->timing->roofline.pct_peak}};
    r5.summary = fmt::format("measured {:.4g} us (median of {})", eval->timing->median_us,
                             eval->timing->reps);
    res.evidence.push_back(r5);
    Estimate m;
    m.time_us = m.low_us = m.high_us = eval->timing->median_us;
    m.low_us = eval->timing->p10_us;
    m.high_us = eval->timing->p90_us;
    m.rung = kRealHardware;
    m.basis = "measured on the local GPU";
    res.estimate = m;
    res.stop_reason = "measured";
  } else {
    res.evidence.push_back(unavailable(kRealHardware, "none",
                                       local ? "unavailable: no timing from the evaluator"
                                             : "unavailable: no " + target.name + " here"));
    res.stop_reason = "no cycle simulator installed; no " + target.id + " here";
  }
  return finish();
}

}  // namespace

const TargetClimber& nvidia_climber() {
  static const NvidiaClimber c;
  return c;
}

ClimbResult nvidia_climb_source(const fs::path& source, const KernelType& type,
                                const TargetSpec& target, const ClimbOptions& opts) {
  if (!nvidia_climber().handles(target))
    throw std::invalid_argument("target " + target.id + " is not an NVIDIA GPU (" +
                                target.vendor + " " + target.kind + ")");
  if (!fs::exists(source)) throw std::runtime_error("CUDA source not found: " + source.string());
  Variant v;
  v.name = source.stem().string();
  v.source = source;
  v.backend = nvidia_climber().backend();
  return nvidia_climber().climb(type, v, target, opts);
}

}  // namespace vb::ladder
