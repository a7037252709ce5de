// f32 weights packed for llama_run's one-row products on AVX-512 (the prepared weights of a small fp32 model).
//
// A token's w·x reads each weight once. From L2, that is bound by what the core does per weight line, not by the
// line itself. With rows one after another (microattn::linear's layout), a vector of 16 rows' products costs 16
// partial-sum vectors and 30 shuffles to add their lanes. Here a tile of 16 rows holds, for every 4 columns, the
// 4 × 4 row-column products of 4 row groups in 4 vectors: x's 4 columns broadcast to the 4 quarters of a vector
// serve all 4 groups, and the 4 accumulators need 6 shuffles for the tile's 16 sums.
#pragma once

#include <cstddef>

#include <microattn/weights.hpp>

namespace llama {

// rows × cols f32 in tiles of 16 rows and blocks of 4 columns, tile-major then block-major: tile t, block b is 4
// vectors of 16 floats, vector g holding W[16t + 4i + g][4b + c] in lane 4i + c (i, c < 4), zeros beyond rows and
// cols. data: 64-byte aligned, packed_floats(rows, cols) floats.
struct PackedMatrix {
  const float* data = nullptr;
  std::size_t rows = 0, cols = 0;
};

std::size_t packed_floats(std::size_t rows, std::size_t cols) noexcept;

// The rows of parts[0 … count) one after another (f32, each of parts[0].cols columns) into out, packed_floats long.
void pack_rows(const microattn::WeightMatrix* parts, std::size_t count, float* out) noexcept;

// Whether llama_run takes its AVX-512 loops here (an x86-64 build on a CPU with AVX-512F and FMA, LLAMA_RUN_SCALAR
// unset): packed_gemv's kernel and the attention's. Elsewhere packed_gemv is a plain loop over the same layout, which
// llama_run does not take.
bool avx512_loops() noexcept;

// y (w.rows floats) = w·x (w.cols floats); x and y any alignment, y not overlapping x.
void packed_gemv(const PackedMatrix& w, const float* x, float* y) noexcept;

}  // namespace llama
