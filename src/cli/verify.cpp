// `vladbud verify`: the model with the extracted kernels plugged in vs the unmodified model.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "backends/backend.h"
#include "bridge/bridge.h"
#include "cli/commands.h"
#include "core/paths.h"

namespace vb::cli {

namespace {
namespace fs = std::filesystem;

struct VerifyArgs {
  std::string workspace = "workspace", backend;
  bool diagnose = false, json = false;
  int reps = 7;
  std::vector<int> seeds{0, 1, 2};
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "vladbud verify: " << msg << "\n";
  throw CLI::RuntimeError(kUsage);
}

void run_verify(const VerifyArgs& a) {
  const fs::path ws = a.workspace, pj = ws / "profile.json", kd = ws / "kernels";
  if (!fs::exists(pj))
    usage_error(pj.string() + " does not exist; run `vladbud profile ...` then `vladbud extract` first");
  if (!fs::is_directory(kd))
    usage_error(kd.string() + " does not exist; run `vladbud extract --top N` first");
  const auto prof = nlohmann::json::parse(read_file(pj));
  std::vector<fs::path> dirs;
  for (const auto& d : fs::directory_iterator(kd))
    if (d.is_directory() && fs::exists(d.path() / "problem.json")) dirs.push_back(d.path());
  std::sort(dirs.begin(), dirs.end());
  if (dirs.empty()) usage_error("no kernel folder with problem.json in " + kd.string() + "; run `vladbud extract`");
  // The best kernel of each extracted type: the folder with the largest share (lowest NN) of
  // that type; its best/<type><ext> when the optimizer left one, else the folder's source.
  std::map<std::string, nlohmann::json> chosen;
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& d : dirs) {
    const auto mp = read_model_problem(d);
    const std::string type = mp->type->name();
    if (chosen.count(type)) continue;
    const std::string backend = a.backend.empty() ? mp->doc.value("backend", "cpu") : a.backend;
    const Backend* be = find_backend(backend);
    if (!be) usage_error("unknown backend '" + backend + "'; available: " + backend_names());
    fs::path src = d / "best" / (type + be->source_extension());
    if (!fs::exists(src)) src = d / mp->doc.value("source", type + be->source_extension());
    if (!fs::exists(src)) usage_error("kernel source " + src.string() + " is missing; re-run `vladbud extract`");
    const BuildResult br = be->build(src);
    if (!br.ok) {
      std::cerr << br.diagnostics;
      std::cerr << "vladbud verify: building " << src.string() << " failed\n";
      throw CLI::RuntimeError(kFail);
    }
    nlohmann::json k = {{"type", type}, {"library", fs::absolute(br.library).string()},
                        {"source", src.string()}, {"backend", backend}, {"folder", d.string()}};
    chosen[type] = k;
    kernels.push_back(k);
  }
  const auto& m = prof.at("model");
  const auto shape = prof.at("input_shape");
  nlohmann::json req = {{"model", m.value("file", "")},
                        {"class_name", m.value("class_name", "")},
                        {"module", m.value("module", "")},
                        {"config", m.value("config", "")},
                        {"model_args", m.value("model_args", nlohmann::json::object())},
                        {"input_shape", fmt::format("{},{}", shape[0].get<int>(), shape[1].get<int>())},
                        {"dtype", prof.value("dtype", "fp32")},
                        {"device", prof.value("device", "cpu")},
                        {"kernels", kernels},
                        {"seeds", a.seeds},
                        {"reps", a.reps},
                        {"diagnose", a.diagnose}};
  nlohmann::json res;
  try {
    res = run_bridge("verify", req, ws / ".bridge");
  } catch (const BridgeUsageError& e) {
    usage_error(e.what());
  }
  write_file_atomic(ws / "verify.json", res.dump(1) + "\n");
  if (a.json) {
    std::cout << res.dump(2) << "\n";
  } else {
    std::cout << fmt::format("model: {} {} on {}, input {}, depth {}\n", m.value("class_name", ""),
                             res.value("dtype", ""), res.value("device", ""), req["input_shape"].get<std::string>(),
                             res.value("depth", 0));
    for (const auto& k : res["kernels"]) {
      const int mods = k.value("modules_replaced", 0);
      std::cout << fmt::format("  kernel {:<17} {}  ({}, {} calls per forward)\n", k.value("type", ""),
                               k.value("source", ""),
                               mods ? fmt::format("module level: {} modules replaced", mods)
                                    : std::string("operator level"),
                               k.value("calls_per_forward", 0));
    }
    std::cout << "tolerance: " << res.value("tolerance_rule", "") << fmt::format(" = {:.3g}\n", res.value("tolerance", 0.0));
    for (const auto& s : res["seeds"])
      std::cout << fmt::format("  seed {}: rel_error {:.3g}  max_abs_diff {:.3g}  {}\n", s.value("seed", 0),
                               s.value("rel_error", 0.0), s.value("max_abs_diff", 0.0),
                               s.value("pass", false) ? "ok" : "FAIL");
    const auto& l = res["latency"];
    std::cout << fmt::format("latency: pytorch {:.2f} ms, with vladbud kernels {:.2f} ms ({}); speedup {:.3f}x\n",
                             l.value("baseline_ms", 0.0), l.value("vladbud_ms", 0.0), l.value("protocol", ""),
                             res.value("speedup", 0.0));
    for (const auto& w : res.value("warnings", nlohmann::json::array()))
      std::cout << "warning: " << w.get<std::string>() << "\n";
    if (res.contains("diagnose")) {
      for (const auto& d : res["diagnose"])
        std::cout << fmt::format("  diagnose {:<17} alone: rel_error {:.3g} {}\n", d.value("type", ""),
                                 d.value("rel_error", 0.0), d.value("pass", false) ? "ok" : "BREAKS THE OUTPUT");
      if (res.contains("diagnose_note")) std::cout << "  " << res["diagnose_note"].get<std::string>() << "\n";
    }
    std::cout << "verify: " << res.value("verdict", "FAIL") << "\n";
    std::cout << "wrote " << (ws / "verify.json").string() << "\n";
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
  c->add_flag("--diagnose", a->diagnose, "also replace each type alone and name the one that breaks the output");
  c->add_option("--backend", a->backend, "backend to build the kernels with (default: the one extract used)");
  c->add_option("--reps", a->reps, "timed forwards per side")->capture_default_str();
  c->add_option("--seeds", a->seeds, "input seeds compared")->capture_default_str();
  c->add_option("--workspace", a->workspace, "workspace folder")->capture_default_str();
  c->add_flag("--json", a->json, "print verify.json");
  c->callback([a] { run_verify(*a); });
}

}  // namespace vb::cli
