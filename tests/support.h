// Shared helpers for the test suites.
#pragma once

#include <filesystem>
#include <string>

#include "eval/evaluator.h"

namespace vb::test {

/// The source tree: $VLADBUD_HOME, else VB_SOURCE_DIR.
std::filesystem::path repo_root();
/// The build tree (where vladbud, vladbud-runner and the test executables are), baked into
/// tests/support.cpp alone at configure time.
std::string binary_dir();
/// The stand-in CUDA driver library (tests/fixtures/cuda/mock_libcuda.cpp) built with the tests.
std::string mock_libcuda();
/// kernels/bad/cpu/<name>.cpp
std::filesystem::path bad_kernel(const std::string& name);
/// kernels/unusual/cpu/<name>.cpp (correct kernels written in unusual ways; must pass)
std::filesystem::path unusual_kernel(const std::string& name);
/// kernels/cpu/<type>.cpp
std::filesystem::path starter(const std::string& type);
/// Ceilings high enough that no honest result is INVALID (for tests that are not about it).
Ceilings generous_ceilings();
/// Evaluator options for tests: fixed fresh seed, short call timeout, given ceilings.
EvalOptions test_options(bool timing = false);
/// N from "sandbox held: reached none of N other ..." (the reaches_other_runners bad kernels'
/// message: how many other processes they tried), or -1 when the message is not that.
int processes_tried(const std::string& reason);
/// Whether that message lists `pid` among the runners' pids it tried (the first few).
bool tried_pid(const std::string& reason, long pid);

}  // namespace vb::test
