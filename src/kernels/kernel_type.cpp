#include "kernels/kernel_type.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace vb {

std::int64_t Problem::dim(std::string_view name) const {
  auto it = size.dims.find(std::string(name));
  if (it == size.dims.end())
    throw std::out_of_range("size '" + size.label + "' of " + kernel + " has no dimension '" +
                            std::string(name) + "'");
  return it->second;
}

double Problem::attr(std::string_view name) const {
  for (std::size_t i = 0; i < attr_names.size(); ++i)
    if (attr_names[i] == name) return attrs.at(i);
  throw std::out_of_range(kernel + " has no attribute '" + std::string(name) + "'");
}

std::string Problem::describe() const {
  std::ostringstream o;
  o << kernel << " " << size.label << " " << dtype_name(dtype);
  if (!attrs.empty()) {
    o << " [";
    for (std::size_t i = 0; i < attrs.size(); ++i) {
      if (i) o << ", ";
      o << attr_names[i] << "=" << attrs[i];
    }
    o << "]";
  }
  return o.str();
}

double KernelType::operand_bytes_per_flop(const Problem&, double) const { return 0; }

std::vector<KernelType::LaunchWork> KernelType::launch_work(const Problem&,
                                                            const std::vector<double>&) const {
  return {};
}

double KernelType::min_bytes(const Problem& p) const {
  double b = 0;
  for (const auto& t : p.inputs) b += static_cast<double>(t.nbytes());
  for (const auto& t : p.outputs) b += static_cast<double>(t.nbytes());
  return b;
}

std::int64_t KernelType::compare_row_length(const Problem& p, int output_index) const {
  const auto& shape = p.outputs.at(static_cast<std::size_t>(output_index)).shape;
  return shape.empty() ? 1 : shape.back();
}

std::vector<Size> KernelType::all_sizes(DeviceKind device) const {
  std::vector<Size> out;
  auto add = [&](const Size& s) {
    for (const auto& o : out)
      if (o.label == s.label) return;
    out.push_back(s);
  };
  add(smoke_size());
  for (const auto& s : test_sizes()) add(s);
  for (const auto& s : edge_sizes()) add(s);
  for (const auto& c : stability_cases()) add(c.size);
  add(benchmark_size(device));
  return out;
}

std::optional<Size> KernelType::find_size(std::string_view label, DeviceKind device) const {
  for (const auto& s : all_sizes(device))
    if (s.label == label) return s;
  return std::nullopt;
}

std::vector<double> KernelType::resolve_attrs(const Size& size) const {
  std::vector<double> v;
  for (const auto& a : attributes()) {
    auto it = size.attrs.find(a.name);
    v.push_back(it != size.attrs.end() ? it->second : a.default_value);
  }
  return v;
}

Size screen_size(const KernelType& type, const Size& size, DType dtype,
                 std::size_t max_set_bytes) {
  const auto dims = type.screen_dims();
  if (max_set_bytes == 0 || dims.empty()) return size;
  auto set_bytes = [&](const Size& s) {
    const Problem p = type.make_problem(s, dtype);
    std::size_t b = 0;
    for (const auto& t : p.inputs) b += t.nbytes();
    for (const auto& t : p.outputs) b += t.nbytes();
    return b;
  };
  Size out = size;
  std::string shrunk;
  // Each dimension keeps >= 64 and >= 1/16 of its extent, and the work shrinks by <= 16x in
  // all: a smaller screen would time another kernel (a GEMM screened as a GEMV).
  auto floor_of = [&](const std::string& d) {
    return std::max<std::int64_t>(64, (size.dims.at(d) + 15) / 16);
  };
  double reduction = 1;
  for (int step = 0; step < 64 && set_bytes(out) > max_set_bytes; ++step) {
    bool any = false;
    for (const auto& d : dims) {
      auto it = out.dims.find(d);
      if (it == out.dims.end()) continue;
      const std::int64_t half = (it->second + 1) / 2;
      if (half < floor_of(d)) continue;
      const double r = reduction * static_cast<double>(it->second) / static_cast<double>(half);
      if (r > 16.0 + 1e-9) continue;
      reduction = r;
      it->second = half;
      any = true;
      break;
    }
    if (!any) break;
  }
  // Cannot fit within those limits: screen at the problem's size.
  if (out.dims == size.dims || set_bytes(out) > max_set_bytes) return size;
  for (const auto& d : dims)
    if (out.dims.count(d) && out.dims.at(d) != size.dims.at(d))
      shrunk += d + std::to_string(out.dims.at(d));
  out.label = size.label + "-screen-" + shrunk;
  return out;
}

}  // namespace vb
