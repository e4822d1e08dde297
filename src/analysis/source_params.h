// Tunable parameters a kernel source declares for VladBud (the `@vb-param` convention):
//
//   // @vb-param NAME DEFAULT {v1,v2,...} description
//   #ifndef NAME
//   #define NAME DEFAULT
//   #endif
//
// The optimizer varies them with -DNAME=v; the NVIDIA ladder reads the block size from them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vb::analysis {

/// One declared parameter.
struct SourceParam {
  std::string name;                 ///< "BLOCK_THREADS"
  std::string default_value;        ///< "256" (as written)
  std::vector<std::string> values;  ///< {"128","256","512"}; empty when no {...} list
  std::string description;          ///< the rest of the line
  int line = 0;                     ///< 1-based line of the @vb-param comment
};

/// Every `@vb-param` line of `source`, in order. A malformed line (no name or no default) is
/// skipped. Never throws.
std::vector<SourceParam> parse_source_params(std::string_view source);

/// The block size a source declares: the default of the first parameter named BLOCK_THREADS,
/// THREADS, NUM_THREADS, BLOCK_SIZE or THREADS_PER_BLOCK (in that order of preference), when it
/// is a positive integer; else nullopt. `name_out` receives the parameter's name.
std::optional<int> declared_block_threads(const std::vector<SourceParam>& params,
                                          std::string* name_out = nullptr);

}  // namespace vb::analysis
