// The Triton toolchain (DESIGN §1, §8): the project's Python with the triton package, probed
// once per process. Triton kernels are Python sources; the C++ side reaches Triton through
// python/vladbud/triton_build.py (static checks, compile-only builds) and runs kernels through
// python/vladbud/triton_runner.py (the interpreter runner), both executed as scripts.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace vb {

/// What the probe found. `error` is "" when Triton (and torch, which the interpreter runner
/// needs) can be used; otherwise it names what is missing and the fix.
struct TritonToolchain {
  std::string python;   ///< the interpreter (core/paths project_python: $VB_PYTHON, .venv, python3)
  std::string version;  ///< triton.__version__ ("3.6.0"), "" when not importable
  std::string error;    ///< why the backend cannot be used here, with the fix; "" when it can
  /// Directories of the Python installation (interpreter prefix, venv, site-packages) the
  /// sandboxed runner must read (Device::RunnerProgram::reachable).
  std::vector<std::string> reach;
};

/// The probe's result (runs `python triton_build.py version` once, ~0.3 s; cached).
const TritonToolchain& triton_toolchain();

/// <home>/python/vladbud/triton_build.py (the Python half of the backend).
std::filesystem::path triton_build_script();
/// <home>/python/vladbud/triton_runner.py (the interpreter runner, DESIGN §4).
std::filesystem::path triton_runner_script();

}  // namespace vb
