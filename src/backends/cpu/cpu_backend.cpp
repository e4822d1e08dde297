// CPU backend: builds a C++ kernel source with the host compiler into a shared library.
#include <unistd.h>

#include <fmt/format.h>
#include <chrono>
#include <filesystem>

#include "backends/backend.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cpu/toolchain.h"
#include "core/paths.h"
#include "core/process.h"
#include "ladder/cpu.h"
#include "runner/protocol.h"

namespace vb {

namespace fs = std::filesystem;

namespace {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string source_extension() const override { return ".cpp"; }
  const Device& device() const override { return cpu_device(); }
  bool has_vectorization_report() const override { return true; }
  std::vector<std::string> screen_source(const std::string& source) const override {
#if defined(__aarch64__)
    return ladder::screen_cpu_source(source, /*aarch64_target=*/true);
#else
    return ladder::screen_cpu_source(source, /*aarch64_target=*/false);
#endif
  }

  std::string playbook() const override {
    return R"(### Playbook: CPU (C++ with OpenMP)
1. Find the bound first: `pct_peak` in results.tsv is % of the roofline ceiling of this
   machine (memory bandwidth or FMA peak at this shape).
2. Memory-bound kernels (softmax, norms, reductions, RoPE): read each row once, fuse passes
   (keep the row in L1/L2 between passes), keep several independent accumulators so the
   vectorized loop is not latency-bound, stream stores for outputs written once, split rows
   over threads only when the work is large enough to pay the fork/join.
3. Compute-bound kernels (matmul, attention, MLP): block for L1/L2 (pack a panel of B, keep a
   register tile of C of 4-8 vectors x 4-6 rows), broadcast-FMA inner loop, align to the
   vector width (`#pragma omp simd`, `__restrict`), parallelize the outer block loops.
4. Tune the declared `@vb-param` values (unroll, block size, accumulators, threads) before
   restructuring; results must stay bitwise deterministic run to run (fixed reduction order).
)";
  }

  std::string toolchain_description() const override {
    const auto& tc = cpu_toolchain();
    const std::string cpu = tc.native_cpu();
    return tc.version + " | " + tc.command_line() +
           (cpu.empty() ? std::string() : " (-march=native = " + cpu + ")");
  }

  BuildResult build(const fs::path& source) const override {
    BuildResult r;
    std::string src;
    try {
      src = read_file(source);
    } catch (const std::exception& e) {
      r.diagnostics = std::string(e.what()) + " (check the --source path)";
      return r;
    }
    const auto& tc = cpu_toolchain();
    r.compiler_version = tc.version;
    // The key covers everything the compiler sees: the preprocessed source (so an edited
    // header the kernel includes is a new build, not a stale cache hit), the flags and the
    // compiler version. A source that does not even preprocess is built uncached to show its
    // diagnostics.
    std::vector<std::string> pp{tc.cxx};
    pp.insert(pp.end(), tc.flags.begin(), tc.flags.end());
    pp.insert(pp.end(), {"-E", "-P", source.string()});
    const auto pre = run_process(pp, std::chrono::minutes(2));
    // -march=native enters the key as what it resolves to here (CpuToolchain::native_target).
    r.cache_key = cpu_build_key(pre.ok() ? pre.out : src + "\n" + pre.err, tc);
    const fs::path dir = cache_dir() / "build" / "cpu" / r.cache_key;
    r.library = dir / "kernel.so";
    const fs::path report = dir / "vectorization.txt";
    std::vector<std::string> argv{tc.cxx};
    argv.insert(argv.end(), tc.flags.begin(), tc.flags.end());
    const fs::path tmp_lib = dir / ("kernel.so.tmp." + std::to_string(::getpid()));
    const fs::path tmp_rep = dir / ("vectorization.txt.tmp." + std::to_string(::getpid()));
    argv.insert(argv.end(), {"-shared", "-fopt-info-vec-optimized=" + tmp_rep.string(),
                             source.string(), "-o", tmp_lib.string()});
    for (const auto& a : argv) r.command += (r.command.empty() ? "" : " ") + a;
    // The key ignores the file's name (-P drops the line markers), so the cached report may
    // name another path with the same content (an optimizer candidate, a copy): its loops
    // are this source's loops.
    const fs::path built_from = dir / "source-path.txt";
    auto loops_of = [&] {
      auto loops = parse_vectorization_report(read_file(report));
      std::error_code ec;
      const std::string orig = fs::exists(built_from, ec) ? read_file(built_from) : "";
      for (auto& l : loops)
        if (!orig.empty() && l.file == orig) l.file = source.string();
      return loops;
    };
    if (fs::exists(r.library) && fs::exists(report)) {
      r.ok = true;
      r.cached = true;
      r.vectorized_loops = loops_of();
      return r;
    }
    fs::create_directories(dir);
    const auto pr = run_process(argv, std::chrono::minutes(5));
    r.seconds = pr.seconds;
    r.diagnostics = pr.err + pr.out;
    if (!pr.ok()) {
      std::error_code ec;
      fs::remove(tmp_lib, ec);
      fs::remove(tmp_rep, ec);
      if (pr.timed_out) r.diagnostics += "\n(compiler timed out after 5 minutes)";
      return r;
    }
    // No vectorized loop at all: the compiler may not create the report file.
    if (!fs::exists(tmp_rep)) write_file_atomic(tmp_rep, "");
    write_file_atomic(built_from, source.string());
    fs::rename(tmp_lib, r.library);
    fs::rename(tmp_rep, report);
    r.vectorized_loops = loops_of();
    r.ok = true;
    return r;
  }
};

}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend b;
  return b;
}

}  // namespace vb
