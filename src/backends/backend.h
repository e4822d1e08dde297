// The backend interface (DESIGN §1): one small vtable per author surface (cf. ggml-backend.h).
// A Backend is the source language: it turns a kernel source into a library exposing the
// kernel ABI (DESIGN §3), names its file extension, describes its toolchain and offers optional
// hooks (a target architecture, a run-time sanitizer, a playbook for agents). Where the kernel
// runs is its Device (backends/device.h). Nothing above this interface knows which compiler or
// device a backend uses, and the registry (backends/registry.cpp) is the only place that names
// the backends.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/device.h"

namespace vb {

struct Problem;  // kernels/kernel_type.h

/// One loop the compiler reported as vectorized (from -fopt-info-vec-optimized).
struct VectorizedLoop {
  std::string file;
  int line = 0;
  int vector_bytes = 0;  ///< e.g. 64 for 512-bit vectors; 0 when the report gives no width
};

/// Result of building a kernel source.
struct BuildResult {
  bool ok = false;
  std::filesystem::path library;  ///< the shared library (when ok)
  std::string diagnostics;        ///< compiler output; on failure it names file:line
  std::string command;            ///< the compile command line
  std::string compiler_version;
  std::string cache_key;  ///< content hash of source + SDK header + toolchain
  bool cached = false;    ///< true when the library came from the cache
  double seconds = 0;     ///< compile time (0 when cached)
  std::vector<VectorizedLoop> vectorized_loops;  ///< the vectorization report
};

/// What a run-time sanitizer reported about a run.
struct SanitizerFindings {
  int errors = 0;            ///< N of its "ERROR SUMMARY: N error(s)" lines, summed
  bool saw_summary = false;  ///< an "ERROR SUMMARY" line was printed (the run ended normally)
  std::string first;         ///< the first finding ("Invalid __global__ write of size 4 ..."),
                             ///< with the next line naming the thread/address when present
};

/// A checker the runner can be started under (`bench --sanitize TOOL`), e.g. NVIDIA's
/// compute-sanitizer for cuda. Optional per backend (Backend::sanitizer()).
class Sanitizer {
 public:
  virtual ~Sanitizer() = default;
  /// The tools it offers, in the order help text lists them ("memcheck", "racecheck", ...).
  virtual std::vector<std::string> tools() const = 0;
  /// Its executable as an absolute path (the runner client execve()s it), "" when not found.
  virtual std::string find_executable() const = 0;
  /// The usage error when find_executable() is "" (names the fix).
  virtual std::string not_found_message() const = 0;
  /// Parses what the runner processes wrote to stderr under it.
  virtual SanitizerFindings parse_log(const std::string& log) const = 0;
};

/// How a source language binds the value of a tunable parameter that a `@vb-param` comment
/// declares (optimize/params.h): which line holds NAME's value, and that line rewritten for a
/// variant. The declaration comment itself is language-neutral (any line containing
/// "@vb-param NAME DEFAULT {V1,V2,...} description"); only the binding differs, e.g.
/// `#define NAME VALUE` in C/C++/CUDA, a module-level `NAME = VALUE` in Python.
class ParamSyntax {
 public:
  virtual ~ParamSyntax() = default;
  /// What a source of this language adds to declare a tunable, as a phrase for messages that
  /// name the fix ("add " + how_to_declare()), e.g. "'// @vb-param NAME DEFAULT {V1,V2,...}
  /// description' lines with their '#ifndef NAME / #define NAME DEFAULT / #endif' defaults".
  virtual std::string how_to_declare() const = 0;
  /// When `line` binds a parameter's value, {name, value as written}; else nullopt.
  virtual std::optional<std::pair<std::string, std::string>> binding(
      const std::string& line) const = 0;
  /// `line` (a binding of `name`, as binding() matched it) rewritten to bind `value`.
  virtual std::string rebind(const std::string& line, const std::string& name,
                             const std::string& value) const = 0;
  /// A line that binds `name` to `value` when put before everything else of a source without a
  /// binding of it, or nullopt when the language has none (then every declared parameter needs
  /// its own binding line).
  virtual std::optional<std::string> prepended(const std::string& name,
                                               const std::string& value) const = 0;
};

/// The C preprocessor's binding: `#define NAME VALUE` (the first one; the `#ifndef NAME` guard
/// around it lets a prepended `#define` or `-DNAME=VALUE` win). The syntax of the C++ and CUDA
/// sources, and Backend::param_syntax()'s default.
const ParamSyntax& preprocessor_param_syntax();

/// A kernel author surface (the source language): builds sources; its device() runs them.
class Backend {
 public:
  virtual ~Backend() = default;
  /// The backend's registry name ("cpu", "cuda"): the --backend value, problem.json's
  /// "backend", the kernels/<name>/ folder of its starters.
  virtual std::string name() const = 0;
  /// Source file extension of this surface (".cpp", ".cu").
  virtual std::string source_extension() const = 0;
  /// The starter kernel of a type: <home>/kernels/<backend>/<type><ext> (default). A backend
  /// kept outside the tree (register_backend) overrides it with its own folder, which must
  /// still be named after the backend and hold <type><ext> files.
  virtual std::filesystem::path starter_source(std::string_view kernel) const;
  /// The folder of hand-written variants of a type, <home>/kernels/variants/<backend>/<type>
  /// (what `vladbud rank` and `vladbud variants` read by default); it need not exist.
  std::filesystem::path variants_dir(std::string_view kernel) const;
  /// Builds `source` into a library, from the content-hash cache when possible. Never throws
  /// for a bad source: a failed build returns ok=false with the compiler's diagnostics.
  virtual BuildResult build(const std::filesystem::path& source) const = 0;
  /// True when this backend's libraries are specialized per problem, so that build_for() must be
  /// given every problem the library will be called with (e.g. Triton's ahead-of-time GPU
  /// libraries: the Python launch code picks block sizes and grids per shape). Callers that know
  /// their problems (the evaluator, a model's problem.json) then call build_for(). Default false.
  virtual bool needs_build_problems() const { return false; }
  /// Builds `source` into a library serving exactly `problems` (dtypes, shapes and attribute
  /// values; duplicates allowed). A call with another problem fails with a message naming it.
  /// Default: build(source) (the library serves any problem). Never throws for a bad source.
  virtual BuildResult build_for(const std::filesystem::path& source,
                                const std::vector<Problem>& problems) const {
    (void)problems;
    return build(source);
  }
  /// One line describing the toolchain ("g++ (Debian 12.2.0) -O3 -march=native ...").
  virtual std::string toolchain_description() const = 0;
  /// Where this backend's kernels run.
  virtual const Device& device() const = 0;
  /// Why this machine cannot run kernels of this backend, or "" when it can: the device's
  /// answer (Device::unavailable). A missing device is a usage error, never a kernel's FAIL.
  std::string device_unavailable() const { return device().unavailable(); }

