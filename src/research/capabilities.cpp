#include "research/capabilities.h"
#include "core/util.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <map>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "core/paths.h"
#include "core/process.h"
#include "targets/cpu_info.h"

namespace vb {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// ---- the probes ----------------------------------------------------------------------------

// PTX bodies: registers are zeroed so ptxas sees defined operands.
const char* kPtxMmaBf16 = R"(
  .reg .b32 a<4>, b<2>;
  .reg .f32 d<4>;
  mov.b32 a0, 0; mov.b32 a1, 0; mov.b32 a2, 0; mov.b32 a3, 0; mov.b32 b0, 0; mov.b32 b1, 0;
  mov.f32 d0, 0f00000000; mov.f32 d1, 0f00000000; mov.f32 d2, 0f00000000; mov.f32 d3, 0f00000000;
  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0,d1,d2,d3}, {a0,a1,a2,a3}, {b0,b1}, {d0,d1,d2,d3};
)";

const char* kPtxCpAsync = R"(
  .shared .align 16 .b8 buf[64];
  .reg .b64 g;
  .reg .b32 s;
  ld.param.u64 g, [p];
  mov.u32 s, buf;
  cp.async.cg.shared.global [s], [g], 16;
  cp.async.commit_group;
  cp.async.wait_group 0;
)";

const char* kPtxMmaFp8 = R"(
  .reg .b32 a<4>, b<2>;
  .reg .f32 d<4>;
  mov.b32 a0, 0; mov.b32 a1, 0; mov.b32 a2, 0; mov.b32 a3, 0; mov.b32 b0, 0; mov.b32 b1, 0;
  mov.f32 d0, 0f00000000; mov.f32 d1, 0f00000000; mov.f32 d2, 0f00000000; mov.f32 d3, 0f00000000;
  mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {d0,d1,d2,d3}, {a0,a1,a2,a3}, {b0,b1}, {d0,d1,d2,d3};
)";

const char* kPtxTma = R"(
  .shared .align 128 .b8 buf[1024];
  .shared .align 8 .b64 bar;
  .reg .b64 tmap;
  .reg .b32 s, m, x, y;
  ld.param.u64 tmap, [p];
  mov.u32 s, buf; mov.u32 m, bar; mov.u32 x, 0; mov.u32 y, 0;
  cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [s], [tmap, {x, y}], [m];
)";

const char* kPtxWgmma = R"(
  .reg .f32 d<4>;
  .reg .b64 da, db;
  mov.b64 da, 0; mov.b64 db, 0;
  mov.f32 d0, 0f00000000; mov.f32 d1, 0f00000000; mov.f32 d2, 0f00000000; mov.f32 d3, 0f00000000;
  wgmma.fence.sync.aligned;
  wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {d0, d1, d2, d3}, da, db, 1, 1, 1, 0, 0;
  wgmma.commit_group.sync.aligned;
  wgmma.wait_group.sync.aligned 0;
)";

const char* kPtxSetmaxnreg = R"(
  setmaxnreg.inc.sync.aligned.u32 240;
)";

const char* kPtxTcgen05 = R"(
  .shared .align 16 .b32 slot;
  .reg .b32 sa, taddr, idesc;
  .reg .b64 adesc, bdesc;
  .reg .pred acc;
  mov.u32 sa, slot;
  tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [sa], 32;
  mov.u32 taddr, 0; mov.u32 idesc, 0; mov.b64 adesc, 0; mov.b64 bdesc, 0;
  setp.ne.u32 acc, taddr, 0;
  tcgen05.mma.cta_group::1.kind::f16 [taddr], adesc, bdesc, idesc, acc;
  tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
)";

const char* kPtxBlockScale = R"(
  .reg .b32 a<4>, b<2>, sa, sb;
  .reg .f32 d<4>;
  mov.b32 a0, 0; mov.b32 a1, 0; mov.b32 a2, 0; mov.b32 a3, 0; mov.b32 b0, 0; mov.b32 b1, 0;
  mov.b32 sa, 0; mov.b32 sb, 0;
  mov.f32 d0, 0f00000000; mov.f32 d1, 0f00000000; mov.f32 d2, 0f00000000; mov.f32 d3, 0f00000000;
  mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0 {d0,d1,d2,d3}, {a0,a1,a2,a3}, {b0,b1}, {d0,d1,d2,d3}, sa, {0, 0}, sb, {0, 0};
)";

