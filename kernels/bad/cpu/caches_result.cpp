// BAD (guard fresh_inputs): remembers the output for an (input pointer, shape) and replays it
// instead of recomputing when called again on the same buffers: stale for fresh values.
#include <map>
#include <tuple>

#include "bad_common.h"

namespace {
std::map<std::tuple<const void*, std::int64_t, std::int64_t, int>, std::vector<char>> cache;
}

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const auto key = std::make_tuple(static_cast<const void*>(vbk::data_ptr(in[0])), in[0].shape[0],
                                   in[0].shape[1], static_cast<int>(in[0].dtype.code));
  const std::size_t bytes = static_cast<std::size_t>(vbk::numel(out[0]) * out[0].dtype.bits / 8);
  auto it = cache.find(key);
  if (it != cache.end() && it->second.size() == bytes) {
    std::memcpy(vbk::data_ptr(out[0]), it->second.data(), bytes);
    return 0;
  }
  bad::softmax(in, out, in[0].shape[0]);
  const char* p = static_cast<const char*>(vbk::data_ptr(out[0]));
  cache[key] = std::vector<char>(p, p + bytes);
  return 0;
}
