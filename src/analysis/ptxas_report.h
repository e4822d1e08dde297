// Parser for the resource report of NVIDIA's PTX assembler (`nvcc -Xptxas -v`, `ptxas -v`) and
// for the diagnostics of an nvcc compile (front end and ptxas). Pure text -> struct; no tools run.
//
// The report lines it reads (CUDA 12/13 wording, recorded in tests/fixtures/cuda/ptxas_*.txt):
//   ptxas info    : 0 bytes gmem, 256 bytes cmem[3]
//   ptxas info    : Compiling entry function '_Z5spillPKfPfi' for 'sm_80'
//   ptxas info    : Function properties for _Z5spillPKfPfi
//       272 bytes stack frame, 544 bytes spill stores, 568 bytes spill loads
//   ptxas info    : Used 32 registers, used 0 barriers, 272 bytes cumulative stack size,
//                   1024 bytes smem, 372 bytes cmem[0]
//   ptxas error   : Entry function '_Z8big_smemPf' uses too much shared data (0x19000 bytes, 0xc000 max)
//   ptxas /tmp/x.ptx, line 31; error   : Instruction 'wgmma.fence' not supported on .target 'sm_80'
//   ptxas fatal   : Ptx assembly aborted due to errors
//   ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are
//                   serialized due to program dependence on compiler-inserted WG.AR in divergent
//                   path in the function '_Z15wgmma_in_branchPfPKi'                 (one line)
//   kernel.cu(2): error: identifier "undeclared_value" is undefined      (nvcc front end)
//   nvcc fatal   : Unsupported gpu architecture 'compute_999a'           (nvcc driver)
// Triton's bundled Blackwell assembler (triton/backends/nvidia/bin/ptxas-blackwell, used for
// sm_100 and later) names itself "ptxas-blackwell info    : ..."; both spellings are read.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace vb::analysis {

/// One function in a ptxas -v report. Byte counts are per thread for stack/spills/local memory
/// and per block for shared memory; -1 marks a number the report did not give.
struct PtxasFunction {
  std::string mangled;    ///< symbol as ptxas prints it ("_Z5spillPKfPfi")
  std::string demangled;  ///< "spill(float const*, float*, int)"; == mangled when not C++
  std::string arch;       ///< "sm_90a" (from "Compiling entry function ... for"); "" for non-entries
  bool entry = false;     ///< a __global__ kernel (ptxas said "Compiling entry function")
  int registers = -1;     ///< "Used N registers" (32-bit registers per thread)
  int barriers = -1;      ///< "used N barriers" (named barriers)
  long smem_bytes = 0;    ///< static shared memory per block ("N bytes smem"; 0 when absent)
  long stack_frame_bytes = -1;   ///< "N bytes stack frame" (per thread)
  long spill_store_bytes = -1;   ///< "N bytes spill stores" (per thread, static count)
  long spill_load_bytes = -1;    ///< "N bytes spill loads"
  long cumulative_stack_bytes = 0;  ///< "N bytes cumulative stack size" (0 when absent)
  std::map<int, long> cmem_bytes;   ///< constant bank -> bytes ("372 bytes cmem[0]")
  int textures = 0, samplers = 0, surfaces = 0;

  /// Why ptxas serialized this function's Hopper warpgroup MMAs, "" when it did not. ptxas -v
  /// (sm_90a) prints, before the function's "Compiling entry function" line,
  ///   ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are
  ///   serialized due to program dependence on compiler-inserted WG.AR in divergent path in the
  ///   function '_Z15wgmma_in_branchPfPKi'
  /// and this holds the text after "due to" ("program dependence on compiler-inserted WG.AR in
  /// divergent path"). Other reasons seen from ptxas 13.0: "insufficient register resources for
  /// the wgmma pipeline" (C7511), "wgmma pipeline crossing function boundary at a function call"
  /// (C7510). Several lines for one function are joined with "; ". Serialized wgmmas wait for
  /// each other instead of overlapping: a large performance cliff the resource numbers do not show.
  std::string wgmma_serialized_reason;
  std::string wgmma_serialized_code;  ///< "C7520" (the first line's code; "" when none printed)

  /// True when ptxas reported spill traffic (stores or loads > 0).
  bool spills() const { return spill_store_bytes > 0 || spill_load_bytes > 0; }
  /// True when ptxas said it serialized this function's wgmma.mma_async instructions.
  bool wgmma_serialized() const { return !wgmma_serialized_reason.empty(); }
};

/// One "Potential Performance Loss: wgmma.mma_async instructions are serialized due to <reason>
/// in the function '<mangled>'" line of ptxas -v, as printed (see
/// PtxasFunction::wgmma_serialized_reason).
struct WgmmaSerialization {
  std::string code;      ///< "C7520" (the "(Cnnnn)" before the message; "" when absent)
  std::string reason;    ///< the text after "due to" (the whole message tail when "due to" is absent)
  std::string function;  ///< the function named after "in the function", quotes removed; "" when none
  bool attached = false; ///< `function` is a function of this report (its reason was filled in)
};

/// A compile diagnostic from ptxas or the nvcc front end.
struct CompileDiagnostic {
  std::string tool;      ///< "ptxas" or "nvcc" (front end or driver)
  std::string severity;  ///< "error", "fatal" or "warning"
  std::string file;      ///< file named by the line ("" when none)
  int line = 0;          ///< line in that file (0 when none)
  std::string message;   ///< the text after the severity ("Instruction 'wgmma.fence' not ...")
};

/// Everything parsed from one compile's stderr.
struct PtxasReport {
  std::vector<PtxasFunction> functions;  ///< in report order
  std::vector<CompileDiagnostic> errors;    ///< severity "error" and "fatal"
  std::vector<CompileDiagnostic> warnings;  ///< severity "warning"
  long gmem_bytes = 0;                   ///< "N bytes gmem" (module-scope __device__ data)
  std::map<int, long> module_cmem_bytes;  ///< module-scope constant banks (__constant__ is bank 3)
  /// Every wgmma serialization line, in report order: those naming a function of the report are
  /// also in that PtxasFunction (attached); those naming none, or a function the report has no
  /// numbers for, are kept only here.
  std::vector<WgmmaSerialization> wgmma_serializations;

  /// The entry functions only.
  std::vector<const PtxasFunction*> entries() const;
  /// The function called `mangled`, or nullptr.
  const PtxasFunction* find(std::string_view mangled) const;
  /// True when the compiler does not know the target architecture ("nvcc fatal : Unsupported
  /// gpu architecture", "ptxas fatal : Value 'sm_X' is not defined for option 'gpu-name'"): a
  /// toolchain limit, not a fault of the source.
  bool toolchain_lacks_arch() const;
  /// The first error line as "<tool> <severity>: <message>" (errors before fatals), "" if none.
  std::string first_error() const;
  /// The wgmma serialization lines not attached to any function of the report.
  std::vector<const WgmmaSerialization*> unattached_wgmma_serializations() const;
};

/// Parses the stderr of `nvcc -Xptxas -v` (or `ptxas -v`). Lines it does not recognise are
/// ignored (so the whole compiler output can be passed); never throws.
PtxasReport parse_ptxas_report(std::string_view text);

/// The C++ demangling of `symbol` (abi::__cxa_demangle), or `symbol` unchanged when it is not a
/// mangled C++ name.
std::string demangle(const std::string& symbol);

nlohmann::json to_json(const PtxasFunction& f);
nlohmann::json to_json(const CompileDiagnostic& d);
nlohmann::json to_json(const WgmmaSerialization& w);

}  // namespace vb::analysis
