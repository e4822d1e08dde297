#include "analysis/sass_mix.h"

#include <cstdlib>
#include <regex>

namespace vb::analysis {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool has_modifier(std::string_view opcode, std::string_view mod) {
  // ".128" as a whole dot-separated field.
  std::size_t pos = 0;
  while ((pos = opcode.find('.', pos)) != std::string_view::npos) {
    ++pos;
    const std::size_t end = opcode.find('.', pos);
    if (opcode.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos) == mod)
      return true;
  }
  return false;
}

// The opcode of an instruction line "/*00c0*/  @!P0 LDG.E.128 R8, ... ;  /* 0x.. */", or "".
std::string opcode_of(std::string_view line) {
  if (!starts_with(line, "/*")) return "";
  const std::size_t close = line.find("*/");
  if (close == std::string_view::npos) return "";
  // An address comment holds hex digits only; the encoding continuation line starts "/* 0x".
  const std::string_view addr = line.substr(2, close - 2);
  if (addr.empty() || addr.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos)
    return "";
  std::string_view rest = trim(line.substr(close + 2));
  if (starts_with(rest, "@")) {  // predicate guard
    const std::size_t sp = rest.find_first_of(" \t");
    if (sp == std::string_view::npos) return "";
    rest = trim(rest.substr(sp));
  }
  const std::size_t end = rest.find_first_of(" \t;");
  return std::string(rest.substr(0, end));
}

// `never`: the instruction is guarded by @!PT (never executed: ptxas's padding idiom).
void count(SassMix& m, const std::string& op, bool never) {
  const std::string base = op.substr(0, op.find('.'));
  if (base == "NOP") return;
  ++m.total;
  ++m.opcodes[base];
  if (base == "HMMA") {
    ++m.hmma;
    // HMMA.16816.F32.BF16: the first all-digit modifier is m n k (16 8 16 or 16 8 8).
    std::size_t p = op.find('.');
    while (p != std::string::npos) {
      const std::size_t q = op.find('.', p + 1);
      const std::string mod = op.substr(p + 1, q == std::string::npos ? std::string::npos : q - p - 1);
      if (!mod.empty() && mod.find_first_not_of("0123456789") == std::string::npos) {
        if (mod == "16816") m.hmma_flops += 2.0 * 16 * 8 * 16;
        else if (mod == "1688") m.hmma_flops += 2.0 * 16 * 8 * 8;
        else if (mod == "884") m.hmma_flops += 2.0 * 8 * 8 * 4;
        break;
      }
      p = q;
    }
  }
  else if (base == "HGMMA") ++m.hgmma;
  else if (base == "IMMA" || base == "IGMMA") ++m.imma;
  else if (base == "QGMMA") ++m.qgmma;
  else if (base == "QMMA" || base == "OMMA" || base == "DMMA" ||
           (starts_with(base, "UTC") && base.find("MMA") != std::string::npos))
    ++m.other_mma;
  else if (base == "FFMA" || base == "FFMA2") m.ffma += base == "FFMA2" ? 2 : 1;
  else if (base == "FADD" || base == "FMUL") ++m.fadd_fmul;
  else if (base == "FADD2" || base == "FMUL2") m.fadd_fmul += 2;
  else if ((base == "HFMA2" || base == "HADD2" || base == "HMUL2") && !has_modifier(op, "MMA") &&
           !has_modifier(op, "F32"))
    ++m.hfma2;  // HFMA2.MMA (a move idiom on the MMA pipe) and HADD2.F32 (a conversion) excluded
  else if (base == "LDG" || base == "STG") {
    const bool load = base == "LDG";
    (load ? m.ldg : m.stg)++;
    if (has_modifier(op, "256")) (load ? m.ldg_256 : m.stg_256)++;
    else if (has_modifier(op, "128")) (load ? m.ldg_128 : m.stg_128)++;
    else if (has_modifier(op, "64")) (load ? m.ldg_64 : m.stg_64)++;
  } else if (base == "LDS") {
    ++m.lds;
    if (!never) m.smem_read_bytes += has_modifier(op, "128") ? 512 : has_modifier(op, "64") ? 256 : 128;
  } else if (base == "STS") ++m.sts;
  else if (base == "LDSM") {
    ++m.ldsm;
    m.smem_read_bytes += has_modifier(op, "4") ? 512 : has_modifier(op, "2") ? 256 : 128;
  }
  else if (base == "LDGSTS") ++m.ldgsts;
  else if (base == "UTMALDG" || base == "UTMASTG" || base == "UBLKCP") ++m.tma;
  else if (base == "LDL") ++m.ldl;
  else if (base == "STL") ++m.stl;
  else if (base == "MUFU") ++m.mufu;
  else if (base == "ATOM" || base == "ATOMG" || base == "RED" || base == "ATOMS" || base == "REDG")
    ++m.atomics;
  else if (base == "BAR") ++m.barriers;
}

