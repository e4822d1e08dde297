// problem.json of an extracted kernel folder (workspace/kernels/NN_<type>/, written by
// `vladbud extract`, issue 6): which kernel type, dtype, backend and model shape the folder's
// one editable source is optimized for, and its share of the model's time.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/dtype.h"
#include "kernels/kernel_type.h"

namespace vb::opt {

/// The fields the optimizer needs from problem.json. Extra fields are kept in `raw`.
struct KernelProblem {
  std::string kernel;   ///< kernel type ("softmax", ...), a DESIGN §2 name
  DType dtype = DType::F32;  ///< problem dtype: fp32, fp16 or bf16
  std::string backend;  ///< "cpu" or "cuda"
  Size size;            ///< label + dims + attrs of the model's shape
  double time_share = 0;  ///< fraction of the model's time spent in this kernel, [0, 1]
  std::string model;      ///< optional "model" field ("" when absent)
  nlohmann::json raw;     ///< the whole file
};

/// Reads `path` (a problem.json, or a kernel folder holding one). Tolerates extra fields.
/// Accepts both the nested form {"size": {"label", "dims", "attrs"}, "time_share"} and the one
/// `vladbud extract` writes (top-level "dims", "attrs", "size_label", "share"; "model" an object).
/// Throws std::runtime_error naming the file and the missing or malformed field, e.g.
/// "workspace/kernels/01_softmax/problem.json: missing field 'size.dims'".
KernelProblem read_problem_file(const std::filesystem::path& path);

/// Serializes a problem in the same format (tests and fixtures write folders with it).
nlohmann::json problem_to_json(const KernelProblem& p);

}  // namespace vb::opt
