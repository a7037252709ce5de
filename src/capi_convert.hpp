// The C API's values as the C++ API's (capi.cpp, blocks_capi.cpp): views, statuses, enums, weight matrices, layer
// configurations and attention options. File-local in each object, so that neither links the other.
#pragma once

#include <cstring>
#include <type_traits>

#include "microattn/microattn.h"
#include "microattn/microattn.hpp"

namespace microattn {
namespace capi {
namespace {

inline MatrixView<const float> cpp(microattn_cview v) noexcept { return {v.data, v.rows, v.cols, v.stride}; }
inline MatrixView<float> cpp(microattn_view v) noexcept { return {v.data, v.rows, v.cols, v.stride}; }
inline microattn_status c(Status s) noexcept { return static_cast<microattn_status>(static_cast<int>(s)); }

// A C enum holds any int, but C++ may not load a value outside the enumerators' range as the enum (UBSan): its
// bytes as the underlying integer. A value above `last` becomes 0xff, outside every C++ enum here (invalid_shape
// after the null pointer checks, as in C++), never truncated into a valid one.
template <class E>
unsigned raw_enum(const E& e, unsigned last) noexcept {
  std::underlying_type_t<E> raw;
  std::memcpy(&raw, &e, sizeof raw);
  const unsigned long long v = static_cast<unsigned long long>(raw);
  return v <= last ? static_cast<unsigned>(v) : 0xffu;
}
inline Format cpp(const microattn_format& f) noexcept { return static_cast<Format>(raw_enum(f, 2)); }
inline WeightMatrix cpp(const microattn_weight_matrix& w) noexcept {
  return {cpp(w.format), w.data, w.rows, w.cols, w.scales, w.group};
}
inline LayerWeightMatrices cpp(const microattn_layer_weight_matrices& w) noexcept {
  return {cpp(w.q), cpp(w.k), cpp(w.v), w.q_bias, w.k_bias, w.v_bias, cpp(w.out), w.out_bias};
}
inline LayerConfig cpp(const microattn_layer_config& c) noexcept {
  LayerConfig r;
  r.rope_theta = c.rope_theta;
  r.rope_dims = c.rope_dims;
  r.rope_interleaved = c.rope_interleaved != 0;
  r.window = c.window;
  return r;
}
inline AttentionOptions cpp(const microattn_attention_options* o) noexcept {
  AttentionOptions r;
  if (o == nullptr) return r;
  r.scale = o->scale;
  r.causal = o->causal != 0;
  r.causal_offset = o->causal_offset;
  if (o->mask.data != nullptr) r.mask = cpp(o->mask);
  r.window = o->window;
  return r;
}

// What every init of a layer or a block sets first: its shape and its cache and scratch blocks, the rest zero (an
// empty cache); the init sets what is its own.
template <class L>
L layer_blocks(std::size_t max_seq, std::size_t model_dim, std::size_t heads, std::size_t head_dim, float* cache,
               std::size_t cache_floats, float* scratch, std::size_t scratch_floats) noexcept {
  L l{};
  l.max_seq = max_seq;
  l.model_dim = model_dim;
  l.heads = heads;
  l.head_dim = head_dim;
  l.cache = cache;
  l.cache_floats = cache_floats;
  l.scratch = scratch;
  l.scratch_floats = scratch_floats;
  return l;
}

}  // namespace
}  // namespace capi
}  // namespace microattn
