// CUDA backend: nvcc builds a .cu kernel source into a shared library, cached by content hash.
#include "backends/cuda/cuda_backend.h"

#include <unistd.h>

#include <fmt/format.h>
#include <filesystem>
#include <mutex>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "backends/backend.h"
#include "backends/cuda/cuda_device.h"
#include "core/paths.h"
#include "core/process.h"
#include "runner/protocol.h"
#include "backends/cuda/gpu_ceilings.h"
#include "targets/nvidia_detect.h"

namespace vb {

namespace fs = std::filesystem;

namespace {

std::mutex g_arch_mu;
std::string g_arch;  // set_cuda_arch(); "" = default

const std::regex& arch_pattern() {
  static const std::regex re(R"(^sm_(\d+)([af]?)$)");
  return re;
}

// First line of `nvcc --version` naming the release, cached per nvcc path.
std::string nvcc_release(const std::string& nvcc) {
  static std::mutex mu;
  static std::string cached_for, cached;
  std::lock_guard<std::mutex> l(mu);
  if (cached_for == nvcc) return cached;
  std::string v = "unknown nvcc version";
  try {
    const auto r = run_process({nvcc, "--version"}, std::chrono::seconds(30));
    const auto pos = r.out.find("release");
    if (pos != std::string::npos) {
      const auto bol = r.out.rfind('\n', pos);
      const auto eol = r.out.find('\n', pos);
      v = r.out.substr(bol == std::string::npos ? 0 : bol + 1,
                       eol == std::string::npos ? std::string::npos : eol - bol - 1);
    }
  } catch (const std::exception&) {
  }
  cached_for = nvcc;
  cached = v;
  return v;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Flags every CUDA kernel is compiled with (DESIGN §3: one shared library per source).
std::vector<std::string> common_flags() {
  return {"-std=c++17",
          "-O3",
          "-Xcompiler",
          "-fPIC",
          "-shared",
          "-lineinfo",
          "-I" + (vladbud_home() / "kernels" / "include").string()};
}

// NVIDIA compute-sanitizer (memcheck, racecheck, initcheck, synccheck).
class ComputeSanitizer final : public Sanitizer {
 public:
  std::vector<std::string> tools() const override {
    return {"memcheck", "racecheck", "initcheck", "synccheck"};
  }
  std::string find_executable() const override { return find_compute_sanitizer(); }
  std::string not_found_message() const override {
    return "--sanitize: compute-sanitizer not found (set VB_COMPUTE_SANITIZER or add the CUDA "
           "toolkit's bin/ to PATH)";
  }
  SanitizerFindings parse_log(const std::string& log) const override {
    return parse_sanitizer_log(log);
  }
};

const Sanitizer& compute_sanitizer() {
  static const ComputeSanitizer s;
  return s;
}

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  std::string source_extension() const override { return ".cu"; }

  std::string toolchain_description() const override {
    const std::string nvcc = find_nvcc();
    if (nvcc.empty()) return "nvcc not found (set VB_NVCC or add the CUDA toolkit's bin/ to PATH)";
    std::string arch;
    try {
      arch = join(cuda_gencode_flags(cuda_arch()));
    } catch (const std::exception& e) {
      arch = std::string("(no target architecture: ") + e.what() + ")";
    }
    return nvcc_release(nvcc) + " | " + nvcc + " " + join(common_flags()) + " " + arch;
  }

  const Device& device() const override { return cuda_device(); }
  bool has_target_arch() const override { return true; }
  void set_target_arch(const std::string& arch) const override { set_cuda_arch(arch); }
  std::string target_arch() const override { return cuda_arch(); }
  const Sanitizer* sanitizer() const override { return &compute_sanitizer(); }

  std::string playbook() const override {
    return R"(### Playbook: CUDA (NVIDIA)
1. Find the bound first: `pct_peak` in results.tsv is % of the roofline ceiling (memory or
   compute, whichever binds at this shape). Memory-bound kernels (softmax, norms, reductions,
   RoPE) gain from fewer bytes and wider accesses; compute-bound ones (matmul, attention, MLP)
   from tensor cores and data reuse.
2. Memory-bound: one pass over the data where possible (online max/sum for softmax, Welford
   for variance), 16-byte vector loads (float4 / 8 x half), coalesced rows (one warp or block
   per row, lanes stride by 32), warp shuffles (`__shfl_xor_sync`) for row reductions instead
   of shared-memory trees, enough blocks in flight (>= 2 x SM count).
3. Compute-bound: tile for shared memory and registers (block tile 64-256, warp tile 32-64,
   k-step 16-64), `ldmatrix` + `mma.sync` (or WMMA) on fp16/bf16 with fp32 accumulation,
   double-buffered `cp.async` loads, avoid bank conflicts (pad or swizzle).
4. Tune the declared `@vb-param` values (BLOCK_THREADS, tile sizes, vector width) before
   restructuring; keep register use low enough for >= 2 blocks per SM; watch spills.
)";
  }

