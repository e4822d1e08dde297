#include "backends/backend.h"

#include <regex>
#include <sstream>
#include <stdexcept>

#include "core/paths.h"

namespace vb {

std::filesystem::path Backend::starter_source(std::string_view kernel) const {
  return vladbud_home() / "kernels" / name() / (std::string(kernel) + source_extension());
}

std::filesystem::path Backend::variants_dir(std::string_view kernel) const {
  return vladbud_home() / "kernels" / "variants" / name() / std::string(kernel);
}

namespace {

class PreprocessorParamSyntax final : public ParamSyntax {
 public:
  std::string how_to_declare() const override {
    return "'// @vb-param NAME DEFAULT {V1,V2,...} description' lines with their "
           "'#ifndef NAME / #define NAME DEFAULT / #endif' defaults";
  }
  std::optional<std::pair<std::string, std::string>> binding(
      const std::string& line) const override {
    // "#define NAME VALUE" (leading whitespace and spaces after '#' allowed).
    static const std::regex re(R"(^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)\s+(\S.*?)\s*$)");
    std::smatch m;
    if (!std::regex_match(line, m, re)) return std::nullopt;
    return std::make_pair(m[1].str(), m[2].str());
  }
  std::string rebind(const std::string&, const std::string& name,
                     const std::string& value) const override {
    return "#define " + name + " " + value;
  }
  std::optional<std::string> prepended(const std::string& name,
                                       const std::string& value) const override {
    return "#define " + name + " " + value;
  }
};

}  // namespace

const ParamSyntax& preprocessor_param_syntax() {
  static const PreprocessorParamSyntax s;
  return s;
}

void Backend::set_target_arch(const std::string&) const {
  throw std::invalid_argument("backend " + name() + " has no selectable target architecture");
}

std::vector<VectorizedLoop> parse_vectorization_report(const std::string& text) {
  std::vector<VectorizedLoop> loops;
  static const std::regex gcc(
      R"(^([^:\s]+):(\d+):\d+: optimized: loop vectorized using (\d+) byte vectors)");
  static const std::regex clang(
      R"(^([^:\s]+):(\d+):\d+: remark: vectorized loop \(vectorization width: (\d+))");
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, gcc)) {
      loops.push_back({m[1], std::stoi(m[2]), std::stoi(m[3])});
    } else if (std::regex_search(line, m, clang)) {
      loops.push_back({m[1], std::stoi(m[2]), 0});
    }
  }
  return loops;
}

}  // namespace vb