// C/C++ translation units: the target's predefined feature macro decides "rejected"; the
// intrinsic then proves the compiler can emit the instruction.
std::string guarded(const std::string& cond, const std::string& what, const std::string& include,
                    const std::string& body) {
  return fmt::format(
      "#if !({0})\n#error VB_PROBE_REJECT: {1} is not enabled for this target\n#else\n"
      "#include <{2}>\n{3}\n#endif\n",
      cond, what, include, body);
}

std::string amd_builtin(const std::string& builtin, const std::string& body) {
  return fmt::format(
      "#if !__has_builtin({0})\n#error VB_PROBE_UNKNOWN: this clang does not know {0}\n#endif\n"
      "{1}\n",
      builtin, body);
}

std::vector<CapabilityProbe> make_probes() {
  std::vector<CapabilityProbe> v;
  auto ptx = [&](std::string id, std::string feature, std::string family, const char* body,
                 std::string control, std::string min_ptx) {
    v.push_back({std::move(id), ProbeIsa::kNvptx, std::move(feature), std::move(family), body,
                 std::move(control), std::move(min_ptx)});
  };
  ptx("mma_sync_bf16", "mma.sync m16n8k16 bf16 -> fp32 (warp-level tensor-core MMA, sm_80+)",
      "mma.sync", kPtxMmaBf16, "sm_80", "7.0");
  ptx("cp_async", "cp.async 16-byte global->shared copy (LDGSTS, sm_80+)", "", kPtxCpAsync, "sm_80",
      "7.0");
  ptx("mma_sync_fp8", "mma.sync m16n8k32 e4m3 -> fp32 (fp8 tensor-core MMA, sm_89+)",
      "mma.sync fp8", kPtxMmaFp8, "sm_89", "8.4");
  ptx("cp_async_bulk_tensor", "cp.async.bulk.tensor 2-D (TMA bulk tensor copy, sm_90+)", "",
      kPtxTma, "sm_90", "8.0");
  ptx("wgmma", "wgmma.mma_async m64n8k16 bf16 (warpgroup MMA, sm_90a)", "wgmma", kPtxWgmma,
      "sm_90a", "8.0");
  ptx("setmaxnreg", "setmaxnreg (warpgroup register reallocation, sm_90a)", "", kPtxSetmaxnreg,
      "sm_90a", "8.0");
  ptx("tcgen05", "tcgen05.alloc + tcgen05.mma kind::f16 (5th-gen tensor cores, tensor memory)",
      "tcgen05", kPtxTcgen05, "sm_100a", "8.6");
  ptx("mma_block_scale",
      "mma.sync m16n8k32 kind::mxf8f6f4 block_scale (block-scaled fp8/fp6/fp4 MMA)",
      "mma.sync block_scale", kPtxBlockScale, "sm_120a", "8.7");

  auto cxx = [&](std::string id, ProbeIsa isa, std::string feature, std::string family,
                 std::string src, std::string control) {
    v.push_back({std::move(id), isa, std::move(feature), std::move(family), std::move(src),
                 std::move(control), ""});
  };
  const auto x86 = ProbeIsa::kX86;
  cxx("avx2_fma", x86, "AVX2 + FMA3 (256-bit vfmadd231ps)", "",
      guarded("defined(__AVX2__) && defined(__FMA__)", "AVX2/FMA", "immintrin.h",
              "__m256 vb_probe(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }"),
      "-mavx2 -mfma");
  cxx("avx512f", x86, "AVX-512F (512-bit vfmadd231ps)", "",
      guarded("defined(__AVX512F__)", "AVX-512F", "immintrin.h",
              "__m512 vb_probe(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }"),
      "-mavx512f");
  cxx("avx512_bf16", x86, "AVX-512 BF16 (vdpbf16ps)", "AVX512-BF16 dot product",
      guarded("defined(__AVX512BF16__)", "AVX-512 BF16", "immintrin.h",
              "__m512 vb_probe(__m512 a, __m512bh b, __m512bh c) {\n"
              "  return _mm512_dpbf16_ps(a, b, c);\n}"),
      "-mavx512f -mavx512bf16");
  cxx("avx512_fp16", x86, "AVX-512 FP16 (vfmadd231ph)", "",
      guarded("defined(__AVX512FP16__)", "AVX-512 FP16", "immintrin.h",
              "__m512h vb_probe(__m512h a, __m512h b, __m512h c) {\n"
              "  return _mm512_fmadd_ph(a, b, c);\n}"),
      "-mavx512f -mavx512fp16");
  cxx("amx_bf16", x86, "AMX-BF16 tile matrix multiply (tdpbf16ps)", "AMX",
      guarded("defined(__AMX_TILE__) && defined(__AMX_BF16__)", "AMX-TILE/AMX-BF16", "immintrin.h",
              "void vb_probe() { _tile_dpbf16ps(0, 1, 2); }"),
      "-mamx-tile -mamx-bf16");

  const auto a64 = ProbeIsa::kAarch64;
  cxx("neon_fma", a64, "Advanced SIMD (NEON) fp32 FMA (128-bit fmla)", "",
      guarded("defined(__ARM_NEON)", "Advanced SIMD", "arm_neon.h",
              "float32x4_t vb_probe(float32x4_t a, float32x4_t b, float32x4_t c) {\n"
              "  return vfmaq_f32(a, b, c);\n}"),
      "-march=armv8-a");
  cxx("neon_fp16", a64, "Advanced SIMD fp16 arithmetic (fmla .8h)", "",
      guarded("defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)", "FP16 vector arithmetic",
              "arm_neon.h",
              "float16x8_t vb_probe(float16x8_t a, float16x8_t b, float16x8_t c) {\n"
              "  return vfmaq_f16(a, b, c);\n}"),
      "-march=armv8.2-a+fp16");
  cxx("bf16_mmla", a64, "BF16 matrix multiply-accumulate (bfmmla)", "BFMMLA",
      guarded("defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)", "BF16", "arm_neon.h",
              "float32x4_t vb_probe(float32x4_t a, bfloat16x8_t b, bfloat16x8_t c) {\n"
              "  return vbfmmlaq_f32(a, b, c);\n}"),
      "-march=armv8.6-a+bf16");
  cxx("i8mm", a64, "Int8 matrix multiply (smmla)", "SMMLA",
      guarded("defined(__ARM_FEATURE_MATMUL_INT8)", "I8MM", "arm_neon.h",
              "int32x4_t vb_probe(int32x4_t a, int8x16_t b, int8x16_t c) {\n"
              "  return vmmlaq_s32(a, b, c);\n}"),
      "-march=armv8.6-a+i8mm");
  cxx("sve", a64, "SVE (scalable vector fmla)", "",
      guarded("defined(__ARM_FEATURE_SVE)", "SVE", "arm_sve.h",
              "svfloat32_t vb_probe(svfloat32_t a, svfloat32_t b, svfloat32_t c) {\n"
              "  return svmla_f32_x(svptrue_b32(), a, b, c);\n}"),
      "-march=armv8.2-a+sve");
  cxx("sve2", a64, "SVE2 (svaba: absolute-difference accumulate)", "",
      guarded("defined(__ARM_FEATURE_SVE2)", "SVE2", "arm_sve.h",
              "svint32_t vb_probe(svint32_t a, svint32_t b, svint32_t c) {\n"
              "  return svaba_s32(a, b, c);\n}"),
      "-march=armv9-a+sve2");

  const auto amd = ProbeIsa::kAmdgcn;
  cxx("mfma_bf16", amd, "MFMA 32x32x8 bf16 -> fp32 (v_mfma_f32_32x32x8bf16_1k, CDNA2+)", "MFMA",
      amd_builtin("__builtin_amdgcn_mfma_f32_32x32x8bf16_1k",
                  "typedef float v16f __attribute__((ext_vector_type(16)));\n"
                  "typedef short v4s __attribute__((ext_vector_type(4)));\n"
                  "v16f vb_probe(v4s a, v4s b, v16f c) {\n"
                  "  return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, 0, 0, 0);\n}"),
      "gfx90a");
  cxx("mfma_f64", amd, "MFMA 16x16x4 fp64 (v_mfma_f64_16x16x4f64, CDNA2+)", "MFMA fp64",
      amd_builtin("__builtin_amdgcn_mfma_f64_16x16x4f64",
                  "typedef double v4d __attribute__((ext_vector_type(4)));\n"
                  "v4d vb_probe(double a, double b, v4d c) {\n"
                  "  return __builtin_amdgcn_mfma_f64_16x16x4f64(a, b, c, 0, 0, 0);\n}"),
      "gfx90a");
  cxx("mfma_fp8", amd, "MFMA 32x32x16 fp8 -> fp32 (v_mfma_f32_32x32x16_fp8_fp8, CDNA3+)",
      "MFMA fp8",
      amd_builtin("__builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8",
                  "typedef float v16f __attribute__((ext_vector_type(16)));\n"
                  "v16f vb_probe(long a, long b, v16f c) {\n"
                  "  return __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a, b, c, 0, 0, 0);\n}"),
      "gfx942");
  return v;
}

