#include "targets/cpu_info.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <cstdio>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace vb {

namespace {

namespace fs = std::filesystem;

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string read_small_file(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Values of the first occurrence of each "key : value" line of /proc/cpuinfo.
std::map<std::string, std::string> cpuinfo_fields(std::string_view text) {
  std::map<std::string, std::string> f;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string key = trim(line.substr(0, colon));
    if (!key.empty() && !f.count(key)) f.emplace(std::move(key), trim(line.substr(colon + 1)));
  }
  return f;
}

std::set<std::string> split_words(std::string_view s) {
  std::set<std::string> out;
  std::istringstream in{std::string(s)};
  std::string w;
  while (in >> w) out.insert(w);
  return out;
}

// Extensions reported, in this order, when the kernel lists them.
constexpr std::string_view kX86Isa[] = {"sse2",        "sse3",
                                        "ssse3",       "sse4_1",
                                        "sse4_2",      "avx",
                                        "avx2",        "fma",
                                        "f16c",        "bmi2",
                                        "avx_vnni",    "avx512f",
                                        "avx512dq",    "avx512cd",
                                        "avx512bw",    "avx512vl",
                                        "avx512ifma",  "avx512vbmi",
                                        "avx512_vnni", "avx512_bf16",
                                        "avx512_fp16", "amx_tile",
                                        "amx_bf16",    "amx_int8",
                                        "amx_fp16",    "avx_ne_convert",
                                        "avx10"};
constexpr std::string_view kArmIsa[] = {"neon",    "asimd", "fphp", "asimdhp", "asimddp",
                                        "bf16",    "i8mm",  "sve",  "sve2",    "svebf16",
                                        "svei8mm", "sme",   "sme2"};

std::string arm_vendor(unsigned impl) {
  switch (impl) {
    case 0x41:
      return "ARM";
    case 0x42:
      return "Broadcom";
    case 0x43:
      return "Cavium";
    case 0x46:
      return "Fujitsu";
    case 0x48:
      return "HiSilicon";
    case 0x4e:
      return "NVIDIA";
    case 0x50:
      return "APM";
    case 0x51:
      return "Qualcomm";
    case 0x61:
      return "Apple";
    case 0x6d:
      return "Microsoft";
    case 0xc0:
      return "Ampere";
    default:
      return fmt::format("implementer 0x{:02x}", impl);
  }
}

std::string arm_part(unsigned impl, unsigned part) {
  if (impl == 0x41) {
    switch (part) {
      case 0xd03:
        return "Cortex-A53";
      case 0xd07:
        return "Cortex-A57";
      case 0xd08:
        return "Cortex-A72";
      case 0xd0b:
        return "Cortex-A76";
      case 0xd0c:
        return "Neoverse-N1";
      case 0xd40:
        return "Neoverse-V1";
      case 0xd49:
        return "Neoverse-N2";
      case 0xd4f:
        return "Neoverse-V2";
      default:
        break;
    }
  }
  return {};
}

bool parse_uint(std::string_view s, unsigned& out) {
  try {
    std::size_t used = 0;
    const std::string str(s);
    const unsigned long v = std::stoul(str, &used, 0);  // accepts 0x.. and decimal
    if (used != str.size()) return false;
    out = static_cast<unsigned>(v);
    return true;
  } catch (...) {
    return false;
  }
}

std::string uname_machine() {
  struct utsname u {};
  if (::uname(&u) == 0) return u.machine;
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

void detect_caches(CpuInfo& c) {
  const fs::path base = "/sys/devices/system/cpu/cpu0/cache";
  int llc_level = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(base, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("index", 0) != 0) continue;
    const std::string level_s = trim(read_small_file(e.path() / "level"));
    const std::string type = trim(read_small_file(e.path() / "type"));
    const std::size_t size = parse_cache_size(trim(read_small_file(e.path() / "size")));
    unsigned level = 0;
    if (!parse_uint(level_s, level) || size == 0 || type == "Instruction") continue;
    if (level == 1 && type == "Data") c.l1d_bytes = size;
    if (level == 2) c.l2_bytes = std::max(c.l2_bytes, size);
    if (static_cast<int>(level) > llc_level ||
        (static_cast<int>(level) == llc_level && size > c.llc_bytes)) {
      llc_level = static_cast<int>(level);
      c.llc_bytes = size;
    }
  }
  // glibc's view (from CPUID on x86) when sysfs is missing.
  auto sc = [](int name) -> std::size_t {
    const long v = ::sysconf(name);
    return v > 0 ? static_cast<std::size_t>(v) : 0;
  };
#ifdef _SC_LEVEL1_DCACHE_SIZE
  if (c.l1d_bytes == 0) c.l1d_bytes = sc(_SC_LEVEL1_DCACHE_SIZE);
  if (c.l2_bytes == 0) c.l2_bytes = sc(_SC_LEVEL2_CACHE_SIZE);
  if (c.llc_bytes == 0) c.llc_bytes = sc(_SC_LEVEL3_CACHE_SIZE);
#endif
  if (c.llc_bytes == 0) c.llc_bytes = c.l2_bytes;
}

}  // namespace

