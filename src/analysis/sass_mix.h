// Instruction mix of NVIDIA SASS as printed by `cuobjdump --dump-sass` (or `nvdisasm`), and the
// per-kernel attributes of a cubin's `.nv.info.<kernel>` sections as printed by `cuobjdump -elf`.
// Pure text -> struct; no tools run. Formats recorded in tests/fixtures/cuda/sass_*.txt and
// elf_*.txt (cuobjdump 13.2 on cubins from nvcc 13.0):
//
//   	code for sm_90a
//   		Function : _Z9vec_scalePK6float4PS_fi
//           /*00c0*/                   LDG.E.128.CONSTANT R8, desc[UR4][R2.64] ;  /* 0x...7981 */
//           /*0060*/               @P0 EXIT ;                                     /* 0x...094d */
//
//   .nv.info._Z9vec_scalePK6float4PS_fi
//   	Attribute:	EIATTR_MAX_THREADS
//   	Format:	EIFMT_SVAL
//   	Value:	0x100 0x1 0x1
//
// Counts are static (instructions in the binary), not dynamic (executed): code in a loop body
// counts once. Opcode names: NVIDIA "CUDA Binary Utilities", instruction set reference per
// architecture (HMMA = warp-level MMA of mma.sync / WMMA; HGMMA = Hopper warpgroup MMA of
// wgmma.mma_async; IMMA / IGMMA integer MMA; QGMMA fp8 warpgroup MMA; QMMA / OMMA fp8 / fp4
// warp MMA (sm_120); UTC*MMA = tcgen05.mma (sm_100); LDGSTS = cp.async; UTMALDG = TMA load;
// LDSM = ldmatrix; LDL / STL = local memory; MUFU = special-function unit).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace vb::analysis {

/// Static instruction counts of one SASS function.
struct SassMix {
  std::string function;  ///< mangled name ("Function : <name>")
  std::string arch;      ///< "sm_90a" (from the preceding "code for" line)
  long total = 0;        ///< all instructions except NOP (alignment padding)
  long hmma = 0;         ///< HMMA (mma.sync / WMMA on tensor cores, 16-bit and tf32 inputs)
  long hgmma = 0;        ///< HGMMA (wgmma.mma_async, sm_90a)
  long imma = 0;         ///< IMMA + IGMMA (integer MMA)
  long qgmma = 0;        ///< QGMMA (fp8 wgmma, sm_90a)
  long other_mma = 0;    ///< QMMA, OMMA, DMMA, UTC*MMA (tcgen05): other tensor-core MMAs
  long ffma = 0;         ///< fp32 FMAs per lane: FFMA counts 1, the paired FFMA2 (sm_100+) 2
  long fadd_fmul = 0;    ///< fp32 FADD / FMUL per lane (FADD2 / FMUL2 count 2)
  long hfma2 = 0;        ///< HFMA2 / HADD2 / HMUL2 (packed 16-bit math; not the HFMA2.MMA
                         ///< move idiom or the HADD2.F32 conversion)
  long ldg = 0;          ///< all LDG (global loads)
  long stg = 0;          ///< all STG (global stores)
  long ldg_64 = 0, ldg_128 = 0, ldg_256 = 0;  ///< LDG by width (.64, .128, .ENL2.256)
  long stg_64 = 0, stg_128 = 0, stg_256 = 0;  ///< STG by width
  long lds = 0, sts = 0, ldsm = 0;  ///< shared-memory loads, stores, ldmatrix
  long ldgsts = 0;        ///< LDGSTS (cp.async global -> shared)
  long tma = 0;           ///< UTMALDG / UTMASTG / UBLKCP (TMA bulk copies)
  long ldl = 0, stl = 0;  ///< local-memory loads / stores (spills, runtime-indexed arrays)
  long mufu = 0;          ///< MUFU (exp2, rcp, rsqrt, ...)
  long atomics = 0;       ///< ATOM / ATOMG / RED / ATOMS
  long barriers = 0;      ///< BAR
  /// Shared-memory bytes one warp reads with these instructions (static sum): LDSM.x4 512,
  /// .x2 256, .x1 128 (8x8 16-bit matrices of 128 B each, PTX ISA "ldmatrix"); LDS.128 512,
  /// LDS.64 256, other LDS 128 (32 lanes x width).
  long smem_read_bytes = 0;
  /// Dense FLOPs one warp issues through HMMA (static sum): 2 x m x n x k of the shape suffix
  /// (HMMA.16816 = m16n8k16 = 4096; HMMA.1688 = 2048; PTX ISA "mma.sync" shapes).
  double hmma_flops = 0;
  std::map<std::string, long> opcodes;  ///< base opcode (text before the first '.') -> count
  /// The hot loop (model 4): the innermost backward branch (BRA to a lower address) whose body
  /// holds the most tensor-core MMAs (else the most instructions). Its static counts are what a
  /// warp issues per iteration of the main loop; 0 when the function has no backward branch.
  long loop_total = 0;         ///< instructions in the hot loop's body (NOP excluded)
  long loop_tensor = 0;        ///< tensor-core MMAs in it (HMMA, HGMMA, IMMA, ...)
  double loop_hmma_flops = 0;  ///< HMMA FLOPs per warp per iteration
  /// Model 5: loops (backward branches) whose body holds an LDG and that enclose no other such
  /// loop: the passes a chunked row program makes over its row (0 when the loads are not in a loop).
  long load_loops = 0;
  /// Model 6: instructions in the bodies of those innermost load loops, summed (NOP excluded),
  /// and their MUFU instructions: what a warp issues per iteration of each pass, added over the
  /// passes. 0 when there is no load loop.
  long load_loop_total = 0;
  long load_loop_mufu = 0;
  /// Model 6: the fewest bytes one thread loads per iteration among those loops (LDG.128 16,
  /// .64 8, .256 32, others 4, as mean_load_bytes). Against the bytes one thread loads per step of
  /// the program's tile it gives the unroll factor ptxas applied (4 steps' loads issued before
  /// the first is used: one latency for 4 steps). 0 when there is no load loop.
  long load_loop_min_ldg_bytes = 0;