// ---- tools ---------------------------------------------------------------------------------

struct Tool {
  std::string exe;                ///< program to run
  std::vector<std::string> args;  ///< leading arguments (e.g. --target=...)
  bool gcc = false;               ///< GCC driver (accepts GCC's CPU aliases)
  std::string version;            ///< first line of --version
  /// "g++ (Debian 12.2.0-14) 12.2.0": the version line, prefixed by the program when that line
  /// does not start with its name.
  std::string label() const {
    if (version.empty()) return exe;
    const std::string base = fs::path(exe).filename().string();
    return version.rfind(base, 0) == 0 ? version : exe + " (" + version + ")";
  }
};

std::string first_line(const std::string& s) {
  const auto eol = s.find('\n');
  return s.substr(0, eol);
}

std::string tool_version(const std::string& exe) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(exe); it != cache.end()) return it->second;
  std::string v;
  try {
    const ProcessResult r = run_process({exe, "--version"}, std::chrono::seconds(30));
    const std::string text = r.out.empty() ? r.err : r.out;
    const auto rel = text.find("release");  // ptxas/nvcc: "Cuda compilation tools, release ..."
    if (rel != std::string::npos) {
      const auto bol = text.rfind('\n', rel);
      v = first_line(text.substr(bol == std::string::npos ? 0 : bol + 1));
    } else {
      v = first_line(text);
    }
  } catch (const std::exception&) {
    v = "unknown version";
  }
  cache[exe] = v;
  return v;
}

