// Triton backend (issue 17 step 2): kernels written in Triton (Python, kernels/triton/<type>.py,
// exporting vb_kernel_run(inputs, outputs, attrs), the Python form of the ABI of DESIGN §3).
// build() checks a source statically (python/vladbud/triton_build.py check: it parses, defines
// vb_kernel_run and an @triton.jit kernel; none of the candidate's code runs outside the
// sandboxed runner) and stores it in the content-hash cache; the "library" the runner loads is
// that source. Without a GPU the device is Triton's interpreter (backends/triton/
// triton_device.h), hosted by the Python runner.
//
// With an NVIDIA GPU (detected through the driver, unless VB_TRITON_INTERPRET=1) the device is
// the CUDA device and the runner is the C++ one (flavour cuda: isolation, staging, guard bands,
// poison, device-event timing), and build_for() makes an ahead-of-time library
// (backends/triton/aot.h): the cubins Triton compiles for the problems the caller lists, with a
// C++ launch table, exporting the same kernel ABI as a CUDA backend library -- which is also
// what a model's compiled torch op loads, with no Python on the per-call path.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <mutex>
#include <regex>

#include "backends/backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_device.h"
#include "backends/triton/aot.h"
#include "backends/triton/toolchain.h"
#include "backends/triton/triton_device.h"
#include "core/paths.h"
#include "core/process.h"
#include "runner/protocol.h"
#include "targets/nvidia_detect.h"

namespace vb {

namespace fs = std::filesystem;

namespace {

// A tunable of a Triton source is a module-level assignment under its declaration comment:
//   # @vb-param BLOCK 1024 {256,512,1024}  description
//   BLOCK = 1024
// Module level (column 0): the kernel's launch code reads the global at call time. Python has no
// guarded default like C's #ifndef, so nothing can be prepended: a prepended assignment would be
// overwritten by the source's own, and every declared parameter needs its assignment line.
class PythonParamSyntax final : public ParamSyntax {
 public:
  std::string how_to_declare() const override {
    return "'# @vb-param NAME DEFAULT {V1,V2,...} description' lines, each with its module-level "
           "assignment 'NAME = DEFAULT' (at column 0) that the launch code reads";
  }
  std::optional<std::pair<std::string, std::string>> binding(
      const std::string& line) const override {
    // NAME = VALUE [# comment]; not NAME == ..., not indented (a local or a class member).
    static const std::regex re(R"(^([A-Za-z_][A-Za-z0-9_]*)[ \t]*=(?!=)[ \t]*([^#\s][^#]*?)[ \t]*(#.*)?$)");
    std::smatch m;
    if (!std::regex_match(line, m, re)) return std::nullopt;
    return std::make_pair(m[1].str(), m[2].str());
  }
  std::string rebind(const std::string& line, const std::string& name,
                     const std::string& value) const override {
    // Keep a trailing comment (everything from the first '#': values are numbers or names).
    const auto hash = line.find('#');
    return name + " = " + value + (hash == std::string::npos ? "" : "  " + line.substr(hash));
  }
  std::optional<std::string> prepended(const std::string&, const std::string&) const override {
    return std::nullopt;
  }
};

// True when Triton kernels run on the local NVIDIA GPU: a GPU is detected through the driver
// ($VB_LIBCUDA or libcuda.so.1) and VB_TRITON_INTERPRET is not "1". Remembered per driver path
// (tests switch $VB_LIBCUDA to the mock driver).
bool on_gpu() {
  const char* interp = std::getenv("VB_TRITON_INTERPRET");
  if (interp && std::string(interp) == "1") return false;
  static std::mutex mu;
  static std::map<std::string, bool> known;
  const char* lib = std::getenv("VB_LIBCUDA");
  const std::string key = lib ? lib : "";
  std::lock_guard<std::mutex> l(mu);
  auto it = known.find(key);
  if (it == known.end()) it = known.emplace(key, !detect_nvidia_gpus().empty()).first;
  return it->second;
}

class TritonBackend final : public Backend {
 public:
  std::string name() const override { return "triton"; }
  std::string source_extension() const override { return ".py"; }
  // On a GPU an ahead-of-time library exports the kernel ABI on device memory, which the
  // compiled torch op loads; the interpreter's "library" is a Python source, which it cannot.
  bool serves_torch_ops() const override { return on_gpu(); }
  const Device& device() const override {
    return on_gpu() ? cuda_device() : triton_interpreter_device();
  }
  // GPU libraries are specialized per problem (aot.h); the interpreter runs any problem.
  bool needs_build_problems() const override { return on_gpu(); }
  // The CUDA architecture (shared with the cuda backend's --arch / VB_CUDA_ARCH / detection).
  bool has_target_arch() const override { return on_gpu(); }
  void set_target_arch(const std::string& arch) const override {
    if (!on_gpu()) return Backend::set_target_arch(arch);  // the interpreter has none: throws
    set_cuda_arch(arch);
  }

