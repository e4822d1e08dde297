// The triton backend's GPU path (issue 17 step 2): Triton kernels built ahead of time into a
// C++ library (backends/triton/aot.h, kernels/include/vb_triton_aot.h) that the C++ runner's
// CUDA flavour loads like a CUDA backend library. Without a GPU, the stand-in driver
// (tests/fixtures/cuda/mock_libcuda.cpp) loads the real sm_90a cubins Triton compiles here and
// records every launch instead of running it: the tests check the launches' grid, block,
// dynamic shared memory (with the >48 KiB opt-in), stream and every parameter's binding to the
// runner's device buffers or to per-call scratch buffers, that a shape outside the library's
// table is refused with a message naming it, and that sources the table cannot reproduce (a
// buffer kept between calls, launches that change between calls, an output written by
// PyTorch code, a failing capture) are refused at build time. Whether the launched cubins compute the right values
// needs a GPU (TritonAotGpu, skipped here; bench/h200_triton.sh runs the starters there).
// Cost: ~20 s on two cores (Triton compiles: softmax 2 kernels, matmul 1, fused_mlp 2, the quick
// evaluation's softmax cases; captures of the refused fixtures).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/backend.h"
#include "backends/triton/aot.h"
#include "core/paths.h"
#include "eval/evaluator.h"
#include "kernels/kernel_type.h"
#include "runner/client.h"
#include "support.h"
#include "targets/nvidia_detect.h"

namespace vb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string why_no_triton() {
  const Backend* b = find_backend("triton");
  if (!b) return "no triton backend registered";
  // The interpreter device's answer is the toolchain probe (python with triton and torch).
  ::setenv("VB_TRITON_INTERPRET", "1", 1);
  std::string why = b->device_unavailable();
  ::unsetenv("VB_TRITON_INTERPRET");
  return why;
}

#define VB_REQUIRE_TRITON()                                  \
  do {                                                       \
    if (const std::string w = why_no_triton(); !w.empty()) { \
      GTEST_SKIP() << w;                                     \
    }                                                        \
  } while (0)

Problem problem(const std::string& type, std::map<std::string, std::int64_t> dims, DType dt) {
  return find_kernel_type(type)->make_problem(Size{"aot-test", std::move(dims), {}}, dt);
}

// VB_LIBCUDA pointing at the mock driver while alive.
class MockDriver {
 public:
  MockDriver() {
    old_ = std::getenv("VB_LIBCUDA") ? std::getenv("VB_LIBCUDA") : "";
    had_ = std::getenv("VB_LIBCUDA") != nullptr;
    ::setenv("VB_LIBCUDA", test::mock_libcuda().c_str(), 1);
  }
  ~MockDriver() {
    if (had_)
      ::setenv("VB_LIBCUDA", old_.c_str(), 1);
    else
      ::unsetenv("VB_LIBCUDA");
  }

 private:
  std::string old_;
  bool had_ = false;
};

// The mock driver's launch records ("vbmock-launch {json}" lines) in the runner's output.
std::vector<json> launches(const std::string& output) {
  std::vector<json> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("vbmock-launch ", 0) == 0) out.push_back(json::parse(line.substr(14)));
  return out;
}

// One problem's buffers in the runner's arena and a call on them.
struct Call {
  std::vector<std::size_t> in_off, out_off;
  RunnerReply reply;
  std::vector<json> launches;
  std::string output;  ///< the runner's output tail (the mock driver's vbmock-* lines)
};

// Starts the cuda runner (mock driver) on `library` and calls it once on `p`.
Call call_once(const fs::path& library, const Problem& p) {
  RunnerClient rc(runner::Flavour::Cuda);
  std::size_t total = 0;
  for (const auto& t : p.inputs) total += RunnerClient::footprint(t.nbytes());
  for (const auto& t : p.outputs) total += RunnerClient::footprint(t.nbytes());
  rc.reset_arena(total);
  Call c;
  json set = {{"in", json::array()}, {"out", json::array()}};
  for (const auto& t : p.inputs) {
    c.in_off.push_back(rc.alloc(t.nbytes()));
    set["in"].push_back({{"off", c.in_off.back()}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}});
  }
  for (const auto& t : p.outputs) {
    c.out_off.push_back(rc.alloc(t.nbytes()));
    set["out"].push_back({{"off", c.out_off.back()}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}});
  }
  const auto started = rc.start(library.string(), std::chrono::seconds(30));
  if (started.kind != RunnerReply::Kind::Ok) {
    c.reply = started;
    return c;
  }
  c.reply = rc.command({{"op", "call"}, {"sets", json::array({set})}, {"attrs", p.attrs},
                        {"warmup", 0}, {"order", {0}}, {"verify", false}},
                       std::chrono::seconds(30));
  c.output = rc.output_tail();
  c.launches = launches(c.output);
  rc.stop();
  return c;
}

