#include "core/tensor.h"

#include <dlpack/dlpack.h>

#include "core/parallel.h"

namespace vb {

std::int64_t shape_numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::int64_t TensorDesc::numel() const {
  return shape_numel(shape);
}

std::size_t TensorDesc::nbytes() const {
  return static_cast<std::size_t>(numel()) * dtype_size(dtype);
}

std::string TensorDesc::shape_str() const {
  if (shape.empty()) return "scalar";
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(shape[i]);
  }
  return s;
}

Array64 to_array64(const TensorView& t) {
  Array64 a;
  a.shape = t.desc.shape;
  const std::int64_t n = t.desc.numel();
  a.v.resize(static_cast<std::size_t>(n));
  parallel_for(n, 1 << 16, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) a.v[static_cast<std::size_t>(i)] = t.get(i);
  });
  return a;
}

DLDataType to_dlpack(DType t) {
  DLDataType d{};
  d.lanes = 1;
  switch (t) {
    case DType::F16:
      d.code = kDLFloat;
      d.bits = 16;
      break;
    case DType::BF16:
      d.code = kDLBfloat;
      d.bits = 16;
      break;
    case DType::F32:
      d.code = kDLFloat;
      d.bits = 32;
      break;
    case DType::F64:
      d.code = kDLFloat;
      d.bits = 64;
      break;
    case DType::I64:
      d.code = kDLInt;
      d.bits = 64;
      break;
  }
  return d;
}

}  // namespace vb
