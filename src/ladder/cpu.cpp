#include "ladder/cpu.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "analysis/cpu_asm.h"
#include "backends/backend.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/util.h"
#include "eval/evaluator.h"
#include "ladder/rank.h"
#include "targets/ceilings.h"
#include "targets/cpu_info.h"

namespace vb::ladder {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kClang = "clang++-19";
constexpr const char* kMca = "llvm-mca-19";
constexpr const char* kCrossGxx = "aarch64-linux-gnu-g++";
constexpr const char* kQemu = "qemu-aarch64";
constexpr const char* kCrossSysroot = "/usr/aarch64-linux-gnu";
constexpr const char* kLibompDir = "/usr/lib/llvm-19/lib";

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// First line of `prog --version` (cached), or "" when the program is missing.
std::string tool_version(const std::string& prog) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> l(mu);
  auto it = cache.find(prog);
  if (it != cache.end()) return it->second;
  std::string v;
  if (have_program(prog)) {
    auto r = run_process({prog, "--version"}, std::chrono::seconds(30));
    std::istringstream in(r.out + r.err);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("version") != std::string::npos || line.find("(") != std::string::npos) {
        v = line;
        break;
      }
    }
    if (v.empty()) v = first_line(r.out);
    while (!v.empty() && (v.front() == ' ')) v.erase(0, 1);
  }
  return cache[prog] = v;
}

std::string hash_hex(const std::string& s) { return fmt::format("{:016x}", fnv1a(s)); }

// Removes // and /* */ comments and the contents of string and character literals.
std::string strip_comments(const std::string& s, bool blank_strings = true) {
  std::string o;
  o.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') ++i;
      o += '\n';
    } else if (s[i] == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      i += 2;
      while (i + 1 < s.size() && !(s[i] == '*' && s[i + 1] == '/')) {
        if (s[i] == '\n') o += '\n';
        ++i;
      }
      ++i;
    } else if (blank_strings && (s[i] == '"' || s[i] == '\'')) {
      const char q = s[i];
      o += q;
      ++i;
      while (i < s.size() && s[i] != q && s[i] != '\n') {
        if (s[i] == '\\') ++i;
        ++i;
      }
      o += q;
    } else {
      o += s[i];
    }
  }
  return o;
}

// Include directory for the aarch64 cross compiler: the host's header-only dependencies
// (dlpack, nlohmann-json, Highway) linked in, without exposing the host's /usr/include.
fs::path cross_include_dir() {
  const fs::path d = cache_dir() / "cross-include";
  fs::create_directories(d);
  for (const char* dep : {"dlpack", "nlohmann", "hwy"}) {
    const fs::path link = d / dep;
    std::error_code ec;
    if (!fs::exists(link, ec) && fs::exists(fs::path("/usr/include") / dep))
      fs::create_directory_symlink(fs::path("/usr/include") / dep, link, ec);
  }
  return d;
}

// Writes `text` to a fresh temporary file under the cache and returns its path.
fs::path temp_file(const std::string& stem, const std::string& text) {
  const fs::path d = cache_dir() / "ladder" / "tmp";
  fs::create_directories(d);
  const fs::path p = d / fmt::format("{}.{}.{}", stem, ::getpid(), hash_hex(text));
  write_file_atomic(p, text);
  return p;
}

}  // namespace

// ---- configuration and screen ----------------------------------------------------------------

CpuTargetConfig cpu_target_config(const TargetSpec& t) {
  if (t.kind != "cpu")
    throw std::invalid_argument("target " + t.id + " is a " + t.kind + ", not a CPU");
  CpuTargetConfig c;
  c.aarch64 = t.isa.rfind("armv", 0) == 0 || t.isa.rfind("aarch64", 0) == 0;
  const CpuInfo host = detect_cpu();
  if (t.id == "local-cpu") {
    c.local = true;
    c.aarch64 = host.arch == "aarch64";
    c.triple = c.aarch64 ? "aarch64-linux-gnu" : "x86_64-linux-gnu";
    c.cpu = "native";
    c.clang_cpu_flags = {c.aarch64 ? "-mcpu=native" : "-march=native"};
    c.sve = host.has("sve");
    return c;
  }
  c.triple = c.aarch64 ? "aarch64-linux-gnu" : "x86_64-linux-gnu";
  auto r1 = t.rungs.find("rung1");
  std::smatch m;
  static const std::regex mcpu(R"(-mcpu=([A-Za-z0-9_.+-]+))");
  if (r1 == t.rungs.end() || !std::regex_search(r1->second, m, mcpu))
    throw std::invalid_argument("target " + t.id +
                                ": rungs.rung1 names no llvm-mca -mcpu=... (add it to " +
                                t.path.string() + ")");
  c.cpu = m[1];
  c.clang_cpu_flags = {(c.aarch64 ? "-mcpu=" : "-march=") + c.cpu};
  if (c.aarch64) {
    c.gcc_cross_flags = {"-march=" + t.isa};
    c.sve = t.isa.find("sve") != std::string::npos;
    if (t.raw.contains("vector_width") && t.raw["vector_width"].contains("bits"))
      c.sve_bytes = std::max(16, t.raw["vector_width"]["bits"].get<int>() / 8);
  }
  const auto* local = match_cpu(std::vector<TargetSpec>{t}, host);
  c.local = local != nullptr;
  return c;
}

