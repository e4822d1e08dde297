// The runner's choice of device: made once, from the flavour on its command line.
#include "runner/device.h"

namespace vb::runner {

std::unique_ptr<RunnerDevice> make_runner_device(Flavour flavour, std::size_t gpu_budget) {
  switch (flavour) {
    case Flavour::Cuda:
      return make_cuda_device(gpu_budget);
    case Flavour::Host:
      break;
  }
  return make_host_device();
}

}  // namespace vb::runner
