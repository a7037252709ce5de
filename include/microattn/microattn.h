/* microattn — the C API (C99; also valid C++, and includable together with microattn.hpp).
 *
 * Everything the C++ API offers, for C firmware (Zephyr, FreeRTOS, vendor SDKs): matmul, softmax_rows,
 * exp_elements, fused attention, and multi-head attention layers over caller-provided memory. The same rules
 * as the C++ API hold, and the C++ headers document each function in full (the names map one to one:
 * microattn_matmul is microattn::matmul, and so on):
 *  - matrices are row-major views {data, rows, cols, stride}: element (r, c) is data[r * stride + c], stride in
 *    elements, stride >= cols, no alignment beyond that of float required;
 *  - every function checks its arguments first and, on error, returns a non-OK status without writing a
 *    single byte of its outputs (nor the layer's cache or state);
 *  - nothing allocates; scratch memory is the caller's, sized by the *_FLOATS macros below (integer constant
 *    expressions, for static arrays) or the functions of the same name.
 * The library is C++ inside (built with -fno-exceptions -fno-rtti) but references nothing of the C++ runtime, only
 * memcpy, memset and libm: a C program links it with the C compiler, e.g. `cc app.c -lmicroattn -lm`. */
#ifndef MICROATTN_MICROATTN_H
#define MICROATTN_MICROATTN_H

#include <stddef.h>
#include <stdint.h>

#include "microattn/config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- views ------------------------------------------------------------------------------------------ */

/* An input matrix (read only) and an output matrix. A head h of a packed (seq × heads·d) matrix m is
 * {m + h·d, seq, d, heads·d}: no copies. */
typedef struct {
  const float* data;
  size_t rows, cols, stride;
} microattn_cview;
typedef struct {
  float* data;
  size_t rows, cols, stride;
} microattn_view;

/* ---- status ----------------------------------------------------------------------------------------- */

/* The same values as microattn::Status (checked at compile time by the library). */
typedef enum {
  MICROATTN_OK = 0,                  /* success, outputs written */
  MICROATTN_NULL_POINTER = 1,        /* a required pointer is null */
  MICROATTN_INVALID_SHAPE = 2,       /* zero or mismatched dimension, stride < cols, more rows than a layer holds */
  MICROATTN_WORKSPACE_TOO_SMALL = 3, /* workspace or layer buffer smaller than its *_floats() value */
  MICROATTN_ALIASING = 4,            /* an output overlaps an input (except documented in-place use) */
  MICROATTN_MISALIGNED = 5           /* a float pointer not aligned to float (4 bytes) */
} microattn_status;

/* "ok", "null_pointer", ..., "misaligned" (the C++ to_string names); never NULL, "unknown_status" for other
 * values. */
const char* microattn_status_string(microattn_status s);

/* ---- build information ------------------------------------------------------------------------------ */

/* "major.minor.patch" of the library linked. */
const char* microattn_version(void);
/* Kernel instruction set ("avx512bw", "fma3+avx2", "sse2", "neon64", "neon", "helium", "scalar") and matmul
 * micro-kernel
 * ("gemm_8x32_avx512", ..., "gemm_4x4_scalar") the library was built with. */
const char* microattn_simd_arch(void);
const char* microattn_matmul_kernel_name(void);
/* 1 when the running CPU has every instruction-set feature the library was compiled for (and the OS enables their
 * registers), else 0; and the first feature missing ("avx512f", "avx2", "neon", ...), "" when none, never NULL.
 * Compiled for any CPU of the target: call it first and refuse with its name, instead of dying of SIGILL in the
 * first kernel. x86 (GCC, Clang): CPUID and XGETBV; ARM Linux: AT_HWCAP (NEON on ARMv7-A, AArch64's
 * extensions); Cortex-M and other bare-metal targets: 1 (built for one core). The contract in full:
 * microattn::cpu_supported() in microattn/version.hpp. */
int microattn_cpu_supported(void);
const char* microattn_cpu_missing(void);

/* ---- matmul, softmax, exp --------------------------------------------------------------------------- */

/* c = a·b (a: m×k, b: k×n) or, with transpose_b != 0, c = a·bᵀ (b: n×k, the nn.Linear weight layout).
 * c is m×n and overwritten. Errors: NULL_POINTER, MISALIGNED, INVALID_SHAPE, ALIASING (c shares an element with a
 * or b). */
microattn_status microattn_matmul(microattn_cview a, microattn_cview b, microattn_view c, int transpose_b);

/* Every row of x becomes its softmax, in place. -inf entries give 0, a row of only -inf gives zeros; NaN or
 * +inf in a row makes that row NaN. Errors: NULL_POINTER, MISALIGNED, INVALID_SHAPE. */
microattn_status microattn_softmax_rows(microattn_view x);

/* y[i] = e^x[i] for i < n; x == y is fine (in place), partial overlap is ALIASING; n == 0 is OK. Errors:
 * NULL_POINTER (x or y with n > 0), MISALIGNED, ALIASING.
 * At most MICROATTN_EXP_MAX_ULP ULP from the correctly rounded result for normal results. */
