// Tunable parameters declared in a kernel source, and candidate sources written from them.
//
// Convention (one declaration line per parameter, anywhere in the file, in the language's
// comment; then the parameter's binding in the language's own form, Backend::param_syntax()):
//   // @vb-param NAME DEFAULT {V1,V2,...}  free-text description       (C++ / CUDA)
//   #ifndef NAME
//   #define NAME DEFAULT
//   #endif
//
//   # @vb-param NAME DEFAULT {V1,V2,...}  free-text description        (Triton / Python)
//   NAME = DEFAULT
// Structural choices are parameters too (`// @vb-param ALGO 0 {0,1,2} 0 scalar, 1 omp simd`).
// A configuration assigns one domain value to each parameter; a candidate source is the
// source with each parameter's binding rewritten (or, where the language allows it, a binding
// prepended when the source has none for that name).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/device.h"

namespace vb::opt {

/// One @vb-param declaration.
struct TunableParam {
  std::string name;                 ///< C identifier, e.g. BLOCK_THREADS
  std::string default_value;        ///< as written, e.g. "256"
  std::vector<std::string> domain;  ///< allowed values in declaration order
  std::string description;
  int line = 0;  ///< 1-based line of the declaration
};

/// NAME -> value.
using Config = std::map<std::string, std::string>;

/// Parses every `@vb-param` line of `source`. Throws std::invalid_argument naming the line for
/// a malformed declaration (no domain, default not in the domain, duplicate name, bad name) and,
/// when `syntax` cannot prepend a binding (Python), for a parameter without its binding line
/// ("line 12: @vb-param BLOCK has no binding ...: add 'BLOCK = 1024' ...").
std::vector<TunableParam> parse_params(
    const std::string& source, const ParamSyntax& syntax = preprocessor_param_syntax());

/// The configuration the source currently selects: for each parameter the value of its first
/// binding in `syntax` (`#define NAME VALUE`, `NAME = VALUE`), else its declared default.
Config current_config(const std::string& source, const std::vector<TunableParam>& params,
                      const ParamSyntax& syntax = preprocessor_param_syntax());

/// `source` with each parameter of `cfg` set: its first binding line in `syntax` is rewritten
/// (`#define NAME VALUE`); a name without one gets `syntax`'s prepended binding. Throws
/// std::invalid_argument when a name has no binding and `syntax` cannot prepend one.
std::string apply_config(const std::string& source, const Config& cfg,
                         const ParamSyntax& syntax = preprocessor_param_syntax());

/// "BLOCK=64 UNROLL=4" (names in order).
std::string config_string(const Config& cfg);

/// A rung-0 screen: returns a reason when the candidate must not be built, else nullopt. The
/// ladder's static screen (issue 4) plugs in here; `builtin_pruner` is the optimizer's own.
using Pruner =
    std::function<std::optional<std::string>(const std::string& source, const Config& cfg)>;

/// Limits a candidate must respect: the device's (Device::limits(), backends/device.h).
using TargetLimits = DeviceLimits;

/// The optimizer's own screen: every value in its declared domain; parameters named *_THREADS
/// or NUM_THREADS within the logical cores (limits.logical_cores > 0: a host device) and within
/// the block limit (limits.max_threads_per_block > 0: a GPU device, where BLOCK_X/Y/Z and
/// *_DIM_X/Y/Z of one block multiply); VEC*_BYTES / VECTOR_BYTES within the native vector
/// width; SMEM*_BYTES / SHARED*_BYTES within the shared-memory limit. A limit of 0 is not
/// checked.
Pruner builtin_pruner(const std::vector<TunableParam>& params, const TargetLimits& limits);

/// Runs several screens in order; the first rejection wins.
Pruner chain_pruners(std::vector<Pruner> pruners);

}  // namespace vb::opt