bool CpuInfo::has(std::string_view ext) const {
  return std::find(isa.begin(), isa.end(), ext) != isa.end();
}

std::size_t parse_cache_size(std::string_view s) {
  const std::string t = trim(s);
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t[0]))) return 0;
  std::size_t i = 0;
  std::uint64_t v = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) {
    v = v * 10 + static_cast<std::uint64_t>(t[i] - '0');
    ++i;
  }
  std::uint64_t mult = 1;
  if (i < t.size()) {
    switch (std::toupper(static_cast<unsigned char>(t[i]))) {
      case 'K':
        mult = 1ull << 10;
        break;
      case 'M':
        mult = 1ull << 20;
        break;
      case 'G':
        mult = 1ull << 30;
        break;
      default:
        return 0;
    }
    ++i;
    if (i < t.size() && (t[i] == 'B' || t[i] == 'b')) ++i;  // "48KB"
    if (i != t.size()) return 0;
  }
  return static_cast<std::size_t>(v * mult);
}

CpuInfo parse_proc_cpuinfo(std::string_view text, std::string_view arch) {
  CpuInfo c;
  c.arch = std::string(arch);
  const auto f = cpuinfo_fields(text);
  auto get = [&](const char* k) -> std::string {
    auto it = f.find(k);
    return it == f.end() ? std::string() : it->second;
  };
  const bool arm = arch == "aarch64" || arch == "arm64" || arch.rfind("arm", 0) == 0;

  if (!arm) {
    c.vendor = get("vendor_id");
    c.model = get("model name");
    const std::set<std::string> flags = split_words(get("flags"));
    for (auto ext : kX86Isa) {
      // /proc/cpuinfo calls SSE3 "pni"; AVX10 appears as avx10_1 etc. on new kernels.
      const bool present = flags.count(std::string(ext)) || (ext == "sse3" && flags.count("pni")) ||
                           (ext == "avx10" && (flags.count("avx10_1") || flags.count("avx10_2")));
      if (present) c.isa.emplace_back(ext);
    }
  } else {
    unsigned impl = 0, part = 0;
    const bool have_impl = parse_uint(get("CPU implementer"), impl);
    const bool have_part = parse_uint(get("CPU part"), part);
    if (have_impl) c.vendor = arm_vendor(impl);
    if (have_impl && have_part) {
      c.model = arm_part(impl, part);
      if (c.model.empty()) c.model = fmt::format("{} part 0x{:03x}", c.vendor, part);
    }
    if (c.model.empty()) c.model = get("model name");
    if (c.model.empty()) c.model = get("Hardware");
    if (c.model.empty()) c.model = get("Processor");
    std::set<std::string> feats = split_words(get("Features"));
    if (feats.count("asimd")) feats.insert("neon");
    for (auto ext : kArmIsa)
      if (feats.count(std::string(ext))) c.isa.emplace_back(ext);
  }
  if (c.vendor.empty()) c.vendor = "unknown";
  if (c.model.empty()) c.model = "unknown";
  return c;
}

CpuInfo detect_cpu() {
  const std::string arch = uname_machine();
  CpuInfo c = parse_proc_cpuinfo(read_small_file("/proc/cpuinfo"), arch);
  unsigned hc = std::thread::hardware_concurrency();
  if (hc == 0) {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    hc = n > 0 ? static_cast<unsigned>(n) : 1;
  }
  c.logical_cores = static_cast<int>(hc);
  detect_caches(c);
  return c;
}

std::string machine_id(const CpuInfo& cpu) {
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}|", cpu.vendor, cpu.model, cpu.arch,
                                cpu.logical_cores, cpu.l1d_bytes, cpu.l2_bytes, cpu.llc_bytes);
  for (const auto& e : cpu.isa) key += e + ",";
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (unsigned char ch : key) {
    h ^= ch;
    h *= 1099511628211ull;  // FNV prime
  }
  return fmt::format("{:016x}", h);
}

int runnable_tasks() {
  std::ifstream in("/proc/loadavg");
  double a, b, c;
  std::string rt;
  if (!(in >> a >> b >> c >> rt)) return -1;
  const auto slash = rt.find('/');
  if (slash == std::string::npos) return -1;
  try {
    return std::stoi(rt.substr(0, slash));
  } catch (const std::exception&) {
    return -1;
  }
}

int competing_tasks(int others, int cores, int host_threads) {
  cores = std::max(cores, 1);
  const int spare = host_threads <= 0 ? 0 : std::max(0, cores - host_threads);
  return std::max(0, others - spare);
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::string contention_warning(double max_load, int cores) {
  if (cores < 1) throw std::invalid_argument("contention_warning: cores must be >= 1");
  if (!(max_load > cores + 1.0)) return "";
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "warning: the machine was busy during this run (load average up to %.1f on %d "
                "cores, other processes included): the latencies, speedups and keeps above may "
                "reflect the contention rather than the kernels; re-run on a quiet machine (see "
                "`uptime`) before trusting them",
                max_load, cores);
  return buf;
}

double system_load_average() {
  std::ifstream in("/proc/loadavg");
  double v = 0;
  if (!(in >> v)) return 0;
  return v;
}

}  // namespace vb
