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
      "Decide, inside the profiled model, which extracted kernels (workspace/kernels/, best/ when "
      "the optimizer kept one) to hand over: each type alone is checked for correctness against "
      "the unmodified model on seeded inputs (tolerance from dtype and depth), for intercepting "
      "the calls the profile attributed to it, and timed with and without it in paired rounds; "
      "it goes in only if the model gets faster beyond the noise. A kernel slower than PyTorch at "
      "its own shape is not plugged in. Prints every candidate with its effect and the reason it "
      "was kept or dropped, and the end-to-end speedup of what is handed over. Writes "
      "workspace/verify.json; exit 0 on PASS, 1 when a candidate is wrong in the model or misses "
      "calls, 2 on bad input.");
  c->add_flag("--diagnose", a->req.diagnose, "also list each type's output error alone (every type is checked alone anyway)");
  c->add_flag("--compile", a->req.compile,
              "the baseline is torch.compile of the model; candidates that win in eager are timed "
              "again inside the compiled model, and the table shows eager, torch.compile, VladBud "
              "and VladBud + compile");
  c->add_flag("!--no-select", a->req.select,
              "plug in every correct kernel without the in-model timing decision (diagnosis only: "
              "the model may get slower)");
  c->add_option("--backend", a->req.backend, "backend to build the kernels with (default: the one extract used)");
  c->add_option("--reps", a->req.reps,
                "paired timed rounds per in-model comparison (the decision uses the 95 % interval "
                "of the median ratio; at least 6)")
      ->capture_default_str();
  c->add_option("--seeds", a->req.seeds, "input seeds compared")->capture_default_str();
  c->add_option("--workspace", a->workspace, "workspace folder")->capture_default_str();
  c->add_flag("--json", a->json, "print verify.json");
  c->callback([a] { run_verify(*a); });
}

}  // namespace vb::cli
