// Single-core FMA peak of the instruction set the library was built for, so every benchmark can be read as
// a fraction of what the core can do. Independent accumulators hide the FMA latency (16 chains covers
// 4-cycle latency × 2 FMA ports with room to spare).
#pragma once

#include <cstddef>

namespace bench {

// Runs `iterations` rounds of 16 independent vector FMAs; returns flops executed (2 per lane per FMA).
double fma_burst(std::size_t iterations, float* sink);
// Measured peak in GFLOP/s (best of a few short bursts).
double measure_fma_peak_gflops();
const char* peak_arch();

}  // namespace bench