std::vector<std::string> screen_cpu_source(const std::string& source, bool aarch64_target) {
  std::vector<std::string> problems;
  const std::string s = strip_comments(source);
  struct Rule {
    std::regex re;
    std::string what;
  };
  static const std::vector<Rule> rules = [] {
    std::vector<Rule> v;
    auto add = [&](const char* re, const char* what) { v.push_back({std::regex(re), what}); };
    add(R"(\b(system|popen)\s*\()", "runs a shell command (system/popen)");
    add(R"(\b(fork|vfork|clone)\s*\()", "creates a process (fork)");
    add(R"(\bexec(l|lp|le|v|vp|vpe|ve)\s*\()", "executes a program (exec*)");
    add(R"(\bposix_spawnp?\s*\()", "executes a program (posix_spawn)");
    add(R"(\b(dlopen|dlsym)\s*\()", "loads code at run time (dlopen/dlsym)");
    add(R"(\b(fopen|freopen|open|openat|creat)\s*\()", "opens a file");
    add(R"(\b(socket|connect|bind|listen|accept)\s*\()", "uses a socket");
    add(R"(\bstd::(i|o)?fstream\b)", "opens a file (fstream)");
    add(R"(\b(syscall|ptrace)\s*\()", "makes a raw system call");
    add(R"(#\s*include\s*<(fstream|dlfcn\.h|spawn\.h|sys/socket\.h|netinet/[^>]*|arpa/inet\.h)>)",
        "includes a file/process/socket header");
    return v;
  }();
  std::istringstream in(s);
  // Inline asm is judged by its text, so that copy keeps the string literals.
  std::istringstream in_asm(strip_comments(source, false));
  std::string line, asm_line;
  int no = 0, if_depth = 0;
  static const std::regex x86_hdr(
      R"(#\s*include\s*<(immintrin|xmmintrin|emmintrin|pmmintrin|tmmintrin|smmintrin|nmmintrin|avxintrin|avx2intrin|avx512fintrin|x86intrin|x86gprintrin|ia32intrin)\.h>)");
  static const std::regex arm_hdr(R"(#\s*include\s*<(arm_neon|arm_sve|arm_acle)\.h>)");
  static const std::regex asm_re(R"(\b(asm|__asm__|__asm)\b\s*(volatile|__volatile__)?\s*\()");
  static const std::regex x86_regs(R"(%%?(r[a-d]x|e[a-d]x|[xyz]mm\d+|rsp|rbp|rsi|rdi))");
  static const std::regex arm_regs(R"(\b([xw]\d{1,2}|[vz]\d{1,2}\.\d*[bhsd]|p\d\.[bhsd])\b)");
  static const std::regex pp_if(R"(^\s*#\s*if)");
  static const std::regex pp_endif(R"(^\s*#\s*endif)");
  while (std::getline(in, line)) {
    ++no;
    if (!std::getline(in_asm, asm_line)) asm_line.clear();
    if (std::regex_search(line, pp_if)) ++if_depth;
    if (std::regex_search(line, pp_endif)) if_depth = std::max(0, if_depth - 1);
    for (const auto& r : rules)
      if (std::regex_search(line, r.re))
        problems.push_back(fmt::format("line {}: {} (kernels may only compute on their tensors)",
                                       no, r.what));
    if (aarch64_target && if_depth == 0 && std::regex_search(line, x86_hdr))
      problems.push_back(fmt::format(
          "line {}: includes x86 intrinsics header unconditionally (x86 SSE/AVX intrinsics do "
          "not exist on aarch64; use Highway, omp simd or guard it with #if defined(__x86_64__))",
          no));
    if (!aarch64_target && if_depth == 0 && std::regex_search(line, arm_hdr))
      problems.push_back(fmt::format(
          "line {}: includes Arm intrinsics header unconditionally (NEON/SVE intrinsics do not "
          "exist on x86-64; guard it with #if defined(__aarch64__))",
          no));
    if (std::regex_search(line, asm_re)) {
      if (aarch64_target && (std::regex_search(asm_line, x86_regs) ||
                             asm_line.find("vzeroupper") != std::string::npos))
        problems.push_back(fmt::format("line {}: inline asm for x86-64 in a kernel for aarch64",
                                       no));
      else if (!aarch64_target && std::regex_search(asm_line, arm_regs))
        problems.push_back(fmt::format("line {}: inline asm for aarch64 in a kernel for x86-64",
                                       no));
    }
  }
  return problems;
}

