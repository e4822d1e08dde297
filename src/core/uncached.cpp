#include "core/uncached.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace vb {

namespace {
constexpr std::uintptr_t kLine = 64;

#if defined(__x86_64__)
void flush_lines(const char* p, std::size_t n) {
  if (n == 0) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p) & ~(kLine - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(p) + n;
  for (std::uintptr_t l = a; l < end; l += kLine) _mm_clflush(reinterpret_cast<const void*>(l));
}
#endif
}  // namespace

void copy_uncached(void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
#if defined(__x86_64__)
  // Head up to 16-byte alignment of dst, and the tail: plain copies, flushed.
  std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
  if (head > n) head = n;
  std::memcpy(d, s, head);
  std::size_t i = head;
  for (; i + 16 <= n; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  std::memcpy(d + i, s + i, n - i);
  _mm_mfence();
  flush_lines(d, head);
  flush_lines(d + i, n - i);
  _mm_mfence();
#elif defined(__aarch64__)
  std::memcpy(d, s, n);
  const auto a = reinterpret_cast<std::uintptr_t>(d) & ~(kLine - 1);
  for (std::uintptr_t l = a; l < reinterpret_cast<std::uintptr_t>(d) + n; l += kLine)
    asm volatile("dc civac, %0" ::"r"(l) : "memory");
  asm volatile("dsb ish" ::: "memory");
#else
  std::memcpy(d, s, n);
#endif
}

}  // namespace vb