std::optional<int> product_of_hex(std::string_view values) {
  // "0x100 0x1 0x1" -> 256
  long p = 1;
  int n = 0;
  std::string s(values);
  const char* c = s.c_str();
  while (*c) {
    char* end = nullptr;
    const long v = std::strtol(c, &end, 0);
    if (end == c) break;
    p *= v;
    ++n;
    c = end;
    while (*c == ' ' || *c == '\t') ++c;
  }
  if (n == 0) return std::nullopt;
  return static_cast<int>(p);
}

}  // namespace

int SassMix::tensor_path_generation() const {
  long tcgen05 = 0;
  for (const auto& [op, n] : opcodes)
    if (op.rfind("UTC", 0) == 0 && op.find("MMA") != std::string::npos) tcgen05 += n;
  if (hgmma + qgmma + tcgen05 > 0) return 2;
  return tensor_core() > 0 ? 1 : 0;
}

double SassMix::mean_load_bytes() const {
  if (ldg == 0) return 0;
  const long narrow = ldg - ldg_64 - ldg_128 - ldg_256;
  return (4.0 * narrow + 8.0 * ldg_64 + 16.0 * ldg_128 + 32.0 * ldg_256) / static_cast<double>(ldg);
}

namespace {

// One instruction of a function, for the hot-loop scan: its address and, for a BRA, its target.
struct Instr {
  long addr = 0, target = -1;
  std::string op;
};

long address_of(std::string_view line) {
  return std::strtol(std::string(line.substr(2, line.find("*/") - 2)).c_str(), nullptr, 16);
}

// "BRA 0x8b0" (cuobjdump prints the absolute target), or -1.
long branch_target(std::string_view line) {
  const std::size_t b = line.find("BRA ");
  if (b == std::string_view::npos) return -1;
  const std::size_t x = line.find("0x", b);
  const std::size_t semi = line.find(';', b);
  if (x == std::string_view::npos || (semi != std::string_view::npos && x > semi)) return -1;
  return std::strtol(std::string(line.substr(x, 18)).c_str(), nullptr, 16);
}

// Fills m.loop_*: among the loops closed by backward branches, the one with the most tensor-core
// MMAs (ties: the innermost, i.e. the shortest); with no MMA anywhere, the longest loop body.
void find_hot_loop(SassMix& m, const std::vector<Instr>& ins) {
  long best_tc = -1, best_n = 0;
  for (std::size_t e = 0; e < ins.size(); ++e) {
    if (ins[e].target < 0 || ins[e].target > ins[e].addr) continue;
    std::size_t s = e;
    while (s > 0 && ins[s - 1].addr >= ins[e].target) --s;
    SassMix body;
    for (std::size_t i = s; i <= e; ++i) count(body, ins[i].op, false);
    const long tc = body.tensor_core();
    const bool better = tc > best_tc || (tc == best_tc && tc > 0 && body.total < best_n) ||
                        (tc == best_tc && tc == 0 && body.total > best_n);
    if (better) {
      best_tc = tc;
      best_n = body.total;
      m.loop_total = body.total;
      m.loop_tensor = tc;
      m.loop_hmma_flops = body.hmma_flops;
    }
  }
}

// Bytes one thread loads with a global load opcode (LDG.E.128 16, .64 8, .256 32, else 4; as
// SassMix::mean_load_bytes).
long ldg_bytes(const std::string& op) {
  if (has_modifier(op, "256")) return 32;
  if (has_modifier(op, "128")) return 16;
  if (has_modifier(op, "64")) return 8;
  return 4;
}

// Fills m.load_loops (the loops, i.e. backward branches, whose body holds a global load: LDG,
// not LDGSTS / LDGDEPBAR, and that enclose no other such loop) and, over those loops, the
// instructions and MUFUs of their bodies and the fewest LDG bytes per thread of one body.
void count_load_loops(SassMix& m, const std::vector<Instr>& ins) {
  auto is_ldg = [](const std::string& op) {
    return op.rfind("LDG", 0) == 0 && op.rfind("LDGSTS", 0) != 0 && op.rfind("LDGDEPBAR", 0) != 0;
  };
  std::vector<std::pair<std::size_t, std::size_t>> loops;  // [first, last] with an LDG
  for (std::size_t e = 0; e < ins.size(); ++e) {
    if (ins[e].target < 0 || ins[e].target > ins[e].addr) continue;
    std::size_t s = e;
    while (s > 0 && ins[s - 1].addr >= ins[e].target) --s;
    bool ldg = false;
    for (std::size_t i = s; i <= e && !ldg; ++i) ldg = is_ldg(ins[i].op);
    if (ldg) loops.emplace_back(s, e);
  }
  long n = 0;
  // Loops may overlap without nesting (ptxas's CUDA row kernels: two backward branches whose
  // bodies share instructions): an instruction counts once in load_loop_total / _mufu, so they
  // never exceed the kernel's totals.
  std::vector<bool> counted(ins.size(), false);
  for (const auto& a : loops) {
    bool encloses = false;
    for (const auto& b : loops)
      if (&a != &b && a.first <= b.first && b.second <= a.second && a != b) encloses = true;
    if (encloses) continue;
    ++n;
    long body = 0, mufu = 0, bytes = 0;
    for (std::size_t i = a.first; i <= a.second; ++i) {
      const std::string base = ins[i].op.substr(0, ins[i].op.find('.'));
      if (base == "NOP") continue;
      if (is_ldg(ins[i].op)) bytes += ldg_bytes(ins[i].op);  // per body: this loop's own loads
      if (counted[i]) continue;
      counted[i] = true;
      ++body;
      if (base == "MUFU") ++mufu;
    }
    m.load_loop_total += body;
    m.load_loop_mufu += mufu;
    if (m.load_loop_min_ldg_bytes == 0 || bytes < m.load_loop_min_ldg_bytes)
      m.load_loop_min_ldg_bytes = bytes;
  }
  m.load_loops = n;
}

}  // namespace

