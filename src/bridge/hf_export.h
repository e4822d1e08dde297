// `vladbud export` (issue 19, item 5): a VladBud kernel as a Hugging Face `kernels` package. The
// work is python/vladbud/hf_export.py (it needs torch: the variant's name comes from the torch
// build, the library is built with torch.utils.cpp_extension), run through the bridge's
// subprocess contract (bridge.h); this side only assembles the request.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace vb {

/// Options of hf_export (the CLI's flags).
struct HfExportOptions {
  std::filesystem::path kernel;  ///< a kernel folder (problem.json), a starters folder (+type) or a .cu/.cpp source
  std::string name;              ///< package name: lowercase, digits, single '_' or '-' (e.g. vb_rmsnorm)
  std::filesystem::path out;     ///< output folder; "" = ./<name with '-'>
  std::string type;              ///< kernel type; "" = from problem.json or the file name
  bool force = false;            ///< replace a non-empty `out`
  bool build = true;             ///< also build the local variant build/<variant>/
  std::vector<std::string> cuda_archs;  ///< e.g. {"9.0a"}; empty = the local GPU's, else 9.0a
  std::string license = "Apache-2.0";   ///< the package's license (build.toml, metadata.json)
  int version = 1;                      ///< the package's major version (build.toml, metadata.json)
};

/// Writes the kernel-builder source tree (build.toml edition 5, torch-ext/, the kernel folder,
/// tests/, benchmarks/) and, unless !o.build, builds the local variant that
/// `kernels.get_local_kernel` loads. Returns python's result ({"out", "name", "package",
/// "type", "backend", "source", "files", "variant", "variant_dir", "op_namespace",
/// "cuda_archs", "layers", "build": {"ok", "seconds", "library"}, "warnings"}). Throws
/// BridgeUsageError (naming the fix) for a missing kernel path, an unknown type, a Triton
/// kernel, a name `kernels` refuses, a non-empty `out` without force, a bad CUDA arch, a
/// version below 1; std::runtime_error with the compiler's output when the build fails.
nlohmann::json hf_export(const HfExportOptions& o);

}  // namespace vb
