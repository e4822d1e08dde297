#include "backends/triton/toolchain.h"

#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "core/process.h"

namespace vb {

std::filesystem::path triton_build_script() {
  return vladbud_home() / "python" / "vladbud" / "triton_build.py";
}

std::filesystem::path triton_runner_script() {
  return vladbud_home() / "python" / "vladbud" / "triton_runner.py";
}

namespace {

constexpr const char* kFix =
    "run `bash scripts/setup.sh` (its .venv has torch, whose Linux wheel brings triton) or set "
    "VB_PYTHON to a Python that has the triton and torch packages";

TritonToolchain probe() {
  TritonToolchain t;
  t.python = project_python();
  const std::string py = find_program(t.python);
  if (py.empty()) {
    t.error = "no Python interpreter '" + t.python + "' for the triton backend; " + kFix;
    return t;
  }
  t.python = py;
  ProcessResult r;
  try {
    r = run_process({py, triton_build_script().string(), "version"}, std::chrono::seconds(60));
  } catch (const std::exception& e) {
    t.error = std::string("cannot start ") + py + ": " + e.what() + "; " + kFix;
    return t;
  }
  if (!r.ok()) {
    std::string why = r.err.find("No module named 'triton'") != std::string::npos
                          ? "it has no triton package"
                          : "`" + py + " triton_build.py version` failed: " +
                                r.err.substr(r.err.size() > 300 ? r.err.size() - 300 : 0);
    t.error = "the triton backend needs Triton in " + py + ", but " + why + "; " + kFix;
    return t;
  }
  try {
    const auto j = nlohmann::json::parse(r.out);
    t.version = j.at("triton_version").get<std::string>();
    t.reach = j.value("reach", std::vector<std::string>{});
    if (!j.value("torch", false))
      t.error = py + " has triton " + t.version +
                " but no torch (the Triton interpreter runner needs it); " + kFix;
  } catch (const std::exception& e) {
    t.error = std::string("unreadable answer of triton_build.py version: ") + e.what();
  }
  return t;
}

}  // namespace

const TritonToolchain& triton_toolchain() {
  static const TritonToolchain t = probe();
  return t;
}

}  // namespace vb
