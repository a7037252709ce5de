// The llama2.c forward pass for one token: embedding, the decoder layers, final rms norm, classifier. Every
// projection and the classifier go through microattn::linear (any weight format), but for a small fp32 model on
// AVX-512, whose matrices are packed for the runner's own product (llama_packed.hpp); attention over the cache is
// the runner's own loop over blocked caches (below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "llama_model.hpp"
#include "llama_packed.hpp"

namespace llama {

// A decoder layer's weights as the forward pass reads them, prepared once per model. In a small model (layer
// weights up to init_state's fuse_limit_bytes), where a token's time goes to per-call work rather than to
// reading weights, qkv is [wq; wk; wv] and w13 is [w1; w3] as one matrix each (one linear call instead of three
// and two): f32 and q8 whose groups tile every row (group divides cols) are concatenated as stored. A larger
// model's matrices are used in place (qkv_parts 3, w13_parts 2). A q8 matrix whose groups straddle rows unevenly
// (e.g. w2 with hidden 172, group 64), which linear computes in float from the dequantized weights anyway, is
// dequantized once here (each scale · value rounded once to float, as linear does).
// An f32 w2 whose row length is over 128 and not a multiple of 128 (hidden 172) is split by columns into w2 (the
// first multiple of 128) and w2_tail (the rest, zero-padded to a multiple of 16 columns): linear's kernels for
// one row of x keep rows of up to 128 floats in registers, and longer ones take a path several times slower
// per element at these sizes (measured: 64 × 172 866 ns, 64 × 128 144 ns).
// A small fp32 model on a CPU with AVX-512 (avx512_loops) instead has every matrix packed (llama_packed.hpp): qkv,
// wo, w13 and w2 (whole) in the *_packed members, the WeightMatrix members unused.
struct PreparedLayer {
  const float* attention_norm;
  const float* ffn_norm;
  microattn::WeightMatrix qkv[3], wo, w13[2], w2;
  std::size_t qkv_parts, w13_parts;                           // 1: fused
  microattn::WeightMatrix w2_tail;                            // data nullptr: no split
  PackedMatrix qkv_packed, wo_packed, w13_packed, w2_packed;  // data nullptr: not packed
};

// Storage on 64-byte boundaries: a weight row (or key block) that starts on a cache line is read without vector
// loads split across two lines (the prepared f32 weights of a dim-64 model: 95 → 135 GB/s from L2, measured).
// From 64 KiB on, pages of their own, mapped and populated in one call (MAP_POPULATE where the system has it): the
// prepared weights and the K/V caches are written once when the model is prepared, and a page fault for each of
// their pages cost more than writing them (stories260K at 256 positions, the caches alone: about 80 faults).
void* allocate_aligned(std::size_t bytes);
void deallocate_aligned(void* p, std::size_t bytes) noexcept;
template <class T>
struct CacheAligned {
  using value_type = T;
  CacheAligned() = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_aligned(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { deallocate_aligned(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const CacheAligned<U>&) const noexcept {
    return false;
  }
};
template <class T>
using aligned_vector = std::vector<T, CacheAligned<T>>;

// Activations and the K/V cache of one sequence of at most `capacity` tokens.
struct RunState {
  std::size_t capacity = 0;
  std::vector<float> x, xb, xb2, hb, qkv, logits;
  std::vector<float> tail;  // w2_tail's input: the last hidden columns, zero-padded
  // Keys layer × kv head × blocks of 16 positions × head_dim × 16 (capacity rounded up to 16; a head's scores are
  // vectors of positions, whatever the head dimension); values layer × kv head × capacity × head_dim, or as the
  // keys where values_transposed.
  aligned_vector<float> key_cache, value_cache;
  aligned_vector<float> att;              // n_heads rows of capacity rounded up to 16 (the fused path's row stride)
  std::vector<float> rope_cos, rope_sin;  // head_dim / 2 angles of the current position
  std::vector<PreparedLayer> layers;
  microattn::WeightMatrix classifier{};                  // the model's, or its f16 copy
  PackedMatrix classifier_packed{};                      // data nullptr: not packed
  std::vector<aligned_vector<float>> owned_f32;          // concatenated, copied, dequantized or packed weights
  std::vector<aligned_vector<std::int8_t>> owned_q8;     // concatenated or copied q8 values
  std::vector<aligned_vector<std::uint16_t>> owned_f16;  // f16 copies (Storage::f16)
  bool wide = false;                                     // the AVX-512 attention loops (checked once here)
  bool values_transposed = false;                        // value_cache blocked as key_cache (the fused AVX-512 path)
  // The workers linear()'s projections run on (llama_run -j; microattn/parallel.hpp): the same logits, bit for
  // bit, for any count. The packed fp32 products and attention run on the calling thread.
  microattn::Parallel parallel{nullptr, nullptr, 1};
};

// How the prepared weights hold the model's fp32 matrices (the layers' and the classifier; the embedding rows stay
// as stored): as they are, or converted once to f16 (binary16, to nearest, ties to even), half the bytes a token
// reads where the weights stream from memory. A version-2 (q8) model is kept as it is.
enum class Storage { as_stored, f16 };

// Whether every fp32 matrix element converts to a finite f16 (|w| < 65520, the first value that rounds to inf).
bool fits_f16(const Model& m) noexcept;

// Sizes the buffers for `capacity` positions (1 <= capacity <= seq_len) and prepares the weights (fused where all
// layers' weights take at most fuse_limit_bytes as stored). False if memory runs out, or for Storage::f16 if the
// model does not fit_f16.
constexpr std::size_t default_fuse_limit_bytes = std::size_t{8} << 20;
bool init_state(const Model& m, std::size_t capacity, RunState& s,
                std::size_t fuse_limit_bytes = default_fuse_limit_bytes, Storage storage = Storage::as_stored);

// Logits (vocab_size floats, in s.logits) for `token` at position `pos` < s.capacity.
const float* forward(const Model& m, RunState& s, int token, std::size_t pos);

// run.c's rms norm: o = weight · (x / sqrt(mean(x²) + 1e-5)); o may be x.
void rms_norm(float* o, const float* x, const float* weight, std::size_t n) noexcept;

}  // namespace llama
