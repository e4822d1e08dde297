// The CPU ladder end to end: a kernel under qemu-aarch64 passing the evaluator (rung 2), x86
// intrinsics rejected at rung 0 for Arm with the reason, a loop that does not vectorize for SVE
// shown at rung 1, bad input to `vladbud rank` refused, and the ranking variants passing the
// evaluator natively here (quick mode).
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/backend.h"
#include "core/paths.h"
#include "core/process.h"
#include "eval/evaluator.h"
#include "ladder/cpu.h"
#include "ladder/rank.h"
#include "support.h"

namespace vb::ladder {
namespace {

namespace fs = std::filesystem;

bool have_tools() { return have_program("clang++-19") && have_program("llvm-mca-19"); }
fs::path fixture(const std::string& n) { return vladbud_home() / "tests" / "fixtures" / "ladder" / n; }

const RungEvidence* rung(const ClimbResult& r, int n) {
  for (const auto& e : r.evidence)
    if (e.rung == n) return &e;
  return nullptr;
}

TEST(LadderCpu, KernelUnderQemuAarch64PassesTheEvaluator) {
  if (!have_tools() || !have_program("qemu-aarch64") || !have_program("aarch64-linux-gnu-g++"))
    GTEST_SKIP() << "clang-19/llvm-19/qemu-user/g++-aarch64-linux-gnu not installed (scripts/setup.sh)";
  const TargetSpec t = resolve_target("neoverse-v2");
  ClimbOptions o;
  o.quick = true;
  o.max_rung = 3;
  Variant v{"unroll", require_backend("cpu").variants_dir("reduce") / "unroll.cpp", "cpu", ""};
  const auto inst = instantiate_variants({v}, t, fs::temp_directory_path() / "vb-ladder-qemu");
  auto r = cpu_climber().climb(*find_kernel_type("reduce"), inst[0], t, o);
  const auto* e2 = rung(r, 2);
  ASSERT_NE(e2, nullptr) << r.to_json().dump(2);
  EXPECT_EQ(e2->status, "pass") << e2->summary;
  EXPECT_NE(e2->tool.find("qemu-aarch64 -cpu max,sve=on"), std::string::npos) << e2->tool;
  EXPECT_FALSE(e2->tool_version.empty());
  EXPECT_EQ(r.highest_rung, 3);
  ASSERT_TRUE(r.estimate);
  EXPECT_LT(r.estimate->low_us, r.estimate->time_us + 1e-9);
  EXPECT_GT(r.estimate->high_us, r.estimate->time_us - 1e-9);
  EXPECT_EQ(r.confidence, "emulated+analytical");
  // Rung 1 ran llvm-mca on the hot loop for the target's -mcpu.
  const auto* e1 = rung(r, 1);
  ASSERT_NE(e1, nullptr);
  EXPECT_TRUE(e1->data.contains("mca")) << e1->data.dump(2);
  EXPECT_NE(e1->tool_version.find("19"), std::string::npos);
}

TEST(LadderCpu, X86IntrinsicsAreRejectedAtRungZeroForArm) {
  if (!have_tools()) GTEST_SKIP() << "clang-19/llvm-19 not installed (scripts/setup.sh)";
  const TargetSpec t = resolve_target("neoverse-v2");
  ClimbOptions o;
  o.max_rung = 1;
  const auto* kt = find_kernel_type("reduce");
  auto r = cpu_climber().climb(*kt, {"x86", fixture("x86_intrinsics_reduce.cpp"), "cpu", ""}, t, o);
  EXPECT_TRUE(r.rejected);
  ASSERT_EQ(r.evidence.size(), 1u);
  EXPECT_EQ(r.evidence[0].rung, 0);
  EXPECT_EQ(r.evidence[0].status, "reject");
  EXPECT_NE(r.stop_reason.find("x86 intrinsics"), std::string::npos) << r.stop_reason;
  // Guarded include, unguarded use: the cross-compile fails and the reason says why.
  auto g = cpu_climber().climb(*kt, {"x86g", fixture("x86_intrinsics_guarded_include.cpp"), "cpu", ""},
                               t, o);
  EXPECT_TRUE(g.rejected);
  EXPECT_NE(g.stop_reason.find("uses x86 intrinsics"), std::string::npos) << g.stop_reason;
  // The same source is fine for an AVX-512 target.
  auto x = cpu_climber().climb(*kt, {"x86", fixture("x86_intrinsics_reduce.cpp"), "cpu", ""},
                               resolve_target("sapphirerapids"), o);
  EXPECT_FALSE(x.rejected) << x.stop_reason;
}

TEST(LadderCpu, LoopThatDoesNotVectorizeForSveShowsAtRungOne) {
  if (!have_tools()) GTEST_SKIP() << "clang-19/llvm-19 not installed (scripts/setup.sh)";
  ClimbOptions o;
  o.max_rung = 1;
  const auto* kt = find_kernel_type("reduce");
  auto r = cpu_climber().climb(*kt, {"novec", fixture("novec_reduce.cpp"), "cpu", ""},
                               resolve_target("neoverse-v2"), o);
  const auto* e1 = rung(r, 1);
  ASSERT_NE(e1, nullptr) << r.to_json().dump(2);
  EXPECT_FALSE(e1->data["vectorized"].get<bool>());
  EXPECT_NE(e1->summary.find("NOT vectorized"), std::string::npos) << e1->summary;
  // The compiler-vectorized variant does vectorize for SVE (scalable width).
  auto s = cpu_climber().climb(*kt, {"simd", require_backend("cpu").variants_dir("reduce") / "simd.cpp", "cpu", ""},
                               resolve_target("neoverse-v2"), o);
  EXPECT_TRUE(rung(s, 1)->data["vectorized"].get<bool>()) << rung(s, 1)->summary;
}

ProcessResult vladbud(std::vector<std::string> args) {
  args.insert(args.begin(), vb::test::binary_dir() + "/vladbud");
  return run_process(args, std::chrono::minutes(5));
}

TEST(LadderCpu, RankRefusesBadInputWithAClearMessage) {
  auto a = vladbud({"rank", "softmax", "--targets", "no-such-cpu"});
  EXPECT_EQ(a.exit_code, 2);
  EXPECT_NE(a.err.find("unknown target 'no-such-cpu'"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("neoverse-v2"), std::string::npos) << a.err;  // lists the known ones
  auto b = vladbud({"rank", "softmaxx", "--targets", "neoverse-v2"});
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.err.find("unknown kernel type 'softmaxx'"), std::string::npos) << b.err;
  const fs::path empty = fs::temp_directory_path() / ("vb-empty-variants-" + std::to_string(::getpid()));
  fs::create_directories(empty);
  auto c = vladbud({"rank", "softmax", "--targets", "neoverse-v2", "--variants", empty.string()});
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("holds no .cpp or .cu variant"), std::string::npos) << c.err;
  auto d = vladbud({"rank", "softmax", "--targets", "neoverse-v2", "--variants", "/nonexistent/dir"});
  EXPECT_EQ(d.exit_code, 2);
  EXPECT_NE(d.err.find("does not exist"), std::string::npos) << d.err;
}

/// Quick correctness stages (no timing) for every variant in kernels/variants/cpu/<type>/ of each
/// type, in `dtypes`; each failure names the variant, the stage and the reason.
void expect_variants_pass(std::initializer_list<const char*> types, std::vector<DType> dtypes) {
  for (const char* type : types) {
    const auto* kt = find_kernel_type(type);
    ASSERT_NE(kt, nullptr) << type;
    const auto variants = default_variants(type);
    EXPECT_GE(variants.size(), 4u) << type << ": issue 4 asks for at least four variants per type";
    for (const auto& v : variants) {
      EvalOptions o;
      o.quick = true;
      o.timing = false;
      o.dtypes = dtypes;
      auto rep = evaluate(*kt, *find_backend("cpu"), v.source, o);
      EXPECT_EQ(rep.verdict, "PASS") << type << "/" << v.name << ": " << rep.failed_stage << " "
                                     << rep.reason;
    }
  }
}

TEST(LadderCpu, RankingVariantsPassTheEvaluatorHere) {
  // Every variant of the four study types, quick mode, correctness only (fp16, bf16, fp32).
  expect_variants_pass({"softmax", "rmsnorm", "reduce", "matmul"},
                       {DType::F16, DType::BF16, DType::F32});
}

TEST(LadderCpu, VariantsOfTheOtherFiveTypesPassTheEvaluatorHere) {
  // The variants of the remaining five types, quick mode, correctness only (fp16, bf16, fp32).
  expect_variants_pass({"layernorm", "flash_attention", "fused_mlp", "cross_entropy",
                        "rotary_embedding"},
                       {DType::F16, DType::BF16, DType::F32});
}

}  // namespace
}  // namespace vb::ladder
