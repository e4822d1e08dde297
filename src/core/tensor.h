// Tensor descriptors and non-owning views used by the evaluator, the kernel types and the
// runner. Tensors are dense, row-major (C-contiguous), as the kernel ABI (DESIGN §3) requires.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "core/dtype.h"

namespace vb {

/// Name, element type and shape of one kernel argument. A 0-d tensor has an empty shape and
/// one element.
struct TensorDesc {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;

  /// Number of elements (product of the shape; 1 for 0-d).
  std::int64_t numel() const;
  /// numel() * dtype_size(dtype).
  std::size_t nbytes() const;
  /// Shape as "4096x4096" ("scalar" for 0-d).
  std::string shape_str() const;
};

/// A desc plus a pointer to its contiguous data (not owned).
struct TensorView {
  TensorDesc desc;
  void* data = nullptr;

  double get(std::int64_t i) const {
    return load_as_double(data, desc.dtype, static_cast<std::size_t>(i));
  }
  void set(std::int64_t i, double x) const {
    store_from_double(data, desc.dtype, static_cast<std::size_t>(i), x);
  }
};

/// A tensor held in double precision for the fp64 oracle: same shape, values upcast exactly.
struct Array64 {
  std::vector<std::int64_t> shape;
  std::vector<double> v;
  /// Oracle outputs only, optional (empty = none): a per-element magnitude floor for the
  /// comparison (compare_output), same count as v. Element i's reference magnitude is taken as
  /// max(|v_i|, scale_i), so an output that cancels (a sum of mixed signs that lands near 0)
  /// is judged against the size its inputs give it, not its own near-zero value. A kernel type
  /// sets it where fp32 accumulation error scales with the inputs rather than the result
  /// (reduce: the row's 2-norm ‖x_r‖₂, the size of a sum's rounding random walk).
  std::vector<double> scale;

  std::int64_t numel() const { return static_cast<std::int64_t>(v.size()); }
  /// Length of the last dimension (1 for 0-d); rows = numel / row_len.
  std::int64_t row_len() const { return shape.empty() ? 1 : shape.back(); }
};

/// Upcasts a view to double (exact for fp16/bf16/fp32).
Array64 to_array64(const TensorView& t);

/// DLPack dtype for a VladBud dtype (kDLFloat/kDLBfloat/kDLInt, bits, 1 lane).
DLDataType to_dlpack(DType t);

/// Element count of a shape (1 for an empty shape).
std::int64_t shape_numel(const std::vector<std::int64_t>& shape);

}  // namespace vb
