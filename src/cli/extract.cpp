// `vladbud extract`: one kernel folder per bottleneck of the profiled model, at its shapes.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "backends/backend.h"
#include "bridge/bridge.h"
#include "cli/commands.h"
#include "core/paths.h"

namespace vb::cli {

namespace {
struct ExtractArgs {
  int top = 5;
  std::string backend = "cpu", workspace = "workspace";
  bool json = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "vladbud extract: " << msg << "\n";
  throw CLI::RuntimeError(kUsage);
}

void run_extract(const ExtractArgs& a) {
  const std::filesystem::path pj = std::filesystem::path(a.workspace) / "profile.json";
  if (!std::filesystem::exists(pj))
    usage_error(pj.string() + " does not exist; run `vladbud profile --model FILE --class-name X "
                "--input-shape B,S --dtype fp32` first");
  nlohmann::json prof;
  try {
    prof = nlohmann::json::parse(read_file(pj));
  } catch (const std::exception& e) {
    usage_error(pj.string() + " is not valid JSON (" + e.what() + "); re-run `vladbud profile`");
  }
  std::vector<std::filesystem::path> dirs;
  try {
    dirs = extract_kernels(prof, a.top, a.backend, a.workspace);
  } catch (const BridgeUsageError& e) {
    usage_error(e.what());
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& d : dirs) {
    const auto mp = read_model_problem(d);
    const auto& doc = mp->doc;
    out.push_back({{"folder", d.string()}, {"problem", doc}});
    if (!a.json)
      std::cout << fmt::format("{:<32} {:>5.1f}%  {} {} {}  bound {}  (Amdahl {:.2f}x)\n", d.string(),
                               100 * doc.value("share", 0.0), doc.value("kernel", ""),
                               mp->size.label, doc.value("dtype", ""), doc.value("bound", ""),
                               doc.value("amdahl_max", 1.0));
  }
  if (a.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::cout << "each folder: problem.json (the model's shapes, dtype, share) and the starter "
               "source to edit; `cd` there and run `vladbud bench` (times the model's shape, "
               "checks correctness on all sizes), then `vladbud verify`\n";
}
}  // namespace

void add_extract(CLI::App& app) {
  auto a = std::make_shared<ExtractArgs>();
  auto* c = app.add_subcommand(
      "extract",
      "From workspace/profile.json, write workspace/kernels/NN_<type>/ for the N largest "
      "(type, shapes, dtype) groups by time share: problem.json and the starter source.");
  c->add_option("--top", a->top, "how many groups")->capture_default_str();
  c->add_option("--backend", a->backend, "backend of the starter sources: " + backend_names())
      ->capture_default_str();
  c->add_option("--workspace", a->workspace, "workspace folder")->capture_default_str();
  c->add_flag("--json", a->json, "print the folders and problems as JSON");
  c->callback([a] { run_extract(*a); });
}

}  // namespace vb::cli