  BuildResult build(const fs::path& source_arg) const override {
    BuildResult r;
    // One spelling of the path: the preprocessed text (the cache key) carries it in its line
    // markers, so kernels/cuda/x.cu and /abs/kernels/cuda/x.cu must be the same build.
    std::error_code ec;
    fs::path source = fs::weakly_canonical(fs::absolute(source_arg), ec);
    if (ec) source = source_arg;
    if (!fs::is_regular_file(source)) {
      r.diagnostics = "kernel source " + source.string() +
                      " does not exist (check the --source path, or write kernels/cuda/<type>.cu)";
      return r;
    }
    const std::string nvcc = find_nvcc();
    if (nvcc.empty()) {
      r.diagnostics =
          "error: nvcc not found: set VB_NVCC or add the CUDA toolkit's bin/ to PATH "
          "(/usr/local/cuda/bin is searched too)";
      return r;
    }
    std::vector<std::string> arch;
    try {
      arch = cuda_gencode_flags(cuda_arch());
    } catch (const std::exception& e) {
      r.diagnostics = std::string("error: ") + e.what();
      return r;
    }
    r.compiler_version = nvcc_release(nvcc);
    std::vector<std::string> flags = common_flags();
    flags.insert(flags.end(), arch.begin(), arch.end());
    // Key: the preprocessed source (an edited header is a new build) with the source's own
    // location taken out (cuda_build_key), flags, nvcc release. A source that does not
    // preprocess is keyed by its text and built to show the diagnostics.
    std::vector<std::string> pp{nvcc};
    pp.insert(pp.end(), flags.begin(), flags.end());
    pp.insert(pp.end(), {"-E", source.string()});
    const auto pre = run_process(pp, std::chrono::minutes(2));
    std::string text;
    if (!pre.ok()) text = read_file(source) + "\n" + pre.err;
    r.cache_key = cuda_build_key(pre.ok() ? pre.out : text, source, join(flags), r.compiler_version);
    const fs::path dir = cache_dir() / "build" / "cuda" / r.cache_key;
    r.library = dir / "kernel.so";
    const fs::path tmp = dir / ("kernel.so.tmp." + std::to_string(::getpid()));
    std::vector<std::string> argv{nvcc};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {source.string(), "-o", tmp.string()});
    r.command = join(argv);
    if (fs::exists(r.library)) {
      r.ok = true;
      r.cached = true;
      return r;
    }
    fs::create_directories(dir);
    const auto pr = run_process(argv, std::chrono::minutes(5));
    r.seconds = pr.seconds;
    r.diagnostics = normalize_nvcc_diagnostics(pr.err + pr.out);
    if (!pr.ok()) {
      std::error_code ec;
      fs::remove(tmp, ec);
      if (pr.timed_out) r.diagnostics += "\n(nvcc timed out after 5 minutes)";
      return r;
    }
    fs::rename(tmp, r.library);
    r.ok = true;
    return r;
  }
};

}  // namespace

void set_cuda_arch(const std::string& arch) {
  if (!arch.empty() && !std::regex_match(arch, arch_pattern()))
    throw std::invalid_argument("--arch '" + arch +
                                "' is not a CUDA architecture name; use e.g. sm_90a, sm_90, sm_80");
  std::lock_guard<std::mutex> l(g_arch_mu);
  g_arch = arch;
}

std::string cuda_arch() {
  {
    std::lock_guard<std::mutex> l(g_arch_mu);
    if (!g_arch.empty()) return g_arch;
  }
  if (const char* e = std::getenv("VB_CUDA_ARCH"); e && *e) {
    if (!std::regex_match(std::string(e), arch_pattern()))
      throw std::runtime_error(std::string("VB_CUDA_ARCH='") + e +
                               "' is not a CUDA architecture name; use e.g. sm_90a");
    return e;
  }
  std::string why;
  const auto gpus = detect_nvidia_gpus(&why);
  if (gpus.empty())
    throw std::runtime_error(why +
                             "; give the target architecture explicitly (--arch sm_90a, or "
                             "VB_CUDA_ARCH=sm_90a)");
  const auto& g = gpus.front();
  return fmt::format("sm_{}{}{}", g.cc_major, g.cc_minor,
                     (g.cc_major == 9 && g.cc_minor == 0) ? "a" : "");
}