// The capture triton_build.py aot left next to the library (kernels, problems).
json capture_of(const BuildResult& b) { return json::parse(read_file(b.library.parent_path() / "aot.json")); }

std::string hexv(std::uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

TEST(TritonAot, SoftmaxLaunchesBindTheRunnersDeviceBuffers) {
  VB_REQUIRE_TRITON();
  MockDriver mock;
  const Problem small = problem("softmax", {{"R", 32}, {"C", 1000}}, DType::F16);
  const Problem wide = problem("softmax", {{"R", 8}, {"C", 20000}}, DType::F32);  // two passes
  const BuildResult b = build_triton_aot(find_backend("triton")->starter_source("softmax"), {small, wide, small}, "sm_90a");
  ASSERT_TRUE(b.ok) << b.diagnostics;
  const json cap = capture_of(b);
  ASSERT_EQ(cap.at("problems").size(), 2u) << "duplicate problems are served once";
  ASSERT_EQ(cap.at("kernels").size(), 2u) << "one kernel per specialization (BLOCK, ONE_PASS, dtype)";

  for (const Problem* p : {&small, &wide}) {
    SCOPED_TRACE(p->describe());
    const Call c = call_once(b.library, *p);
    ASSERT_EQ(c.reply.kind, RunnerReply::Kind::Ok) << c.reply.message << c.reply.body.dump();
    ASSERT_EQ(c.launches.size(), 1u);
    const json& l = c.launches[0];
    const std::int64_t R = p->dim("R"), C = p->dim("C");
    const json& k = cap.at("kernels").at(p == &small ? 0 : 1);
    EXPECT_EQ(l.at("function"), k.at("entry"));
    EXPECT_EQ(l.at("grid"), json::array({R, 1, 1})) << "one program per row";
    EXPECT_EQ(l.at("block"), json::array({32 * k.at("num_warps").get<int>(), 1, 1}));
    EXPECT_EQ(k.at("num_warps"), p == &small ? 4 : 8) << "the source's warps for its BLOCK";
    EXPECT_EQ(l.at("shared"), k.at("shared_bytes"));
    EXPECT_EQ(l.at("stream"), "runner") << "launched on the stream vb_kernel_run was given";
    // x_ptr, y_ptr, C, then Triton 3.6's global_scratch and profile_scratch pointers.
    const json& prm = l.at("params");
    ASSERT_EQ(prm.size(), 5u) << l.dump();
    // The runner's device twin of its arena is its first allocation, at the arena's offsets.
    EXPECT_EQ(prm[0].value("alloc", -1), 0) << prm[0].dump();
    EXPECT_EQ(prm[0].value("offset", std::size_t{0}), c.in_off[0]);
    EXPECT_EQ(prm[1].value("alloc", -1), 0) << prm[1].dump();
    EXPECT_EQ(prm[1].value("offset", std::size_t{0}), c.out_off[0]);
    EXPECT_EQ(prm[2].at("size"), 4);
    EXPECT_EQ(prm[2].at("value"), hexv(static_cast<std::uint64_t>(C)));
    EXPECT_EQ(prm[3].at("value"), "0x0");
    EXPECT_EQ(prm[4].at("value"), "0x0");
  }
}

TEST(TritonAot, MatmulOptsInToLargeSharedMemoryAndBindsEveryStride) {
  VB_REQUIRE_TRITON();
  MockDriver mock;
  const Problem p = problem("matmul", {{"M", 256}, {"N", 192}, {"K", 128}}, DType::F16);
  const BuildResult b = build_triton_aot(find_backend("triton")->starter_source("matmul"), {p}, "sm_90a");
  ASSERT_TRUE(b.ok) << b.diagnostics;
  const json k = capture_of(b).at("kernels").at(0);
  ASSERT_GT(k.at("shared_bytes").get<int>(), 48 * 1024)
      << "this test needs a kernel above 48 KiB of dynamic shared memory (Hopper's pipelined tiles)";
  const Call c = call_once(b.library, p);
  // The mock refuses a launch above 48 KiB unless cuFuncSetAttribute opted the function in.
  ASSERT_EQ(c.reply.kind, RunnerReply::Kind::Ok) << c.reply.message << c.reply.body.dump();
  ASSERT_EQ(c.launches.size(), 1u);
  const json& l = c.launches[0];
  const auto& cx = k.at("constexprs");
  const int bm = cx.at("BLOCK_M"), bn = cx.at("BLOCK_N");
  EXPECT_EQ(l.at("grid"), json::array({((256 + bm - 1) / bm) * ((192 + bn - 1) / bn), 1, 1}));
  EXPECT_EQ(l.at("shared"), k.at("shared_bytes"));
  const json& prm = l.at("params");
  ASSERT_EQ(prm.size(), 11u) << "a, b, c, M, N, K, three strides, two scratch pointers: " << l.dump();
  EXPECT_EQ(prm[0].value("offset", std::size_t{0}), c.in_off[0]);
  EXPECT_EQ(prm[1].value("offset", std::size_t{0}), c.in_off[1]);
  EXPECT_EQ(prm[2].value("offset", std::size_t{0}), c.out_off[0]);
  const std::vector<std::uint64_t> scalars{256, 192, 128, 128, 192, 192};  // M N K lda ldb ldc
  for (std::size_t i = 0; i < scalars.size(); ++i)
    EXPECT_EQ(prm[3 + i].at("value"), hexv(scalars[i])) << "parameter " << 3 + i;
}

// fused_mlp keeps its hidden activation h[B,H] in a torch.empty temporary: the launcher
// allocates it on the stream for the call, the first kernel writes it, the second reads it.
TEST(TritonAot, ATemporaryBecomesAScratchBufferSharedByTheLaunchesOfOneCall) {
  VB_REQUIRE_TRITON();
  MockDriver mock;
  const Problem p = problem("fused_mlp", {{"B", 64}, {"D", 128}, {"H", 256}}, DType::F16);
  const BuildResult b = build_triton_aot(find_backend("triton")->starter_source("fused_mlp"), {p}, "sm_90a");
  ASSERT_TRUE(b.ok) << b.diagnostics;
  const json cap = capture_of(b);
  ASSERT_EQ(cap.at("problems").at(0).at("scratch"),
            json::parse(R"([{"bytes": 32768, "zero": false}])"))
      << "h[64,256] fp16, made by torch.empty";
  const Call c = call_once(b.library, p);
  ASSERT_EQ(c.reply.kind, RunnerReply::Kind::Ok) << c.reply.message << c.reply.body.dump();
  ASSERT_EQ(c.launches.size(), 2u);
  const json& h_written = c.launches[0].at("params").at(3);  // _gate_up(x, wg, wu, h, ...)
  const json& h_read = c.launches[1].at("params").at(0);     // _down(h, wd, y, ...)
  ASSERT_TRUE(h_written.contains("alloc")) << h_written.dump();
  EXPECT_GT(h_written.at("alloc").get<int>(), 0) << "not the runner's arena twin (allocation 0)";
  EXPECT_EQ(h_written, h_read) << "one buffer for both launches";
  EXPECT_EQ(c.launches[1].at("params").at(2).value("offset", std::size_t{0}), c.out_off[0]);
  // The default pool keeps freed scratch (release threshold = max) instead of returning it to
  // the driver at each synchronization: on an H200 a cross_entropy's per-call scratch cost
  // ~270 us a call without it (2026-12-07).
  EXPECT_NE(c.output.find(R"(vbmock-mempool {"attr": 4, "value": "0xffffffffffffffff"})"), std::string::npos)
      << c.output;
}

TEST(TritonAot, ALibraryWithoutScratchLeavesTheMemoryPoolAlone) {
  VB_REQUIRE_TRITON();
  MockDriver mock;
  const Problem p = problem("softmax", {{"R", 32}, {"C", 1000}}, DType::F16);
  const BuildResult b = build_triton_aot(find_backend("triton")->starter_source("softmax"), {p}, "sm_90a");
  ASSERT_TRUE(b.ok) << b.diagnostics;
  const Call c = call_once(b.library, p);
  ASSERT_EQ(c.reply.kind, RunnerReply::Kind::Ok) << c.reply.message << c.reply.body.dump();
  EXPECT_EQ(c.output.find("vbmock-mempool"), std::string::npos) << c.output;
}

TEST(TritonAot, AShapeOutsideTheTableIsRefusedNamingItAndTheFix) {
  VB_REQUIRE_TRITON();
  MockDriver mock;
  const Problem built = problem("softmax", {{"R", 32}, {"C", 1000}}, DType::F16);
  const BuildResult b = build_triton_aot(find_backend("triton")->starter_source("softmax"), {built}, "sm_90a");
  ASSERT_TRUE(b.ok) << b.diagnostics;
  const Call c = call_once(b.library, problem("softmax", {{"R", 16}, {"C", 1000}}, DType::F16));
  ASSERT_EQ(c.reply.kind, RunnerReply::Kind::Error) << c.reply.body.dump();
  EXPECT_TRUE(c.launches.empty());
  const std::string msg = c.reply.message + c.reply.body.dump();
  EXPECT_NE(msg.find("fp16[16,1000]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fix: build it with this problem"), std::string::npos) << msg;
}

TEST(TritonAot, SourcesATableCannotReproduceAreRefusedAtBuildTime) {
  VB_REQUIRE_TRITON();
  const Problem p = problem("softmax", {{"R", 4}, {"C", 300}}, DType::F32);
  const fs::path fx = test::repo_root() / "tests" / "fixtures" / "triton";
  const struct {
    const char* file;
    const char* says;
  } cases[] = {{"aot_keeps_buffer.py", "nor a temporary made by torch.empty/zeros during the call"},
               {"aot_keeps_state.py", "keeps state between calls"},
               {"aot_torch_writes.py", "writes output 0 with PyTorch code"},
               {"aot_capture_fails.py", "failed while capturing"}};
  for (const auto& c : cases) {
    const BuildResult b = build_triton_aot(fx / c.file, {p}, "sm_90a");
    EXPECT_FALSE(b.ok) << c.file;
    EXPECT_NE(b.diagnostics.find(c.says), std::string::npos) << c.file << ": " << b.diagnostics;
    EXPECT_NE(b.diagnostics.find(c.file), std::string::npos) << "names the source: " << b.diagnostics;
  }
  const BuildResult none = build_triton_aot(find_backend("triton")->starter_source("softmax"), {}, "sm_90a");
  EXPECT_FALSE(none.ok);
  EXPECT_NE(none.diagnostics.find("needs the problems"), std::string::npos) << none.diagnostics;
}

// The evaluator on a machine whose driver reports a GPU (the mock): the triton backend's device
// is the CUDA device, the build gets every case of the run, the C++ runner loads the library
// and launches -- and the mock runs no kernel, so the poisoned outputs fail the smoke stage.
TEST(TritonAot, TheEvaluatorBuildsForItsCasesAndRunsTheCudaRunner) {
  VB_REQUIRE_TRITON();
  MockDriver mock;
  const Backend& tb = *find_backend("triton");
  ASSERT_EQ(tb.device().runner_flavour(), runner::Flavour::Cuda) << tb.device().name();
  ASSERT_TRUE(tb.needs_build_problems());
  ASSERT_TRUE(tb.serves_torch_ops());
  EvalOptions o = test::test_options(false);
  o.quick = true;
  o.dtypes = {DType::F32};
  o.call_timeout_s = 30;
  const EvalReport r = evaluate(*find_kernel_type("softmax"), tb, tb.starter_source("softmax"), o);
  ASSERT_TRUE(r.build.ok) << r.build.diagnostics;
  EXPECT_NE(r.build.library.filename().string().find(".so"), std::string::npos);
  EXPECT_EQ(r.verdict, "FAIL") << r.guard << ": " << r.reason;
  EXPECT_EQ(r.guard, "poisoned_output") << r.reason;
  EXPECT_EQ(r.failed_stage, "smoke") << r.reason;
  // Without problems the GPU build is refused, naming the fix.
  const BuildResult bare = tb.build(tb.starter_source("softmax"));
  EXPECT_FALSE(bare.ok);
  EXPECT_NE(bare.diagnostics.find("VB_TRITON_INTERPRET=1"), std::string::npos) << bare.diagnostics;
}

// On a real GPU: the starter's cubins launched from C++ pass every stage (quick sizes, three
// dtypes) and are timed by device events.
TEST(TritonAotGpu, TheSoftmaxStarterPassesOnTheGpu) {
  VB_REQUIRE_TRITON();
  std::string why;
  if (std::getenv("VB_LIBCUDA") || detect_nvidia_gpus(&why).empty())
    GTEST_SKIP() << "needs an NVIDIA GPU (" << (why.empty() ? "VB_LIBCUDA is set" : why)
                 << "); bench/h200_triton.sh runs all nine starters there";
  const Backend& tb = *find_backend("triton");
  EvalOptions o = test::test_options(true);
  o.quick = true;
  const EvalReport r = evaluate(*find_kernel_type("softmax"), tb, tb.starter_source("softmax"), o);
  EXPECT_EQ(r.verdict, "PASS") << r.failed_stage << " [" << r.guard << "] " << r.reason;
  EXPECT_TRUE(r.timing.has_value());
}

}  // namespace
}  // namespace vb
