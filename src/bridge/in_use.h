// The in-use check (issue 18 class 6): a kernel library called once the way a model calls it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "backends/backend.h"
#include "core/dtype.h"
#include "kernels/kernel_type.h"

namespace vb {

/// Runs the built `library` of kernel type `kt` once through torch.ops.vladbud.<type> in an
/// ordinary Python process (`python -m vladbud.in_use`: the user's environment, working
/// directory and uid, on the backend's torch device), on the type's smoke problem in `dtype`
/// with inputs drawn from `seed` here, and compares its outputs with the fp64 oracle by the
/// evaluator's rule (compare_output). The evaluator's verdict then holds outside its sandbox
/// too: a kernel that detects the harness and computes differently in use fails here.
/// Returns "" when the outputs match, else the reason ("output 'y': ..."; or the kernel's
/// error in use). Files go under `scratch` (created). Throws std::runtime_error when the Python
/// side cannot run (no .venv or torch: the check is then skipped by the caller, who says so).
std::string in_use_mismatch(const KernelType& kt, const Backend& backend,
                            const std::filesystem::path& library, DType dtype, std::uint64_t seed,
                            const std::filesystem::path& scratch);

}  // namespace vb
