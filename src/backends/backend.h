// The backend interface (DESIGN §1): one small vtable per author surface (cf. ggml-backend.h).
// A backend turns a kernel source into a library exposing the kernel ABI (DESIGN §3) and
// names the runner flavour that executes it. Nothing above this interface knows which
// compiler or device a backend uses.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace vb {

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

/// A kernel author surface: builds sources and names how they run.
class Backend {
 public:
  virtual ~Backend() = default;
  /// "cpu", "cuda".
  virtual std::string name() const = 0;
  /// Source file extension of this surface (".cpp", ".cu").
  virtual std::string source_extension() const = 0;
  /// The starter kernel of a type: <home>/kernels/<backend>/<type><ext>.
  std::filesystem::path starter_source(std::string_view kernel) const;
  /// Builds `source` into a library, from the content-hash cache when possible. Never throws
  /// for a bad source: a failed build returns ok=false with the compiler's diagnostics.
  virtual BuildResult build(const std::filesystem::path& source) const = 0;
  /// One line describing the toolchain ("g++ (Debian 12.2.0) -O3 -march=native ...").
  virtual std::string toolchain_description() const = 0;
  /// Why this machine cannot run kernels of this backend ("no GPU: libcuda.so.1 not found
  /// (...)"), or "" when it can. Commands that run kernels turn a non-empty answer into a usage
  /// error before building anything, so a missing device is never a kernel's FAIL. Default: "".
  virtual std::string device_unavailable() const { return ""; }
};

/// The backend called `name`, or nullptr.
const Backend* find_backend(std::string_view name);
/// Names of all registered backends, comma-separated (for error messages).
std::string backend_names();

/// Parses GCC/Clang optimisation remarks ("f.cpp:12:5: optimized: loop vectorized using 64
/// byte vectors", clang: "remark: vectorized loop (vectorization width: 16, ...)") into loops.
std::vector<VectorizedLoop> parse_vectorization_report(const std::string& text);

}  // namespace vb
