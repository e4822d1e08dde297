// Compile-only builds of Triton kernel sources for absent GPUs (ladder rungs 0 and 1 of the AMD
// and the Triton-on-NVIDIA climbers): the source's vb_kernel_run is called on empty CPU tensors
// of the ranked problem with Triton's launches captured instead of run, and each captured
// launch is compiled with triton.compile for the target (python/vladbud/triton_build.py
// compile, run as an unprivileged tool process of the project's Python, never in this
// process). No GPU, ROCm or CUDA driver is needed.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "kernels/kernel_type.h"

namespace vb::ladder {

/// What one compile-only build found.
struct TritonCompile {
  bool ok = false;             ///< every captured launch compiled for the target
  /// Triton cannot compile for this architecture at all (a limit of the installed Triton, not a
  /// fault of the source); `diagnostics` names the architecture and the fix.
  bool arch_unsupported = false;
  std::string diagnostics;     ///< the compile error, or why the architecture is unsupported
  std::string triton_version;  ///< "3.6.0" (the toolchain's probe when the script gave none)
  /// triton_build.py compile's per-launch records (name, grid, num_warps, num_stages,
  /// signature, constexprs, shared_bytes, and the target's numbers; see its docstring).
  nlohmann::json kernels = nlohmann::json::array();
};

/// The problem as triton_build.py compile reads it: {"inputs": [{"dtype", "shape"}],
/// "outputs": [...], "attrs": [...]}.
nlohmann::json triton_problem_json(const Problem& p);

/// Compiles every kernel `source` launches for `p` for `target`, a triton_build.py target
/// "backend:arch:warp_size" ("hip:gfx942:64", "cuda:90:32"), in a private work directory under
/// cache_dir()/triton-static/ that is removed afterwards; `inspect` (optional) is called with
/// the kernel records of a successful build while the files they name (cuda: the .cubin and
/// .ptx) still exist. A compiler that aborts the process on an architecture its LLVM does not
/// know ("is not a recognized processor") gives arch_unsupported; any other abort of the
/// compiler on this source gives ok = false with its last error lines. Throws
/// std::runtime_error when the Triton toolchain is unavailable (triton_toolchain().error) or
/// the script cannot be started or answers nothing readable without a compiler error.
TritonCompile triton_compile_only(const std::filesystem::path& source, const Problem& p,
                                  const std::string& target,
                                  const std::function<void(const nlohmann::json&)>& inspect = {});

}  // namespace vb::ladder
