#include "backends/cpu/toolchain.h"

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "core/paths.h"
#include "core/process.h"
#include "runner/protocol.h"

namespace vb {

std::string CpuToolchain::command_line() const {
  std::string s = cxx;
  for (const auto& f : flags) s += " " + f;
  return s;
}

std::string CpuToolchain::native_cpu() const {
  for (const char* key : {"-march=", "-target-cpu "}) {
    const auto p = native_target.find(key);
    if (p == std::string::npos) continue;
    const auto b = p + std::string_view(key).size();
    return native_target.substr(b, native_target.find(' ', b) - b);
  }
  return "";
}

std::string resolve_native_target(const std::string& cxx) {
  std::string out;
  try {
    const auto r = run_process({cxx, "-march=native", "-###", "-x", "c++", "-c", "/dev/null", "-o",
                                "/dev/null"},
                               std::chrono::seconds(30));
    // The compiler proper's line: cc1plus (GCC) or "-cc1" (Clang), tokens in double quotes or
    // bare. Temporary file names differ between runs and are dropped.
    std::istringstream lines(r.err + r.out);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find("cc1plus") == std::string::npos && line.find("\"-cc1\"") == std::string::npos)
        continue;
      std::istringstream toks(line);
      std::string t, prev;
      while (toks >> t) {
        if (t.size() >= 2 && t.front() == '"' && t.back() == '"') t = t.substr(1, t.size() - 2);
        if (prev == "--param" || prev == "-target-cpu" || prev == "-target-feature" ||
            prev == "-tune-cpu" || (t.rfind("-m", 0) == 0 && t != "-main-file-name")) {
          // Appended piecewise: GCC 12's -Wrestrict misfires on the one-expression form.
          if (!out.empty()) out += ' ';
          if (prev == "-target-cpu") out += prev + ' ';
          out += t;
        }
        prev = t;
      }
      break;
    }
  } catch (const std::exception&) {
  }
  if (!out.empty()) return out;
  // Fallback: what the kernel says about the first CPU.
  std::ifstream info("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(info, line) && (model.empty() || flags.empty())) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line;
    if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0))
      flags = line;
  }
  return model.empty() && flags.empty() ? "" : model + " | " + flags;
}

std::string cpu_build_key(const std::string& preprocessed, const CpuToolchain& tc) {
  const std::string material = preprocessed + "\n--tc--\n" + tc.command_line() + "\n" + tc.version +
                               "\n--native--\n" + tc.native_target;
  return runner::hex64(runner::fnv1a64(material.data(), material.size()));
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
    tc.native_target = resolve_native_target(tc.cxx);
  });
  return tc;
}

}  // namespace vb
