// Tests of src/targets: CPU detection, measured ceilings and their cache, the roofline.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "backends/cpu/toolchain.h"
#include "core/paths.h"
#include "targets/ceilings.h"
#include "targets/cpu_info.h"
#include "targets/load_record.h"
#include "targets/roofline.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace vb {
namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Sets an environment variable for the lifetime of the object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

fs::path make_temp_dir(const std::string& tag) {
  std::string templ = (fs::temp_directory_path() / ("vb_" + tag + "_XXXXXX")).string();
  if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  return templ;
}

// ---- cpu_info -----------------------------------------------------------------------------

TEST(CpuInfo, DetectsThisMachine) {
  const CpuInfo cpu = detect_cpu();
  EXPECT_GT(cpu.logical_cores, 0);
  EXPECT_FALSE(cpu.model.empty());
  EXPECT_NE(cpu.model, "unknown");
  EXPECT_FALSE(cpu.vendor.empty());
  EXPECT_FALSE(cpu.arch.empty());
  EXPECT_GT(cpu.llc_bytes, 0u);
  if (cpu.l2_bytes > 0) {
    EXPECT_LE(cpu.l2_bytes, cpu.llc_bytes);
  }
  if (cpu.l1d_bytes > 0 && cpu.l2_bytes > 0) {
    EXPECT_LT(cpu.l1d_bytes, cpu.l2_bytes);
  }

  const std::string proc = slurp("/proc/cpuinfo");
  std::smatch m;
  if (std::regex_search(proc, m, std::regex(R"(\nflags\s*:([^\n]*))"))) {
    const std::string flags = " " + m[1].str() + " ";
    EXPECT_EQ(cpu.has("avx2"), flags.find(" avx2 ") != std::string::npos);
    EXPECT_EQ(cpu.has("avx512f"), flags.find(" avx512f ") != std::string::npos);
    EXPECT_EQ(cpu.has("avx512_fp16"), flags.find(" avx512_fp16 ") != std::string::npos);
  }
}

