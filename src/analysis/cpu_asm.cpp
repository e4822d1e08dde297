#include "analysis/cpu_asm.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

namespace vb::analysis {

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string l;
  while (std::getline(in, l)) lines.push_back(l);
  return lines;
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// The instruction text of an assembly line without its trailing comment, or "" for labels,
// directives, comments and blank lines.
std::string instruction_of(const std::string& line, AsmIsa isa) {
  std::string s = line;
  const auto c = s.find(isa == AsmIsa::X86_64 ? "#" : "//");
  if (c != std::string::npos) s = s.substr(0, c);
  s = trim(s);
  if (s.empty() || s[0] == '.' || s.back() == ':') return "";
  return s;
}

std::string label_of(const std::string& line) {
  static const std::regex re(R"(^([A-Za-z_.$][\w.$]*):)");
  std::smatch m;
  if (std::regex_search(line, m, re)) return m[1];
  return "";
}

// Target label of a branch instruction, or "".
std::string branch_target(const std::string& ins, AsmIsa isa) {
  std::istringstream in(ins);
  std::string mn;
  in >> mn;
  std::string rest;
  std::getline(in, rest);
  rest = trim(rest);
  if (isa == AsmIsa::X86_64) {
    if (mn.empty() || mn[0] != 'j') return "";
    if (rest.empty() || rest[0] == '*') return "";
    return rest;
  }
  if (mn == "b" || mn.rfind("b.", 0) == 0 || mn == "cbz" || mn == "cbnz" || mn == "tbz" ||
      mn == "tbnz") {
    const auto comma = rest.rfind(',');
    return trim(comma == std::string::npos ? rest : rest.substr(comma + 1));
  }
  return "";
}

struct InsInfo {
  bool vector = false;
  int vector_bytes = 0;
  double flops = 0;
  bool load = false, store = false;
};

InsInfo classify(const std::string& ins, AsmIsa isa, int sve_bytes) {
  InsInfo r;
  std::istringstream in(ins);
  std::string mn;
  in >> mn;
  std::string ops;
  std::getline(in, ops);
  if (isa == AsmIsa::X86_64) {
    int bytes = 0;
    if (ops.find("%zmm") != std::string::npos) bytes = 64;
    else if (ops.find("%ymm") != std::string::npos) bytes = 32;
    else if (ops.find("%xmm") != std::string::npos) bytes = 16;
    r.vector = bytes > 0;
    const bool packed = mn.size() > 2 && (mn.ends_with("ps") || mn.ends_with("pd"));
    const bool scalar = mn.size() > 2 && (mn.ends_with("ss") || mn.ends_with("sd"));
    if (packed) r.vector_bytes = bytes;
    const int elem = mn.ends_with("pd") || mn.ends_with("sd") ? 8 : 4;
    const int lanes = packed ? std::max(1, bytes / elem) : (scalar ? 1 : 0);
    static const std::regex fma(R"(^v?f(n)?m(add|sub)(\d{3})?(ps|pd|ss|sd)$)");
    static const std::regex arith(R"(^v?(add|sub|mul|div|max|min)(ps|pd|ss|sd)$)");
    if (lanes > 0) {
      if (std::regex_match(mn, fma)) r.flops = 2.0 * lanes;
      else if (std::regex_match(mn, arith)) r.flops = lanes;
    }
    // AT&T: the memory operand is "(...)"; it is the destination when it is the last operand.
    const auto paren = ops.find('(');
    if (paren != std::string::npos && mn.rfind("lea", 0) != 0 && mn != "nop" &&
        mn.rfind("prefetch", 0) != 0) {
      const auto last_comma = ops.rfind(',');
      const bool mem_last = last_comma == std::string::npos || ops.find('(', last_comma) != std::string::npos;
      if (mem_last && last_comma != std::string::npos && mn.rfind("cmp", 0) != 0 &&
          mn.rfind("test", 0) != 0)
        r.store = true;
      else
        r.load = true;
    }
    return r;
  }
  // AArch64
  static const std::regex sve(R"(\bz\d+\.([bhsd]))");
  static const std::regex neon(R"(\bv\d+\.(\d+)([bhsd]))");
  static const std::regex qreg(R"(\bq\d+\b)");
  static const std::regex sreg(R"(^\s*[sd]\d+\b)");
  std::smatch m;
  int lanes = 0;
  if (std::regex_search(ops, m, sve)) {
    r.vector = true;
    r.vector_bytes = sve_bytes;
    const char e = m[1].str()[0];
    const int eb = e == 'b' ? 1 : e == 'h' ? 2 : e == 's' ? 4 : 8;
    lanes = sve_bytes / eb;
  } else if (std::regex_search(ops, m, neon)) {
    r.vector = true;
    const int n = std::stoi(m[1]);
    const char e = m[2].str()[0];
    const int eb = e == 'b' ? 1 : e == 'h' ? 2 : e == 's' ? 4 : 8;
    r.vector_bytes = n * eb;
    lanes = n;
  } else if (std::regex_search(ops, m, qreg)) {
    r.vector = true;
    r.vector_bytes = 16;
  } else if (std::regex_search(ops, m, sreg)) {
    lanes = 1;
  }
  static const std::regex fma(R"(^(fmla|fmls|fmad|fmsb|fmadd|fmsub|fnmadd|fnmsub)$)");
  static const std::regex arith(R"(^(fadd|fsub|fmul|fdiv|fmax|fmin|fmaxnm|fminnm|faddp|fadda)$)");
  if (lanes > 0) {
    if (std::regex_match(mn, fma)) r.flops = 2.0 * lanes;
    else if (std::regex_match(mn, arith)) r.flops = lanes;
  }
  if (mn.rfind("ld", 0) == 0) r.load = true;
  if (mn.rfind("st", 0) == 0) r.store = true;
  return r;
}

}  // namespace