std::vector<SassMix> parse_sass_mix(std::string_view text) {
  std::vector<SassMix> out;
  std::vector<Instr> ins;
  std::string arch;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = trim(text.substr(pos, eol - pos));
    pos = eol + 1;
    if (starts_with(line, "code for ")) {
      arch = std::string(trim(line.substr(9)));
    } else if (starts_with(line, "Function : ")) {
      if (!out.empty()) {
        find_hot_loop(out.back(), ins);
        count_load_loops(out.back(), ins);
      }
      ins.clear();
      SassMix m;
      m.function = std::string(trim(line.substr(11)));
      m.arch = arch;
      out.push_back(std::move(m));
    } else if (!out.empty()) {
      const std::string op = opcode_of(line);
      if (!op.empty()) {
        count(out.back(), op, line.find("@!PT ") != std::string_view::npos);
        ins.push_back({address_of(line), op.rfind("BRA", 0) == 0 ? branch_target(line) : -1, op});
      }
    }
  }
  if (!out.empty()) {
    find_hot_loop(out.back(), ins);
    count_load_loops(out.back(), ins);
  }
  return out;
}

std::vector<KernelAttributes> parse_kernel_attributes(std::string_view elf_text) {
  std::vector<KernelAttributes> out;
  auto entry = [&](const std::string& fn) -> KernelAttributes& {
    for (auto& a : out)
      if (a.function == fn) return a;
    out.push_back(KernelAttributes{fn, {}, {}, {}, {}});
    return out.back();
  };
  static const std::regex regcount(R"(function:\s*(\S+?)\(0x[0-9a-fA-F]+\)\s*register count:\s*(\d+))");
  enum class Section { kOther, kModule, kKernel } kind = Section::kOther;
  std::string section;    // the kernel of a ".nv.info.<fn>" section
  std::string attribute;  // last "Attribute:" seen
  std::size_t pos = 0;
  while (pos < elf_text.size()) {
    std::size_t eol = elf_text.find('\n', pos);
    if (eol == std::string_view::npos) eol = elf_text.size();
    const std::string_view raw = elf_text.substr(pos, eol - pos);
    pos = eol + 1;
    const std::string_view line = trim(raw);
    if (!raw.empty() && raw[0] == '.') {  // a section header starts in column 0
      if (starts_with(line, ".nv.info.")) {
        kind = Section::kKernel;
        section = std::string(line.substr(9));
        entry(section);
      } else {
        kind = line == ".nv.info" ? Section::kModule : Section::kOther;
      }
      attribute.clear();
      continue;
    }
    if (kind == Section::kOther) continue;
    if (starts_with(line, "Attribute:")) {
      attribute = std::string(trim(line.substr(10)));
    } else if (starts_with(line, "Value:")) {
      const std::string_view value = trim(line.substr(6));
      if (kind == Section::kModule) {
        std::smatch m;
        const std::string v(value);
        if (attribute == "EIATTR_REGCOUNT" && std::regex_search(v, m, regcount))
          entry(m[1].str()).register_count = std::atoi(m[2].str().c_str());
      } else if (attribute == "EIATTR_MAX_THREADS") {
        entry(section).max_threads = product_of_hex(value);
      } else if (attribute == "EIATTR_REQNTID") {
        entry(section).required_threads = product_of_hex(value);
      } else if (attribute == "EIATTR_MAXREG_COUNT") {
        entry(section).max_registers = product_of_hex(value);
      }
    }
  }
  return out;
}

