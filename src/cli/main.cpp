// vladbud: autonomous, vendor-portable kernel optimization. This file wires the subcommands.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"

namespace vb::cli {

int exit_code_for(const std::string& verdict) {
  if (verdict == "PASS") return kOk;
  if (verdict == "UNVERIFIED") return kOk;  // --timing-only: asked not to check correctness
  if (verdict == "TIMEOUT") return kTimeout;
  if (verdict == "CRASH") return kCrash;
  if (verdict == "INVALID") return kInvalid;
  if (verdict == "INCONCLUSIVE") return kInconclusive;
  return kFail;
}

std::function<void(const std::string&)> progress_printer(bool force) {
  if (!force && !::isatty(2)) return {};
  return [](const std::string& s) { std::fprintf(stderr, "  %s\n", s.c_str()); };
}

}  // namespace vb::cli

int main(int argc, char** argv) {
  CLI::App app{
      "VladBud: generates, validates and benchmarks kernels (matmul, softmax, layernorm, rmsnorm,\n"
      "flash_attention, fused_mlp, cross_entropy, rotary_embedding, reduce) on the hardware here,\n"
      "against a float64 oracle and behind an adversarial evaluator.\n\n"
      "Exit codes: 0 PASS (or UNVERIFIED under --timing-only), 1 FAIL, 2 bad usage, 3 TIMEOUT,\n"
      "4 CRASH, 5 INVALID, 6 INCONCLUSIVE (an emulator could not decide some cases; none failed).",
      "vladbud"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "vladbud 0.1.0");
  vb::cli::add_bench(app);
  vb::cli::add_run(app);
  vb::cli::add_research(app);
  vb::cli::add_targets(app);
  vb::cli::add_profile(app);
  vb::cli::add_extract(app);
  vb::cli::add_verify(app);
  vb::cli::add_optimize(app);
  vb::cli::add_status(app);
  vb::cli::add_report(app);
  vb::cli::add_rank(app);
  vb::cli::add_variants(app);
  vb::cli::add_autotune(app);
  vb::cli::add_kernelbench(app);
  vb::cli::add_export(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    // A misspelling gets our one line (what is unknown, the nearest name, where the list is)
    // instead of CLI11's, which for a misspelled subcommand says only "A subcommand is required"
    // (a new user saw both and found them contradictory).
    const std::string hint = vb::cli::suggest_fix(app, argc, argv);
    if (hint.empty()) app.exit(e);
    else std::cerr << hint << "\n";
    return vb::cli::kUsage;
  } catch (const std::exception& e) {
    std::cerr << "vladbud: error: " << e.what() << "\n";
    return vb::cli::kUsage;
  }
  return 0;
}
