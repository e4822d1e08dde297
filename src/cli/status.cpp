// `vladbud status`: where the orchestrator stands (workspace/orchestration.json and the kernel
// folders' state.json).
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "core/paths.h"
#include "optimize/orchestrator.h"

namespace vb::cli {

void add_status(CLI::App& app) {
  auto ws = std::make_shared<std::string>("workspace");
  auto json = std::make_shared<bool>(false);
  auto* c = app.add_subcommand(
      "status", "Show the optimizer's progress: per kernel its share of model time, starter and "
                "best latency, speedup, % of ceiling, experiments, keeps and status. Exit codes: "
                "0 shown, 2 nothing to show (no workspace, or no kernels/ in it: the message "
                "names the command that makes them).");
  c->add_option("--workspace", *ws, "workspace folder")->capture_default_str();
  c->add_flag("--json", *json, "print orchestration.json (or the per-kernel entries) as JSON");
  c->callback([ws, json] {
    try {
      if (*json) {
        std::cout << opt::status_json(*ws).dump(2) << "\n";
      } else {
        std::cout << opt::format_status(*ws);
      }
    } catch (const std::exception& e) {
      std::cerr << "vladbud status: " << e.what() << "\n";
      throw CLI::RuntimeError(kUsage);
    }
  });
}

}  // namespace vb::cli