std::string host_arch() {
  struct utsname u {};
  return ::uname(&u) == 0 ? std::string(u.machine) : std::string("unknown");
}

const char* kClangVersions[] = {"-19", "-18", "-17", "-16", "-15", ""};

// Installed compilers for `isa`, best first (GCC, then the newest clang). Also returns the
// name of the primary tool for "not installed" messages.
std::vector<Tool> cxx_tools(ProbeIsa isa, std::string* primary) {
  std::vector<Tool> tools;
  const std::string host = host_arch();
  auto add = [&](const std::string& exe, std::vector<std::string> args, bool gcc) {
    if (!have_program(exe)) return;
    Tool t{exe, std::move(args), gcc, tool_version(exe)};
    for (const auto& o : tools)
      if (o.version == t.version && o.args == t.args && o.gcc == t.gcc) return;  // same tool
    tools.push_back(std::move(t));
  };
  if (isa == ProbeIsa::kX86 || isa == ProbeIsa::kAarch64) {
    const bool native = (isa == ProbeIsa::kX86) == (host == "x86_64") &&
                        (isa == ProbeIsa::kAarch64) == (host == "aarch64");
    const std::string triple = isa == ProbeIsa::kX86 ? "x86_64-linux-gnu" : "aarch64-linux-gnu";
    const std::string gxx = native ? "g++" : triple + "-g++";
    *primary = gxx;
    add(gxx, {}, true);
    for (const char* suf : kClangVersions) {
      std::vector<std::string> args;
      if (!native) args.push_back("--target=" + triple);
      add(std::string("clang++") + suf, args, false);
    }
  } else if (isa == ProbeIsa::kAmdgcn) {
    *primary = "clang (with the AMDGPU target)";
    for (const char* suf : kClangVersions)
      add(std::string("clang") + suf, {"--target=amdgcn-amd-amdhsa", "-nogpulib"}, false);
  }
  return tools;
}

std::string find_ptxas() {
  if (const char* e = std::getenv("VB_PTXAS"); e && *e) return have_program(e) ? e : "";
  if (have_program("ptxas")) return "ptxas";
  if (have_program("/usr/local/cuda/bin/ptxas")) return "/usr/local/cuda/bin/ptxas";
  return "";
}