microattn_status microattn_exp_elements(const float* x, float* y, size_t n);
#define MICROATTN_EXP_MAX_ULP 1.5f

/* ---- attention -------------------------------------------------------------------------------------- */

/* The same meanings as microattn::AttentionOptions:
 *   scale          0: 1/sqrt(d_k)
 *   causal         non-zero: key j is visible to query i iff j <= i + causal_offset (offset 0: PyTorch's
 *                  is_causal, top-left; n_kv - n_q: bottom-right, the decoding case)
 *   mask           mask.data NULL: no mask; else an additive n_q × n_kv mask (-inf hides a key)
 *   window         0: unlimited
 * Zero-initialise it ({0} or memset) for the defaults. */
typedef struct {
  float scale;
  int causal;
  ptrdiff_t causal_offset;
  microattn_cview mask;
  size_t window;
} microattn_attention_options;

/* The attention tiles of the target, MICROATTN_ATTENTION_BLOCK_Q and _KV: microattn/config.h (C++:
 * microattn::attention_block_q / _kv). */

/* Largest head size (d_k, d_v) attention takes. */
#define MICROATTN_ATTENTION_MAX_HEAD_DIM 65536u

/* Scratch floats microattn_attention needs, for head sizes d_k and d_v (never depends on n_q or n_kv):
 *   BLOCK_Q · (d_k + d_v + BLOCK_KV + 3) + 16      e.g. 6256 for d = 64 (Cortex-M: 604). Float alignment only
 * (the 16 floats are the padding it aligns itself with). The function returns 0, as the layer size functions
 * below, where the workspace's size in bytes (4 × that count) would exceed PTRDIFF_MAX, the count overflowing
 * size_t included: only for head sizes far above MICROATTN_ATTENTION_MAX_HEAD_DIM, which microattn_attention
 * rejects anyway (C++'s attention_workspace_floats saturates at SIZE_MAX there instead). The macro does not check:
 * it is for static arrays, whose size the compiler checks. */
#define MICROATTN_ATTENTION_WORKSPACE_FLOATS(d_k, d_v) \
  ((size_t)MICROATTN_ATTENTION_BLOCK_Q * ((size_t)(d_k) + (size_t)(d_v) + MICROATTN_ATTENTION_BLOCK_KV + 3u) + 16u)
size_t microattn_attention_workspace_floats(size_t d_k, size_t d_v);

/* out (n_q × d_v) = softmax(q·kᵀ·scale + mask)·v; q: n_q × d_k, k: n_kv × d_k, v: n_kv × d_v. options NULL:
 * the defaults. A query that sees no key gets zeros. Errors (nothing written to out or the workspace):
 *   NULL_POINTER (q, k, v, out or workspace), MISALIGNED (any of them or the mask), INVALID_SHAPE,
 *   WORKSPACE_TOO_SMALL (workspace_floats < microattn_attention_workspace_floats(d_k, d_v)), ALIASING (out or
 *   the workspace overlaps an input, or each other). */
microattn_status microattn_attention(microattn_cview q, microattn_cview k, microattn_cview v, microattn_view out,
                                     float* workspace, size_t workspace_floats,
                                     const microattn_attention_options* options);

/* ---- weight formats (C++: microattn/weights.hpp) --------------------------------------------------------- */

/* How a weight matrix is stored (the values of microattn::Format). */
typedef enum { MICROATTN_FORMAT_F32 = 0, MICROATTN_FORMAT_F16 = 1, MICROATTN_FORMAT_Q8 = 2 } microattn_format;

/* A read-only rows × cols matrix, row-major and dense (stride = cols), in nn.Linear layout (out × in). Borrowed.
 *   F32: data is const float* (4-byte aligned); F16: const uint16_t* with IEEE binary16 bit patterns (2-byte aligned);
 *   Q8: const int8_t* (any alignment) and one float scale (4-byte aligned) per group of `group` consecutive elements
 *   in row-major order: element (r, c) = scales[(r·cols + c) / group] · data[r·cols + c]; group divides rows·cols
 *   (group = cols: one scale per row; llama2.c's version-2 layout, whose groups may straddle rows).
 * scales and group are read for Q8 only. */
typedef struct {
  microattn_format format;
  const void* data;
  size_t rows, cols;
  const float* scales;
  size_t group;
} microattn_weight_matrix;

/* ---- layers ----------------------------------------------------------------------------------------- */

/* Weights in nn.Linear layout (out_features × in_features, row-major), borrowed, never copied: they must
 * outlive the layer (const arrays in flash are the intended case). head_dim = model_dim / heads.
 *   q_weight: model_dim × model_dim           k_weight, v_weight: (kv_heads·head_dim) × model_dim
 *   q_bias: model_dim   k_bias, v_bias: kv_heads·head_dim             (NULL: no bias)
 *   out_weight: model_dim × model_dim, out_bias: model_dim   (out_weight NULL: y is the concatenated heads)
 * For PyTorch's nn.MultiheadAttention, q/k/v_weight are the three row blocks of in_proj_weight, q/k/v_bias
 * those of in_proj_bias, out_weight/out_bias are out_proj.weight/bias (scripts/export_weights.py writes them). */
