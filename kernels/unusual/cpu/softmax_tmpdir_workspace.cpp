// UNUSUAL but correct: softmax whose fp32 workspace is a scratch file in $TMPDIR (created with
// mkstemp, unlinked at once, grown with ftruncate and mapped), made on the first call and
// reused by every later call -- the way a kernel may spill a large workspace to a file. It
// keeps no results between calls: every call recomputes from its inputs. The runner's private
// temp directory (issue 18 class 5) must leave this working. Must pass every stage.
#include "vb_kernel.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>

namespace {

float* workspace = nullptr;  // reused across calls: scratch only
std::size_t workspace_bytes = 0;
int workspace_fd = -1;

// Returns a scratch buffer of at least `bytes`, or nullptr (message in vbk::fail).
float* scratch(std::size_t bytes) {
  if (bytes <= workspace_bytes) return workspace;
  if (workspace_fd < 0) {
    const char* dir = std::getenv("TMPDIR");
    std::string path = std::string(dir && *dir ? dir : "/tmp") + "/vb-softmax-ws-XXXXXX";
    workspace_fd = ::mkstemp(path.data());
    if (workspace_fd < 0) return nullptr;
    ::unlink(path.c_str());
  }
  if (workspace) ::munmap(workspace, workspace_bytes);
  workspace = nullptr;
  workspace_bytes = 0;
  if (::ftruncate(workspace_fd, static_cast<off_t>(bytes)) != 0) return nullptr;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, workspace_fd, 0);
  if (p == MAP_FAILED) return nullptr;
  workspace = static_cast<float*>(p);
  workspace_bytes = bytes;
  return workspace;
}

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  if (in[0].ndim != 2) return vbk::fail("softmax expects x[R,C]");
  const std::int64_t rows = in[0].shape[0], c = in[0].shape[1];
  float* x = scratch(static_cast<std::size_t>(c > 0 ? c : 1) * sizeof(float));
  if (!x) return vbk::fail("cannot create the scratch file in $TMPDIR");
  const vbk::Dt dt = vbk::dtype_of(in[0]);
  for (std::int64_t r = 0; r < rows; ++r) {
    vbk::load_f32(vbk::data_ptr(in[0]), dt, r * c, c, x);
    float m = -INFINITY;
    for (std::int64_t j = 0; j < c; ++j) m = std::fmax(m, x[j]);
    float s = 0;
    for (std::int64_t j = 0; j < c; ++j) s += (x[j] = std::exp(x[j] - m));
    const float inv = 1.0f / s;
    for (std::int64_t j = 0; j < c; ++j) x[j] *= inv;
    vbk::store_f32(x, vbk::dtype_of(out[0]), vbk::data_ptr(out[0]), r * c, c);
  }
  return 0;
}
