// BAD (guard input_mutation, issue 18 class 8): uses its input as scratch space -- writes the
// exponentials into x in place -- and restores x from a copy before returning, so a checksum
// of the inputs after the call sees nothing. Inputs are read-only to the kernel: their pages
// are mapped read-only during the call, and the first write faults.
#include <cstring>

#include "bad_common.h"

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out, const double*,
                             int n_attrs, void*) {
  if (int e = bad::softmax_args(in, n_in, out, n_out, n_attrs)) return e;
  const std::size_t bytes = static_cast<std::size_t>(vbk::numel(in[0]) * in[0].dtype.bits / 8);
  std::vector<char> saved(bytes);
  char* x = static_cast<char*>(vbk::data_ptr(in[0]));
  std::memcpy(saved.data(), x, bytes);
  // "Scratch": overwrite the input, compute from the saved copy, then put the input back.
  std::memset(x, 0, bytes);
  DLTensor copy = in[0];
  copy.data = saved.data();
  copy.byte_offset = 0;
  bad::softmax(&copy, out, in[0].shape[0]);
  std::memcpy(x, saved.data(), bytes);
  return 0;
}
