// The roofline model (DESIGN §5): where a timed kernel run sits relative to the machine's
// memory and compute ceilings.
//
// S. Williams, A. Waterman, D. Patterson, "Roofline: An Insightful Visual Performance Model for
// Multicore Architectures", Communications of the ACM 52(4):65-76, 2009. Attainable
// performance is min(peak FLOP/s, arithmetic intensity x memory bandwidth); the two roofs meet
// at the ridge point peak / bandwidth. A kernel left of the ridge is memory bound, right of it
// (or on it) compute bound, and its efficiency is measured against the roof that bounds it.
#pragma once

#include <string>

#include "core/dtype.h"
#include "targets/ceilings.h"

namespace vb {

/// One kernel run placed on the roofline.
struct RooflinePoint {
  double arithmetic_intensity = 0;  ///< FLOP per byte of the kernel's traffic model (inf if 0 B)
  double ridge_point = 0;           ///< FLOP/byte where the roofs meet: peak / bandwidth
  double achieved_tflops = 0;       ///< flops / seconds, in TFLOP/s (1e12)
  double achieved_gbs = 0;          ///< bytes / seconds, in GB/s (1e9)
  /// The bounding roof: GB/s (memory bandwidth) when bound == "memory", else TFLOP/s (peak).
  double ceiling = 0;
  /// achieved / ceiling x 100 on the bounding roof (achieved_gbs or achieved_tflops). Values
  /// above 100 mean the traffic/FLOP model or the timing is wrong (DESIGN §4 flags them).
  double pct_peak = 0;
  std::string bound;  ///< "memory" if arithmetic_intensity < ridge_point, else "compute"
};

/// Places a run of `flops` floating-point operations moving `bytes` bytes (the kernel's model at
/// the actual size, not measured counters) in `seconds` on the roofline of `c`. The compute
/// roof is c.peak_for(dtype): the fp64 peak for F64 and I64, the dtype's own peak for F32, F16,
/// BF16. flops == 0 (pure data movement) is memory bound with intensity 0; bytes == 0 with
/// flops > 0 is compute bound with infinite intensity.
/// Throws std::invalid_argument when seconds <= 0 or is not finite, flops or bytes is negative
/// or not finite, both are 0, or `c` has no positive bandwidth or peak for `dtype`.
RooflinePoint roofline_point(const Ceilings& c, DType dtype, double flops, double bytes,
                             double seconds);

}  // namespace vb
