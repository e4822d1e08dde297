// BAD (guard fresh_inputs, one element changed): remembers its last output in memory keyed on
// the shape, dtype and a hash of every 64th input element, and replays it when that key
// matches -- fast on repeated inputs, stale when an element outside the sample changes. A new
// input drawn from a fresh seed changes the sample too; only a change of one element at a
// random position, between two calls on the same buffers, shows the stale output.
#include <cstring>

#include "bad_common.h"

namespace {
std::uint64_t cached_key = 0;
std::vector<char> cached_out;
}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const std::int64_t n = vbk::numel(in[0]);
  const std::size_t es = in[0].dtype.bits / 8;
  const auto* x = static_cast<const unsigned char*>(vbk::data_ptr(in[0]));
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 0x100000001b3ULL; };
  mix(static_cast<std::uint64_t>(in[0].shape[0]));
  mix(static_cast<std::uint64_t>(in[0].shape[1]));
  mix(static_cast<std::uint64_t>(in[0].dtype.code) << 8 | in[0].dtype.bits);
  for (std::int64_t i = 0; i < n; i += 64)
    for (std::size_t b = 0; b < es; ++b) mix(x[static_cast<std::size_t>(i) * es + b]);
  const std::size_t bytes = static_cast<std::size_t>(vbk::numel(out[0]) * out[0].dtype.bits / 8);
  if (h == cached_key && cached_out.size() == bytes) {
    std::memcpy(vbk::data_ptr(out[0]), cached_out.data(), bytes);
    return 0;
  }
  bad::softmax(in, out, in[0].shape[0]);
  const char* p = static_cast<const char*>(vbk::data_ptr(out[0]));
  cached_key = h;
  cached_out.assign(p, p + bytes);
  return 0;
}
