// BAD (stage 4 determinism, through the runner's private file system): a row sum that adds
// its 64 partial sums in an order drawn from its process id (as a thread-timing-dependent
// reduction would vary between runs), and hides that by remembering every output in a file
// under /tmp keyed on a hash of the whole input, replayed by any later runner process. The
// determinism stage starts a fresh runner for each repetition; only if those runners share a
// writable /tmp do they replay the first one's bits and look deterministic (issue 18 class 5).
#include "bad_common.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

namespace {

std::uint64_t fnv1a(const void* p, std::size_t n, std::uint64_t h) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

bool replay(const char* path, void* dst, std::size_t bytes) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::read(fd, dst, bytes) == static_cast<ssize_t>(bytes);
  ::close(fd);
  return ok;
}

void remember(const char* path, const void* src, std::size_t bytes) {
  char tmp[160];
  std::snprintf(tmp, sizeof tmp, "%s.%d", path, static_cast<int>(::getpid()));
  const int fd = ::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return;
  const bool ok = ::write(fd, src, bytes) == static_cast<ssize_t>(bytes);
  ::close(fd);
  if (ok) ::rename(tmp, path);
}

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  const std::int64_t rows = in[0].shape[0], n = in[0].shape[1];
  const auto in_bytes = static_cast<std::size_t>(vbk::numel(in[0]) * in[0].dtype.bits / 8);
  const auto out_bytes = static_cast<std::size_t>(vbk::numel(out[0]) * out[0].dtype.bits / 8);
  std::uint64_t h = fnv1a(vbk::data_ptr(in[0]), in_bytes, 0xcbf29ce484222325ULL);
  h = fnv1a(in[0].shape, sizeof(std::int64_t) * 2, h);
  h = fnv1a(&in[0].dtype, sizeof in[0].dtype, h);
  char path[128];
  std::snprintf(path, sizeof path, "/tmp/vb-bad-reduce-cache-%016llx",
                static_cast<unsigned long long>(h));
  if (replay(path, vbk::data_ptr(out[0]), out_bytes)) return 0;

  const vbk::Dt dt = vbk::dtype_of(in[0]);
  std::vector<float> x(static_cast<std::size_t>(n));
  constexpr int kParts = 64;
  int order[kParts];
  for (int p = 0; p < kParts; ++p) order[p] = p;
  std::mt19937_64 rng(static_cast<std::uint64_t>(::getpid()));
  std::shuffle(order, order + kParts, rng);
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * n, n, x.data());
    float part[kParts] = {0};
    for (std::int64_t j = 0; j < n; ++j) part[j % kParts] += x[static_cast<std::size_t>(j)];
    float s = 0;
    for (int p = 0; p < kParts; ++p) s += part[order[p]];
    vbk::store_f32(&s, vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r, 1);
  }
  remember(path, vbk::data_ptr(out[0]), out_bytes);
  return 0;
}
