// The kernel types: VladBud's compatibility surface (DESIGN §2).
//
// A KernelType fixes, for one operation (softmax, matmul, ...): the order, shapes and dtypes of
// the ABI's inputs, outputs and attributes (DESIGN §3), the seeded input generator, the float64
// reference, the FLOP and minimal-byte model, and the sizes each evaluator stage runs.
// One implementation file per type lives beside this header; the registry in registry.cpp lists
// them in DESIGN order.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/device_kind.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace vb {

/// A scalar attribute passed to vb_kernel_run in `attrs[]`, in declaration order.
struct AttrSpec {
  std::string name;
  /// Default value. NaN means "derived from the shape at make_problem time" (e.g. sm_scale).
  double default_value;
  std::string doc;
};

/// One problem size of a kernel type: named dimensions plus attribute overrides.
struct Size {
  /// Unique within the type and stable across versions (used by --size, caches, results.tsv),
  /// e.g. "4096x4096", "b1h8s1024d128-noncausal", "edge-127x4097".
  std::string label;
  /// Dimension values by the type's dimension names, e.g. {"M", 4096}, {"N", 4096}.
  std::map<std::string, std::int64_t> dims;
  /// Attribute overrides of the defaults, e.g. {"causal", 0}.
  std::map<std::string, double> attrs;
};

/// A fully resolved problem: what the evaluator allocates and passes through the ABI.
struct Problem {
  std::string kernel;
  Size size;
  DType dtype = DType::F32;  ///< the problem dtype (--dtype); tensors may differ (int64 targets)
  std::vector<TensorDesc> inputs;       ///< ABI order
  std::vector<TensorDesc> outputs;      ///< ABI order
  std::vector<double> attrs;            ///< ABI order, every value resolved (no NaN defaults)
  std::vector<std::string> attr_names;  ///< names of attrs, same order

  /// Value of a dimension of size; throws std::out_of_range naming the dimension if absent.
  std::int64_t dim(std::string_view name) const;
  /// Value of a resolved attribute by name; throws std::out_of_range if absent.
  double attr(std::string_view name) const;
  /// Human-readable "softmax 4096x4096 fp32 [causal=1]" for reports.
  std::string describe() const;
};

/// A stage-3 numerical-stability case: a size plus a named input regime the type's generator
/// understands (e.g. "near_max", "tiny", "subnormal", "large_mean", "all_equal", "masked_inf",
/// or a type-specific one such as "fp16_row_12_0_0_0").
struct StabilityCase {
  std::string name;  ///< shown in reports, e.g. "large-mean rows (2000 + N(0,1))"
  Size size;
  std::string regime;
  std::vector<DType> dtypes;  ///< dtypes this case runs in; empty = fp16, bf16, fp32
};

/// Interface of one kernel type. Implementations are stateless and thread-safe.
class KernelType {
 public:
  virtual ~KernelType() = default;

  /// DESIGN §2 name: "matmul", "softmax", "layernorm", "rmsnorm", "flash_attention",
  /// "fused_mlp", "cross_entropy", "rotary_embedding", "reduce".
  virtual std::string name() const = 0;
  /// One line of semantics for --help and reports.
  virtual std::string summary() const = 0;
  /// Attributes in ABI order with their defaults.
  virtual std::vector<AttrSpec> attributes() const = 0;

  /// Resolves tensors (names, dtypes, shapes) and attribute values for a size and dtype.
  /// Throws std::invalid_argument naming the field when the size lacks a dimension or is
  /// inconsistent (e.g. odd head_dim for RoPE).
  virtual Problem make_problem(const Size& size, DType dtype) const = 0;

  /// Fills `inputs` (views over the problem's input tensors, ABI order, any memory) with the
  /// values of sample `seed` under `regime` ("normal" for ordinary inputs). Deterministic in
  /// (problem, seed, regime). Throws std::invalid_argument for an unknown regime.
  virtual void generate(const Problem& p, std::uint64_t seed, std::string_view regime,
                        const std::vector<TensorView>& inputs) const = 0;

  /// The float64 oracle: computes the outputs (ABI order) from inputs upcast to double.
  /// `outputs` is resized and shaped by the callee. Results are NOT rounded to the output
  /// dtype; the evaluator does that.
  virtual void reference(const Problem& p, const std::vector<Array64>& inputs,
                         std::vector<Array64>& outputs) const = 0;

  /// Floating-point operations of one call (multiply-add = 2 FLOPs), by the type's model.
  virtual double flops(const Problem& p) const = 0;
  /// Minimal bytes moved from/to memory by one call: every input read once, every output
  /// written once (int64 targets count 8 bytes). Types may override (none needs to today).
  virtual double min_bytes(const Problem& p) const;