std::vector<LoopRemark> parse_loop_remarks(const std::string& text) {
  std::vector<LoopRemark> out;
  std::set<std::tuple<std::string, int, bool>> seen;
  static const std::regex clang_ok(
      R"(^([^:\s]+):(\d+):\d+: remark: vectorized loop \(vectorization width: (vscale x )?(\d+)(, interleaved count: (\d+))?)");
  static const std::regex clang_miss(
      R"(^([^:\s]+):(\d+):\d+: remark: loop not vectorized:? ?(.*?)\s*(\[-Rpass-missed=loop-vectorize\])?$)");
  static const std::regex gcc_ok(
      R"(^([^:\s]+):(\d+):\d+: optimized: loop vectorized using (\d+) byte vectors)");
  static const std::regex gcc_miss(R"(^([^:\s]+):(\d+):\d+: missed: couldn't vectorize loop)");
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    LoopRemark r;
    if (std::regex_search(line, m, clang_ok)) {
      r = {m[1], std::stoi(m[2]), true, std::stoi(m[4]), m[3].matched,
           m[6].matched ? std::stoi(m[6]) : 0, 0, ""};
    } else if (std::regex_search(line, m, clang_miss)) {
      r = {m[1], std::stoi(m[2]), false, 0, false, 0, 0, trim(m[3])};
    } else if (std::regex_search(line, m, gcc_ok)) {
      r = {m[1], std::stoi(m[2]), true, 0, false, 0, std::stoi(m[3]), ""};
    } else if (std::regex_search(line, m, gcc_miss)) {
      r = {m[1], std::stoi(m[2]), false, 0, false, 0, 0, "couldn't vectorize loop"};
    } else {
      continue;
    }
    if (seen.insert({r.file, r.line, r.vectorized}).second) out.push_back(r);
  }
  return out;
}

std::vector<AsmLoop> find_innermost_loops(const std::string& assembly, AsmIsa isa,
                                          int sve_bytes) {
  const auto lines = split_lines(assembly);
  std::map<std::string, int> label_line;
  std::vector<std::string> function_at(lines.size());
  std::string fn;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string l = label_of(lines[i]);
    if (!l.empty()) {
      label_line[l] = static_cast<int>(i);
      if (l[0] != '.') fn = l;
    }
    function_at[i] = fn;
  }
  struct Span {
    int b, e;
    std::string label;
  };
  std::vector<Span> spans;
  for (std::size_t j = 0; j < lines.size(); ++j) {
    const std::string ins = instruction_of(lines[j], isa);
    if (ins.empty()) continue;
    const std::string t = branch_target(ins, isa);
    if (t.empty()) continue;
    auto it = label_line.find(t);
    if (it == label_line.end() || it->second >= static_cast<int>(j)) continue;
    if (function_at[it->second] != function_at[j]) continue;
    spans.push_back({it->second, static_cast<int>(j), t});
  }
  std::vector<AsmLoop> loops;
  for (const auto& s : spans) {
    bool inner = true;
    for (const auto& o : spans)
      if (&o != &s && o.b >= s.b && o.e <= s.e && (o.b != s.b || o.e != s.e)) inner = false;
    if (!inner) continue;
    AsmLoop L;
    L.function = function_at[s.b];
    L.label = s.label;
    L.begin_line = s.b;
    L.end_line = s.e;
    for (int i = s.b; i <= s.e; ++i) {
      const std::string ins = instruction_of(lines[i], isa);
      if (ins.empty()) continue;
      ++L.instructions;
      const InsInfo c = classify(ins, isa, sve_bytes);
      if (c.vector) ++L.vector_instructions;
      L.max_vector_bytes = std::max(L.max_vector_bytes, c.vector_bytes);
      L.flops_per_iteration += c.flops;
      L.loads += c.load;
      L.stores += c.store;
    }
    loops.push_back(L);
  }
  return loops;
}