std::string cuda_build_key(std::string preprocessed, const fs::path& source,
                           const std::string& flags, const std::string& nvcc_release) {
  // The line markers (# 1 "/tmp/vb-pool-x1/cand.cu") and any __FILE__ spell where the source
  // lies; a pool's build worker and its measuring worker write the same text into different
  // temporary folders. The whole path first, then the folder (a header next to the source).
  auto replace_all = [&](const std::string& from, const std::string& to) {
    if (from.empty()) return;
    std::string out;
    out.reserve(preprocessed.size());
    std::size_t pos = 0;
    for (std::size_t hit; (hit = preprocessed.find(from, pos)) != std::string::npos;
         pos = hit + from.size())
      out.append(preprocessed, pos, hit - pos).append(to);
    out.append(preprocessed, pos, std::string::npos);
    preprocessed.swap(out);
  };
  const std::string path = source.string();
  if (source.is_absolute() && path.size() > 1) {
    replace_all(path, "<source>");
    const std::string dir = source.parent_path().string();
    if (dir.size() > 1) replace_all(dir + "/", "<source-dir>/");
  }
  const std::string material = preprocessed + "\n--tc--\n" + flags + "\n" + nvcc_release;
  return runner::hex64(runner::fnv1a64(material.data(), material.size()));
}

std::vector<std::string> cuda_gencode_flags(const std::string& arch) {
  std::smatch m;
  if (!std::regex_match(arch, m, arch_pattern()))
    throw std::invalid_argument("'" + arch + "' is not a CUDA architecture name (e.g. sm_90a)");
  const std::string cc = m[1].str() + m[2].str();
  return {"-gencode", fmt::format("arch=compute_{},code=sm_{}", cc, cc)};
}

std::string normalize_nvcc_diagnostics(const std::string& text) {
  static const std::regex re(R"(^(.+?)\((\d+)\): (error|warning|remark|catastrophic error))");
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    out += std::regex_replace(line, re, "$1:$2: $3", std::regex_constants::format_first_only);
    out += '\n';
  }
  return out;
}

SanitizerFindings parse_sanitizer_log(const std::string& log) {
  SanitizerFindings f;
  static const std::regex summary(R"(^=+ ERROR SUMMARY: (\d+) error)");
  std::istringstream in(log);
  std::string line;
  bool want_detail = false;
  while (std::getline(in, line)) {
    if (line.rfind("=========", 0) != 0) continue;
    std::smatch m;
    if (std::regex_search(line, m, summary)) {
      f.saw_summary = true;
      f.errors += std::stoi(m[1]);
      continue;
    }
    std::string body = line.substr(line.find_first_not_of('='));
    const auto b = body.find_first_not_of(' ');
    body = b == std::string::npos ? "" : body.substr(b);
    if (body.empty() || body.rfind("COMPUTE-SANITIZER", 0) == 0) continue;
    if (f.first.empty()) {
      f.first = body;
      want_detail = true;
    } else if (want_detail) {
      f.first += " | " + body;  // "at kernel+0x90 in k.cu:12" / "by thread (0,0,0) in block"
      want_detail = f.first.size() < 300;
    }
  }
  return f;
}

std::string find_compute_sanitizer() {
  // An absolute path: the runner client execve()s it (no PATH search).
  if (const char* e = std::getenv("VB_COMPUTE_SANITIZER"); e && *e) return find_program(e);
  if (const std::string p = find_program("compute-sanitizer"); !p.empty()) return p;
  const std::string nvcc = find_nvcc();
  if (nvcc.find('/') != std::string::npos) {
    const fs::path p = fs::path(nvcc).parent_path() / "compute-sanitizer";
    if (have_program(p.string())) return p.string();
  }
  if (have_program("/usr/local/cuda/bin/compute-sanitizer"))
    return "/usr/local/cuda/bin/compute-sanitizer";
  return "";
}

const Backend& cuda_backend() {
  static const CudaBackend b;
  return b;
}

}  // namespace vb
