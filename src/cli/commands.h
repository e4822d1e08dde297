// Subcommand registration for the `vladbud` CLI. Each subcommand lives in its own file and
// only parses arguments and calls library code (DESIGN §1).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace vb::cli {

void add_bench(CLI::App& app);
void add_run(CLI::App& app);
void add_research(CLI::App&);
void add_targets(CLI::App& app);
void add_profile(CLI::App& app);
void add_extract(CLI::App& app);
void add_verify(CLI::App& app);
void add_optimize(CLI::App& app);
void add_status(CLI::App& app);
void add_report(CLI::App& app);
void add_rank(CLI::App& app);
void add_variants(CLI::App& app);
void add_autotune(CLI::App& app);
void add_kernelbench(CLI::App& app);
void add_export(CLI::App& app);

/// Exit codes shared by the subcommands.
enum ExitCode : int {
  kOk = 0,
  kFail = 1,   ///< correctness failed (or a build failed)
  kUsage = 2,  ///< bad arguments or input
  kTimeout = 3,
  kCrash = 4,
  kInvalid = 5,  ///< correct but the timing is not credible (above the ceiling, cross-check)
  kInconclusive = 6,  ///< no case failed, but an emulating device could not decide some
};

/// Maps an evaluation verdict to an exit code.
int exit_code_for(const std::string& verdict);

/// For a command line that `app` refused: "vladbud: unknown command 'rnu'; did you mean 'run'?
/// ..." when argv[1] is no subcommand, else one line per --option the subcommand does not
/// have, with the closest of its long options (edit distance with adjacent transpositions,
/// within a third of the word's length: 1 to 3 edits). "" when nothing is unknown (the refusal was about something
/// else: a missing value, a bad number, ...).
std::string suggest_fix(const CLI::App& app, int argc, char** argv);

/// A progress printer to stderr, active when stderr is a terminal or `force` is set.
std::function<void(const std::string&)> progress_printer(bool force);

}  // namespace vb::cli
