// The PyTorch bridge through the `vladbud` binary: clear errors for bad input, bench inside an
// extracted folder at the model's shapes and dtype, and the profile -> extract -> verify
// pipeline on a small GPT-2 (Python with torch; skipped with a reason when there is none).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bridge/bridge.h"
#include "core/paths.h"
#include "core/process.h"
#include "support.h"

namespace vb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

ProcessResult vladbud(std::vector<std::string> args, const fs::path& cwd) {
  args.insert(args.begin(), vb::test::binary_dir() + "/vladbud");
  return run_process(args, std::chrono::minutes(10), cwd);
}

fs::path temp_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("vb-bridge-it-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

bool have_torch() {
  static const bool ok = [] {
    try {
      return run_process({bridge_python(), "-c", "import torch"}, std::chrono::minutes(1)).ok();
    } catch (const std::exception&) {
      return false;
    }
  }();
  return ok;
}

std::string models(const std::string& f) { return (vladbud_home() / "models" / f).string(); }

TEST(BridgeCli, ExtractBeforeProfileNamesTheCommandToRun) {
  const auto d = temp_dir("no-profile");
  const auto r = vladbud({"extract", "--top", "3"}, d);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("profile.json does not exist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("vladbud profile"), std::string::npos) << r.err;
  const auto v = vladbud({"verify"}, d);
  EXPECT_EQ(v.exit_code, 2) << v.err;
  EXPECT_NE(v.err.find("vladbud profile"), std::string::npos) << v.err;
  fs::remove_all(d);
}

TEST(BridgeCli, VerifyRefusesTooFewRoundsAndAProfileWithoutEntriesBeforeBuilding) {
  const auto d = temp_dir("verify-bad");
  fs::create_directories(d / "workspace" / "kernels");
  write_file_atomic(d / "workspace" / "profile.json",
                    R"({"model": {"class_name": "GPT2"}, "input_shape": [1, 8]})");
  auto r = vladbud({"verify"}, d);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("lacks the model, its input_shape or the profiled entries"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("vladbud profile"), std::string::npos) << r.err;
  r = vladbud({"verify", "--reps", "3"}, d);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--reps must be >= 6"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "workspace" / "verify.json"));
  fs::remove_all(d);
}

TEST(BridgeCli, ProfileRejectsBadInputBeforeStartingTorch) {
  const auto d = temp_dir("bad-input");
  auto r = vladbud({"profile", "--model", "nope.py", "--class-name", "GPT2"}, d);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'nope.py' does not exist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("models"), std::string::npos) << r.err;
  for (const char* shape : {"128", "1,x", "0,8", "1,2,3"}) {
    r = vladbud({"profile", "--model", models("gpt2.py"), "--class-name", "GPT2", "--input-shape", shape}, d);
    EXPECT_EQ(r.exit_code, 2) << shape;
    EXPECT_NE(r.err.find("BATCH,SEQ"), std::string::npos) << shape << ": " << r.err;
  }
  r = vladbud({"profile", "--model", models("gpt2.py"), "--class-name", "GPT2", "--dtype", "fp8"}, d);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--dtype"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d / "workspace" / "profile.json"));
  fs::remove_all(d);
}

TEST(BridgeCli, UnknownClassIsReportedByThePythonSideWithTheClassesFound) {
  if (!have_torch()) GTEST_SKIP() << "no Python with torch (" << bridge_python() << "); run scripts/setup.sh";
  const auto d = temp_dir("bad-class");
  const auto r = vladbud({"profile", "--model", models("gpt2.py"), "--class-name", "GTP2"}, d);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("class 'GTP2' not found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GPT2"), std::string::npos) << r.err;
  fs::remove_all(d);
}

TEST(BridgeCli, AnEmptyTraceGivesAClearMessageNotACrash) {
  if (!have_torch()) GTEST_SKIP() << "no Python with torch (" << bridge_python() << "); run scripts/setup.sh";
  const auto d = temp_dir("empty-trace");
  write_file_atomic(d / "identity.py", R"(import torch.nn as nn


class Identity(nn.Module):
    """Does no tensor work at all: the profiler records no operator."""

    def example_inputs(self, batch, seq, device="cpu"):
        import torch
        return torch.zeros(batch, seq)

    def forward(self, x):
        return x
)");
  const auto r = vladbud({"profile", "--model", (d / "identity.py").string(), "--class-name",
                          "Identity", "--input-shape", "1,4", "--warmup", "1", "--iters", "1"}, d);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("recorded no operator time"), std::string::npos) << r.out << r.err;
  EXPECT_FALSE(fs::exists(d / "workspace" / "profile.json"));
  fs::remove_all(d);
}

