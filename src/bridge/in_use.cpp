#include "bridge/in_use.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "bridge/bridge.h"
#include "core/tensor.h"
#include "eval/compare.h"

namespace vb {

namespace {
void write_bytes(const std::filesystem::path& f, const std::vector<char>& b) {
  std::ofstream o(f, std::ios::binary);
  o.write(b.data(), static_cast<std::streamsize>(b.size()));
  if (!o) throw std::runtime_error("cannot write " + f.string());
}
}  // namespace

std::string in_use_mismatch(const KernelType& kt, const Backend& backend,
                            const std::filesystem::path& library, DType dtype, std::uint64_t seed,
                            const std::filesystem::path& scratch) {
  std::filesystem::create_directories(scratch);
  const Problem p = kt.make_problem(kt.smoke_size(), dtype);
  std::vector<std::vector<char>> bufs;
  std::vector<TensorView> views;
  for (const auto& t : p.inputs) bufs.emplace_back(t.nbytes());
  for (std::size_t i = 0; i < p.inputs.size(); ++i) views.push_back({p.inputs[i], bufs[i].data()});
  kt.generate(p, seed, "normal", views);
  nlohmann::json ins = nlohmann::json::array(), outs = nlohmann::json::array();
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    const auto f = scratch / fmt::format("in{}.bin", i);
    write_bytes(f, bufs[i]);
    ins.push_back({{"file", f.string()},
                   {"dtype", dtype_name(p.inputs[i].dtype)},
                   {"shape", p.inputs[i].shape}});
  }
  for (std::size_t i = 0; i < p.outputs.size(); ++i)
    outs.push_back({{"file", (scratch / fmt::format("out{}.bin", i)).string()},
                    {"dtype", dtype_name(p.outputs[i].dtype)},
                    {"shape", p.outputs[i].shape}});
  const nlohmann::json req{{"kernel", kt.name()},
                           {"library", std::filesystem::absolute(library).string()},
                           {"device", backend.device().torch_device()},
                           {"inputs", ins},
                           {"attrs", p.attrs},
                           {"outputs", outs}};
  try {
    run_bridge("in_use", req, scratch, std::chrono::seconds(600));
  } catch (const BridgeUsageError& e) {
    return std::string("in use (torch.ops.vladbud) the kernel failed: ") + e.what();
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    // The kernel's own error raised by the op reaches us in the Python side's stderr tail.
    if (m.find("vladbud") != std::string::npos && m.find("failed") != std::string::npos)
      return "in use (torch.ops.vladbud) the kernel failed: " + m;
    throw;
  }
  std::vector<Array64> ref_in;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) ref_in.push_back(to_array64(views[i]));
  std::vector<Array64> ref;
  kt.reference(p, ref_in, ref);
  for (std::size_t i = 0; i < p.outputs.size(); ++i) {
    for (auto& v : ref[i].v) v = round_to_dtype(v, p.outputs[i].dtype);
    std::ifstream f(outs[i]["file"].get<std::string>(), std::ios::binary);
    std::vector<char> got(p.outputs[i].nbytes());
    f.read(got.data(), static_cast<std::streamsize>(got.size()));
    if (f.gcount() != static_cast<std::streamsize>(got.size()))
      return fmt::format("in use the kernel wrote {} of the {} bytes of output '{}'", f.gcount(),
                         got.size(), p.outputs[i].name);
    const auto c = compare_output(TensorView{p.outputs[i], got.data()}, ref[i],
                                  kt.compare_row_length(p, static_cast<int>(i)));
    if (!c.ok)
      return fmt::format("called through torch.ops.vladbud in an ordinary process ({} {}), "
                         "output '{}': {}",
                         p.size.label, dtype_name(dtype), p.outputs[i].name, c.reason);
  }
  return "";
}

}  // namespace vb