typedef struct {
  const float* q_weight;
  const float* k_weight;
  const float* v_weight;
  const float* q_bias;
  const float* k_bias;
  const float* v_bias;
  const float* out_weight;
  const float* out_bias;
} microattn_layer_weights;

/* The four projections of a layer, each in its own format (C++: microattn::LayerWeightMatrices), biases fp32
 * (NULL: no bias), all borrowed; out.data NULL: no out projection (y is the concatenated heads).
 *   q: model_dim × model_dim   k, v: (kv_heads·head_dim) × model_dim   out: model_dim × model_dim
 *   q_bias: model_dim   k_bias, v_bias: kv_heads·head_dim   out_bias: model_dim */
typedef struct {
  microattn_weight_matrix q, k, v;
  const float* q_bias;
  const float* k_bias;
  const float* v_bias;
  microattn_weight_matrix out;
  const float* out_bias;
} microattn_layer_weight_matrices;

/* Per-layer options beyond the weights (C++: microattn::LayerConfig). Zero-initialise it ({0} or memset) for the
 * defaults: no rotary embedding, no window.
 *   rope_theta        rotary position embedding base, e.g. 10000, from 1 to FLT_MAX; 0: none
 *   rope_dims         leading dims of each head that rotate (even, <= head_dim); 0: all of head_dim
 *   rope_interleaved  0: pairs (i, i + rope_dims/2), HF Llama's rotate_half; non-zero: pairs (2i, 2i+1), GPT-J
 *   window            the layer's sliding window (used where the call's options.window is 0); makes the cache a
 *                     ring: appends keep the newest window - 1 rows when they run past max_seq
 * Pair p of a head at position t turns by t · rope_theta^(-2p/rope_dims) radians (float products, as PyTorch's
 * fp32 path: angle rounding about t · (ln θ + 4) · 2^-24 radians). */
typedef struct {
  float rope_theta;
  size_t rope_dims;
  int rope_interleaved;
  size_t window;
} microattn_layer_config;

/* A multi-head attention layer with a K/V cache (C++: MultiHeadAttention<max_seq, model_dim, heads, kv_heads>,
 * or MultiHeadAttentionSharedScratch with a borrowed scratch) over memory the caller provides. Fill it with a
 * microattn_layer_init* function only; the fields are readable, writing them is undefined.
 *   cache    K then V of max_seq rows each: K = cache, V = cache + cache_floats / 2
 *   scratch  the per-call scratch: cache + cache_floats in a layer over one buffer, else the shared block
 *   cached, position   rows [0, cached) of K and V hold the positions [position - cached, position)
 *   weights            the fp32 weights (microattn_layer_init*), all NULL for a layer from weight matrices
 *   weight_matrices    the weights of microattn_layer_init_matrices (zeroed for the others)
 *   weight_reader      internal: how the calls read the weights (a firmware that never calls
 *                      microattn_layer_init_matrices links no f16/q8 code through it)
 *   cache_format       how K and V are stored (microattn_layer_init_matrices' cache_format; F32 for the others).
 *                      F16 / Q8: cache is the block given to init, laid out as the C++ layer's: for Q8 first
 *                      2·max_seq·kv_heads float scales (K's, then V's, one per row and K/V head), then K and V
 *                      (max_seq rows of kv_heads·head_dim binary16 or int8 elements each); cache_floats is the
 *                      block's size in floats, rounded up
 *   cache_runner       internal: the calls over an F16 / Q8 cache (NULL for F32: an F32 firmware links none of it) */
typedef struct {
  size_t max_seq, model_dim, heads, kv_heads, head_dim;
  microattn_layer_weights weights;
  microattn_layer_config config;
  float* cache;
  size_t cache_floats;
  float* scratch;
  size_t scratch_floats;
  size_t cached;
  size_t position;
  microattn_layer_weight_matrices weight_matrices;
  const void* weight_reader;
  microattn_format cache_format;
  const void* cache_runner;
} microattn_layer;

/* Floats of a layer's K/V cache (C++: layer_cache_floats) and of its per-call scratch (C++:
 * layer_scratch_floats), and of one buffer holding both (C++: MultiHeadAttention<...>::buffer_floats;
 * ram_bytes = 4 × this):
 *   cache    2·max_seq·kv_heads·head_dim
 *   scratch  2·BLOCK_Q·model_dim + ATTENTION_WORKSPACE_FLOATS(head_dim, head_dim)
 *   buffer   cache + scratch
 * The functions return 0 for an invalid shape (a zero size, model_dim % heads, heads % kv_heads, or a head
 * dimension above MICROATTN_ATTENTION_MAX_HEAD_DIM) or when the block's size in bytes (4 × the count: the blocks
 * need float alignment only, so no padding) would exceed PTRDIFF_MAX, the largest object, which includes the count
 * overflowing size_t (C++'s size functions give SIZE_MAX there instead); the C++ template rejects such a layer at
 * compile time. The macros do not check: they are for static arrays, whose size the compiler checks. Layers that
 * run one after another may share one scratch block (microattn_layer_init_shared): size it for the largest. */
