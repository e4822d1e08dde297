#include "analysis/ptxas_report.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <regex>

namespace vb::analysis {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "N bytes <what>" items of a comma-separated list ("Used 32 registers, used 0 barriers, ...").
void parse_items(std::string_view list, PtxasFunction& f, PtxasReport* module) {
  static const std::regex item(R"(^\s*(?:[Uu]sed\s+)?(\d+)\s+(.*?)\s*$)");
  static const std::regex cmem(R"(^bytes cmem\[(\d+)\]$)");
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string piece(list.substr(start, comma - start));
    start = comma + 1;
    std::smatch m;
    if (!std::regex_match(piece, m, item)) continue;
    const long n = std::strtol(m[1].str().c_str(), nullptr, 10);
    const std::string what = m[2].str();
    std::smatch c;
    if (std::regex_match(what, c, cmem)) {
      const int bank = std::atoi(c[1].str().c_str());
      if (module)
        module->module_cmem_bytes[bank] = n;
      else
        f.cmem_bytes[bank] = n;
    } else if (what == "bytes gmem") {
      if (module) module->gmem_bytes = n;
    } else if (what == "registers") {
      f.registers = static_cast<int>(n);
    } else if (what == "barriers") {
      f.barriers = static_cast<int>(n);
    } else if (what == "bytes smem") {
      f.smem_bytes = n;
    } else if (what == "bytes stack frame") {
      f.stack_frame_bytes = n;
    } else if (what == "bytes spill stores") {
      f.spill_store_bytes = n;
    } else if (what == "bytes spill loads") {
      f.spill_load_bytes = n;
    } else if (what == "bytes cumulative stack size") {
      f.cumulative_stack_bytes = n;
    } else if (what == "textures") {
      f.textures = static_cast<int>(n);
    } else if (what == "samplers") {
      f.samplers = static_cast<int>(n);
    } else if (what == "surfaces") {
      f.surfaces = static_cast<int>(n);
    }
    if (comma == list.size()) break;
  }
}

// A wgmma serialization line's message (the text after "ptxas info    :"), e.g.
//   (C7520) Potential Performance Loss: wgmma.mma_async instructions are serialized due to
//   program dependence on compiler-inserted WG.AR in divergent path in the function '_Z1kPf'
// -> {code "C7520", reason "program dependence ... divergent path", function "_Z1kPf"}. The
// code, the "due to" and the function may each be missing; false for any other message.
bool parse_wgmma_serialization(std::string_view body, WgmmaSerialization& w) {
  static constexpr std::string_view kSerialized = "wgmma.mma_async instructions are serialized";
  const std::size_t at = body.find(kSerialized);
  if (at == std::string_view::npos) return false;
  w = WgmmaSerialization{};
  static const std::regex code(R"(\((C\d+)\))");
  const std::string head(body.substr(0, at));
  std::smatch m;
  if (std::regex_search(head, m, code)) w.code = m[1].str();
  std::string_view rest = trim(body.substr(at + kSerialized.size()));
  for (const std::string_view marker : {std::string_view("in the function"), std::string_view("in function")}) {
    const std::size_t f = rest.rfind(marker);
    if (f == std::string_view::npos || (f > 0 && rest[f - 1] != ' ')) continue;
    std::string_view name = trim(rest.substr(f + marker.size()));
    while (!name.empty() && (name.back() == '.' || name.back() == ',')) name.remove_suffix(1);
    const auto quote = [](char c) { return c == '\'' || c == '"' || c == '`'; };
    if (!name.empty() && quote(name.front())) name.remove_prefix(1);
    if (!name.empty() && quote(name.back())) name.remove_suffix(1);
    w.function = std::string(trim(name));
    rest = trim(rest.substr(0, f));
    break;
  }
  if (starts_with(rest, "due to ")) rest = trim(rest.substr(7));
  while (!rest.empty() && (rest.back() == '.' || rest.back() == ',')) rest = trim(rest.substr(0, rest.size() - 1));
  w.reason = rest.empty() ? "no reason given" : std::string(rest);
  return true;
}

}  // namespace

std::string demangle(const std::string& symbol) {
  if (!starts_with(symbol, "_Z")) return symbol;
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : symbol;
}

std::vector<const PtxasFunction*> PtxasReport::entries() const {
  std::vector<const PtxasFunction*> v;
  for (const auto& f : functions)
    if (f.entry) v.push_back(&f);
  return v;
}

const PtxasFunction* PtxasReport::find(std::string_view mangled) const {
  for (const auto& f : functions)
    if (f.mangled == mangled) return &f;
  return nullptr;
}

bool PtxasReport::toolchain_lacks_arch() const {
  for (const auto& e : errors)
    if (e.message.find("Unsupported gpu architecture") != std::string::npos ||
        e.message.find("is not defined for option 'gpu-name'") != std::string::npos)
      return true;
  return false;
}

std::string PtxasReport::first_error() const {
  for (const auto& e : errors)
    if (e.severity == "error") return e.tool + " " + e.severity + ": " + e.message;
  if (!errors.empty()) return errors[0].tool + " " + errors[0].severity + ": " + errors[0].message;
  return "";
}

std::vector<const WgmmaSerialization*> PtxasReport::unattached_wgmma_serializations() const {
  std::vector<const WgmmaSerialization*> v;
  for (const auto& w : wgmma_serializations)
    if (!w.attached) v.push_back(&w);
  return v;
}