  BuildResult build_for(const fs::path& source, const std::vector<Problem>& problems) const override {
    if (!on_gpu()) return build(source);
    std::string arch;
    try {
      arch = cuda_arch();
    } catch (const std::exception& e) {
      BuildResult r;
      r.diagnostics = std::string("error: ") + e.what();
      return r;
    }
    return build_triton_aot(source, problems, arch);
  }

  std::string toolchain_description() const override {
    const auto& tc = triton_toolchain();
    if (!tc.error.empty()) return "triton (unavailable: " + tc.error + ")";
    return "triton " + tc.version + " (" + tc.python + ")";
  }

  const ParamSyntax& param_syntax() const override {
    static const PythonParamSyntax s;
    return s;
  }

  std::string playbook() const override {
    return R"(### Playbook: Triton
1. The source is Python: `vb_kernel_run(inputs, outputs, attrs)` gets contiguous torch tensors
   in the type's order and launches `@triton.jit` kernels; raise ValueError for a bad call.
2. Memory-bound kernels (softmax, norms, reductions, RoPE): one program per row (or a few
   rows), the row in registers when it fits (BLOCK = next power of two of the row), chunked
   passes for long rows, fp32 statistics; tune BLOCK and num_warps.
3. Compute-bound kernels (matmul, attention, MLP): tl.dot on BLOCK_M x BLOCK_N x BLOCK_K tiles
   with an fp32 accumulator, grouped rasterization, num_stages for software pipelining; fp32
   problems need input_precision="ieee" (TF32 fails the fp32 threshold).
4. Tunables are `# @vb-param NAME DEFAULT {V1,V2,...}` comments above module-level
   `NAME = DEFAULT` assignments that the launch code reads (block sizes, num_warps, num_stages);
   a value that would break correctness must not be in the set.
5. No atomics or split reductions whose order varies: results must be bitwise deterministic.
)";
  }

  // The static check and the cached copy of the source (the interpreter runner's "library").
  // On a GPU that is no runnable library: the caller must list its problems (build_for).
  BuildResult build(const fs::path& source) const override {
    if (on_gpu()) {
      BuildResult r;
      r.diagnostics =
          "error: on a GPU a Triton kernel is built ahead of time for the problems it will serve "
          "(its Python launch code specializes every launch per shape), and this caller gave "
          "none; fix: build through a caller that lists them (vladbud bench / optimize / verify "
          "do), or set VB_TRITON_INTERPRET=1 to use the Triton interpreter";
      return r;
    }
    return check_and_cache(source);
  }

  BuildResult check_and_cache(const fs::path& source) const {
    BuildResult r;
    std::string src;
    try {
      src = read_file(source);
    } catch (const std::exception& e) {
      r.diagnostics = std::string(e.what()) + " (check the --source path)";
      return r;
    }
    const auto& tc = triton_toolchain();
    if (!tc.error.empty()) {
      r.diagnostics = tc.error;
      return r;
    }
    r.compiler_version = "triton " + tc.version;
    const std::string material = src + "\n--triton " + tc.version;
    r.cache_key = runner::hex64(runner::fnv1a64(material.data(), material.size()));
    const fs::path dir = cache_dir() / "build" / "triton" / r.cache_key;
    r.library = dir / "kernel.py";
    r.command = tc.python + " " + triton_build_script().string() + " check " + source.string();
    if (fs::exists(r.library)) {
      r.ok = r.cached = true;
      return r;
    }
    const auto pr = run_process({tc.python, triton_build_script().string(), "check", source.string()},
                                std::chrono::minutes(2));
    r.seconds = pr.seconds;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(pr.out);
    } catch (const std::exception&) {
      r.diagnostics = "triton_build.py check failed (exit " + std::to_string(pr.exit_code) +
                      "): " + pr.err + pr.out;
      return r;
    }
    if (!j.value("ok", false)) {
      r.diagnostics = j.value("diagnostics", std::string("the source check failed"));
      return r;
    }
    fs::create_directories(dir);
    const fs::path tmp = dir / ("kernel.py.tmp." + std::to_string(::getpid()));
    write_file_atomic(tmp, src);
    fs::rename(tmp, r.library);
    r.ok = true;
    return r;
  }
};

}  // namespace

const Backend& triton_backend() {
  static const TritonBackend b;
  return b;
}

}  // namespace vb