#define MICROATTN_LAYER_CACHE_FLOATS(max_seq, model_dim, heads, kv_heads) \
  (2u * (size_t)(max_seq) * ((size_t)(kv_heads) * ((size_t)(model_dim) / (size_t)(heads))))
#define MICROATTN_LAYER_SCRATCH_FLOATS(model_dim, heads)            \
  (2u * (size_t)MICROATTN_ATTENTION_BLOCK_Q * (size_t)(model_dim) + \
   MICROATTN_ATTENTION_WORKSPACE_FLOATS((size_t)(model_dim) / (size_t)(heads), (size_t)(model_dim) / (size_t)(heads)))
#define MICROATTN_LAYER_BUFFER_FLOATS(max_seq, model_dim, heads, kv_heads) \
  (MICROATTN_LAYER_CACHE_FLOATS(max_seq, model_dim, heads, kv_heads) + MICROATTN_LAYER_SCRATCH_FLOATS(model_dim, heads))
size_t microattn_layer_cache_floats(size_t max_seq, size_t model_dim, size_t heads, size_t kv_heads);
size_t microattn_layer_scratch_floats(size_t model_dim, size_t heads);
size_t microattn_layer_buffer_floats(size_t max_seq, size_t model_dim, size_t heads, size_t kv_heads);

/* Sets *layer up over `buffer` (at least microattn_layer_buffer_floats(...) floats, aligned to float, contents
 * irrelevant), with the default configuration; the cache starts empty. Init writes only *layer, and only on
 * success. Errors (*layer and the buffer untouched), in this order: NULL_POINTER (layer, weights, q/k/v weight,
 * buffer, or an out_bias without out_weight), INVALID_SHAPE (as microattn_layer_buffer_floats returning 0),
 * WORKSPACE_TOO_SMALL (buffer_floats too small), MISALIGNED (the buffer or any weight or bias not aligned to
 * float), ALIASING (the buffer overlaps a weight or bias array). The weights get the checks, and the statuses, of
 * the C++ layer's every call, once: a layer that init accepted never fails on its weights. */
microattn_status microattn_layer_init(microattn_layer* layer, size_t max_seq, size_t model_dim, size_t heads,
                                      size_t kv_heads, const microattn_layer_weights* weights, float* buffer,
                                      size_t buffer_floats);
/* The same with a configuration (NULL: the defaults). Also INVALID_SHAPE, after the shape, for a configuration
 * the C++ layer rejects on every call: an odd rope_dims or one above head_dim, a rope_theta other than 0 outside
 * [1, FLT_MAX] (negative, NaN, infinite, below 1). */
microattn_status microattn_layer_init_config(microattn_layer* layer, size_t max_seq, size_t model_dim, size_t heads,
                                             size_t kv_heads, const microattn_layer_weights* weights,
                                             const microattn_layer_config* config, float* buffer, size_t buffer_floats);
/* A layer whose per-call scratch is a separate block, which layers that never run concurrently may share (one
 * call at a time: not from two threads, nor from an interrupt and the code it interrupts). cache: at least
 * microattn_layer_cache_floats(...) floats, the layer's own; scratch: at least
 * microattn_layer_scratch_floats(model_dim, heads). Errors as microattn_layer_init_config, NULL_POINTER and
 * MISALIGNED for either block, WORKSPACE_TOO_SMALL for either size, ALIASING also when the cache and the
 * scratch overlap. */
microattn_status microattn_layer_init_shared(microattn_layer* layer, size_t max_seq, size_t model_dim, size_t heads,
                                             size_t kv_heads, const microattn_layer_weights* weights,
                                             const microattn_layer_config* config, float* cache, size_t cache_floats,
                                             float* scratch, size_t scratch_floats);

/* Bytes of a layer's K/V cache stored in `cache` format (C++: layer_cache_bytes), with e = cache floats
 * (microattn_layer_cache_floats): F32 4·e, F16 2·e, Q8 e + 4·2·max_seq·kv_heads (int8 elements and one float
 * scale per row and K/V head); 0 for an invalid shape or a cache too large (as microattn_layer_cache_floats) or a
 * format outside the enum. */
size_t microattn_layer_cache_bytes(size_t max_seq, size_t model_dim, size_t heads, size_t kv_heads,
                                   microattn_format cache);
/* Floats of per-call scratch a layer whose cache is in `cache` format uses (C++: layer_scratch_floats(model_dim,
 * heads, cache)): microattn_layer_scratch_floats for F32; F16 and Q8 add a fixed block where key blocks are
 * converted to float (it does not grow with max_seq). 0 for an invalid shape, a scratch too large (as
 * microattn_layer_scratch_floats) or an invalid format. */