// ---- helpers -------------------------------------------------------------------------------

bool contains(const std::string& s, std::string_view needle) {
  return s.find(needle) != std::string::npos;
}

// The first line of `text` containing `needle` (trimmed), or the first non-empty line.
std::string line_with(const std::string& text, std::string_view needle) {
  std::size_t start = 0;
  std::string first;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (first.empty() && !line.empty()) first = line;
    if (!needle.empty() && contains(line, needle)) return line;
    start = end + 1;
  }
  return first;
}

std::string head(const std::string& s, std::size_t n = 600) {
  return s.size() <= n ? s : s.substr(0, n) + "...";
}

std::string join(const std::vector<std::string>& v, const std::string& sep = " ") {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : sep) + a;
  return s;
}

// A fresh temporary directory, removed on destruction.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "vb-cap-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed in " + tmpl);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

struct Compile {
  ProcessResult r;
  std::string command;  ///< as shown to the user (file names relative to the temp dir)
  std::string output() const { return r.err + r.out; }
};

Compile compile_in(const TempDir& dir, const std::string& file, const std::string& text,
                   std::vector<std::string> argv) {
  write_file_atomic(dir.path / file, text);
  Compile c;
  c.command = join(argv);
  c.r = run_process(argv, std::chrono::seconds(60), dir.path);
  return c;
}

// ---- PTX -----------------------------------------------------------------------------------

// Highest PTX ISA version the installed ptxas accepts ("9.0" for CUDA 13.0), from its reply to
// an impossible version; "" when it cannot be told.
std::string ptxas_max_ptx(const std::string& ptxas) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = ptxas + "|" + tool_version(ptxas);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  std::string v;
  try {
    TempDir dir;
    const Compile c =
        compile_in(dir, "v.ptx",
                   ".version 99.9\n.target sm_80\n.address_size 64\n.visible .entry k() { ret; }\n",
                   {ptxas, "-arch=sm_80", "v.ptx", "-o", "v.cubin"});
    const std::string out = c.output();
    const auto pos = out.find("current version is '");
    if (pos != std::string::npos) {
      const auto b = pos + 20, e = out.find('\'', b);
      if (e != std::string::npos) v = out.substr(b, e - b);
    }
  } catch (const std::exception&) {
  }
  cache[key] = v;
  return v;
}

double version_number(const std::string& v) {
  return v.empty() ? 0.0 : std::atof(v.c_str());
}

CapabilityResult base_result(const CapabilityProbe& p, const std::string& arch) {
  CapabilityResult r;
  r.probe = p.id;
  r.isa = probe_isa_name(p.isa);
  r.arch = arch;
  r.feature = p.feature;
  r.matrix_family = p.matrix_family;
  r.checked_at = utc_now_iso8601();
  return r;
}

enum class PtxVerdict { kAccepted, kRejected, kUnknownTarget, kUnsupportedVersion, kError };

PtxVerdict classify_ptx(const Compile& c) {
  const std::string out = c.output();
  if (c.r.ok()) return PtxVerdict::kAccepted;
  if (contains(out, "is not defined for option 'gpu-name'") || contains(out, "Unknown .target") ||
      contains(out, "Unsupported .target") || contains(out, "does not support .target"))
    return PtxVerdict::kUnknownTarget;
  if (contains(out, "Unsupported .version")) return PtxVerdict::kUnsupportedVersion;
  if (contains(out, "not supported on .target") || contains(out, "requires .target"))
    return PtxVerdict::kRejected;
  return PtxVerdict::kError;
}