  /// Any tensor-core MMA instruction (hmma + hgmma + imma + qgmma + other_mma).
  long tensor_core() const { return hmma + hgmma + imma + qgmma + other_mma; }
  /// Generation of the newest tensor-core path in the kernel: 2 for the asynchronous MMAs
  /// (HGMMA / QGMMA: wgmma on sm_90a; UTC*MMA: tcgen05 on sm_100a), 1 for warp MMAs only
  /// (HMMA, IMMA, QMMA, OMMA, DMMA: mma.sync), 0 for none. A starter that keeps an mma.sync
  /// fallback beside its wgmma path has more HMMA than HGMMA instructions, yet the newer path
  /// is the one that runs where the architecture has it.
  int tensor_path_generation() const;
  /// Global loads and stores of 128 bits or more.
  long wide_global() const { return ldg_128 + ldg_256 + stg_128 + stg_256; }
  /// Mean bytes per thread of one global load (4 for scalar fp32, 16 for LDG.E.128); 0 when
  /// there is no LDG. Loads without a width suffix count as 4 bytes (.U8/.U16 as 4: a register).
  double mean_load_bytes() const;
};

/// Parses `cuobjdump --dump-sass` output: one SassMix per "Function :" block, in order.
/// Never throws; text without functions gives an empty vector.
std::vector<SassMix> parse_sass_mix(std::string_view text);

/// Per-kernel attributes from the `.nv.info.<kernel>` sections of `cuobjdump -elf` output.
struct KernelAttributes {
  std::string function;  ///< mangled name
  /// __launch_bounds__ maximum threads per block (EIATTR_MAX_THREADS, x*y*z), else nullopt.
  std::optional<int> max_threads;
  /// Required block size (.reqntid, EIATTR_REQNTID, x*y*z), else nullopt.
  std::optional<int> required_threads;
  /// Register cap ptxas was given (EIATTR_MAXREG_COUNT; 255 when unconstrained), else nullopt.
  std::optional<int> max_registers;
  std::optional<int> register_count;  ///< EIATTR_REGCOUNT (from the module's .nv.info)
};

/// Parses `cuobjdump -elf` output into one entry per kernel, in order of first mention.
std::vector<KernelAttributes> parse_kernel_attributes(std::string_view elf_text);

/// Only the `.nv.info*` sections of `cuobjdump -elf` output (what parse_kernel_attributes
/// reads), to keep cached copies small.
std::string nv_info_sections(std::string_view elf_text);

nlohmann::json to_json(const SassMix& m);
nlohmann::json to_json(const KernelAttributes& a);

}  // namespace vb::analysis