size_t microattn_layer_cache_scratch_floats(size_t model_dim, size_t heads, microattn_format cache);
/* A layer whose weights are in any formats (each projection its own: F32, F16, Q8), over a K/V cache of
 * cache_bytes bytes (at least microattn_layer_cache_bytes(..., cache_format); float alignment) and a scratch
 * block of scratch_floats floats (at least microattn_layer_cache_scratch_floats(model_dim, heads, cache_format)),
 * which layers that never run concurrently may share. F16 / Q8 caches round K and V when stored, as the C++
 * layer's Cache parameter does (docs/numerical-contract.md). config NULL: the defaults. Init writes only *layer, and
 * only on success; it checks everything the calls would check of the weights, once, with these statuses, in this order:
 *   NULL_POINTER   layer, weights, cache or scratch; q, k or v data; a Q8 matrix's scales; out_bias without
 *                  out.data
 *   INVALID_SHAPE  the shape (as microattn_layer_cache_floats returning 0); a format outside the enum; a matrix
 *                  whose rows × cols differ from the above; Q8 group 0 or not dividing rows·cols; a
 *                  configuration the layer rejects (as microattn_layer_init_config); a cache_format outside
 *                  the enum
 *   WORKSPACE_TOO_SMALL  cache_bytes or scratch_floats too small
 *   MISALIGNED     cache or scratch not aligned to float; F32 data, Q8 scales or a bias not 4-byte aligned; F16
 *                  data not 2-byte aligned (Q8 data: any alignment)
 *   ALIASING       the cache or the scratch sharing a byte with any weight data, scales or bias, or each other
 * The calls then run the projections through microattn_linear's kernels, within its accuracy bounds (F16
 * exact; Q8 quantizes each projection's input per group); the stack stays as for the fp32 layer (Q8 quantizes
 * into the scratch). */
microattn_status microattn_layer_init_matrices(microattn_layer* layer, size_t max_seq, size_t model_dim, size_t heads,
                                               size_t kv_heads, const microattn_layer_weight_matrices* weights,
                                               const microattn_layer_config* config, microattn_format cache_format,
                                               void* cache, size_t cache_bytes, float* scratch, size_t scratch_floats);

/* The layer calls below have the semantics and error rules of the C++ methods of the same name (layers.hpp).
 * Common rules: options NULL is the defaults (scale 1/sqrt(head_dim), no mask, not causal, the layer's window);
 * y may be exactly the query (same data and stride: in place). Errors as microattn_attention, plus
 * NULL_POINTER for a layer that was never initialised (zeroed), MISALIGNED for any view or mask not aligned to
 * float, INVALID_SHAPE for cols != model_dim or more rows than fit, ALIASING for y overlapping an input (other
 * than exactly), the mask, a weight, the scratch, or any input, output or mask overlapping the cache. On error
 * nothing is written: not y, not the cache, not cached or position.
 *
 * forward: self-attention over x (rows <= max_seq); afterwards the cache holds x's K/V:
 * cached == position == x.rows. */
microattn_status microattn_layer_forward(microattn_layer* layer, microattn_cview x, microattn_view y,
                                         const microattn_attention_options* options);
/* Cross-attention: queries from `query`, keys and values from `context` (rows <= max_seq each); y
 * (query.rows × model_dim) may be exactly query or exactly context. The cache then holds the context's K/V. */
microattn_status microattn_layer_forward_cross(microattn_layer* layer, microattn_cview query, microattn_cview context,
                                               microattn_view y, const microattn_attention_options* options);
/* x's rows are the next tokens (positions position … position + x.rows - 1): their K/V go after the cached ones
 * and each row attends to the cache and to the rows of x up to itself (causal; options->causal and
 * causal_offset are ignored), within the window if any. Appending tokens one by one or in any chunks gives the
 * rows of one causal forward over them (within the accuracy bound). options->mask, when given, is
 * x.rows × (cached + x.rows); a layer with config.window takes none. INVALID_SHAPE when the rows do not fit
 * (no config.window: cached + x.rows > max_seq; with it: config.window - 1 + x.rows > max_seq), for
 * options->window > config.window on a ring layer, or for a mask on a ring layer. */
microattn_status microattn_layer_append(microattn_layer* layer, microattn_cview x, microattn_view y,
                                        const microattn_attention_options* options);
/* Queries (any number of rows; rotary positions 0 …) attend to the cached K/V (cached keys), which stay as they
 * are: cross-attention decoding after microattn_layer_forward_cross. Mask: query.rows × cached. An empty
 * cache is INVALID_SHAPE. */
microattn_status microattn_layer_attend(microattn_layer* layer, microattn_cview query, microattn_view y,
                                        const microattn_attention_options* options);
/* Empties the cache (cached = position = 0). NULL_POINTER for NULL or a layer never initialised. */
microattn_status microattn_layer_reset(microattn_layer* layer);
/* Rows held in the cache (<= max_seq), and the position of the next appended row; 0 for NULL. */
size_t microattn_layer_cached(const microattn_layer* layer);
size_t microattn_layer_position(const microattn_layer* layer);