CapabilityResult run_ptx(const CapabilityProbe& p, const std::string& arch,
                         const std::string& ptxas) {
  CapabilityResult r = base_result(p, arch);
  const std::string ver = tool_version(ptxas);
  r.tool = "ptxas (" + ver + ")";
  const std::string ptx = ptxas_max_ptx(ptxas);
  if (ptx.empty()) {
    r.status = CapStatus::kError;
    r.reason = "cannot tell which PTX ISA versions " + ptxas + " accepts";
    return r;
  }
  if (version_number(ptx) + 1e-9 < version_number(p.min_ptx)) {
    r.status = CapStatus::kUnavailable;
    r.reason = fmt::format("unavailable: ptxas ({}) supports PTX ISA up to {}; {} needs {}", ver,
                           ptx, p.id, p.min_ptx);
    return r;
  }
  auto assemble = [&](const std::string& target) {
    TempDir dir;
    const std::string text = fmt::format(
        ".version {}\n.target {}\n.address_size 64\n\n.visible .entry vb_probe(.param .u64 p)\n"
        "{{\n{}  ret;\n}}\n",
        ptx, target, p.source);
    return compile_in(dir, "probe.ptx", text,
                      {ptxas, "-arch=" + target, "probe.ptx", "-o", "probe.cubin"});
  };
  const Compile c = assemble(arch);
  r.command = c.command + fmt::format("   # probe.ptx: .version {} .target {}", ptx, arch);
  switch (classify_ptx(c)) {
    case PtxVerdict::kAccepted:
      r.status = CapStatus::kAccepted;
      r.reason = "assembled";
      return r;
    case PtxVerdict::kUnknownTarget:
      r.status = CapStatus::kUnavailable;
      r.reason = fmt::format("unavailable: ptxas ({}) does not know {}: {}", ver, arch,
                             line_with(c.output(), arch));
      return r;
    case PtxVerdict::kUnsupportedVersion:
      r.status = CapStatus::kUnavailable;
      r.reason = "unavailable: " + line_with(c.output(), "version");
      return r;
    case PtxVerdict::kError:
      r.status = CapStatus::kError;
      r.reason = head(c.output());
      return r;
    case PtxVerdict::kRejected:
      break;
  }
  // Rejected for `arch`: a control assembly proves this ptxas knows the feature at all.
  const Compile ctl = assemble(p.control);
  if (classify_ptx(ctl) != PtxVerdict::kAccepted) {
    r.status = CapStatus::kUnavailable;
    r.reason = fmt::format(
        "unavailable: ptxas ({}) rejects {} for {}, but also for {} where it exists (control): "
        "this ptxas does not support it",
        ver, p.id, arch, p.control);
    r.note = head(ctl.output(), 300);
    return r;
  }
  r.status = CapStatus::kRejected;
  r.reason = line_with(c.output(), "not supported on .target");
  if (!contains(r.reason, "not supported")) r.reason = line_with(c.output(), "requires .target");
  r.note = "control: accepted for " + p.control;
  return r;
}

// ---- C/C++ ---------------------------------------------------------------------------------

bool unknown_arch(const std::string& out) {
  return (contains(out, "bad value") && contains(out, "-march")) ||
         (contains(out, "unknown value") && contains(out, "-mcpu")) ||
         contains(out, "unknown target CPU") || contains(out, "invalid target ID") ||
         contains(out, "does not support '-mcpu") || contains(out, "does not support '-march") ||
         contains(out, "unsupported argument") ||
         (contains(out, "unknown") && contains(out, "processor"));
}

// Names GCC releases gave a CPU before its marketing name (GCC 12 knows Neoverse V2, CPU part
// 0xd4f, only as "demeter"; GCC 13 renamed it).
std::vector<std::string> gcc_aliases(const std::string& arch) {
  if (arch == "neoverse-v2") return {"demeter"};
  if (arch == "neoverse-v1") return {"zeus"};
  return {};
}

std::vector<std::string> arch_flags(ProbeIsa isa, const std::string& name) {
  if (isa == ProbeIsa::kX86) return {"-march=" + name};
  return {"-mcpu=" + name};
}

