// UNUSUAL but correct: softmax on its own pool of two std::threads, created on the first call
// and kept alive between calls, asleep on a condition variable (as a runtime's worker pool
// is). Each call hands the workers half the rows each and waits for both. Threads that
// outlive a call are allowed as long as they do no work outside it: the runner stops the whole
// process between timed calls (issue 18 class 8) and continues it, and the pool must survive
// that and every guard. Must pass every stage and the timing protocol.
#include "vb_kernel.h"

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace {

struct Job {
  const DLTensor* in = nullptr;
  DLTensor* out = nullptr;
  std::int64_t r0 = 0, r1 = 0;
};

void softmax_rows(const Job& j) {
  const std::int64_t c = j.in->shape[1];
  const vbk::Dt dt = vbk::dtype_of(*j.in);
  std::vector<float> a(static_cast<std::size_t>(c));
  for (std::int64_t r = j.r0; r < j.r1; ++r) {
    vbk::load_f32(vbk::data_ptr(*j.in), dt, r * c, c, a.data());
    float m = -INFINITY;
    for (float v : a) m = std::fmax(m, v);
    double s = 0;
    for (float& v : a) s += (v = std::exp(v - m));
    for (float& v : a) v = static_cast<float>(v / s);
    vbk::store_f32(a.data(), vbk::dtype_of(*j.out), vbk::data_ptr(*j.out), r * c, c);
  }
}

class Pool {
 public:
  Pool() {
    for (int i = 0; i < 2; ++i) workers_.emplace_back([this, i] { loop(i); });
  }
  void run(const Job& a, const Job& b) {
    {
      std::lock_guard<std::mutex> l(m_);
      jobs_[0] = a, jobs_[1] = b;
      pending_ = 2;
      ++generation_;
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> l(m_);
    done_.wait(l, [this] { return pending_ == 0; });
  }

 private:
  void loop(int i) {
    unsigned long seen = 0;
    for (;;) {
      Job j;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return generation_ != seen; });
        seen = generation_;
        j = jobs_[i];
      }
      softmax_rows(j);
      std::lock_guard<std::mutex> l(m_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
  std::mutex m_;
  std::condition_variable cv_, done_;
  Job jobs_[2];
  int pending_ = 0;
  unsigned long generation_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace

extern "C" int vb_kernel_run(const DLTensor* in, int n_in, DLTensor* out, int n_out,
                             const double*, int n_attrs, void*) {
  if (int e = vbk::check_args(in, n_in, 1, out, n_out, 1, n_attrs, 0)) return e;
  if (in[0].ndim != 2) return vbk::fail("softmax expects x[R,C]");
  static Pool* pool = new Pool();  // never destroyed: the workers live as long as the process
  const std::int64_t rows = in[0].shape[0], half = rows / 2;
  pool->run(Job{&in[0], &out[0], 0, half}, Job{&in[0], &out[0], half, rows});
  return 0;
}