/* Conversions to the storage formats (microattn::f16_from_float, float_from_f16, quantize_q8: the rules and errors
 * of microattn/weights.hpp, which scripts/export_weights.py follows too). F16: round to nearest even, |x| >= 65520
 * gives ±inf; back to float exactly. Q8: w (any stride) into rows·cols int8 values and rows·cols / group scales,
 * s = max|w| / 127 per group, q = round(w / s) with ties to even, clamped to ±127; an all-zero group s = 0; a
 * group with NaN or ±inf s = NaN, q = 0. Errors (nothing written): NULL_POINTER, MISALIGNED (w.data, scales),
 * INVALID_SHAPE (w's shape, group 0 or not dividing rows·cols), ALIASING (data, scales and w not disjoint). */
uint16_t microattn_f16_from_float(float x);
float microattn_float_from_f16(uint16_t h);
microattn_status microattn_quantize_q8(microattn_cview w, size_t group, int8_t* data, float* scales);

/* ---- linear: weights in low-precision storage (C++: microattn/weights.hpp) ------------------------------ */

/* y = x·wᵀ + bias (nn.Linear): x is m × w->cols, y is m × w->rows and overwritten, bias w->rows floats or NULL.
 * Errors (nothing written): NULL_POINTER (w, x.data, y.data or w->data NULL; Q8 without scales), MISALIGNED,
 * INVALID_SHAPE (a format outside the enum, zero or mismatched sizes, Q8 group 0 or not dividing rows·cols),
 * ALIASING (y overlaps x, the weights, the scales or the bias). Accuracy: F32 and F16 within matmul's bound (F16
 * converted exactly); Q8 quantizes x per group as llama2.c's runq.c (absmax / 127, round half away from zero), see
 * microattn/weights.hpp and docs/numerical-contract.md "Low-precision weights". Stack: under 1 KiB on Cortex-M,
 * within 16 KiB otherwise. */
microattn_status microattn_linear(microattn_cview x, const microattn_weight_matrix* w, const float* bias,
                                  microattn_view y);

/* The caller's workers (C++: microattn/parallel.hpp, struct Parallel): run(pool, task, ctx, count) runs
 * task(ctx, begin, end) over every item of [0, count) exactly once, in ranges it chooses, on up to `workers` workers
 * (the calling thread may be one), and returns nonzero once every item is done, or 0 without having run any (the
 * library then runs them on the calling thread). run NULL or workers <= 1: the calling thread alone. */
typedef void (*microattn_parallel_task)(void* ctx, size_t begin, size_t end);
typedef struct {
  int (*run)(void* pool, microattn_parallel_task task, void* ctx, size_t count);
  void* pool;
  size_t workers;
} microattn_parallel;

/* microattn_linear on the caller's workers (C++: linear(x, w, bias, y, parallel)): y as microattn_linear's, bit
 * for bit, for every worker count; the same errors, nothing written. parallel NULL: the calling thread alone. */
microattn_status microattn_linear_parallel(microattn_cview x, const microattn_weight_matrix* w, const float* bias,
                                           microattn_view y, const microattn_parallel* parallel);

/* ---- transformer blocks: row norms and activations (C++: microattn/blocks.hpp) ------------------------- */

/* The feed-forward activations (the values of microattn::Activation). GELU: exact erf form (F.gelu's default);
 * GELU_TANH: approximate='tanh'; SILU: x·sigmoid(x). */
typedef enum {
  MICROATTN_ACTIVATION_RELU = 0,
  MICROATTN_ACTIVATION_GELU = 1,
  MICROATTN_ACTIVATION_GELU_TANH = 2,
  MICROATTN_ACTIVATION_SILU = 3
} microattn_activation;

/* nn.LayerNorm over each row: y = (x − mean)/sqrt(biased variance + eps)·weight + bias; weight / bias NULL mean 1 / 0
 * (x.cols floats each). y must have x's shape; y may be exactly x (in place), any other overlap is ALIASING.
 * eps finite and >= 0, else INVALID_SHAPE. A row with NaN or inf gives NaN in that row; every finite row is
 * handled (rescaled where float sums would overflow or underflow): a finite output, a constant row exactly the
 * bias (with eps = 0 NaN, as PyTorch). Errors: NULL_POINTER, MISALIGNED, INVALID_SHAPE, ALIASING; nothing
 * written. Accuracy: microattn/blocks.hpp. */
microattn_status microattn_layer_norm_rows(microattn_cview x, const float* weight, const float* bias, float eps,
                                           microattn_view y);

/* RMSNorm over each row (llama2.c, HF LlamaRMSNorm): y = x/sqrt(mean(x²) + eps)·weight, weight NULL: 1. Rules as
 * microattn_layer_norm_rows. */
microattn_status microattn_rms_norm_rows(microattn_cview x, const float* weight, float eps, microattn_view y);

/* Every element of x becomes a(x), in place. An activation outside the enum is INVALID_SHAPE. Errors:
 * NULL_POINTER, MISALIGNED, INVALID_SHAPE; nothing written. */
microattn_status microattn_activate_rows(microattn_view x, microattn_activation a);

/* ---- transformer blocks: encoder and decoder layers (C++: TransformerEncoderLayer, DecoderLayer) ---------- */

