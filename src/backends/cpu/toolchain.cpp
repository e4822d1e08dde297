#include "backends/cpu/toolchain.h"

#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "core/paths.h"
#include "core/process.h"

namespace vb {

std::string CpuToolchain::command_line() const {
  std::string s = cxx;
  for (const auto& f : flags) s += " " + f;
  return s;
}

const CpuToolchain& cpu_toolchain() {
  static CpuToolchain tc;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* e = std::getenv("VB_CPU_CXX");
    tc.cxx = (e && *e) ? e : "g++";
    if (!have_program(tc.cxx))
      throw std::runtime_error("CPU kernel compiler '" + tc.cxx +
                               "' not found in PATH; run scripts/setup.sh or set VB_CPU_CXX");
    tc.flags = {"-std=c++20", "-O3",   "-march=native",
                "-fopenmp",   "-fPIC", "-I" + (vladbud_home() / "kernels" / "include").string()};
    auto r = run_process({tc.cxx, "--version"}, std::chrono::seconds(30));
    tc.version = r.out.substr(0, r.out.find('\n'));
  });
  return tc;
}

}  // namespace vb