bool variant_is_threaded(const std::string& source) {
  static const std::regex re(R"(#\s*pragma\s+omp\s+(parallel|taskloop)|std::thread|std::jthread)");
  const std::string s = strip_comments(source);
  std::smatch m;
  // "#pragma omp parallel if (0)" or "num_threads(1)" is single-threaded.
  static const std::regex single(R"(#\s*pragma\s+omp\s+parallel[^\n]*(num_threads\s*\(\s*1\s*\)|if\s*\(\s*(0|false)\s*\)))");
  if (std::regex_search(s, single)) return false;
  return std::regex_search(s, m, re);
}

// ---- the climber -------------------------------------------------------------------------------

namespace {

// A library built outside the backend registry (for the target's flags), served to the
// evaluator through the Backend interface.
// It stands in for `base` (the climber's backend): the same name, extension and device.
class PrebuiltBackend final : public Backend {
 public:
  PrebuiltBackend(const Backend& base, BuildResult b, std::string desc)
      : base_(base), b_(std::move(b)), desc_(std::move(desc)) {}
  std::string name() const override { return base_.name(); }
  std::string source_extension() const override { return base_.source_extension(); }
  const Device& device() const override { return base_.device(); }
  BuildResult build(const fs::path&) const override { return b_; }
  std::string toolchain_description() const override { return desc_; }

 private:
  const Backend& base_;
  BuildResult b_;
  std::string desc_;
};

}  // namespace

std::string local_include_text() {
  const fs::path inc = vladbud_home() / "kernels" / "include";
  std::error_code ec;
  if (!fs::is_directory(inc, ec)) return {};
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(inc, ec))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) text += "== " + fs::relative(f, inc).generic_string() + "\n" + read_file(f);
  return text;
}

namespace {

// Builds `source` with argv (the source and "-o OUT" appended), cached by content.
BuildResult build_library(std::vector<std::string> argv, const fs::path& source,
                          const std::string& tag) {
  BuildResult r;
  r.compiler_version = tool_version(argv[0]);
  std::string cmd;
  for (const auto& a : argv) cmd += a + " ";
  const std::string src = read_file(source);
  // Local includes (kernels/include/*) are part of the key through their text.
  const std::string sdk = local_include_text();
  r.cache_key = hash_hex(src + "\n--\n" + sdk + "\n--\n" + cmd + r.compiler_version);
  const fs::path dir = cache_dir() / "build" / ("cpu-" + tag) / r.cache_key;
  r.library = dir / "kernel.so";
  argv.insert(argv.end(), {source.string(), "-o"});
  r.command = cmd + source.string() + " -o " + r.library.string();
  if (fs::exists(r.library)) {
    r.ok = r.cached = true;
    return r;
  }
  fs::create_directories(dir);
  const fs::path tmp = dir / fmt::format("kernel.so.tmp.{}", ::getpid());
  argv.push_back(tmp.string());
  const auto pr = run_process(argv, std::chrono::minutes(5));
  r.seconds = pr.seconds;
  r.diagnostics = pr.err + pr.out;
  if (!pr.ok()) {
    std::error_code ec;
    fs::remove(tmp, ec);
    return r;
  }
  fs::rename(tmp, r.library);
  r.ok = true;
  return r;
}

// The runner cross-built for aarch64 (cached by the runner sources' content).
fs::path cross_runner(std::string* err) {
  static std::mutex mu;
  std::lock_guard<std::mutex> l(mu);
  const fs::path home = vladbud_home();
  // The runner's sources as CMakeLists.txt lists them for vladbud-runner; its CUDA device
  // (the driver loaded at run time, never used under QEMU) is part of the binary.
  const fs::path dir = home / "src" / "runner";
  const fs::path core = home / "src" / "core";
  const std::vector<fs::path> sources{dir / "runner_main.cpp",        dir / "device.cpp",
                                      dir / "host_device.cpp",        dir / "cuda_runner_device.cpp",
                                      dir / "cuda_device.cpp",        dir / "protocol.cpp",
                                      core / "sandbox.cpp"};
  const std::vector<fs::path> headers{dir / "protocol.h", dir / "device.h", dir / "cuda_device.h",
                                      core / "sandbox.h"};
  std::string text;
  for (const auto& f : sources) text += read_file(f);
  for (const auto& f : headers) text += read_file(f);
  const std::string key = hash_hex(text + tool_version(kCrossGxx));
  const fs::path out = cache_dir() / "runner-aarch64" / key / "vladbud-runner";
  if (fs::exists(out)) return out;
  fs::create_directories(out.parent_path());
  const fs::path tmp = out.string() + fmt::format(".tmp.{}", ::getpid());
  std::vector<std::string> argv{kCrossGxx, "-std=c++20", "-O2", "-I" + cross_include_dir().string(),
                                "-I" + (home / "src").string()};
  for (const auto& f : sources) argv.push_back(f.string());
  argv.insert(argv.end(), {"-o", tmp.string(), "-ldl", "-lpthread"});
  auto pr = run_process(argv, std::chrono::minutes(5));
  if (!pr.ok()) {
    *err = "cannot cross-build the runner for aarch64: " + first_line(pr.err);
    return {};
  }
  fs::rename(tmp, out);
  return out;
}

RungEvidence make_ev(int rung, std::string status, std::string tool, std::string version,
                     std::string summary, json data = json::object()) {
  RungEvidence e;
  e.rung = rung;
  e.status = std::move(status);
  e.tool = std::move(tool);
  e.tool_version = std::move(version);
  e.summary = std::move(summary);
  e.data = std::move(data);
  return e;
}

std::string first_error(const std::string& diag) {
  std::istringstream in(diag);
  std::string line;
  while (std::getline(in, line))
    if (line.find("error:") != std::string::npos) return line;
  return first_line(diag);
}

std::string stage_summary(const EvalReport& rep) {
  std::string s;
  for (const auto& st : rep.stages) s += (s.empty() ? "" : ", ") + st.name + " " + st.status;
  return s;
}

class CpuClimber final : public TargetClimber {
 public:
  std::string name() const override { return "cpu"; }
  bool handles(const TargetSpec& t) const override { return t.kind == "cpu"; }
  std::string backend() const override { return "cpu"; }
  std::vector<TargetSpec> remote_targets() const override { return remote_cpu_targets(); }

