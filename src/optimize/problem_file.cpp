#include "optimize/problem_file.h"

#include <fmt/format.h>

#include <stdexcept>

#include "core/paths.h"

namespace vb::opt {

namespace {
using json = nlohmann::json;

[[noreturn]] void bad(const std::filesystem::path& f, const std::string& what) {
  throw std::runtime_error(f.string() + ": " + what);
}

const json& field(const std::filesystem::path& f, const json& obj, const char* name,
                  const std::string& prefix, json::value_t want) {
  if (!obj.contains(name)) bad(f, "missing field '" + prefix + name + "'");
  const json& v = obj.at(name);
  const bool ok = want == json::value_t::number_float ? v.is_number()
                  : want == json::value_t::string    ? v.is_string()
                                                     : v.is_object();
  if (!ok)
    bad(f, "field '" + prefix + name + "' must be " +
               (want == json::value_t::number_float ? "a number"
                : want == json::value_t::string     ? "a string"
                                                    : "an object"));
  return v;
}
}  // namespace

KernelProblem read_problem_file(const std::filesystem::path& path) {
  const auto f = std::filesystem::is_directory(path) ? path / "problem.json" : path;
  if (!std::filesystem::exists(f))
    throw std::runtime_error(f.string() +
                             " does not exist (a kernel folder holds problem.json and its one "
                             "editable source; create them with `vladbud extract`)");
  json j;
  try {
    j = json::parse(read_file(f));
  } catch (const json::parse_error& e) {
    bad(f, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) bad(f, "top level must be a JSON object");
  KernelProblem p;
  p.raw = j;
  p.kernel = field(f, j, "kernel", "", json::value_t::string).get<std::string>();
  if (!find_kernel_type(p.kernel))
    bad(f, "field 'kernel' is '" + p.kernel + "'; expected one of: " + kernel_type_names());
  const auto dt = field(f, j, "dtype", "", json::value_t::string).get<std::string>();
  const auto d = parse_dtype(dt);
  if (!d || !is_floating(*d) || *d == DType::F64)
    bad(f, "field 'dtype' is '" + dt + "'; expected fp32, fp16 or bf16");
  p.dtype = *d;
  p.backend = field(f, j, "backend", "", json::value_t::string).get<std::string>();
  // The size: {"size": {"label", "dims", "attrs"}} (the optimizer's contract) or, as
  // `vladbud extract` writes it, top-level "dims", "attrs" and "size_label".
  const bool nested = j.contains("size");
  const json& s = nested ? field(f, j, "size", "", json::value_t::object) : j;
  const std::string pre = nested ? "size." : "";
  if (nested) {
    p.size.label = field(f, s, "label", pre, json::value_t::string).get<std::string>();
  } else if (j.contains("size_label") && j["size_label"].is_string()) {
    p.size.label = j["size_label"].get<std::string>();
  }
  if (!nested && !j.contains("dims")) bad(f, "missing field 'size' (or top-level 'dims')");
  const json& dims = field(f, s, "dims", pre, json::value_t::object);
  for (const auto& [k, v] : dims.items()) {
    if (!v.is_number_integer()) bad(f, "field '" + pre + "dims." + k + "' must be an integer");
    p.size.dims[k] = v.get<std::int64_t>();
  }
  if (s.contains("attrs")) {
    if (!s["attrs"].is_object()) bad(f, "field '" + pre + "attrs' must be an object");
    for (const auto& [k, v] : s["attrs"].items()) {
      if (!v.is_number()) bad(f, "field '" + pre + "attrs." + k + "' must be a number");
      p.size.attrs[k] = v.get<double>();
    }
  }
  if (p.size.label.empty())
    for (const auto& [k, v] : p.size.dims) p.size.label += fmt::format("{}{}{}", p.size.label.empty() ? "" : "-", k, v);
  // Share of model time: "time_share" (contract) or "share" (`vladbud extract`).
  const char* share_key = j.contains("time_share") || !j.contains("share") ? "time_share" : "share";
  p.time_share = field(f, j, share_key, "", json::value_t::number_float).get<double>();
  if (!(p.time_share >= 0 && p.time_share <= 1))
    bad(f, std::string("field '") + share_key + "' must be a fraction of the model's time in [0, 1]");
  if (j.contains("model") && j["model"].is_string()) p.model = j["model"].get<std::string>();
  if (j.contains("model") && j["model"].is_object())
    for (const char* k : {"name", "id", "class_name", "class"})
      if (j["model"].contains(k) && j["model"][k].is_string()) {
        p.model = j["model"][k].get<std::string>();
        break;
      }
  // The shape must be a valid problem of the type (names the missing dimension otherwise).
  try {
    (void)find_kernel_type(p.kernel)->make_problem(p.size, p.dtype);
  } catch (const std::exception& e) {
    bad(f, std::string("field 'size' is not a valid ") + p.kernel + " problem: " + e.what());
  }
  return p;
}

nlohmann::json problem_to_json(const KernelProblem& p) {
  json j = p.raw.is_object() ? p.raw : json::object();
  j["kernel"] = p.kernel;
  j["dtype"] = std::string(dtype_name(p.dtype));
  j["backend"] = p.backend;
  j["size"] = {{"label", p.size.label}, {"dims", p.size.dims}, {"attrs", p.size.attrs}};
  j["time_share"] = p.time_share;
  if (!p.model.empty()) j["model"] = p.model;
  return j;
}

}  // namespace vb::opt
