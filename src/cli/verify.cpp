// `vladbud verify`: the model with the extracted kernels plugged in vs the unmodified model.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "bridge/pipeline.h"
#include "cli/commands.h"
#include "core/paths.h"

namespace vb::cli {

namespace {

struct VerifyArgs {
  VerifyRequest req;
  std::string workspace = "workspace";
  bool json = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "vladbud verify: " << msg << "\n";
  throw CLI::RuntimeError(kUsage);
}

void run_verify(VerifyArgs a) {
  a.req.workspace = a.workspace;
  nlohmann::json res;
  try {
    res = verify_model(a.req);
  } catch (const BridgeUsageError& e) {
    usage_error(e.what());
  } catch (const KernelBuildError& e) {
    std::cerr << e.diagnostics;
    std::cerr << "vladbud verify: " << e.what() << "\n";
    throw CLI::RuntimeError(kFail);
  }
  if (a.json) {
    std::cout << res.dump(2) << "\n";
  } else {
    const auto prof = nlohmann::json::parse(read_file(a.req.workspace / "profile.json"));
    std::cout << format_verify(res, prof, a.req.workspace);
  }
  if (res.value("verdict", "FAIL") != "PASS") throw CLI::RuntimeError(kFail);
}
}  // namespace

void add_verify(CLI::App& app) {
  auto a = std::make_shared<VerifyArgs>();
  auto* c = app.add_subcommand(
      "verify",
      "Plug the best kernel of each extracted type (workspace/kernels/) into the profiled model "
      "as torch custom ops over DLPack, compare with the unmodified model on seeded inputs "
      "(tolerance from dtype and depth), time both (median, alternating), report the speedup. "
      "Writes workspace/verify.json; exit 0 only on PASS.");
  c->add_flag("--diagnose", a->req.diagnose, "also replace each type alone and name the one that breaks the output");
  c->add_option("--backend", a->req.backend, "backend to build the kernels with (default: the one extract used)");
  c->add_option("--reps", a->req.reps, "timed forwards per side")->capture_default_str();
  c->add_option("--seeds", a->req.seeds, "input seeds compared")->capture_default_str();
  c->add_option("--workspace", a->workspace, "workspace folder")->capture_default_str();
  c->add_flag("--json", a->json, "print verify.json");
  c->callback([a] { run_verify(*a); });
}

}  // namespace vb::cli