TEST(CpuInfo, CompetingTasksAreThoseBeyondTheCoresATimedCallLeavesIdle) {
  // A CPU kernel's team uses every core (0): every other runnable task competes.
  EXPECT_EQ(competing_tasks(0, 2, 0), 0);
  EXPECT_EQ(competing_tasks(1, 2, 0), 1);
  EXPECT_EQ(competing_tasks(8, 16, 0), 8);
  // A GPU call keeps one host thread busy: 8 build workers on a 16-core host do not compete,
  // the 16th other task does.
  EXPECT_EQ(competing_tasks(8, 16, 1), 0);
  EXPECT_EQ(competing_tasks(15, 16, 1), 0);
  EXPECT_EQ(competing_tasks(16, 16, 1), 1);
  EXPECT_EQ(competing_tasks(1, 2, 1), 0);
  EXPECT_EQ(competing_tasks(2, 2, 1), 1);
  // Unknown load (runnable_tasks() -1 gives others -2) and a bad core count stay sane.
  EXPECT_EQ(competing_tasks(-2, 2, 0), 0);
  EXPECT_EQ(competing_tasks(3, 0, 1), 3);
  // The cores a timing may use are this process's CPUs (its affinity mask), never more than
  // the machine has.
  EXPECT_GE(usable_cores(), 1);
  EXPECT_LE(usable_cores(), std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
}

TEST(CpuInfo, ContentionWarningOnlyAboveTheCoresPlusOne) {
  EXPECT_EQ(contention_warning(0.0, 2), "");  // unknown load
  EXPECT_EQ(contention_warning(2.9, 2), "");  // this run's own two threads and a little more
  const std::string w = contention_warning(5.25, 2);
  EXPECT_EQ(w.rfind("warning: the machine was busy", 0), 0u) << w;
  EXPECT_NE(w.find("5.2 on 2 cores"), std::string::npos) << w;
  EXPECT_EQ(contention_warning(17.0, 16), "");
  EXPECT_NE(contention_warning(17.5, 16), "");
  EXPECT_THROW(contention_warning(3.0, 0), std::invalid_argument);
}

TEST(LoadRecord, ARunShorterThanTheCheckWindowReportsTheLoadItSawNotZero) {
  // autotune reported max_load_average 0 for any run under a minute: it sampled only from the
  // first minute on. The figures seen are reported; only the busy check waits for the minute.
  LoadRecord r(60);
  r.add(0, 1.5);
  r.add(20, 2.5);
  r.add(40, 2.0);
  EXPECT_EQ(r.samples(), 3);
  EXPECT_EQ(r.at_start(), 1.5);
  EXPECT_EQ(r.max(), 2.5);
  EXPECT_FALSE(r.max_checked());
  const json j = r.to_json();
  EXPECT_EQ(j["max"], 2.5);
  EXPECT_EQ(j["at_start"], 1.5);
  EXPECT_TRUE(j["max_checked"].is_null());
  EXPECT_EQ(j["checked_samples"], 0);
  EXPECT_NE(j["note"].get<std::string>().find("did not apply"), std::string::npos) << j.dump();
  EXPECT_NE(r.summary().find("1.50 at the start, up to 2.50 over 3 sample(s)"), std::string::npos)
      << r.summary();
  EXPECT_NE(r.summary().find("busy-machine check did not apply"), std::string::npos) << r.summary();
  // From the first minute on, the samples feed the check too.
  r.add(61, 4.25);
  r.add(90, 3.0);
  EXPECT_EQ(r.max_checked(), 4.25);
  EXPECT_EQ(r.max(), 4.25);
  EXPECT_EQ(r.to_json()["checked_samples"], 2);
  EXPECT_EQ(r.to_json()["note"], "");
  EXPECT_EQ(r.summary().find("did not apply"), std::string::npos) << r.summary();
  // A quiet machine's 0.00 is a figure, not "unknown".
  LoadRecord quiet(0);
  quiet.add(0, 0.0);
  EXPECT_EQ(quiet.samples(), 1);
  EXPECT_EQ(quiet.max_checked(), 0.0);
  EXPECT_EQ(quiet.to_json()["max"], 0.0);
}

TEST(LoadRecord, UnreadableSamplesAreNotTakenAsZeroAndBadSettingsAreRefused) {
  LoadRecord r(60);
  r.add(0, std::nullopt);
  r.add(70, -1.0);
  r.add(70, std::numeric_limits<double>::quiet_NaN());
  r.add(70, std::numeric_limits<double>::infinity());
  EXPECT_EQ(r.samples(), 0);
  EXPECT_EQ(r.unreadable(), 4);
  EXPECT_FALSE(r.max());
  EXPECT_FALSE(r.at_start());
  const json j = r.to_json();
  EXPECT_TRUE(j["max"].is_null());
  EXPECT_TRUE(j["at_start"].is_null());
  EXPECT_NE(j["note"].get<std::string>().find("not sampled"), std::string::npos) << j.dump();
  EXPECT_NE(r.summary().find("not sampled"), std::string::npos) << r.summary();
  EXPECT_THROW(LoadRecord(-1), std::invalid_argument);
  EXPECT_THROW(LoadRecord(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
  EXPECT_THROW(LoadRecord(std::numeric_limits<double>::infinity()), std::invalid_argument);
}

TEST(LoadRecord, ReadsTheFirstFieldOfLoadavgAndRefusesADamagedOne) {
  const fs::path d = make_temp_dir("loadavg");
  auto with = [&](const std::string& text) {
    std::ofstream(d / "loadavg", std::ios::trunc) << text;
    return read_load_average(d / "loadavg");
  };
  EXPECT_EQ(with("0.42 0.30 0.20 1/123 4567\n"), 0.42);
  EXPECT_EQ(with("0.00 0.01 0.05 1/99 12\n"), 0.0);
  EXPECT_FALSE(with(""));
  EXPECT_FALSE(with("load high\n"));
  EXPECT_FALSE(with("-3 0 0 1/1 1\n"));
  EXPECT_FALSE(with("nan 0 0 1/1 1\n"));
  EXPECT_FALSE(read_load_average(d / "missing"));
  fs::remove_all(d);
  if (fs::exists("/proc/loadavg")) {
    EXPECT_TRUE(read_load_average());
  }
}

TEST(LoadRecord, SamplesFromSeveralThreadsAreAllCounted) {
  LoadRecord r(1);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&r, t] {
      for (int i = 0; i < 250; ++i) r.add(i % 3, t + 0.5);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(r.samples(), 1000);
  EXPECT_EQ(r.max(), 3.5);
  EXPECT_EQ(r.to_json()["checked_samples"].get<int>(), 4 * 166);
}

TEST(CpuInfo, ParsesX86Cpuinfo) {
  const std::string text =
      "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n"
      "model name\t: Intel(R) Xeon(R) Platinum 8592+\n"
      "flags\t\t: fpu sse2 pni ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512bw "
      "avx512vl avx512_bf16 avx512_fp16 amx_tile amx_bf16\n\n"
      "processor\t: 1\nvendor_id\t: Other\nmodel name\t: Second\n";
  const CpuInfo c = parse_proc_cpuinfo(text, "x86_64");
  EXPECT_EQ(c.vendor, "GenuineIntel");
  EXPECT_EQ(c.model, "Intel(R) Xeon(R) Platinum 8592+");
  EXPECT_EQ(c.arch, "x86_64");
  for (const char* e :
       {"sse2", "sse3", "ssse3", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw",
        "avx512vl", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"})
    EXPECT_TRUE(c.has(e)) << e;
  EXPECT_FALSE(c.has("avx512dq"));
  EXPECT_FALSE(c.has("fpu"));  // not an extension of interest
  EXPECT_FALSE(c.has("neon"));
}

TEST(CpuInfo, ParsesAarch64Cpuinfo) {
  const std::string text =
      "processor\t: 0\nBogoMIPS\t: 2000.00\n"
      "Features\t: fp asimd evtstrm aes fphp asimdhp asimddp sve sve2 bf16 i8mm\n"
      "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n"
      "CPU part\t: 0xd4f\nCPU revision\t: 1\n";
  const CpuInfo c = parse_proc_cpuinfo(text, "aarch64");
  EXPECT_EQ(c.vendor, "ARM");
  EXPECT_EQ(c.model, "Neoverse-V2");
  for (const char* e : {"neon", "asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm"})
    EXPECT_TRUE(c.has(e)) << e;
  EXPECT_FALSE(c.has("avx2"));
  EXPECT_FALSE(c.has("sme"));

  const CpuInfo u = parse_proc_cpuinfo("CPU implementer\t: 0x61\nCPU part\t: 0x022\n", "aarch64");
  EXPECT_EQ(u.vendor, "Apple");
  EXPECT_EQ(u.model, "Apple part 0x022");
  const CpuInfo none = parse_proc_cpuinfo("", "aarch64");
  EXPECT_EQ(none.vendor, "unknown");
  EXPECT_EQ(none.model, "unknown");
}

TEST(CpuInfo, ParsesCacheSizes) {
  EXPECT_EQ(parse_cache_size("48K"), 48u * 1024);
  EXPECT_EQ(parse_cache_size("266240K\n"), 266240u * 1024);
  EXPECT_EQ(parse_cache_size("2M"), 2u << 20);
  EXPECT_EQ(parse_cache_size("1G"), 1u << 30);
  EXPECT_EQ(parse_cache_size("512"), 512u);
  EXPECT_EQ(parse_cache_size("32KB"), 32u * 1024);
  EXPECT_EQ(parse_cache_size(""), 0u);
  EXPECT_EQ(parse_cache_size("K"), 0u);
  EXPECT_EQ(parse_cache_size("12Q"), 0u);
}

TEST(CpuInfo, MachineIdIsStableAndSensitive) {
  const CpuInfo a = detect_cpu();
  const std::string id = machine_id(a);
  EXPECT_EQ(id, machine_id(detect_cpu()));
  EXPECT_EQ(id, machine_id(a));
  EXPECT_TRUE(std::regex_match(id, std::regex("[0-9a-f]{16}"))) << id;

  CpuInfo b = a;
  b.logical_cores += 1;
  EXPECT_NE(machine_id(b), id);
  b = a;
  b.llc_bytes += 1024;
  EXPECT_NE(machine_id(b), id);
  b = a;
  b.model += "x";
  EXPECT_NE(machine_id(b), id);
}

// ---- roofline -----------------------------------------------------------------------------

// 100 GB/s, fp64 1 TFLOP/s, fp32 2 TFLOP/s, fp16 4 TFLOP/s: ridge 10 / 20 / 40 FLOP/byte.
Ceilings toy_ceilings() {
  Ceilings c;
  c.machine_id = "0123456789abcdef";
  c.cpu_model = "Toy CPU";
  c.measured_at = "2025-01-01T00:00:00Z";
  c.compiler = "g++ -O3";
  c.mem_bw_gbs = 100;
  c.bw_probes_gbs = {{"read", 100}, {"copy", 80}, {"triad", 90}};
  c.peak_tflops = {{DType::F64, 1.0}, {DType::F32, 2.0}, {DType::F16, 4.0}};
  c.peak_method = {{DType::F64, "a"}, {DType::F32, "b"}, {DType::F16, "c"}};
  c.probe_seconds = 3.5;
  c.threads = 2;
  return c;
}

TEST(Roofline, MemoryBound) {
  // AI = 1e9 / 1e9 = 1 < ridge 20; 1e9 bytes in 0.02 s = 50 GB/s = 50 % of 100 GB/s.
  const RooflinePoint p = roofline_point(toy_ceilings(), DType::F32, 1e9, 1e9, 0.02);
  EXPECT_EQ(p.bound, "memory");
  EXPECT_DOUBLE_EQ(p.arithmetic_intensity, 1.0);
  EXPECT_DOUBLE_EQ(p.ridge_point, 20.0);
  EXPECT_DOUBLE_EQ(p.achieved_gbs, 50.0);
  EXPECT_DOUBLE_EQ(p.achieved_tflops, 0.05);
  EXPECT_DOUBLE_EQ(p.ceiling, 100.0);
  EXPECT_DOUBLE_EQ(p.pct_peak, 50.0);
}

TEST(Roofline, ComputeBound) {
  // AI = 4e10 / 1e9 = 40 > 20; 4e10 FLOP in 0.04 s = 1 TFLOP/s = 50 % of 2 TFLOP/s.
  const RooflinePoint p = roofline_point(toy_ceilings(), DType::F32, 4e10, 1e9, 0.04);
  EXPECT_EQ(p.bound, "compute");
  EXPECT_DOUBLE_EQ(p.arithmetic_intensity, 40.0);
  EXPECT_DOUBLE_EQ(p.achieved_tflops, 1.0);
  EXPECT_DOUBLE_EQ(p.achieved_gbs, 25.0);
  EXPECT_DOUBLE_EQ(p.ceiling, 2.0);
  EXPECT_DOUBLE_EQ(p.pct_peak, 50.0);
}

TEST(Roofline, RidgeBoundaryAndDtypes) {
  const Ceilings c = toy_ceilings();
  // Exactly at the ridge (20 FLOP/byte for fp32) counts as compute bound; just below is memory.
  EXPECT_EQ(roofline_point(c, DType::F32, 2e10, 1e9, 1.0).bound, "compute");
  EXPECT_EQ(roofline_point(c, DType::F32, 2e10 * (1 - 1e-12), 1e9, 1.0).bound, "memory");
  // The same AI is compute bound for fp64 (ridge 10) and memory bound for fp16 (ridge 40).
  EXPECT_EQ(roofline_point(c, DType::F64, 2e10, 1e9, 1.0).bound, "compute");
  EXPECT_DOUBLE_EQ(roofline_point(c, DType::F64, 2e10, 1e9, 1.0).ridge_point, 10.0);
  EXPECT_EQ(roofline_point(c, DType::F16, 2e10, 1e9, 1.0).bound, "memory");
  // int64 uses the fp64 peak; bf16 (absent) falls back to fp32.
  const RooflinePoint i = roofline_point(c, DType::I64, 4e11, 1e9, 1.0);
  EXPECT_DOUBLE_EQ(i.ridge_point, 10.0);
  EXPECT_DOUBLE_EQ(i.ceiling, 1.0);
  EXPECT_DOUBLE_EQ(i.pct_peak, 40.0);
  EXPECT_DOUBLE_EQ(roofline_point(c, DType::BF16, 1, 1, 1).ridge_point, 20.0);
  // Above 100 % is reported as such (the evaluator flags it).
  EXPECT_DOUBLE_EQ(roofline_point(c, DType::F32, 1e9, 2e11, 1.0).pct_peak, 200.0);
}

TEST(Roofline, EdgeCases) {
  const Ceilings c = toy_ceilings();
  // Pure data movement: memory bound at intensity 0.
  const RooflinePoint m = roofline_point(c, DType::F32, 0, 8e9, 0.1);
  EXPECT_EQ(m.bound, "memory");
  EXPECT_EQ(m.arithmetic_intensity, 0.0);
  EXPECT_DOUBLE_EQ(m.pct_peak, 80.0);
  // No bytes: compute bound at infinite intensity.
  const RooflinePoint f = roofline_point(c, DType::F32, 1e12, 0, 1.0);
  EXPECT_EQ(f.bound, "compute");
  EXPECT_TRUE(std::isinf(f.arithmetic_intensity));
  EXPECT_DOUBLE_EQ(f.pct_peak, 50.0);

  EXPECT_THROW(roofline_point(c, DType::F32, 1, 1, 0), std::invalid_argument);
  EXPECT_THROW(roofline_point(c, DType::F32, 1, 1, -1), std::invalid_argument);
  EXPECT_THROW(roofline_point(c, DType::F32, 1, 1, std::nan("")), std::invalid_argument);
  EXPECT_THROW(roofline_point(c, DType::F32, -1, 1, 1), std::invalid_argument);
  EXPECT_THROW(roofline_point(c, DType::F32, 0, 0, 1), std::invalid_argument);
  Ceilings empty = c;
  empty.peak_tflops.clear();
  EXPECT_THROW(roofline_point(empty, DType::F32, 1, 1, 1), std::invalid_argument);
  empty = c;
  empty.mem_bw_gbs = 0;
  EXPECT_THROW(roofline_point(empty, DType::F32, 1, 1, 1), std::invalid_argument);
}

// ---- ceilings JSON ------------------------------------------------------------------------

TEST(Ceilings, JsonRoundTrip) {
  Ceilings c = toy_ceilings();
  c.peak_tflops[DType::BF16] = 1.5;
  c.peak_method[DType::BF16] = "via fp32 (no native 16-bit FMA)";
  c.quick = true;
  c.probe = "0123456789abcdef";
  const json j = c;
  EXPECT_DOUBLE_EQ(j.at("peak_tflops").at("fp32").get<double>(), 2.0);
  EXPECT_EQ(j.at("peak_method").at("bf16"), "via fp32 (no native 16-bit FMA)");
  const Ceilings r = json::parse(j.dump()).get<Ceilings>();
  EXPECT_EQ(r.machine_id, c.machine_id);
  EXPECT_EQ(r.cpu_model, c.cpu_model);
  EXPECT_EQ(r.measured_at, c.measured_at);
  EXPECT_EQ(r.compiler, c.compiler);
  EXPECT_EQ(r.mem_bw_gbs, c.mem_bw_gbs);
  EXPECT_EQ(r.bw_probes_gbs, c.bw_probes_gbs);
  EXPECT_EQ(r.peak_tflops, c.peak_tflops);
  EXPECT_EQ(r.peak_method, c.peak_method);
  EXPECT_EQ(r.probe_seconds, c.probe_seconds);
  EXPECT_EQ(r.probe, c.probe);
  EXPECT_EQ(r.threads, c.threads);
  EXPECT_EQ(r.quick, c.quick);
}

TEST(Ceilings, JsonRejectsInvalid) {
  json j = toy_ceilings();
  json bad = j;
  bad["peak_tflops"]["fp128"] = 1.0;
  EXPECT_ANY_THROW(bad.get<Ceilings>());
  bad = j;
  bad["mem_bw_gbs"] = -3.0;
  EXPECT_ANY_THROW(bad.get<Ceilings>());
  bad = j;
  bad.erase("machine_id");
  EXPECT_ANY_THROW(bad.get<Ceilings>());
  bad = j;
  bad["peak_tflops"].erase("fp32");
  EXPECT_ANY_THROW(bad.get<Ceilings>());
  bad = j;
  bad["peak_tflops"]["fp64"] = "fast";
  EXPECT_ANY_THROW(bad.get<Ceilings>());
}

// A new user's second checkout (/tmp/newuser) re-probed and overwrote the ceilings cache: the
// probe id hashed the compiler command line with the checkout's absolute include directory.
TEST(Ceilings, ProbeIdIsTheSameUnderTwoRepoRootsAndChangesWithTheSourceOrCompiler) {
  const std::string src = "int main() { return 0; }\n";
  auto toolchain_at = [](const fs::path& home) {
    CpuToolchain tc;
    tc.cxx = "g++";
    tc.flags = {"-std=c++20", "-O3", "-march=native", "-fopenmp", "-fPIC",
                "-I" + (home / "kernels" / "include").string()};
    tc.version = "g++ (GCC) 13.2.0";
    return tc;
  };
  const fs::path a = "/home/dev/vladbud", b = "/tmp/newuser";
  const CpuToolchain ta = toolchain_at(a), tb = toolchain_at(b);
  ASSERT_NE(ta.command_line(), tb.command_line());  // what the id hashed before
  const std::string id = cpu_probe_id_of(src, ta, a);
  EXPECT_EQ(id.size(), 16u);
  EXPECT_EQ(id, cpu_probe_id_of(src, tb, b));
  EXPECT_EQ(id, cpu_probe_id_of(src, toolchain_at("/tmp/newuser/"), "/tmp/newuser/"));
  // A changed probe source, compiler, version or flag is another probe build.
  EXPECT_NE(id, cpu_probe_id_of(src + "// changed\n", tb, b));
  CpuToolchain other = ta;
  other.cxx = "clang++";
  EXPECT_NE(id, cpu_probe_id_of(src, other, a));
  other = ta;
  other.version = "g++ (GCC) 14.1.0";
  EXPECT_NE(id, cpu_probe_id_of(src, other, a));
  other = ta;
  other.flags[1] = "-O2";
  EXPECT_NE(id, cpu_probe_id_of(src, other, a));
  // Only the checkout's own path is taken out: an include directory elsewhere still counts,
  // and a root that is a mere prefix of another path ("/tmp/newuser" of "/tmp/newuser2") does
  // not match it.
  other = ta;
  other.flags.push_back("-I/opt/sdk/include");
  EXPECT_NE(id, cpu_probe_id_of(src, other, a));
  EXPECT_NE(cpu_probe_id_of(src, toolchain_at("/tmp/newuser2"), b), id);
}

// ---- measured ceilings and their cache (quick probe in a private cache dir) ----------------

class LocalCeilings : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(make_temp_dir("ceilings"));
    cache_env_ = new ScopedEnv("VB_CACHE_DIR", dir_->string());
    quick_env_ = new ScopedEnv("VB_PROBE_QUICK", "1");
  }
  static void TearDownTestSuite() {
    delete quick_env_;
    delete cache_env_;
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  static fs::path cache_file() { return ceilings_cache_path(machine_id(detect_cpu())); }

  static fs::path* dir_;
  static ScopedEnv* cache_env_;
  static ScopedEnv* quick_env_;
};
fs::path* LocalCeilings::dir_ = nullptr;
ScopedEnv* LocalCeilings::cache_env_ = nullptr;
ScopedEnv* LocalCeilings::quick_env_ = nullptr;

void expect_plausible(const Ceilings& c) {
  EXPECT_EQ(c.machine_id, machine_id(detect_cpu()));
  EXPECT_EQ(c.cpu_model, detect_cpu().model);
  EXPECT_TRUE(std::regex_match(c.measured_at, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << c.measured_at;
  EXPECT_FALSE(c.compiler.empty());
  EXPECT_GE(c.threads, 1);
  EXPECT_GT(c.probe_seconds, 0);
  double max_bw = 0;
  for (const char* probe : {"read", "copy", "triad"}) {
    ASSERT_TRUE(c.bw_probes_gbs.count(probe)) << probe;
    const double bw = c.bw_probes_gbs.at(probe);
    EXPECT_GE(bw, 1.0) << probe;
    EXPECT_LE(bw, 2000.0) << probe;
    max_bw = std::max(max_bw, bw);
  }
#if defined(__x86_64__)
  // The copy with non-temporal stores (kernels that stream their output reach it; memmove only
  // above a size threshold): measured, and part of the ceiling.
  ASSERT_TRUE(c.bw_probes_gbs.count("copy_nt"));
  EXPECT_GE(c.bw_probes_gbs.at("copy_nt"), 1.0);
  EXPECT_LE(c.bw_probes_gbs.at("copy_nt"), 2000.0);
  max_bw = std::max(max_bw, c.bw_probes_gbs.at("copy_nt"));
#endif
  EXPECT_EQ(c.mem_bw_gbs, max_bw);
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    ASSERT_TRUE(c.peak_tflops.count(t)) << dtype_name(t);
    EXPECT_FALSE(c.peak_method.at(t).empty());
  }
  const double f64 = c.peak_tflops.at(DType::F64), f32 = c.peak_tflops.at(DType::F32);
  EXPECT_GT(f64, 0);
  EXPECT_GT(f32, f64);
  EXPECT_LT(f32, 10000.0);
  EXPECT_GE(c.peak_tflops.at(DType::F16), f32);
  EXPECT_GE(c.peak_tflops.at(DType::BF16), f32);
}

TEST_F(LocalCeilings, MeasuredValuesArePlausibleAndCached) {
  std::vector<std::string> messages;
  const Ceilings c = local_cpu_ceilings(false, [&](std::string m) { messages.push_back(m); });
  expect_plausible(c);
  EXPECT_TRUE(c.quick);
  EXPECT_FALSE(messages.empty());
  ASSERT_TRUE(fs::exists(cache_file()));
  const Ceilings on_disk = json::parse(slurp(cache_file())).get<Ceilings>();
  EXPECT_EQ(on_disk.measured_at, c.measured_at);
  EXPECT_EQ(on_disk.peak_tflops, c.peak_tflops);
  // A second call returns the cached measurement without running the probe.
  messages.clear();
  const Ceilings again = local_cpu_ceilings(false, [&](std::string m) { messages.push_back(m); });
  EXPECT_TRUE(messages.empty());
  EXPECT_EQ(again.probe_seconds, c.probe_seconds);
  EXPECT_EQ(again.bw_probes_gbs, c.bw_probes_gbs);
}

TEST_F(LocalCeilings, ValidCacheIsReusedAndRecalibrateRemeasures) {
  Ceilings fake = toy_ceilings();
  fake.machine_id = machine_id(detect_cpu());
  fake.mem_bw_gbs = 123.5;
  fake.quick = true;
  fake.probe = cpu_probe_id();
  write_file_atomic(cache_file(), json(fake).dump());
  EXPECT_EQ(local_cpu_ceilings().mem_bw_gbs, 123.5);
  const Ceilings fresh = local_cpu_ceilings(true);
  EXPECT_NE(fresh.mem_bw_gbs, 123.5);
  expect_plausible(fresh);
  EXPECT_EQ(json::parse(slurp(cache_file())).get<Ceilings>().measured_at, fresh.measured_at);
}

TEST_F(LocalCeilings, ACacheMeasuredByAnotherProbeBuildIsRemeasured) {
  // Caches written before the probe had an id, and by another build of the probe, are not
  // reused: a probe that gained a measurement (copy_nt) must replace an older, lower ceiling.
  for (const std::string id : {std::string(), std::string("0000000000000000")}) {
    Ceilings old = toy_ceilings();
    old.machine_id = machine_id(detect_cpu());
    old.mem_bw_gbs = 123.5;
    old.quick = true;
    old.probe = id;
    write_file_atomic(cache_file(), json(old).dump());
    std::vector<std::string> messages;
    const Ceilings c = local_cpu_ceilings(false, [&](std::string m) { messages.push_back(m); });
    EXPECT_NE(c.mem_bw_gbs, 123.5) << id;
    EXPECT_EQ(c.probe, cpu_probe_id());
    ASSERT_FALSE(messages.empty());
    EXPECT_NE(messages.front().find(id.empty() ? "predate the probe's id" : "another build of the probe"),
              std::string::npos)
        << messages.front();
  }
}

TEST_F(LocalCeilings, CorruptedCacheIsRemeasured) {
  write_file_atomic(cache_file(), "{\"machine_id\": \"trunc");
  std::vector<std::string> messages;
  const Ceilings c = local_cpu_ceilings(false, [&](std::string m) { messages.push_back(m); });
  expect_plausible(c);
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(messages.front().find("ignoring unreadable"), std::string::npos) << messages.front();
  // The cache was rewritten with a valid measurement.
  EXPECT_EQ(json::parse(slurp(cache_file())).get<Ceilings>().machine_id, c.machine_id);
}

TEST_F(LocalCeilings, CacheOfAnotherMachineIsRemeasured) {
  Ceilings other = toy_ceilings();  // machine_id "0123456789abcdef"
  other.mem_bw_gbs = 123.5;
  write_file_atomic(cache_file(), json(other).dump());
  const Ceilings c = local_cpu_ceilings();
  EXPECT_EQ(c.machine_id, machine_id(detect_cpu()));
  EXPECT_NE(c.mem_bw_gbs, 123.5);
  expect_plausible(c);
}

TEST_F(LocalCeilings, ProbeBuildFailureReportsCompilerOutput) {
  const fs::path home = make_temp_dir("home");
  fs::create_directories(home / "src" / "targets" / "probes");
  std::ofstream(home / "src" / "targets" / "probes" / "cpu_ceilings.cpp")
      << "int main() { return undeclared_identifier_xyz; }\n";
  ScopedEnv env("VLADBUD_HOME", home.string());
  try {
    (void)measure_cpu_ceilings();
    ADD_FAILURE() << "expected a build failure";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("building the ceiling probe failed"), std::string::npos) << what;
    EXPECT_NE(what.find("undeclared_identifier_xyz"), std::string::npos) << what;
  }
  std::error_code ec;
  fs::remove_all(home, ec);
}

}  // namespace
}  // namespace vb
