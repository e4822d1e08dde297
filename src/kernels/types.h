// Factories of the nine kernel types of DESIGN §2, one per implementation file in this folder.
// Each returns a process-lifetime singleton; the registry (registry.cpp) lists them in DESIGN
// order. Most code should go through all_kernel_types() / find_kernel_type() instead.
#pragma once

#include "kernels/kernel_type.h"

namespace vb {

const KernelType& matmul_type();            ///< matmul.cpp
const KernelType& softmax_type();           ///< softmax.cpp
const KernelType& layernorm_type();         ///< layernorm.cpp
const KernelType& rmsnorm_type();           ///< rmsnorm.cpp
const KernelType& flash_attention_type();   ///< flash_attention.cpp
const KernelType& fused_mlp_type();         ///< fused_mlp.cpp
const KernelType& cross_entropy_type();     ///< cross_entropy.cpp
const KernelType& rotary_embedding_type();  ///< rotary_embedding.cpp
const KernelType& reduce_type();            ///< reduce.cpp

}  // namespace vb