/* nn.TransformerEncoderLayer's state_dict (C++: microattn::EncoderLayerWeights), all borrowed, biases and norm
 * vectors fp32 (NULL: no bias; a norm weight NULL is 1, a norm bias NULL is 0):
 *   self_attn  the self-attention (as microattn_layer_init_matrices, kv_heads = heads)
 *   linear1    feed_forward × model_dim, linear1_bias feed_forward floats
 *   linear2    model_dim × feed_forward, linear2_bias model_dim floats
 *   norm1_*, norm2_*  model_dim floats each */
typedef struct {
  microattn_layer_weight_matrices self_attn;
  microattn_weight_matrix linear1;
  const float* linear1_bias;
  microattn_weight_matrix linear2;
  const float* linear2_bias;
  const float* norm1_weight;
  const float* norm1_bias;
  const float* norm2_weight;
  const float* norm2_bias;
} microattn_encoder_layer_weights;
/* C++: microattn::EncoderLayerConfig. A NULL config is the C++ defaults: norm_first 0, RELU, layer_norm_eps 1e-5
 * (a zeroed struct means eps 0, which is allowed, as in PyTorch). norm_first non-zero: pre-norm. */
typedef struct {
  int norm_first;
  microattn_activation activation;
  float layer_norm_eps;
} microattn_encoder_layer_config;

/* The llama decoder layer's weights (C++: microattn::DecoderLayerWeights), borrowed, no biases:
 *   wq model_dim × model_dim, wk, wv (kv_heads·head_dim) × model_dim, wo model_dim × model_dim (data NULL:
 *   none, y's attention part is the concatenated heads),
 *   w1, w3 hidden × model_dim (gate, up), w2 model_dim × hidden (down),
 *   attention_norm, ffn_norm  model_dim floats each (NULL: 1). */
typedef struct {
  microattn_weight_matrix wq, wk, wv, wo, w1, w2, w3;
  const float* attention_norm;
  const float* ffn_norm;
} microattn_decoder_layer_weights;
/* C++: microattn::DecoderLayerConfig. A NULL config is the C++ defaults: no rope, no window, rms_norm_eps 1e-5. */
typedef struct {
  microattn_layer_config attention;
  float rms_norm_eps;
} microattn_decoder_layer_config;

/* The blocks over caller memory. Fill them with their init function only; the fields are readable, writing them
 * is undefined. cache: the K/V cache block (for the decoder laid out as microattn_layer's for its cache_format),
 * cache_floats its size in floats (rounded up); scratch: the per-call scratch, which blocks and layers that never
 * run concurrently may share (one call at a time). */
typedef struct {
  size_t max_seq, model_dim, heads, feed_forward, head_dim;
  microattn_encoder_layer_weights weights;
  microattn_encoder_layer_config config;
  float* cache;
  size_t cache_floats;
  float* scratch;
  size_t scratch_floats;
} microattn_encoder_layer;
typedef struct {
  size_t max_seq, model_dim, heads, kv_heads, hidden, head_dim;
  microattn_decoder_layer_weights weights;
  microattn_decoder_layer_config config;
  microattn_format cache_format;
  float* cache;
  size_t cache_floats;
  float* scratch;
  size_t scratch_floats;
  size_t cached;
  size_t position;
} microattn_decoder_layer;

/* Floats of a block's per-call scratch (C++: encoder_layer_scratch_floats, decoder_layer_scratch_floats), none of it
 * growing with max_seq (one query tile of rows at a time):
 *   encoder  LAYER_SCRATCH_FLOATS(model_dim, heads) + BLOCK_Q·(model_dim + feed_forward)
 *   decoder  microattn_layer_cache_scratch_floats(model_dim, heads, cache) + BLOCK_Q·(model_dim + 2·hidden)
 * The cache: microattn_layer_cache_floats(max_seq, model_dim, heads, heads) floats for the encoder,
 * microattn_layer_cache_bytes(max_seq, model_dim, heads, kv_heads, cache) bytes for the decoder. The functions
 * return 0 for sizes the C++ templates reject at compile time (a zero size, model_dim % heads, heads % kv_heads, a
 * head dimension above MICROATTN_ATTENTION_MAX_HEAD_DIM, buffers that overflow; one rule with them), for a block
 * past PTRDIFF_MAX bytes, or for a cache format outside the enum. The macros (F32 cache) do not check: they are for
 * static arrays. */
#define MICROATTN_ENCODER_LAYER_SCRATCH_FLOATS(max_seq, model_dim, heads, feed_forward) \
  (MICROATTN_LAYER_SCRATCH_FLOATS(model_dim, heads) +                                   \
   (size_t)MICROATTN_ATTENTION_BLOCK_Q * ((size_t)(model_dim) + (size_t)(feed_forward)))
#define MICROATTN_DECODER_LAYER_SCRATCH_FLOATS(max_seq, model_dim, heads, hidden) \
  (MICROATTN_LAYER_SCRATCH_FLOATS(model_dim, heads) +                             \
   (size_t)MICROATTN_ATTENTION_BLOCK_Q * ((size_t)(model_dim) + 2u * (size_t)(hidden)))
