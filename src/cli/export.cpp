// `vladbud export --kernel DIR --name NAME`: a VladBud kernel as a Hugging Face `kernels` package
// (kernel-builder source tree + a local build that `kernels.get_local_kernel` loads); issue 19.
#include <fmt/format.h>

#include <iostream>

#include "bridge/bridge.h"
#include "bridge/hf_export.h"
#include "cli/commands.h"

namespace vb::cli {

namespace {
struct ExportArgs {
  HfExportOptions o;
  std::string kernel, out;
  bool no_build = false, json = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "vladbud export: " << msg << "\n";
  throw CLI::RuntimeError(kUsage);
}

void run_export(ExportArgs& a) {
  a.o.kernel = a.kernel;
  a.o.out = a.out;
  a.o.build = !a.no_build;
  nlohmann::json r;
  try {
    r = hf_export(a.o);
  } catch (const BridgeUsageError& e) {
    usage_error(e.what());
  } catch (const std::runtime_error& e) {
    std::cerr << "vladbud export: " << e.what() << "\n";
    throw CLI::RuntimeError(kFail);
  }
  if (a.json) {
    std::cout << r.dump(2) << "\n";
    return;
  }
  std::cout << fmt::format("exported {} ({} kernel, backend {}) from {}\n", r.value("name", ""),
                           r.value("type", ""), r.value("backend", ""), r.value("source", ""));
  std::cout << "  source tree: " << r.value("out", "") << "/ (build.toml edition 5, torch-ext/, "
            << r.value("package", "") << "_" << r.value("backend", "") << "/, tests/, benchmarks/)\n";
  if (r["build"].is_object())
    std::cout << fmt::format("  local variant: {} (built in {:.1f} s; op namespace {})\n",
                             r.value("variant_dir", ""), r["build"].value("seconds", 0.0),
                             r.value("op_namespace", ""));
  else
    std::cout << "  local variant: not built (--no-build)\n";
  if (!r["layers"].empty()) {
    std::string l;
    for (const auto& x : r["layers"]) l += (l.empty() ? "" : ", ") + x.get<std::string>();
    std::cout << "  kernelize layers: " << l << "\n";
  }
  for (const auto& w : r.value("warnings", nlohmann::json::array()))
    std::cout << "warning: " << w.get<std::string>() << "\n";
  std::cout << "load it: " << r.value("load", "") << "\n";
}
}  // namespace

void add_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* c = app.add_subcommand(
      "export",
      "Write a Hugging Face `kernels` package of a kernel: a kernel-builder source tree (build.toml\n"
      "edition 5, torch-ext/ binding and Python package, the kernel source, a test, a benchmark) and\n"
      "a local build build/torch<MM>-cxx11-<cu<NNN>|cpu>-<arch>-linux/ that `kernels.get_local_kernel`\n"
      "loads offline. rmsnorm and fused_mlp also get kernelize layers (RMSNorm, LlamaMLP).");
  c->add_option("--kernel,-k", a->kernel,
                "a kernel folder (problem.json: the optimizer's best/ when kept), a folder of starters "
                "(e.g. kernels/cuda, with --type) or a .cu/.cpp kernel source")
      ->required();
  c->add_option("--name", a->o.name, "package name: lowercase letters, digits, single '_' or '-' (e.g. vb_rmsnorm)")
      ->required();
  c->add_option("--out,-o", a->out, "output folder (default: ./NAME with '-')");
  c->add_option("--type,-t", a->o.type, "kernel type (default: from problem.json or the file name)");
  c->add_option("--cuda-arch", a->o.cuda_archs,
                "CUDA capability to build for, e.g. 9.0a (repeatable; default: the local GPU's, else 9.0a)");
  c->add_option("--license", a->o.license, "license named in build.toml and metadata.json")->capture_default_str();
  c->add_option("--version", a->o.version, "the package's major version")->capture_default_str();
  c->add_flag("--force", a->o.force, "replace OUT when it exists and is not empty");
  c->add_flag("--no-build", a->no_build, "write the source tree only (no local variant)");
  c->add_flag("--json", a->json, "print the result as JSON");
  c->callback([a] { run_export(*a); });
}

}  // namespace vb::cli
