// The registry of kernel types: DESIGN §2 order.
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernel_type.h"
#include "kernels/types.h"

namespace vb {

const std::vector<const KernelType*>& all_kernel_types() {
  static const std::vector<const KernelType*> types = {
      &matmul_type(),        &softmax_type(),          &layernorm_type(),
      &rmsnorm_type(),       &flash_attention_type(),  &fused_mlp_type(),
      &cross_entropy_type(), &rotary_embedding_type(), &reduce_type(),
  };
  return types;
}

const KernelType* find_kernel_type(std::string_view name) {
  for (const KernelType* t : all_kernel_types())
    if (t->name() == name) return t;
  return nullptr;
}

std::string kernel_type_names() {
  std::string s;
  for (const KernelType* t : all_kernel_types()) {
    if (!s.empty()) s += ", ";
    s += t->name();
  }
  return s;
}

}  // namespace vb
