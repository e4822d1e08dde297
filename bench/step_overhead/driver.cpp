// Step-overhead probe (issue 16): times a CPU kernel library's fp32 matmul at M x N x K in three
// modes, to measure what the evaluator's stepped timing (issue 18: the runner stops itself with
// SIGSTOP before each timed call, the parent reveals the inputs and continues it) costs a kernel
// next to back-to-back calls.
//   mode 0: back-to-back calls over SETS rotating input sets;
//   mode 2: the same, each call's A and B first rewritten with non-temporal stores (cold inputs,
//           as the evaluator's reveal leaves them), no stop;
//   mode 1: as mode 2, but the process stops itself before each call and a forked parent
//           rewrites the inputs and continues it (SIGCONT), as the evaluator does.
// Usage: driver LIB.so M N K MODE CALLS   (env SETS, default 16). Prints one line:
//   "mode K MxNxK: p10 X p50 Y p90 Z us (n=CALLS)". x86-64 with AVX-512 only (the probe's NT
//   stores); exits 2 with a message on bad arguments or a library without vb_kernel_run.
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <immintrin.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
using KernelFn = int (*)(const DLTensor*, int, DLTensor*, int, const double*, int, void*);

DLTensor tensor(float* p, std::int64_t* shape) {
  DLTensor t{};
  t.data = p;
  t.device = {kDLCPU, 0};
  t.ndim = 2;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  return t;
}

// Rewrites n floats at dst from src with non-temporal stores (the inputs end up in memory,
// not in the caches).
void stream_copy(float* dst, const float* src, std::size_t n) {
  for (std::size_t i = 0; i + 16 <= n; i += 16) _mm512_stream_ps(dst + i, _mm512_loadu_ps(src + i));
  _mm_sfence();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: driver LIB.so M N K MODE(0|1|2) CALLS\n");
    return 2;
  }
  const std::int64_t M = std::atol(argv[2]), N = std::atol(argv[3]), K = std::atol(argv[4]);
  const int mode = std::atoi(argv[5]), calls = std::atoi(argv[6]);
  if (M <= 0 || N <= 0 || K <= 0 || mode < 0 || mode > 2 || calls < 10) {
    std::fprintf(stderr, "driver: M, N, K must be > 0, MODE 0, 1 or 2, CALLS >= 10\n");
    return 2;
  }
  void* h = dlopen(argv[1], RTLD_NOW);
  const auto fn = h ? reinterpret_cast<KernelFn>(dlsym(h, "vb_kernel_run")) : nullptr;
  if (!fn) {
    std::fprintf(stderr, "driver: %s has no vb_kernel_run (%s)\n", argv[1], dlerror());
    return 2;
  }
  const int sets = std::max(1, std::getenv("SETS") ? std::atoi(std::getenv("SETS")) : 16);
  const std::size_t per = static_cast<std::size_t>(M * K + K * N + M * N);  // floats per set
  auto* arena = static_cast<float*>(mmap(nullptr, per * sets * 4, PROT_READ | PROT_WRITE,
                                         MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (arena == MAP_FAILED) {
    std::perror("driver: mmap");
    return 2;
  }
  for (std::size_t i = 0; i < per * sets; ++i)
    arena[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.f - 0.5f;
  std::vector<float> fresh(static_cast<std::size_t>(M * K + K * N), 0.25f);
  std::int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
  if (mode == 1) {
    const pid_t child = fork();
    if (child > 0) {  // the parent: at each stop, reveal that call's inputs, then continue
      for (int c = 0;; ++c) {
        int st = 0;
        if (waitpid(child, &st, WUNTRACED) < 0 || !WIFSTOPPED(st)) return 0;
        stream_copy(arena + per * (c % sets), fresh.data(), fresh.size());
        kill(child, SIGCONT);
      }
    }
  }
  std::vector<double> us;
  for (int c = 0; c < calls + 3; ++c) {
    float* base = arena + per * (c % sets);
    if (mode == 2) stream_copy(base, fresh.data(), fresh.size());
    if (mode == 1) raise(SIGSTOP);
    DLTensor in[2] = {tensor(base, sa), tensor(base + M * K, sb)};
    DLTensor out = tensor(base + M * K + K * N, sc);
    const auto t0 = std::chrono::steady_clock::now();
    if (fn(in, 2, &out, 1, nullptr, 0, nullptr) != 0) {
      std::fprintf(stderr, "driver: the kernel returned an error\n");
      return 1;
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (c >= 3) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("mode %d %lldx%lldx%lld: p10 %.1f p50 %.1f p90 %.1f us (n=%zu)\n", mode,
              static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K),
              us[us.size() / 10], us[us.size() / 2], us[us.size() * 9 / 10], us.size());
  return 0;
}