CapabilityResult run_cxx(const CapabilityProbe& p, const std::string& arch,
                         const std::vector<Tool>& tools) {
  CapabilityResult r = base_result(p, arch);
  const bool is_c = p.isa == ProbeIsa::kAmdgcn;
  const std::string file = is_c ? "probe.c" : "probe.cpp";
  auto compile = [&](const Tool& t, const std::vector<std::string>& flags) {
    TempDir dir;
    std::vector<std::string> argv{t.exe};
    argv.insert(argv.end(), t.args.begin(), t.args.end());
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-O2", "-x", is_c ? "c" : "c++", "-c", file, "-o", "probe.o"});
    return compile_in(dir, file, p.source, argv);
  };
  std::vector<std::string> unknown_by;
  for (const Tool& t : tools) {
    std::vector<std::string> names{arch};
    if (t.gcc)
      for (const auto& a : gcc_aliases(arch)) names.push_back(a);
    for (const std::string& name : names) {
      const Compile c = compile(t, arch_flags(p.isa, name));
      const std::string out = c.output();
      if (!c.r.ok() && unknown_arch(out)) continue;
      r.tool = t.label();
      r.command = c.command;
      if (name != arch) r.note = fmt::format("{} knows {} as '{}'", t.exe, arch, name);
      if (c.r.ok()) {
        r.status = CapStatus::kAccepted;
        r.reason = "compiled";
        return r;
      }
      if (contains(out, "VB_PROBE_UNKNOWN")) {
        r.status = CapStatus::kUnavailable;
        r.reason = "unavailable: " + line_with(out, "VB_PROBE_UNKNOWN");
        return r;
      }
      const bool rejected = contains(out, "VB_PROBE_REJECT") ||
                            (is_c && (contains(out, "needs target feature") ||
                                      contains(out, "not supported on this GPU") ||
                                      contains(out, "Cannot select: intrinsic")));
      if (!rejected) {
        r.status = CapStatus::kError;
        r.reason = head(out);
        return r;
      }
      // Control: the same compiler with the feature switched on must accept it.
      std::vector<std::string> ctl_flags;
      if (p.isa == ProbeIsa::kAmdgcn) {
        ctl_flags = {"-mcpu=" + p.control};
      } else {
        std::string f;
        for (char ch : p.control + " ") {
          if (ch == ' ') {
            if (!f.empty()) ctl_flags.push_back(f);
            f.clear();
          } else {
            f += ch;
          }
        }
      }
      const Compile ctl = compile(t, ctl_flags);
      if (!ctl.r.ok()) {
        r.status = CapStatus::kUnavailable;
        r.reason = fmt::format(
            "unavailable: {} does not compile {} even with {} (control), so its refusal for {} "
            "says nothing",
            t.label(), p.id, join(ctl_flags), arch);
        r.note = head(ctl.output(), 300);
        return r;
      }
      r.status = CapStatus::kRejected;
      std::string why = line_with(out, "VB_PROBE_REJECT");
      if (!contains(why, "VB_PROBE_REJECT"))
        why = line_with(
            out, contains(out, "needs target feature") ? "needs target feature" : "not supported");
      r.reason = why;
      r.note += (r.note.empty() ? "" : "; ") + ("control: accepted with " + join(ctl_flags));
      return r;
    }
    unknown_by.push_back(t.label());
  }
  r.status = CapStatus::kUnavailable;
  r.tool = join(unknown_by, "; ");
  const std::string flag = p.isa == ProbeIsa::kX86 ? "-march=" : "-mcpu=";
  r.reason = fmt::format("unavailable: {} {} not know {}{}", join(unknown_by, " and "),
                         unknown_by.size() == 1 ? "does" : "do", flag, arch);
  return r;
}

bool cacheable(const CapabilityResult& r) {
  return r.status != CapStatus::kError;
}

std::string safe_name(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
  return s;
}

}  // namespace

std::string probe_isa_name(ProbeIsa isa) {
  switch (isa) {
    case ProbeIsa::kNvptx:
      return "nvptx";
    case ProbeIsa::kX86:
      return "x86";
    case ProbeIsa::kAarch64:
      return "aarch64";
    case ProbeIsa::kAmdgcn:
      return "amdgcn";
  }
  return "unknown";
}

std::string cap_status_name(CapStatus s) {
  switch (s) {
    case CapStatus::kAccepted:
      return "accepted";
    case CapStatus::kRejected:
      return "rejected";
    case CapStatus::kUnavailable:
      return "unavailable";
    case CapStatus::kError:
      return "error";
  }
  return "error";
}

void to_json(json& j, const CapabilityResult& r) {
  j = json{{"probe", r.probe},
           {"isa", r.isa},
           {"arch", r.arch},
           {"feature", r.feature},
           {"matrix_family", r.matrix_family},
           {"status", cap_status_name(r.status)},
           {"reason", r.reason},
           {"tool", r.tool},
           {"command", r.command},
           {"note", r.note},
           {"checked_at", r.checked_at},
           {"cached", r.cached}};
}