const AsmLoop* hot_loop(const std::vector<AsmLoop>& loops) {
  const AsmLoop* best = nullptr;
  for (const auto& l : loops) {
    if (!best ||
        std::tie(l.flops_per_iteration, l.vector_instructions, l.instructions) >
            std::tie(best->flops_per_iteration, best->vector_instructions, best->instructions))
      best = &l;
  }
  return best;
}

std::string insert_mca_markers(const std::string& assembly, const AsmLoop& loop, AsmIsa isa,
                               const std::string& name) {
  const auto lines = split_lines(assembly);
  // llvm-mca recognises the markers in '#' comments on both ISAs (on AArch64 '//' comments are
  // not scanned for them; checked with llvm-mca 19).
  (void)isa;
  const std::string c = "# ";
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (static_cast<int>(i) == loop.begin_line) out += c + "LLVM-MCA-BEGIN " + name + "\n";
    out += lines[i] + "\n";
    if (static_cast<int>(i) == loop.end_line) out += c + "LLVM-MCA-END " + name + "\n";
  }
  return out;
}

std::vector<McaRegion> parse_llvm_mca(const std::string& text) {
  const auto lines = split_lines(text);
  std::vector<McaRegion> out;
  static const std::regex region(R"(^\[\d+\] Code Region(?: - (.*))?$)");
  static const std::regex kv(R"(^([A-Za-z ]+):\s+([0-9.]+)\s*$)");
  std::smatch m;
  bool any_summary = false;
  McaRegion* cur = nullptr;
  std::vector<std::string> resource_names;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string l = trim(lines[i]);
    if (std::regex_match(l, m, region)) {
      out.push_back({});
      out.back().name = m[1].matched ? trim(m[1]) : "";
      cur = &out.back();
      resource_names.clear();
      continue;
    }
    if (std::regex_match(l, m, kv)) {
      if (!cur) {
        out.push_back({});
        cur = &out.back();
      }
      const std::string k = m[1];
      const double v = std::stod(m[2]);
      if (k == "Iterations") cur->iterations = static_cast<int>(v), any_summary = true;
      else if (k == "Instructions") cur->instructions = static_cast<long>(v);
      else if (k == "Total Cycles") cur->total_cycles = static_cast<long>(v);
      else if (k == "IPC") cur->ipc = v;
      else if (k == "Block RThroughput") cur->block_rthroughput = v;
      continue;
    }
    if (!cur) continue;
    static const std::regex res(R"(^\[(\d+)\]\s+-\s+(\S+)$)");
    if (std::regex_match(l, m, res)) {
      const auto idx = static_cast<std::size_t>(std::stoi(m[1]));
      if (resource_names.size() <= idx) resource_names.resize(idx + 1);
      resource_names[idx] = m[2];
      continue;
    }
    if (l == "Resource pressure per iteration:" && i + 2 < lines.size()) {
      std::istringstream vals(lines[i + 2]);
      std::string tok;
      std::size_t idx = 0;
      while (vals >> tok) {
        if (tok != "-" && idx < resource_names.size()) {
          const double v = std::stod(tok);
          if (v > cur->bottleneck_pressure) {
            cur->bottleneck_pressure = v;
            cur->bottleneck_resource = resource_names[idx];
          }
        }
        ++idx;
      }
      continue;
    }
    static const std::regex pressure(R"(^Resource Pressure\s+\[\s*([0-9.]+)%\s*\])");
    static const std::regex deps(R"(^Data Dependencies:\s+\[\s*([0-9.]+)%\s*\])");
    if (std::regex_search(l, m, pressure))
      cur->bottleneck_summary += "resource pressure " + m[1].str() + "%";
    else if (std::regex_search(l, m, deps))
      cur->bottleneck_summary +=
          (cur->bottleneck_summary.empty() ? "" : ", ") + std::string("data dependencies ") +
          m[1].str() + "%";
    else if (l.rfind("No resource or data dependency bottlenecks", 0) == 0)
      cur->bottleneck_summary = "no resource or data dependency bottleneck";
  }
  if (!any_summary)
    throw std::runtime_error("not an llvm-mca report (no \"Iterations:\" line)");
  for (auto& r : out)
    if (r.iterations > 0) r.cycles_per_iteration = static_cast<double>(r.total_cycles) / r.iterations;
  return out;
}

}  // namespace vb::analysis
