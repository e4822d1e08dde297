#include "ladder/triton_compile.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "backends/triton/toolchain.h"
#include "core/paths.h"
#include "core/process.h"

namespace vb::ladder {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The last `n` non-empty lines of `text`, joined by " | ".
std::string last_lines(const std::string& text, int n) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    if (eol > pos) lines.push_back(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  std::string out;
  for (std::size_t i = lines.size() > static_cast<std::size_t>(n) ? lines.size() - n : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : " | ") + lines[i];
  return out;
}

}  // namespace

json triton_problem_json(const Problem& p) {
  auto side = [](const std::vector<TensorDesc>& ts) {
    json a = json::array();
    for (const auto& t : ts) a.push_back({{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}});
    return a;
  };
  return {{"inputs", side(p.inputs)}, {"outputs", side(p.outputs)}, {"attrs", p.attrs}};
}

TritonCompile triton_compile_only(const fs::path& source, const Problem& p, const std::string& target,
                                  const std::function<void(const json&)>& inspect) {
  const auto& tc = triton_toolchain();
  if (!tc.error.empty()) throw std::runtime_error(tc.error);
  static std::atomic<int> serial{0};
  const std::string tag = target.substr(0, target.rfind(':'));
  RemoveTreeOnExit work{cache_dir() / "triton-static" /
                    fmt::format("{}-{}-{}", ::getpid(), serial++, tag.substr(tag.find(':') + 1))};
  fs::create_directories(work.dir);
  const fs::path prob = work.dir / "problem.json";
  write_file_atomic(prob, triton_problem_json(p).dump());
  const auto pr = run_process({tc.python, triton_build_script().string(), "compile", source.string(),
                               prob.string(), target},
                              std::chrono::minutes(10));
  TritonCompile out;
  out.triton_version = tc.version;
  json res;
  try {
    res = json::parse(pr.out);
  } catch (const std::exception&) {
    // No answer: the process died. Triton's LLVM aborts on a processor it does not know; other
    // aborts during the compile (LLVM ERROR, ptxas crash) are this source failing to compile.
    const std::string arch = target.substr(target.find(':') + 1, target.rfind(':') - target.find(':') - 1);
    if (pr.err.find("is not a recognized processor") != std::string::npos) {
      out.arch_unsupported = true;
      out.diagnostics = fmt::format(
          "Triton {} cannot compile for {} (its LLVM: {}); fix: a Triton release that supports "
          "that architecture (pip install -U triton in the project's .venv), or another target",
          tc.version, arch, last_lines(pr.err, 1));
      return out;
    }
    if (pr.err.find("LLVM ERROR") != std::string::npos || pr.err.find("ptxas") != std::string::npos) {
      out.diagnostics = fmt::format("{}: error: Triton's compiler aborted for {} (exit {}): {}",
                                    source.string(), target, pr.exit_code, last_lines(pr.err, 3));
      return out;
    }
    throw std::runtime_error("triton_build.py compile failed (exit " + std::to_string(pr.exit_code) +
                             "): " + pr.err.substr(0, 2000));
  }
  out.ok = res.value("ok", false);
  out.arch_unsupported = res.value("arch_unsupported", false);
  out.diagnostics = res.value("diagnostics", std::string());
  out.triton_version = res.value("triton_version", tc.version);
  if (res.contains("kernels")) out.kernels = res["kernels"];
  if (out.ok && inspect) inspect(out.kernels);
  return out;
}

}  // namespace vb::ladder
