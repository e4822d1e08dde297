// The Triton backend's GPU path (issue 17 step 2): ahead-of-time (AOT) libraries. A Triton
// source is Python whose vb_kernel_run specializes every launch per call -- constexpr block
// sizes chosen from the shapes, Triton's divisibility-by-16 and unit-stride specialization of
// integer arguments and 16-byte alignment of pointers, grids computed in Python -- so a
// compiled library can serve only the problems it was built for. The build therefore takes
// the list of problems (Backend::build's BuildProblems: every case the evaluator will run, or
// the one shape of a model's problem.json):
//
//  1. python/vladbud/triton_build.py aot captures, per problem, the launch sequence the Python
//     vb_kernel_run makes on empty CPU tensors (twice: a source whose two captures differ keeps
//     state and is refused; so is an input or output that PyTorch code rather than a launch
//     writes), binds every kernel parameter to an input or output tensor plus an element
//     offset, to a scratch buffer (a temporary the call made with torch.empty/zeros: the
//     launcher allocates it on the stream per call, zero-filled for zeros, and frees it after
//     the launches), or to a scalar constant (any other tensor, e.g. one kept between calls, is
//     refused), and compiles each distinct specialization once with triton.compile into a cubin;
//  2. triton_aot_source() turns that answer into one C++ translation unit: the cubins as byte
//     arrays and the per-problem launch table, over the launcher kernels/include/vb_triton_aot.h
//     (driver entry points resolved at run time; Triton 3.6's launch ABI);
//  3. the host C++ compiler builds it into a shared library exporting the kernel ABI of
//     DESIGN §3 (vb_kernel_run with DLTensors and a stream), which the C++ runner (CUDA
//     flavour) and the compiled torch op load like a CUDA backend library.
//
// Why this design: the C++ runner keeps every guard of DESIGN §4 (a Python runner would have to
// re-implement staging, guard bands, poison and event timing), and the same .so is what a
// model's compiled torch op loads, with no Python per call (DESIGN §3). Why a table per problem
// rather than one generic kernel: what runs must be exactly what Triton's JIT would run for
// that call -- compiling without the shape specialization (do_not_specialize) would measure
// other code, and the block sizes, warps and grids are Python decisions anyway. The cost is a
// compile per distinct specialization of the listed problems (the evaluator lists its cases:
// evaluation_problems() in eval/evaluator.h), cached by content.
//
// A call whose dtypes, shapes and attribute values are not in the table returns nonzero with a
// message naming them and the fix. Host-side TMA descriptors, tuple arguments and kernels that
// need Triton's global scratch memory, clusters (num_ctas > 1), a cooperative grid or
// programmatic dependent launch are refused at build time, naming the fix. None of the nine
// starters uses host-side TMA descriptors (kernels/triton/*.py: block pointers only).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend.h"
#include "kernels/kernel_type.h"

namespace vb {

/// triton_build.py's target for a CUDA architecture name: "sm_90a" -> "cuda:90:32",
/// "sm_80" -> "cuda:80:32". Throws std::invalid_argument for a name that is not sm_<digits>[a|f].
std::string triton_cuda_target(const std::string& arch);

/// The problems triton_build.py aot reads: {"problems": [{"inputs", "outputs", "attrs"}...]},
/// one entry per distinct (dtypes, shapes, attribute values) of `problems`, in first-seen order.
nlohmann::json triton_aot_problems_json(const std::vector<Problem>& problems);

/// The C++ source of an AOT library from triton_build.py aot's answer `aot` (its "kernels"
/// name their cubin files, read here); `source_label` names the kernel source in the library's
/// messages. Throws std::runtime_error when the answer is malformed (a missing field, a kernel
/// index out of range, a parameter count that does not match the kernel's signature) or a
/// cubin cannot be read.
std::string triton_aot_source(const nlohmann::json& aot, const std::string& source_label);

/// Builds `source` ahead of time for the CUDA architecture `arch` ("sm_90a") serving
/// `problems`, from the content-hash cache when possible (key: the source text, the distinct
/// problems, the architecture, the Triton release, triton_build.py (the capture), the launcher
/// headers and the host compiler).
/// Never throws for a bad source: a refused capture, a Triton compile error or a host compile
/// error is ok = false with diagnostics naming the fix. An empty `problems` is refused (nothing
/// to specialize for).
BuildResult build_triton_aot(const std::filesystem::path& source,
                             const std::vector<Problem>& problems, const std::string& arch);

}  // namespace vb
