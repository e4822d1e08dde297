// The device of the triton backend when it runs without a GPU: Triton's interpreter
// (TRITON_INTERPRET=1) on the host CPU, hosted by the Python interpreter runner
// (python/vladbud/triton_runner.py) behind the same runner client and evaluator (DESIGN §4).
// It emulates the GPU program by program, so it answers correctness only (ladder rung 2).
#pragma once

#include "backends/device.h"

namespace vb {

/// The Triton interpreter device (a process-wide singleton).
const Device& triton_interpreter_device();

}  // namespace vb
