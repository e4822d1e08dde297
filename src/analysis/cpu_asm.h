// Static analysis of CPU kernels for the confidence ladder's rung 1 (DESIGN §6): the compiler's
// loop-vectorization remarks, the innermost loops of the emitted assembly (x86-64 AT&T syntax as
// clang emits it, AArch64), LLVM-MCA region markers placed around the hot loop in that assembly
// (never inline asm in C, which would stop vectorization), and llvm-mca's report.
#pragma once

#include <string>
#include <vector>

namespace vb::analysis {

/// One loop remark of clang (-Rpass=loop-vectorize / -Rpass-missed=loop-vectorize) or GCC
/// (-fopt-info-vec-all).
struct LoopRemark {
  std::string file;
  int line = 0;
  bool vectorized = false;
  /// Vectorization factor in elements (clang "vectorization width: 16"; for scalable vectors
  /// "vscale x 4" gives 4 and scalable = true). 0 when the remark gives no width.
  int width = 0;
  bool scalable = false;       ///< SVE-style "vscale x N" width
  int interleave = 0;          ///< clang "interleaved count"; 0 when absent
  int vector_bytes = 0;        ///< GCC "using N byte vectors"; 0 when absent
  std::string reason;          ///< for missed loops: the compiler's reason text
};

/// Parses clang and GCC vectorization remarks (lines like
/// "k.cpp:12:5: remark: vectorized loop (vectorization width: 16, interleaved count: 2)",
/// "k.cpp:9:3: remark: loop not vectorized: ... [-Rpass-missed=loop-vectorize]",
/// "k.cpp:12:5: optimized: loop vectorized using 64 byte vectors",
/// "k.cpp:12:5: missed: couldn't vectorize loop"). Other lines are ignored. Remarks that repeat
/// the same file, line and outcome are kept once.
std::vector<LoopRemark> parse_loop_remarks(const std::string& text);

/// Instruction set of an assembly listing.
enum class AsmIsa { X86_64, AArch64 };

/// One innermost loop of an assembly listing: the label that heads it and the backward branch
/// that closes it.
struct AsmLoop {
  std::string function;      ///< enclosing symbol (last non-local label before the loop)
  std::string label;         ///< loop header label (".LBB0_7")
  int begin_line = 0;        ///< 0-based line index of the label
  int end_line = 0;          ///< 0-based line index of the closing branch
  int instructions = 0;      ///< instructions in the body (directives and comments excluded)
  int vector_instructions = 0;  ///< instructions on vector registers (zmm/ymm/xmm; v/z/q regs)
  int max_vector_bytes = 0;     ///< widest vector register the body uses (64 = zmm; SVE: sve_bytes)
  /// Floating-point operations of one iteration (an FMA counts 2 per lane; add, sub, mul, div,
  /// min, max 1 per lane; packed lanes from the register width, scalar 1). fp32/fp64 only.
  double flops_per_iteration = 0;
  int loads = 0, stores = 0;  ///< memory operands read / written (instructions)
};

/// Finds the innermost loops (a backward branch to a label with no other such loop inside)
/// of `assembly`. `sve_bytes` is the SVE vector length the z registers are counted at (16 for
/// 128-bit SVE implementations such as Neoverse V2).
std::vector<AsmLoop> find_innermost_loops(const std::string& assembly, AsmIsa isa,
                                          int sve_bytes = 16);

/// The loop llvm-mca should analyse: the innermost loop with the most floating-point work per
/// iteration, then the most vector instructions, then the longest body. nullptr when `loops` is
/// empty.
const AsmLoop* hot_loop(const std::vector<AsmLoop>& loops);

/// `assembly` with "LLVM-MCA-BEGIN <name>" before the loop's label and "LLVM-MCA-END <name>"
/// after its closing branch, as '#' comments (the form llvm-mca scans on x86-64 and AArch64).
std::string insert_mca_markers(const std::string& assembly, const AsmLoop& loop, AsmIsa isa,
                               const std::string& name = "hot");

/// What llvm-mca reported for one code region.
struct McaRegion {
  std::string name;
  int iterations = 0;
  long instructions = 0;
  long total_cycles = 0;
  double ipc = 0;
  double block_rthroughput = 0;  ///< "Block RThroughput": cycles per iteration at steady state
  double cycles_per_iteration = 0;  ///< total_cycles / iterations
  /// The resource (pipeline unit) with the highest pressure per iteration in the
  /// "Resource pressure per iteration" table, e.g. "SPRPort00", "V2UnitV0"; "" if none.
  std::string bottleneck_resource;
  double bottleneck_pressure = 0;  ///< cycles per iteration on that resource
  /// From -bottleneck-analysis: "resource pressure 12.3%, data dependencies 40.1%" ("" if
  /// the section is absent).
  std::string bottleneck_summary;
};

/// Parses llvm-mca's default report (summary, "Resource pressure per iteration" and the
/// optional -bottleneck-analysis section) into one entry per region ("[0] Code Region - hot").
/// A report without region headers gives one region named "". Throws std::runtime_error when
/// the text has no "Iterations:" summary at all (not an llvm-mca report).
std::vector<McaRegion> parse_llvm_mca(const std::string& text);

}  // namespace vb::analysis