size_t microattn_encoder_layer_scratch_floats(size_t max_seq, size_t model_dim, size_t heads, size_t feed_forward);
size_t microattn_decoder_layer_scratch_floats(size_t max_seq, size_t model_dim, size_t heads, size_t hidden,
                                              microattn_format cache);

/* Sets *layer up (C++: TransformerEncoderLayerSharedScratch<max_seq, model_dim, heads, feed_forward>) over a cache
 * of cache_floats floats and a scratch of scratch_floats floats (contents irrelevant). config NULL: the defaults.
 * Init writes only *layer, and only on success; it checks once what the C++ layer checks of its weights and
 * configuration on every call, with these statuses, in this order:
 *   NULL_POINTER   layer, weights, cache or scratch; self_attn's q, k or v data, linear1 or linear2 data; a Q8
 *                  matrix's scales; self_attn.out_bias without out.data
 *   INVALID_SHAPE  the sizes (as microattn_encoder_layer_scratch_floats returning 0); a matrix format outside the
 *                  enum or a matrix whose rows × cols differ from the above; Q8 group 0 or not dividing rows·cols;
 *                  layer_norm_eps negative, NaN or infinite; an activation outside the enum
 *   WORKSPACE_TOO_SMALL  cache_floats or scratch_floats below the sizes above
 *   MISALIGNED     cache or scratch not aligned to float; F32 data, Q8 scales, a bias or norm vector not 4-byte
 *                  aligned; F16 data not 2-byte aligned
 *   ALIASING       the cache or the scratch sharing a byte with any weight, scales, bias or norm vector, or with
 *                  each other */
microattn_status microattn_encoder_layer_init(microattn_encoder_layer* layer, size_t max_seq, size_t model_dim,
                                              size_t heads, size_t feed_forward,
                                              const microattn_encoder_layer_weights* weights,
                                              const microattn_encoder_layer_config* config, float* cache,
                                              size_t cache_floats, float* scratch, size_t scratch_floats);
/* The decoder (C++: DecoderLayerSharedScratch<max_seq, model_dim, heads, kv_heads, hidden, cache_format>), over a
 * K/V cache of cache_bytes bytes (float alignment) in cache_format (F16 / Q8 round K and V when stored) and a
 * scratch of scratch_floats floats. The cache starts empty. Errors as microattn_encoder_layer_init (wo.data NULL is
 * no out projection, as self_attn.out; rms_norm_eps as layer_norm_eps), plus INVALID_SHAPE for a configuration
 * microattn_layer_init_config rejects or a cache_format outside the enum, and WORKSPACE_TOO_SMALL for cache_bytes
 * below microattn_layer_cache_bytes(..., cache_format). */
microattn_status microattn_decoder_layer_init(microattn_decoder_layer* layer, size_t max_seq, size_t model_dim,
                                              size_t heads, size_t kv_heads, size_t hidden,
                                              const microattn_decoder_layer_weights* weights,
                                              const microattn_decoder_layer_config* config,
                                              microattn_format cache_format, void* cache, size_t cache_bytes,
                                              float* scratch, size_t scratch_floats);

/* The block calls have the semantics of the C++ methods of the same name (blocks.hpp) and run the same code
 * (bit-identical results). x: rows <= max_seq, cols model_dim; y: x's shape, may be exactly x (in place). options
 * NULL: the defaults (the encoder's go to its self-attention, as src_mask / is_causal). Errors, nothing written
 * (not y, not the cache, not cached or position; the scratch holds nothing between calls, and a call that fails
 * in its attention step, as an append past max_seq, may have used it): NULL_POINTER for a NULL or never-initialised
 * block, x.data or y.data; MISALIGNED; INVALID_SHAPE (shapes, more rows than fit, a bad mask); ALIASING for y
 * overlapping x (other than exactly), a weight, or the mask, and for x, y or the mask sharing memory with the block's
 * cache or scratch.
 *
 * Encoder forward: the layer over x (its cache is refilled on every call). */
microattn_status microattn_encoder_layer_forward(microattn_encoder_layer* layer, microattn_cview x, microattn_view y,
                                                 const microattn_attention_options* options);
/* Decoder forward: a prompt, causal; afterwards cached == position == x.rows. append: the next tokens after the
 * cached ones (as microattn_layer_append). reset: an empty cache (NULL_POINTER for NULL or a block never
 * initialised). cached / position: as microattn_layer's, 0 for NULL. */
microattn_status microattn_decoder_layer_forward(microattn_decoder_layer* layer, microattn_cview x, microattn_view y,
                                                 const microattn_attention_options* options);
microattn_status microattn_decoder_layer_append(microattn_decoder_layer* layer, microattn_cview x, microattn_view y,
                                                const microattn_attention_options* options);
microattn_status microattn_decoder_layer_reset(microattn_decoder_layer* layer);
size_t microattn_decoder_layer_cached(const microattn_decoder_layer* layer);
size_t microattn_decoder_layer_position(const microattn_decoder_layer* layer);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MICROATTN_MICROATTN_H */
