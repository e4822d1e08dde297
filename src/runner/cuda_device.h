// The runner's view of one CUDA device, through the driver API loaded at run time with
// dlopen(3) (libcuda.so.1, or $VB_LIBCUDA), so vladbud-runner has no CUDA build dependency.
//
// The runner retains the device's primary context and makes it current: the candidate
// library's statically linked CUDA runtime then uses that same context. All staging copies,
// memsets and the kernel's launches go to one blocking stream created here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vb::runner {

/// Device pointer (CUdeviceptr is an unsigned 64-bit integer on every 64-bit platform).
using DevPtr = std::uint64_t;

/// A CUDA device opened by the runner. Every method returns "" on success or a message
/// "<what>: CUDA_ERROR_NAME: description" on failure.
class CudaDevice {
 public:
  CudaDevice() = default;
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  /// Loads the driver, initializes device 0, retains its primary context, makes it current,
  /// creates the stream and two events. Idempotent. Without a usable GPU it returns
  /// "no GPU: libcuda.so.1 not found (<dlerror>)", "no GPU: cuInit failed: ...", ...
  std::string open();
  bool is_open() const { return stream_ != nullptr; }

  /// The stream kernels launch on (a CUstream, passed to vb_kernel_run as `stream`).
  void* stream() const { return stream_; }
  std::string name() const { return name_; }
  std::size_t l2_bytes() const { return l2_bytes_; }
  std::size_t total_mem_bytes() const { return total_mem_; }
  int cc_major() const { return cc_major_; }
  int cc_minor() const { return cc_minor_; }

  /// Device memory: allocate `bytes` / release an allocation (cuMemAlloc / cuMemFree).
  std::string alloc(std::size_t bytes, DevPtr* out);
  std::string release(DevPtr p);
  /// Free and total device memory in bytes (cuMemGetInfo).
  std::string mem_info(std::size_t* free_bytes, std::size_t* total_bytes);

  /// Synchronous copies (cuMemcpyHtoD / cuMemcpyDtoH; they order after prior stream work
  /// because the stream is a blocking one).
  std::string to_device(DevPtr dst, const void* src, std::size_t bytes);
  std::string to_host(void* dst, DevPtr src, std::size_t bytes);
  /// Fills `count` elements of 1, 2 or 4 bytes with `value` on the stream (cuMemsetD8/16/32Async).
  std::string fill(DevPtr dst, unsigned value, int elem_bytes, std::size_t count);

  /// Records the start / end event on the stream.
  std::string record_start();
  std::string record_end();
  /// Waits for the end event, then for the whole context (work the kernel put on other
  /// streams too), and returns the event pair's elapsed time in ms. A failure here is the
  /// candidate's asynchronous fault (sticky: the context is unusable afterwards).
  std::string finish_timed(float* ms);
  /// Undoes what a kernel may have done to keep data in L2 across calls (issue 18 class 10;
  /// llm.c PR 851): the persisting-L2 set-aside back to 0 (cuCtxSetLimit
  /// CU_LIMIT_PERSISTING_L2_CACHE_SIZE), persisting lines reset to normal
  /// (cuCtxResetPersistingL2Cache) and the runner stream's access-policy window cleared
  /// (cuStreamSetAttribute). Best effort: a driver without these entry points (before CUDA 11)
  /// or a device without persisting L2 has nothing to undo.
  void reset_persisting_l2();
  /// cuCtxSynchronize: "" or the asynchronous error of earlier work.
  std::string synchronize();

 private:
  std::string check(int rc, const char* what) const;

  void* lib_ = nullptr;
  void* ctx_ = nullptr;
  void* stream_ = nullptr;
  void* ev0_ = nullptr;
  void* ev1_ = nullptr;
  int device_ = 0;
  std::string name_;
  std::size_t l2_bytes_ = 0, total_mem_ = 0;
  int cc_major_ = 0, cc_minor_ = 0;
  std::string open_error_;
};

}  // namespace vb::runner