PtxasReport parse_ptxas_report(std::string_view text) {
  PtxasReport r;
  // ptxas diagnostics: "ptxas error   : msg", "ptxas /tmp/x.ptx, line 31; error   : msg".
  static const std::regex ptxas_diag(
      R"(^ptxas(?:-blackwell)?\s+(?:(\S.*?), line (\d+);\s*)?(error|fatal|warning)\s*:\s*(.*)$)");
  // nvcc front end (EDG): "file.cu(12): error: msg", "file.cu(3): warning #177-D: msg".
  static const std::regex front_diag(R"(^(.+?)\((\d+)\): (error|warning)[^:]*:\s*(.*)$)");
  // nvcc driver: "nvcc fatal   : Unsupported gpu architecture 'compute_999a'".
  static const std::regex driver_diag(R"(^nvcc\s+(error|fatal|warning)\s*:\s*(.*)$)");
  static const std::regex compiling(R"(^Compiling entry function '([^']+)' for '([^']+)')");
  PtxasFunction* current = nullptr;  // the function the next numbers belong to
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view raw = text.substr(pos, eol - pos);
    pos = eol + 1;
    const std::string line(trim(raw));
    if (line.empty()) continue;
    std::smatch m;
    if (starts_with(line, "ptxas info") || starts_with(line, "ptxas-blackwell info")) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string body(trim(std::string_view(line).substr(colon + 1)));
      WgmmaSerialization w;
      if (parse_wgmma_serialization(body, w)) {
        // Printed before the function's own lines: attached once the whole report is read.
        r.wgmma_serializations.push_back(std::move(w));
      } else if (std::regex_search(body, m, compiling)) {
        PtxasFunction f;
        f.mangled = m[1].str();
        f.demangled = demangle(f.mangled);
        f.arch = m[2].str();
        f.entry = true;
        r.functions.push_back(std::move(f));
        current = &r.functions.back();
      } else if (starts_with(body, "Function properties for ")) {
        const std::string name(trim(std::string_view(body).substr(24)));
        current = nullptr;
        for (auto& f : r.functions)
          if (f.mangled == name) current = &f;
        if (!current) {  // a non-entry (device) function: properties only
          PtxasFunction f;
          f.mangled = name;
          f.demangled = demangle(name);
          r.functions.push_back(std::move(f));
          current = &r.functions.back();
        }
      } else if (starts_with(body, "Used ")) {
        if (current) parse_items(body, *current, nullptr);
      } else if (body.find("bytes gmem") != std::string::npos) {
        PtxasFunction unused;
        parse_items(body, unused, &r);
      }
    } else if (std::regex_match(line, m, ptxas_diag)) {
      CompileDiagnostic d{"ptxas", m[3].str(), m[1].str(),
                          m[2].matched ? std::atoi(m[2].str().c_str()) : 0, m[4].str()};
      WgmmaSerialization w;  // should a ptxas print it as a warning rather than info
      if (parse_wgmma_serialization(d.message, w)) r.wgmma_serializations.push_back(std::move(w));
      (d.severity == "warning" ? r.warnings : r.errors).push_back(std::move(d));
    } else if (std::regex_match(line, m, driver_diag)) {
      CompileDiagnostic d{"nvcc", m[1].str(), "", 0, m[2].str()};
      (d.severity == "warning" ? r.warnings : r.errors).push_back(std::move(d));
    } else if (std::regex_match(line, m, front_diag)) {
      CompileDiagnostic d{"nvcc", m[3].str(), m[1].str(), std::atoi(m[2].str().c_str()),
                          m[4].str()};
      (d.severity == "warning" ? r.warnings : r.errors).push_back(std::move(d));
    } else if (current && line.find("bytes stack frame") != std::string::npos) {
      parse_items(line, *current, nullptr);
    }
  }
  for (auto& w : r.wgmma_serializations) {
    if (w.function.empty()) continue;
    for (auto& f : r.functions) {
      if (f.mangled != w.function && f.demangled != w.function) continue;
      if (f.wgmma_serialized_reason.find(w.reason) == std::string::npos)
        f.wgmma_serialized_reason += (f.wgmma_serialized_reason.empty() ? "" : "; ") + w.reason;
      if (f.wgmma_serialized_code.empty()) f.wgmma_serialized_code = w.code;
      w.attached = true;
      break;
    }
  }
  return r;
}

nlohmann::json to_json(const PtxasFunction& f) {
  nlohmann::json j{{"mangled", f.mangled},
                   {"demangled", f.demangled},
                   {"entry", f.entry},
                   {"registers", f.registers},
                   {"barriers", f.barriers},
                   {"smem_bytes", f.smem_bytes},
                   {"stack_frame_bytes", f.stack_frame_bytes},
                   {"spill_store_bytes", f.spill_store_bytes},
                   {"spill_load_bytes", f.spill_load_bytes},
                   {"cumulative_stack_bytes", f.cumulative_stack_bytes}};
  if (!f.arch.empty()) j["arch"] = f.arch;
  j["wgmma_serialized"] = f.wgmma_serialized();
  if (f.wgmma_serialized()) {
    j["wgmma_serialized_reason"] = f.wgmma_serialized_reason;
    j["wgmma_serialized_code"] = f.wgmma_serialized_code;
  }
  nlohmann::json c = nlohmann::json::object();
  for (const auto& [bank, n] : f.cmem_bytes) c[std::to_string(bank)] = n;
  j["cmem_bytes"] = c;
  return j;
}

nlohmann::json to_json(const CompileDiagnostic& d) {
  return {{"tool", d.tool}, {"severity", d.severity}, {"file", d.file}, {"line", d.line},
          {"message", d.message}};
}

nlohmann::json to_json(const WgmmaSerialization& w) {
  return {{"code", w.code}, {"reason", w.reason}, {"function", w.function}, {"attached", w.attached}};
}

}  // namespace vb::analysis