  /// Global-memory bytes per FLOP that a tiled implementation reads for its operands when its
  /// output is split into `ctas` tiles (one per thread block): the tile-reuse term of the rung-3
  /// GPU model (src/analysis/gpu_estimate.h). For a GEMM with square-ish tiles of area
  /// A = M*N/ctas it is elem/sqrt(A) (each tile reads BM+BN panels of depth K for 2*BM*BN*K
  /// FLOPs). 0 (the default) for types that are not tiled contractions.
  virtual double operand_bytes_per_flop(const Problem& p, double ctas) const;

  /// The work of one kernel launch of a call (rung 3, model 4).
  struct LaunchWork {
    double flops = 0;                   ///< FLOPs this launch does
    double bytes = 0;                   ///< global bytes it reads and writes (minimal)
    double operand_bytes_per_flop = 0;  ///< its tile-reuse term (0: not a tiled contraction)
  };
  /// How one call's work splits across its launches, when the call launches `ctas.size()`
  /// distinct kernels in this order with these grid sizes (the launch record): one entry per
  /// launch, or empty when the type does not know (the default; the estimate then charges the
  /// whole call to its main kernel).
  virtual std::vector<LaunchWork> launch_work(const Problem& p, const std::vector<double>& ctas) const;

  /// Length of the "rows" the evaluator's localized check uses for output `output_index`:
  /// default the last dimension (one softmax row, one matmul row). Types whose outputs are
  /// independent scalars per element (reduce's y[M], cross_entropy's 0-d loss) return 1.
  virtual std::int64_t compare_row_length(const Problem& p, int output_index) const;

  /// Stage 1: one small size, run in every dtype.
  virtual Size smoke_size() const = 0;
  /// Stage 2: LLM-shaped sizes (and attribute variants), affordable on a 2-core CPU. Stage 4
  /// (determinism) reruns the first, the largest and the longest-row of them.
  virtual std::vector<Size> test_sizes() const = 0;
  /// Stage 5: shapes that are not multiples of any tile (1, 3, 127, 1023, 4097, primes), plus
  /// the tail sweep (kt::tail_lengths): every vectorized dimension takes lengths 33..47, every
  /// nonzero remainder mod 16 (issue 18; a unit test checks the coverage for every type).
  virtual std::vector<Size> edge_sizes() const = 0;
  /// Stage 3 cases.
  virtual std::vector<StabilityCase> stability_cases() const = 0;
  /// The size timed by `vladbud bench` and `vladbud run` on a device of kind `device` (a host
  /// CPU gets a smaller one than a GPU).
  virtual Size benchmark_size(DeviceKind device) const = 0;

  /// The dimensions a reduced-size quick screen may shrink, in order of preference: the ones
  /// whose extent only repeats the same work (rows, tokens, batch, output columns), never a
  /// reduction length, a row length a normalisation runs over, or a head dimension, so the
  /// kernel's inner loops, blocking and vector widths stay those of the full problem. Empty
  /// (the default): the type is always screened at its full size. See screen_size().
  virtual std::vector<std::string> screen_dims() const { return {}; }

  /// All sizes this type knows (smoke, test, edge, benchmark on `device`), for --size lookup.
  std::vector<Size> all_sizes(DeviceKind device) const;
  /// Finds a size by label among all_sizes; nullptr if none.
  std::optional<Size> find_size(std::string_view label, DeviceKind device) const;
  /// Resolves attribute values: overrides from the size, else defaults (NaN defaults must be
  /// resolved by the caller).
  std::vector<double> resolve_attrs(const Size& size) const;
};

/// The size a quick screen times instead of `size` when one rotating set of it (inputs plus
/// outputs, in `dtype`) exceeds `max_set_bytes`: the type's screen_dims() halved (rounded up),
/// in order of preference, until a set fits. A dimension keeps >= 64 and >= 1/16 of its
/// extent, and the work shrinks by <= 16x in all (a GEMM screened as a GEMV would time
/// another kernel). Labelled "<label>-screen-<dim><value>..." with the shrunk dimensions;
/// `size` itself when max_set_bytes is 0, the set already fits, the type declares no
/// screen_dims(), or no size within those limits fits. The
/// screen only filters candidates: every keep is still decided at `size` (issue 16: a
/// 64x50257x768 fp32 matmul's 154 MB sets cost ~3.5 s per screen, mostly input generation
/// and the fp64 verification, against 0.2 s of calls).
Size screen_size(const KernelType& type, const Size& size, DType dtype, std::size_t max_set_bytes);

/// All nine kernel types in DESIGN §2 order.
const std::vector<const KernelType*>& all_kernel_types();

/// The kernel type named `name`, or nullptr.
const KernelType* find_kernel_type(std::string_view name);

/// Comma-separated names of all kernel types (for error messages).
std::string kernel_type_names();

}  // namespace vb
