#include "support.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/paths.h"

namespace vb::test {

std::filesystem::path repo_root() {
  // $VLADBUD_HOME when set (test binaries carried to another machine), else the source tree.
  return vladbud_home();
}

std::filesystem::path bad_kernel(const std::string& name) {
  return repo_root() / "kernels" / "bad" / "cpu" / (name + ".cpp");
}

std::filesystem::path unusual_kernel(const std::string& name) {
  return repo_root() / "kernels" / "unusual" / "cpu" / (name + ".cpp");
}

std::filesystem::path starter(const std::string& type) {
  return repo_root() / "kernels" / "cpu" / (type + ".cpp");
}

Ceilings generous_ceilings() {
  Ceilings c;
  c.machine_id = "test";
  c.cpu_model = "test ceilings";
  c.measured_at = "test";
  c.mem_bw_gbs = 1e6;
  c.bw_probes_gbs = {{"copy", 1e6}};
  for (DType d : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    c.peak_tflops[d] = 1e6;
    c.peak_method[d] = "test";
  }
  return c;
}

EvalOptions test_options(bool timing) {
  EvalOptions o;
  o.fresh_seed = 7;
  o.timing = timing;
  o.call_timeout_s = 20;
  o.min_time_s = 0.05;
  o.max_time_s = 0.5;
  o.min_reps = 3;
  o.ceilings = generous_ceilings();
  return o;
}

std::string binary_dir() { return VB_BINARY_DIR; }
std::string mock_libcuda() { return VB_MOCK_LIBCUDA; }

namespace {
// Keep build artifacts and measured ceilings of test runs inside the build tree.
class TestEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!std::getenv("VB_CACHE_DIR"))
      ::setenv("VB_CACHE_DIR", (std::string(VB_BINARY_DIR) + "/test-cache").c_str(), 1);
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new TestEnv);
}  // namespace

int processes_tried(const std::string& reason) {
  const std::string key = "sandbox held: reached none of ";
  const auto at = reason.find(key);
  if (at == std::string::npos) return -1;
  try {
    return std::stoi(reason.substr(at + key.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

bool tried_pid(const std::string& reason, long pid) {
  const std::string key = "; runner pids";
  const auto at = reason.find(key);
  const auto end = at == std::string::npos ? at : reason.find(" )", at);
  if (at == std::string::npos || end == std::string::npos) return false;
  const auto from = at + key.size();
  return (reason.substr(from, end - from) + " ").find(" " + std::to_string(pid) + " ") !=
         std::string::npos;
}

}  // namespace vb::test