TEST(BridgeCli, BenchInAnExtractedFolderTimesTheModelsShapeAndDtype) {
  const auto d = temp_dir("bench-folder");
  json raw = {{"device", "cpu"}, {"dtype", "bf16"}, {"input_shape", {1, 64}}, {"records", 10},
              {"profiled_us", 100.0}, {"model", json::object()},
              {"entries", {{{"type", "rmsnorm"}, {"op", "aten::pow + ..."},
                            {"dims", {{"M", 64}, {"N", 512}}}, {"attrs", json::object()},
                            {"dtype", "bf16"}, {"calls", 5.0}, {"us", 100.0}}}}};
  Roof roof;
  roof.peak_tflops = 1;
  roof.bandwidth_gbs = 100;
  const auto dirs = extract_kernels(analyze_profile(raw, roof), 1, "cpu", d / "workspace");
  ASSERT_EQ(dirs.size(), 1u);
  const auto r = vladbud({"bench", "--quick", "--json"}, dirs[0]);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["kernel"], "rmsnorm");
  EXPECT_EQ(j["size"], "model-M64xN512");
  EXPECT_EQ(j["dtype"], "bf16");  // the profiled dtype, never a fixed fp16/fp32 default
  EXPECT_EQ(j["source"].get<std::string>().find("rmsnorm.cpp") != std::string::npos, true);
  if (have_torch()) {  // PyTorch timed at the same shape and dtype in the same run
    ASSERT_TRUE(j.contains("pytorch")) << j.dump(1);
    EXPECT_GT(j["pytorch"]["median_us"].get<double>(), 0);
    ASSERT_TRUE(j["speedup_vs_pytorch"].is_number()) << j.dump(1);  // a number, not text
    EXPECT_GT(j["speedup_vs_pytorch"].get<double>(), 0);
    const std::string cell = fmt::format("\t{:.3f}\t", j["speedup_vs_pytorch"].get<double>());
    EXPECT_NE(read_file(dirs[0] / "results.tsv").find(cell), std::string::npos);
  }
  fs::remove_all(d);
}

// --timing-only skips the correctness stages (UNVERIFIED; the timed calls are still checked):
// PyTorch is timed next to it all the same, so a stage that checked first and times after
// (bench/h200_triton.sh aot-check, then aot-time) has its speedup. A kernel whose timed calls
// are wrong gets no PyTorch figure.
TEST(BridgeCli, TimingOnlyIsTimedNextToPyTorchButAFailureIsNot) {
  if (!have_torch()) GTEST_SKIP() << "no Python with torch (" << bridge_python() << "); run scripts/setup.sh";
  const auto d = temp_dir("timing-only-pytorch");
  const auto r = vladbud({"bench", "--kernel", "rmsnorm", "--quick", "--timing-only", "--json"}, d);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["verdict"], "UNVERIFIED") << j.dump(1);
  ASSERT_TRUE(j.contains("pytorch") && j["pytorch"].is_object()) << j.dump(1);
  EXPECT_GT(j["pytorch"]["median_us"].get<double>(), 0);
  EXPECT_GT(j["speedup_vs_pytorch"].get<double>(), 0);
  const auto bad = vladbud({"bench", "--kernel", "softmax", "--quick", "--timing-only", "--json", "--source",
                            test::bad_kernel("skips_last_row").string()},
                           d);
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  const json b = json::parse(bad.out);
  EXPECT_EQ(b["verdict"], "FAIL");
  EXPECT_TRUE(!b.contains("pytorch") || b["pytorch"].is_null()) << b.dump(1);
  fs::remove_all(d);
}

TEST(BridgeCli, ProfileExtractVerifyOnASmallGpt2) {
  if (!have_torch()) GTEST_SKIP() << "no Python with torch (" << bridge_python() << "); run scripts/setup.sh";
  const auto d = temp_dir("pipeline");
  auto r = vladbud({"profile", "--model", models("gpt2.py"), "--class-name", "GPT2", "--model-args",
                    R"({"n_layer": 2, "n_embd": 64, "n_head": 4})", "--input-shape", "1,32",
                    "--dtype", "fp32", "--warmup", "1", "--iters", "1", "--export-trace"},
                   d);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("matmul"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Amdahl"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(d / "workspace" / "trace.json"));
  const json p = json::parse(read_file(d / "workspace" / "profile.json"));
  EXPECT_GT(p["typed_share"].get<double>(), 0.3);
  r = vladbud({"extract", "--top", "3"}, d);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Ranks follow measured time (noisy on a shared machine): look for the folders by type.
  int folders = 0, matmuls = 0;
  for (const auto& e : fs::directory_iterator(d / "workspace" / "kernels")) {
    ++folders;
    EXPECT_TRUE(fs::exists(e.path() / "problem.json")) << e.path();
    matmuls += e.path().filename().string().find("_matmul") != std::string::npos;
  }
  EXPECT_EQ(folders, 3) << r.out;
  EXPECT_GE(matmuls, 1) << r.out;
  r = vladbud({"verify", "--reps", "6", "--seeds", "0", "1"}, d);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("verify: PASS"), std::string::npos) << r.out;
  const json v = json::parse(read_file(d / "workspace" / "verify.json"));
  EXPECT_EQ(v["verdict"], "PASS");
  EXPECT_GT(v["speedup"].get<double>(), 0);
  // The request lists every extracted folder of a type with its dims for the per-shape screen
  // (no optimizer ran: no own-shape speedups).
  const json req = json::parse(read_file(d / "workspace" / ".bridge" / "verify_request.json"));
  for (const auto& k : req["kernels"]) {
    if (k["type"] != "matmul") continue;
    ASSERT_EQ(k["shapes"].size(), static_cast<size_t>(matmuls)) << k.dump();
    for (const auto& s : k["shapes"]) {
      EXPECT_TRUE(s["dims"].contains("N") && s["dims"].contains("K")) << s.dump();
      EXPECT_TRUE(s["own_shape_speedup"].is_null()) << s.dump();
    }
  }
  fs::remove_all(d);
}

}  // namespace
}  // namespace vb
