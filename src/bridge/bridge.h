// The PyTorch bridge, C++ side (DESIGN §1): runs the Python half (python/vladbud, needs torch)
// as a subprocess with a JSON request/result contract, and owns what needs no PyTorch: the
// FLOP/byte models of the kernel types at the model's shapes, the roofline bound, Amdahl's
// bound, the ranked table, extraction into workspace/kernels/NN_<type>/ and problem.json.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/device.h"
#include "core/dtype.h"
#include "kernels/kernel_type.h"

namespace vb {

/// Bad user input detected by the bridge (either side); the message names the fix.
struct BridgeUsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The Python interpreter that has torch: $VB_PYTHON when set, else <home>/.venv/bin/python
/// (made by scripts/setup.sh), else "python3" from PATH.
std::string bridge_python();

/// Runs `python -m vladbud.<module> REQ RES` with PYTHONPATH=<home>/python prepended; the
/// request and result files live in `scratch_dir` (created). Returns the parsed result.
/// Throws BridgeUsageError with the Python side's message when it exits 2 (bad input), and
/// std::runtime_error with the tail of its stderr for any other failure (no torch, crash,
/// timeout).
nlohmann::json run_bridge(const std::string& module, const nlohmann::json& request,
                          const std::filesystem::path& scratch_dir,
                          std::chrono::seconds timeout = std::chrono::seconds(1800));

/// Ceilings of the profiled torch device (`device`: "cpu", "cuda"): the Device::model_roof of
/// the default backend of that torch device (backend_for_torch_device): for the CPU this
/// machine's measured ceilings (probe cached per machine), for an NVIDIA GPU the detected GPU's
/// spec-database entry (or derived spec). Throws std::runtime_error when that device is not
/// detected, std::invalid_argument for a torch device no backend runs on. Roof:
/// backends/device.h.
Roof device_roof(const std::string& device, DType dtype);

/// The kernel-type Size for an entry's dims/attrs, labelled "model-<dims>" (e.g.
/// "model-M64xN512xK512"). Throws std::invalid_argument when dims lack a dimension of the type.
Size model_size(const KernelType& kt, const nlohmann::json& dims, const nlohmann::json& attrs);

/// Adds to the Python result `raw` (vladbud.profile's RESULT, see python/vladbud/profile.py)
/// per entry: share (of the profiled time), flops, bytes, arithmetic_intensity (FLOP/B),
/// bound ("compute" when the intensity >= the ridge point, else "memory"), amdahl_max (end-to-end
/// speedup bound if that entry took no time: 1/(1-share)); and at the top: roof, typed_share
/// (time in the nine types) and amdahl_max_all (1/(1-typed_share)). Entries whose type or dims
/// are unknown get bound "n/a". Returns the augmented document (profile.json's content).
nlohmann::json analyze_profile(const nlohmann::json& raw, const Roof& roof);

/// The ranked table of profile.json (top `rows` entries), one line each: rank, share %,
/// time per forward (us), calls, type (or "-"), op, shapes, dtype, bound, Amdahl bound.
std::string format_profile_table(const nlohmann::json& profile, int rows);

/// Writes workspace/kernels/NN_<type>/ for the `top` largest typed groups of `profile`
/// (distinct type, dims, attrs, dtype), NN = rank from 01: problem.json and the starter source of
/// `backend` copied in as <type><ext>. Replaces an existing workspace/kernels/. Returns the
/// folders written. Throws BridgeUsageError when the profile has no typed entry.
std::vector<std::filesystem::path> extract_kernels(const nlohmann::json& profile, int top,
                                                   const std::string& backend,
                                                   const std::filesystem::path& workspace);

/// PyTorch's latency for problem `p` (the same shapes, dtype and resolved attributes) on `device`
/// ("cpu" or "cuda"), timed by `python -m vladbud.baseline` under the evaluator's protocol
/// (warm-up, input sets cycled over at least `rotation_sets` sets and `rotation_bytes` bytes, min 10 reps and 0.5 s, max 4 s; quick: 3 reps,
/// 0.1 s, 1 s), median. Returns its result ({"op", "median_us", "p10_us", "p90_us", "reps", ...}).
/// Throws as run_bridge does (no torch, bad request).
nlohmann::json pytorch_baseline(const Problem& p, const std::string& device, int rotation_sets,
                                double rotation_bytes, bool quick);

/// problem.json of a kernel folder, parsed into the type, its model Size and dtype.
struct ModelProblem {
  const KernelType* type = nullptr;
  Size size;
  DType dtype = DType::F32;
  nlohmann::json doc;
};

/// Reads <dir>/problem.json; nullopt when it does not exist. Throws BridgeUsageError naming
/// the file and the field when it is malformed.
std::optional<ModelProblem> read_model_problem(const std::filesystem::path& dir);

}  // namespace vb