  ClimbResult climb(const KernelType& type, const Variant& variant, const TargetSpec& target,
                    const ClimbOptions& opts) const override {
    ClimbResult r;
    r.target_id = target.id;
    r.kernel = type.name();
    r.variant = variant.name;
    r.backend = backend();
    auto say = [&](const std::string& m) {
      if (opts.progress) opts.progress(fmt::format("[{} {} {}] {}", target.id, type.name(),
                                                   variant.name, m));
    };
    const CpuTargetConfig cfg = cpu_target_config(target);
    if (!have_program(kClang) || !have_program(kMca))
      throw std::runtime_error(
          "clang++-19 and llvm-mca-19 are needed for the CPU ladder; run scripts/setup.sh "
          "(Debian packages clang-19 llvm-19 libomp-19-dev)");
    std::string src;
    try {
      src = read_file(variant.source);
    } catch (const std::exception& e) {
      throw std::runtime_error("variant " + variant.name + ": cannot read " +
                               variant.source.string() + ": " + e.what());
    }
    const std::string clang_v = tool_version(kClang);
    const std::string mca_v = tool_version(kMca);
    auto reject = [&](RungEvidence e, const std::string& why) {
      r.evidence.push_back(std::move(e));
      r.rejected = true;
      r.confidence = "rejected";
      r.stop_reason = why;
      return r;
    };

    // ---- rung 0: source screen + cross-compile (emit assembly with the vectorization remarks)
    say("rung 0: source screen and compile for " + cfg.triple + " " + cfg.clang_cpu_flags[0]);
    const auto problems = screen_cpu_source(src, cfg.aarch64);
    if (!problems.empty()) {
      json d;
      d["problems"] = problems;
      return reject(make_ev(0, "reject", "source screen", "", problems.front(), d),
                    "rejected at rung 0 (source screen): " + problems.front());
    }
    std::vector<std::string> argv{kClang, "--target=" + cfg.triple};
    argv.insert(argv.end(), cfg.clang_cpu_flags.begin(), cfg.clang_cpu_flags.end());
    argv.insert(argv.end(), {"-std=c++20", "-O3", "-fopenmp", "-fPIC", "-S",
                             "-Rpass=loop-vectorize", "-Rpass-missed=loop-vectorize",
                             "-I" + (vladbud_home() / "kernels" / "include").string()});
    if (cfg.aarch64 && !cfg.local) argv.push_back("-I" + cross_include_dir().string());
    const fs::path asm_path = temp_file("asm-" + variant.name, "") ;
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    argv.insert(argv.end(), {variant.source.string(), "-o", asm_path.string()});
    const auto cc = run_process(argv, std::chrono::minutes(5));
    const std::string tool0 = fmt::format("{} --target={} {}", kClang, cfg.triple,
                                          cfg.clang_cpu_flags[0]);
    if (!cc.ok()) {
      std::string why = first_error(cc.err);
      const bool x86_intrin = cc.err.find("immintrin") != std::string::npos ||
                              cc.err.find("_mm") != std::string::npos ||
                              cc.err.find("__m128") != std::string::npos ||
                              cc.err.find("__m256") != std::string::npos ||
                              cc.err.find("__m512") != std::string::npos;
      if (cfg.aarch64 && x86_intrin)
        why = "uses x86 intrinsics, which aarch64 does not have: " + why;
      json d;
      d["command"] = cmd;
      d["diagnostics"] = cc.err.substr(0, 4000);
      std::error_code ec;
      fs::remove(asm_path, ec);
      return reject(make_ev(0, "reject", tool0, clang_v, "compile failed: " + why, d),
                    "rejected at rung 0 (compile for " + target.id + "): " + why);
    }
    r.evidence.push_back(make_ev(0, "pass", tool0, clang_v,
                                 "source screen clean; compiles for " + cfg.triple + " " +
                                     cfg.clang_cpu_flags[0],
                                 {{"command", cmd}}));
    r.highest_rung = 0;
    r.confidence = "static";
    const std::string assembly = read_file(asm_path);
    {
      std::error_code ec;
      fs::remove(asm_path, ec);
    }
    if (opts.max_rung < 1) {
      r.stop_reason = "--max-rung 0";
      return r;
    }

    // ---- rung 1: vectorization remarks + llvm-mca on the hot loop of the emitted assembly
    say("rung 1: vectorization report and llvm-mca -mcpu=" + cfg.cpu);
    const std::string fname = variant.source.filename().string();
    json loops = json::array();
    int vec = 0, missed = 0, widest = 0;
    bool scalable = false;
    for (const auto& rm : analysis::parse_loop_remarks(cc.err)) {
      if (fs::path(rm.file).filename().string() != fname) continue;  // SDK header loops
      loops.push_back({{"line", rm.line},
                       {"vectorized", rm.vectorized},
                       {"width", rm.width},
                       {"scalable", rm.scalable},
                       {"interleave", rm.interleave},
                       {"reason", rm.reason}});
      if (rm.vectorized) {
        ++vec;
        widest = std::max(widest, rm.width);
        scalable = scalable || rm.scalable;
      } else {
        ++missed;
      }
    }
    const auto isa = cfg.aarch64 ? analysis::AsmIsa::AArch64 : analysis::AsmIsa::X86_64;
    const auto inner = analysis::find_innermost_loops(assembly, isa, cfg.sve_bytes);
    const analysis::AsmLoop* hot = analysis::hot_loop(inner);
    json d1;
    d1["loops"] = loops;
    d1["vectorized_loops"] = vec;
    d1["missed_loops"] = missed;
    d1["vectorized"] = vec > 0;
    d1["max_width"] = widest;
    d1["scalable"] = scalable;
    d1["innermost_asm_loops"] = static_cast<int>(inner.size());
    std::optional<analysis::McaRegion> mca;
    std::string mca_note;
    if (hot) {
      d1["hot_loop"] = {{"function", hot->function},
                        {"label", hot->label},
                        {"instructions", hot->instructions},
                        {"vector_instructions", hot->vector_instructions},
                        {"vector_bytes", hot->max_vector_bytes},
                        {"flops_per_iteration", hot->flops_per_iteration},
                        {"loads", hot->loads},
                        {"stores", hot->stores}};
      const fs::path marked = temp_file("mca-" + variant.name,
                                        analysis::insert_mca_markers(assembly, *hot, isa));
      std::vector<std::string> margv{kMca, "-mtriple=" + cfg.triple, "-mcpu=" + cfg.cpu,
                                     "-bottleneck-analysis", "-iterations=200",
                                     "-skip-unsupported-instructions=lack-sched", marked.string()};
      const auto mr = run_process(margv, std::chrono::minutes(2));
      std::error_code ec;
      fs::remove(marked, ec);
      try {
        for (const auto& reg : analysis::parse_llvm_mca(mr.out))
          if (reg.name == "hot") mca = reg;
        if (!mca) mca_note = "llvm-mca reported no 'hot' region";
      } catch (const std::exception& e) {
        mca_note = std::string("llvm-mca failed: ") + first_line(mr.err.empty() ? e.what() : mr.err);
      }
      if (mca)
        d1["mca"] = {{"cycles_per_iteration", mca->cycles_per_iteration},
                     {"block_rthroughput", mca->block_rthroughput},
                     {"ipc", mca->ipc},
                     {"instructions_per_iteration",
                      mca->iterations ? static_cast<double>(mca->instructions) / mca->iterations : 0},
                     {"bottleneck_resource", mca->bottleneck_resource},
                     {"bottleneck_pressure", mca->bottleneck_pressure},
                     {"bottleneck", mca->bottleneck_summary}};
    } else {
      mca_note = "no loop found in the emitted assembly";
    }
    if (!mca_note.empty()) d1["mca_note"] = mca_note;
    const bool explicit_simd = hot && hot->max_vector_bytes > 0;
    d1["hot_loop_simd"] = explicit_simd;
    std::string s1 =
        vec == 0 ? fmt::format("NOT vectorized by the compiler ({} loop{} missed){}", missed,
                               missed == 1 ? "" : "s",
                               explicit_simd ? fmt::format("; explicit SIMD ({} B vectors) in the hot loop",
                                                           hot->max_vector_bytes)
                                             : "; hot loop is scalar")
                 : fmt::format("{}/{} loops vectorized, width {}{}", vec, vec + missed,
                               scalable ? "vscale x " : "", widest);
    if (mca)
      s1 += fmt::format("; hot loop {} {:.2f} cyc/iter, IPC {:.2f}, {:.0f} FLOP/iter, bottleneck {}",
                        hot->label, mca->cycles_per_iteration, mca->ipc, hot->flops_per_iteration,
                        mca->bottleneck_resource.empty() ? "-" : mca->bottleneck_resource);
    else
      s1 += "; " + mca_note;
    r.evidence.push_back(make_ev(1, "pass", tool0 + " -Rpass=loop-vectorize + " + kMca + " -mcpu=" + cfg.cpu,
                                 clang_v + "; " + mca_v, s1, d1));
    r.highest_rung = 1;

    // ---- rung 2 (and rung 5 on this machine): the evaluator's stages
    std::optional<double> measured_us, p10, p90;
    std::string timing_note, timing_flag;
    bool passed2 = false;
    if (opts.max_rung >= 2) {
      EvalOptions eo;
      eo.quick = opts.quick;
      eo.timing = cfg.local && opts.max_rung >= 5;
      eo.timing_dtype = opts.dtype;
      eo.timing_size = opts.size;
      if (opts.quick) {
        eo.dtypes = {opts.dtype};
        eo.min_time_s = 0.2;
        eo.max_time_s = 1.5;
        eo.min_reps = 5;
      }
      std::optional<EvalReport> rep;
      std::string tool2, version2, unavailable;
      if (cfg.local) {
        const Backend* be = &require_backend(backend());
        tool2 = "native (this machine), " + be->toolchain_description();
        version2 = cpu_toolchain_version();
        say(eo.timing ? "rung 2+5: evaluator stages and timing here" : "rung 2: evaluator stages here");
        rep = evaluate(type, *be, variant.source, eo);
      } else if (cfg.aarch64 && opts.skip_emulation) {
        unavailable = "skipped: emulation (qemu-aarch64) not asked for (vladbud run --all --emulate)";
      } else if (cfg.aarch64) {
        if (!have_program(kQemu) || !have_program(kCrossGxx)) {
          unavailable = "qemu-aarch64 or aarch64-linux-gnu-g++ not installed (scripts/setup.sh)";
        } else {
          std::string err;
          const fs::path runner = cross_runner(&err);
          if (runner.empty()) {
            unavailable = err;
          } else {
            std::vector<std::string> bargv{kCrossGxx};
            bargv.insert(bargv.end(), cfg.gcc_cross_flags.begin(), cfg.gcc_cross_flags.end());
            bargv.insert(bargv.end(), {"-std=c++20", "-O3", "-fopenmp", "-fPIC", "-shared",
                                       "-I" + (vladbud_home() / "kernels" / "include").string(),
                                       "-I" + cross_include_dir().string()});
            BuildResult b = build_library(bargv, variant.source, "aarch64");
            std::vector<std::string> launcher{"/usr/bin/qemu-aarch64", "-cpu",
                                              cfg.sve ? "max,sve=on" : "max", "-L", kCrossSysroot};
            tool2 = fmt::format("qemu-aarch64 -cpu {} -L {} (candidate: {} {})", launcher[2],
                                kCrossSysroot, kCrossGxx, cfg.gcc_cross_flags[0]);
            version2 = tool_version(kQemu) + "; " + tool_version(kCrossGxx);
            eo.runner_launcher = launcher;
            eo.runner_binary = runner.string();
            eo.call_timeout_s = 300;
            eo.timing = false;
            say("rung 2: evaluator stages under " + tool2);
            PrebuiltBackend be(require_backend(backend()), b, tool2);
            rep = evaluate(type, be, variant.source, eo);
          }
        }
      } else {
        // x86-64 target: a native run when this host has the target's base ISA.
        const CpuInfo host = detect_cpu();
        const bool v4 = target.isa == "x86-64-v4";
        const bool host_ok = host.arch == "x86_64" &&
                             (!v4 || (host.has("avx512f") && host.has("avx512bw") &&
                                      host.has("avx512vl")));
        if (opts.skip_emulation) {
          unavailable = "skipped: rung 2 not asked for (vladbud run --all --emulate runs it)";
        } else if (!host_ok) {
          unavailable = "this host lacks the target's ISA (" + target.isa +
                        ") and no emulator exists here (qemu-x86_64 does not emulate AVX-512, "
                        "Intel SDE is not installed)";
        } else {
          std::vector<std::string> bargv{kClang};
          bargv.insert(bargv.end(), cfg.clang_cpu_flags.begin(), cfg.clang_cpu_flags.end());
          std::vector<std::string> removed;
          if (target.raw.contains("isa_extensions"))
            for (const auto& e : target.raw["isa_extensions"]) {
              const std::string x = e.get<std::string>();
              if (host.has(x)) continue;
              std::string flag = x;
              if (flag.rfind("amx_", 0) == 0) {
                std::replace(flag.begin(), flag.end(), '_', '-');
              } else {
                flag.erase(std::remove(flag.begin(), flag.end(), '_'), flag.end());
              }
              removed.push_back("-mno-" + flag);
            }
          bargv.insert(bargv.end(), removed.begin(), removed.end());
          bargv.insert(bargv.end(), {"-std=c++20", "-O3", "-fopenmp", "-fPIC", "-shared",
                                     "-I" + (vladbud_home() / "kernels" / "include").string(),
                                     std::string("-Wl,-rpath,") + kLibompDir});
          BuildResult b = build_library(bargv, variant.source, "x86-" + cfg.cpu);
          std::string rm;
          for (const auto& f : removed) rm += " " + f;
          tool2 = fmt::format("native run on this host ({}) of {} {}{}", host.model, kClang,
                              cfg.clang_cpu_flags[0], rm);
          version2 = clang_v;
          eo.timing = false;
          say("rung 2: evaluator stages, " + tool2);
          PrebuiltBackend be(require_backend(backend()), b, tool2);
          rep = evaluate(type, be, variant.source, eo);
        }
      }
      if (rep) {
        json d2 = {{"verdict", rep->verdict},
                   {"stages", stage_summary(*rep)},
                   {"reason", rep->reason},
                   {"guard", rep->guard},
                   {"failed_stage", rep->failed_stage},
                   {"quick", opts.quick},
                   {"build_command", rep->build.command},
                   {"seconds", rep->seconds}};
        if (!rep->correct()) {
          return reject(make_ev(2, "reject", tool2, version2,
                                fmt::format("{} at {}: {}", rep->verdict, rep->failed_stage,
                                            rep->reason),
                                d2),
                        "rejected at rung 2 (correctness): " + rep->reason);
        }
        r.evidence.push_back(make_ev(2, "pass", tool2, version2,
                                     "PASS (" + stage_summary(*rep) + ")", d2));
        r.highest_rung = 2;
        passed2 = true;
        // A time above the cached ceiling (INVALID, guard above_ceiling) is still this machine's
        // measurement; the flag is kept in the evidence (the ceilings may be stale).
        const bool above = rep->verdict == "INVALID" && rep->guard == "above_ceiling";
        if (!rep->timing || (rep->verdict != "PASS" && !above))
          timing_note = rep->verdict + (rep->reason.empty() ? "" : ": " + rep->reason);
        if (above) timing_flag = "above the cached ceiling: " + rep->reason;
        if (rep->timing && (rep->verdict == "PASS" || above)) {
          measured_us = rep->timing->median_us;
          p10 = rep->timing->p10_us;
          p90 = rep->timing->p90_us;
        }
      } else {
        r.evidence.push_back(make_ev(2, unavailable.rfind("skipped", 0) == 0 ? "skipped" : "unavailable",
                                     "", "", unavailable));
      }
    }

    // ---- rung 3: roofline from the spec x llvm-mca cycles per iteration
    if (opts.max_rung >= 3) {
      const Size size = opts.size ? *opts.size : type.benchmark_size(DeviceKind::Host);
      const Problem p = type.make_problem(size, opts.dtype);
      const double flops = type.flops(p), bytes = type.min_bytes(p);
      const bool threaded = variant_is_threaded(src);
      const int cores_total = std::max(1, target.compute_units);
      const int cores = threaded ? cores_total : 1;
      const double bw = target.memory_bandwidth_gbs * 1e9;
      // One core cannot draw the socket's bandwidth: Little's law with ~16-24 outstanding L1D
      // misses x 64 B over ~80-100 ns DRAM latency gives 10-20 GB/s; L2 prefetchers raise it.
      // We take 20 GB/s per core (a stated assumption, inside the band).
      const double bw_used = threaded ? bw : std::min(bw, 20e9);
      // Measured ceilings (the derived local spec) are reached at ~90 %; datasheet numbers at
      // ~75 % (STREAM-like kernels on DDR5 servers). Band: 95 % .. 55 % of the roof.
      const double eff = target.derived ? 0.9 : 0.75;
      const double t_mem = bytes / (eff * bw_used) * 1e6;
      const double t_mem_lo = bytes / (0.95 * bw_used) * 1e6;
      const double t_mem_hi = bytes / (0.55 * bw_used) * 1e6;
      const auto peak = target.peak_for(opts.dtype);
      double t_peak = 0;
      if (peak && *peak > 0) t_peak = flops / (*peak * 1e12 * cores / cores_total) * 1e6;
      double clock = target.clock_ghz > 0 ? target.clock_ghz : 0;
      std::string clock_note;
      if (clock <= 0) {
        clock = 3.0;
        clock_note = " (clock not in the spec: 3.0 GHz assumed)";
      }
      double t_mca = 0, iters = 0;
      if (mca && hot && hot->flops_per_iteration > 0 && mca->cycles_per_iteration > 0) {
        iters = flops / hot->flops_per_iteration;
        t_mca = iters * mca->cycles_per_iteration / (clock * 1e9) / cores * 1e6;
      }
      double point = std::max({t_mem, t_peak, t_mca});
      // llvm-mca assumes L1 hits and a steady state: its time is a lower bound on the compute
      // side, up to ~2x optimistic for loops that miss in L1 or run at a lower AVX clock.
      double lo = std::max({t_mem_lo, t_peak, t_mca * 0.8});
      double hi = std::max({t_mem_hi, t_peak * 1.5, t_mca * 2.0});
      std::string basis;
      const char* bound = point == t_mca ? "llvm-mca compute" : point == t_mem ? "memory" : "peak compute";
      if (t_mca > 0) {
        basis = fmt::format("max(memory {:.3g} us, peak {:.3g} us, mca {:.0f} iter x {:.2f} cyc / "
                            "{:.2f} GHz / {} core{} = {:.3g} us) -> {}{}",
                            t_mem, t_peak, iters, mca->cycles_per_iteration, clock, cores,
                            cores == 1 ? "" : "s", t_mca, bound, clock_note);
      } else {
        // No cycle count for the hot loop: memory/peak roofline only, a wider band upward.
        hi = std::max(hi, point * 4.0);
        basis = fmt::format("max(memory {:.3g} us, peak {:.3g} us) -> {} (no llvm-mca cycles: {})",
                            t_mem, t_peak, bound, mca_note.empty() ? "hot loop has no FP work" : mca_note);
      }
      json d3 = {{"estimate_us", point}, {"low_us", lo}, {"high_us", hi},
                 {"size", size.label}, {"dtype", std::string(dtype_name(opts.dtype))},
                 {"flops", flops}, {"bytes", bytes}, {"threaded", threaded},
                 {"cores", cores}, {"bandwidth_gbs", bw_used / 1e9}, {"clock_ghz", clock},
                 {"t_memory_us", t_mem}, {"t_peak_us", t_peak}, {"t_mca_us", t_mca},
                 {"bound", bound}};
      r.evidence.push_back(make_ev(3, "pass", "roofline (spec " + target.id + ") x llvm-mca",
                                   mca_v, fmt::format("{:.4g} us [{:.4g}, {:.4g}] {}-bound, {}",
                                                      point, lo, hi, bound,
                                                      threaded ? fmt::format("{} cores", cores) : "1 core"),
                                   d3));
      r.highest_rung = 3;
      Estimate e;
      e.time_us = point;
      e.low_us = lo;
      e.high_us = hi;
      e.rung = passed2 ? 3 : 3;
      e.basis = basis;
      r.estimate = e;
      r.confidence = passed2 ? "emulated+analytical" : "analytical";
    }
    if (opts.max_rung >= 4)
      r.evidence.push_back(make_ev(4, "unavailable", "", "",
                                   "no cycle simulator installed (gem5 is not packaged here)"));
    if (opts.max_rung >= 5) {
      if (measured_us) {
        json d5 = {{"measured_us", *measured_us}, {"p10_us", *p10}, {"p90_us", *p90},
                   {"machine", detect_cpu().model}, {"date", utc_now_iso8601()},
                   {"flag", timing_flag}};
        r.evidence.push_back(make_ev(5, "pass", "evaluator timing (this machine)",
                                     cpu_toolchain_version(),
                                     fmt::format("measured {:.4g} us (p10 {:.4g}, p90 {:.4g})",
                                                 *measured_us, *p10, *p90),
                                     d5));
        r.highest_rung = 5;
        Estimate e;
        e.time_us = *measured_us;
        e.low_us = std::min(*p10, *measured_us);
        e.high_us = std::max(*p90, *measured_us);
        e.rung = 5;
        e.basis = "measured here (median of the evaluator's timing)";
        r.estimate = e;
        r.confidence = "measured";
      } else {
        r.evidence.push_back(make_ev(5, "unavailable", "", "",
                                     cfg.local ? "timing did not produce a valid measurement (" + timing_note + ")"
                                               : "target " + target.id + " is not this machine"));
      }
    }
    r.stop_reason = r.highest_rung >= 5 ? "top of the ladder (measured here)"
                    : opts.max_rung < 5 && opts.max_rung < 4
                        ? fmt::format("--max-rung {}", opts.max_rung)
                        : cfg.local ? "no valid timing"
                                    : "rung 4: no cycle simulator; rung 5: target not present";
    return r;
  }

 private:
  std::string cpu_toolchain_version() const {
    const Backend* be = find_backend(backend());
    return be ? be->toolchain_description() : "";
  }
};

}  // namespace

const TargetClimber& cpu_climber() {
  static const CpuClimber c;
  return c;
}

}  // namespace vb::ladder
