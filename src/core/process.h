// Running external tools (compilers, probes) with captured output and a timeout.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace vb {

/// Outcome of run_process.
struct ProcessResult {
  int exit_code = -1;      ///< exit status, or -1 when killed by a signal / timed out
  int term_signal = 0;     ///< signal number when killed by a signal
  bool timed_out = false;  ///< killed after the timeout
  std::string out;         ///< captured stdout
  std::string err;         ///< captured stderr
  double seconds = 0;      ///< wall time
  bool ok() const { return exit_code == 0 && !timed_out; }
};

/// Runs argv[0] (searched in PATH) with the given arguments, capturing stdout and stderr.
/// Kills the process group after `timeout`. Throws std::runtime_error if it cannot start.
ProcessResult run_process(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::minutes(5),
                          const std::filesystem::path& cwd = {});

/// Human-readable signal name ("SIGSEGV (segmentation fault)").
std::string signal_description(int sig);

/// True when `name` is found as an executable in PATH (or is an executable path).
bool have_program(const std::string& name);

/// The absolute path of `name` looked up in PATH like execvp does (or `name` itself when it
/// contains a '/' and is executable); "" when not found. For callers that must execve().
std::string find_program(const std::string& name);

}  // namespace vb