std::string nv_info_sections(std::string_view elf_text) {
  std::string out;
  bool keep = false;
  std::size_t pos = 0;
  while (pos < elf_text.size()) {
    std::size_t eol = elf_text.find('\n', pos);
    if (eol == std::string_view::npos) eol = elf_text.size();
    const std::string_view raw = elf_text.substr(pos, eol - pos);
    pos = eol + 1;
    if (!raw.empty() && raw[0] == '.') keep = starts_with(raw, ".nv.info");
    if (keep) {
      out.append(raw);
      out.push_back('\n');
    }
  }
  return out;
}

nlohmann::json to_json(const SassMix& m) {
  return {{"function", m.function}, {"arch", m.arch},       {"total", m.total},
          {"hmma", m.hmma},         {"hgmma", m.hgmma},     {"imma", m.imma},
          {"qgmma", m.qgmma},       {"other_mma", m.other_mma}, {"ffma", m.ffma},
          {"fadd_fmul", m.fadd_fmul}, {"hfma2", m.hfma2},   {"ldg", m.ldg},
          {"stg", m.stg},           {"ldg_64", m.ldg_64},   {"ldg_128", m.ldg_128},
          {"ldg_256", m.ldg_256},   {"stg_64", m.stg_64},   {"stg_128", m.stg_128},
          {"stg_256", m.stg_256},   {"lds", m.lds},         {"sts", m.sts},
          {"ldsm", m.ldsm},         {"ldgsts", m.ldgsts},   {"tma", m.tma},
          {"ldl", m.ldl},           {"stl", m.stl},         {"mufu", m.mufu},
          {"atomics", m.atomics},   {"barriers", m.barriers},
          {"smem_read_bytes", m.smem_read_bytes}, {"hmma_flops", m.hmma_flops},
          {"mean_load_bytes", m.mean_load_bytes()}, {"loop_total", m.loop_total},
          {"loop_tensor", m.loop_tensor}, {"loop_hmma_flops", m.loop_hmma_flops},
          {"load_loops", m.load_loops}, {"load_loop_total", m.load_loop_total},
          {"load_loop_mufu", m.load_loop_mufu},
          {"load_loop_min_ldg_bytes", m.load_loop_min_ldg_bytes}};
}

nlohmann::json to_json(const KernelAttributes& a) {
  nlohmann::json j{{"function", a.function}};
  j["max_threads"] = a.max_threads ? nlohmann::json(*a.max_threads) : nlohmann::json(nullptr);
  j["required_threads"] =
      a.required_threads ? nlohmann::json(*a.required_threads) : nlohmann::json(nullptr);
  j["max_registers"] = a.max_registers ? nlohmann::json(*a.max_registers) : nlohmann::json(nullptr);
  j["register_count"] =
      a.register_count ? nlohmann::json(*a.register_count) : nlohmann::json(nullptr);
  return j;
}

}  // namespace vb::analysis