void from_json(const json& j, CapabilityResult& r) {
  CapabilityResult o;
  j.at("probe").get_to(o.probe);
  j.at("isa").get_to(o.isa);
  j.at("arch").get_to(o.arch);
  j.at("feature").get_to(o.feature);
  o.matrix_family = j.value("matrix_family", "");
  const std::string s = j.at("status").get<std::string>();
  if (s == "accepted")
    o.status = CapStatus::kAccepted;
  else if (s == "rejected")
    o.status = CapStatus::kRejected;
  else if (s == "unavailable")
    o.status = CapStatus::kUnavailable;
  else if (s == "error")
    o.status = CapStatus::kError;
  else
    throw std::invalid_argument("capability result: unknown status '" + s + "'");
  o.reason = j.value("reason", "");
  o.tool = j.value("tool", "");
  o.command = j.value("command", "");
  o.note = j.value("note", "");
  o.checked_at = j.value("checked_at", "");
  o.cached = j.value("cached", false);
  r = std::move(o);
}

const std::vector<CapabilityProbe>& capability_probes() {
  static const std::vector<CapabilityProbe> probes = make_probes();
  return probes;
}

const CapabilityProbe* find_capability_probe(const std::string& id) {
  for (const auto& p : capability_probes())
    if (p.id == id) return &p;
  return nullptr;
}

fs::path capability_cache_dir() {
  return cache_dir() / "capabilities";
}

CapabilityResult run_capability_probe(const CapabilityProbe& probe, const std::string& arch,
                                      bool refresh) {
  // The tools that could answer, and the cache key over them.
  std::string key = probe.id + "\n" + arch + "\n" + probe.source + "\n" + probe.control + "\n";
  // "native" means this machine's CPU: the verdict is only valid for this machine.
  if (arch == "native") key += "machine " + machine_id(detect_cpu()) + "\n";
  std::string ptxas;
  std::vector<Tool> tools;
  std::string primary;
  if (probe.isa == ProbeIsa::kNvptx) {
    ptxas = find_ptxas();
    if (ptxas.empty()) {
      CapabilityResult r = base_result(probe, arch);
      r.status = CapStatus::kUnavailable;
      r.reason = "unavailable: ptxas not installed (CUDA toolkit; set VB_PTXAS or PATH)";
      return r;
    }
    key += ptxas + "|" + tool_version(ptxas);
  } else {
    tools = cxx_tools(probe.isa, &primary);
    if (tools.empty()) {
      CapabilityResult r = base_result(probe, arch);
      r.status = CapStatus::kUnavailable;
      r.reason = fmt::format("unavailable: {} not installed", primary);
      return r;
    }
    for (const auto& t : tools) key += t.exe + " " + join(t.args) + "|" + t.version + "\n";
  }
  const fs::path path =
      capability_cache_dir() / fmt::format("{}-{}-{}-{:016x}.json", probe_isa_name(probe.isa),
                                           safe_name(probe.id), safe_name(arch), fnv1a(key));
  if (!refresh && fs::exists(path)) {
    try {
      CapabilityResult r = json::parse(read_file(path)).get<CapabilityResult>();
      if (r.probe == probe.id && r.arch == arch) {
        r.cached = true;
        return r;
      }
    } catch (const std::exception&) {
      // unreadable: probe again and rewrite it
    }
  }
  CapabilityResult r;
  try {
    r = probe.isa == ProbeIsa::kNvptx ? run_ptx(probe, arch, ptxas) : run_cxx(probe, arch, tools);
  } catch (const std::exception& e) {
    r = base_result(probe, arch);
    r.status = CapStatus::kError;
    r.reason = std::string("probe could not run: ") + e.what();
    return r;
  }
  if (cacheable(r)) {
    try {
      write_file_atomic(path, json(r).dump(2) + "\n");
    } catch (const std::exception&) {
      // a read-only cache only costs a re-probe next time
    }
  }
  return r;
}

std::vector<CapabilityResult> probe_capabilities(ProbeIsa isa, const std::string& arch,
                                                 bool refresh) {
  std::vector<std::string> arches{arch};
  if (isa == ProbeIsa::kNvptx && !arch.empty() && arch.back() != 'a') {
    static const char* kWithA[] = {"sm_90",  "sm_100", "sm_101", "sm_103",
                                   "sm_110", "sm_120", "sm_121"};
    for (const char* a : kWithA)
      if (arch == a) arches.push_back(arch + "a");
  }
  std::vector<CapabilityResult> out;
  for (const auto& a : arches)
    for (const auto& p : capability_probes())
      if (p.isa == isa) out.push_back(run_capability_probe(p, a, refresh));
  return out;
}

}  // namespace vb
