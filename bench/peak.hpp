// Single-core FMA peak of the instruction set the library was built for, so every benchmark can be read as
// a fraction of what the core can do. Independent accumulators hide the FMA latency (12 or 16 chains, as many
// as the registers hold: 4-cycle latency × 2 FMA ports needs 8).
#pragma once

#include <cstddef>

namespace bench {

// Runs `iterations` rounds of 12 or 16 independent vector FMAs (peak.cpp); returns flops executed (2 per lane per FMA).
double fma_burst(std::size_t iterations, float* sink);
// Measured peak in GFLOP/s (best of a few short bursts).
double measure_fma_peak_gflops();
const char* peak_arch();

}  // namespace bench