  // ---- optional hooks (defaults: not offered) ----

  /// True when the backend compiles for a selectable target architecture (`--arch`).
  virtual bool has_target_arch() const { return false; }
  /// Selects the target architecture for later builds ("" restores the default). Throws
  /// std::invalid_argument for a malformed name, or when has_target_arch() is false.
  virtual void set_target_arch(const std::string& arch) const;
  /// The architecture later builds target ("sm_90a"): the one set_target_arch() selected, else
  /// the backend's default (e.g. the local GPU's); "" when has_target_arch() is false (default).
  /// Throws std::runtime_error when the backend has one but it cannot be determined (nothing
  /// selected and no device to ask), naming the fix.
  virtual std::string target_arch() const { return ""; }
  /// The run-time sanitizer the runner can be started under, or nullptr (default).
  virtual const Sanitizer* sanitizer() const { return nullptr; }
  /// True when build() fills BuildResult::vectorized_loops from a compiler report (the host
  /// compiler's -fopt-info-vec); default false.
  virtual bool has_vectorization_report() const { return false; }
  /// Whether a built library of this backend can be bound as torch.ops.vladbud.<type>
  /// (python/vladbud/kernels.py: a shared library exporting vb_kernel_run), the path a model
  /// uses; `bench`'s in-use check needs it (issue 18 class 6). Default true.
  virtual bool serves_torch_ops() const { return true; }
  /// The ladder's rung-0 source screen for this backend's language (e.g. the CPU's: process,
  /// dynamic-loading, file and socket calls, inline asm of another ISA), for a target of this
  /// machine: one "line N: <what> (<why>)" per finding; default none. `bench` reports the
  /// findings as warnings (issue 18 class 9: the ladder and the evaluator say the same about a
  /// source), without changing the verdict, since the evaluator's sandbox already contains
  /// such calls.
  virtual std::vector<std::string> screen_source(const std::string& source) const {
    (void)source;
    return {};
  }
  /// How this language binds a `@vb-param` tunable's value (the optimizer's variants rewrite
  /// it); default: the C preprocessor's `#define NAME VALUE`.
  virtual const ParamSyntax& param_syntax() const { return preprocessor_param_syntax(); }
  /// The playbook an agent gets in program.md for this backend (Markdown, starting with a
  /// "### Playbook: ..." heading); default "".
  virtual std::string playbook() const { return ""; }
};

// ---- the registry (backends/registry.cpp): the one place that names the backends ----

/// Every registered backend, in registry order (the first backend of a device is that device's
/// default, e.g. for a model's --device): the built-in ones, then those added by
/// register_backend.
const std::vector<const Backend*>& all_backends();
/// Adds a backend defined outside src/backends/ (a test fixture such as
/// tests/fixtures/backend_stub/, an out-of-tree backend) after the built-in ones, so that it
/// needs no edit of the registry; `backend` must outlive the process (a function-local static).
/// Call it before the registry is used from several threads, e.g. from a static initializer in
/// the backend's own file: it invalidates iterators of all_backends() (not the reference).
/// Throws std::invalid_argument when its name or source extension is already registered (the
/// message names the backend that has it).
void register_backend(const Backend& backend);
/// The backend called `name`, or nullptr.
const Backend* find_backend(std::string_view name);
/// The backend called `name`. Throws std::invalid_argument "unknown backend 'NAME'; available:
/// cpu, cuda" (every registered name) when there is none.
const Backend& require_backend(std::string_view name);
/// The first registered backend whose source_extension() is `ext` (".cpp", ".cu"), or nullptr.
const Backend* backend_for_extension(std::string_view ext);
/// Names of the registered backends, comma-separated (for error messages); with `which`, only
/// those it accepts.
std::string backend_names(const std::function<bool(const Backend&)>& which = {});
/// The default backend of a PyTorch device string ("cpu", "cuda"): the first registered backend
/// whose device's torch_device() is `torch_device`, or nullptr.
const Backend* backend_for_torch_device(std::string_view torch_device);
/// The torch device strings of the registered devices, without repeats, joined by " or "
/// ("cpu or cuda"), for error messages.
std::string torch_device_names();

/// Parses GCC/Clang optimisation remarks ("f.cpp:12:5: optimized: loop vectorized using 64
/// byte vectors", clang: "remark: vectorized loop (vectorization width: 16, ...)") into loops.
std::vector<VectorizedLoop> parse_vectorization_report(const std::string& text);

}  // namespace vb
