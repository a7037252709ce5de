// On-target benchmark: what a firmware engineer flashes to profile microattn on a Cortex-M part.
//
// Runs matmul, softmax_rows, attention (dense and causal) and a MultiHeadAttention forward over MCU-sized
// shapes, plus two yardsticks compiled -O2 (mcu_bench_naive.cpp: the plain three-loop attention and matmul
// a firmware would otherwise write), and prints one row per call: the work (MACs: m·n·k for matmul, 2·n²·d
// for attention — causal included, so its row shows the work it skips — and projections + attention for a
// layer; elements for softmax), the cycles the DWT cycle counter saw, and cycles per MAC (or per element).
// Each measured call sits between mcu_bench_mark_begin() and mcu_bench_mark_end(), two empty functions
// whose addresses the QEMU plugin tools/qemu_insn_count.c is given: under QEMU, where the cycle counter
// does not count (QEMU models no timing), scripts/mcu_bench.sh counts the instructions of each call instead.
// Every result is checked against the yardstick (or an exact property), so a wrong kernel cannot post a
// good figure: the program exits 1 on a mismatch.
//
// On a board: build with any cross/cortex-m*.ini (ninja -C BUILD mcu/mcu_bench), bring the board's startup
// and linker script, retarget printf (semihosting here), flash mcu_bench, read the console. The inputs are
// generated at start-up (no flash tables); RAM: about 200 KiB of .bss (the 128×32 attention and the
// <64, 64, 4> layer); cut `cases` for smaller parts.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <microattn/microattn.hpp>

#include "mcu_bench_naive.hpp"

namespace ma = microattn;

extern "C" {
// The markers: empty and out of line, so the plugin sees every measured call start and end at them.
__attribute__((noinline, used)) void mcu_bench_mark_begin() { asm volatile("" ::: "memory"); }
__attribute__((noinline, used)) void mcu_bench_mark_end() { asm volatile("" ::: "memory"); }
}

namespace {

// ---- DWT cycle counter (Armv7-M / Armv8-M debug) ----------------------------------------------------------
volatile std::uint32_t& reg(std::uintptr_t addr) { return *reinterpret_cast<volatile std::uint32_t*>(addr); }
constexpr std::uintptr_t demcr = 0xE000EDFCu;     // Debug Exception and Monitor Control: TRCENA is bit 24
constexpr std::uintptr_t dwt_ctrl = 0xE0001000u;  // CYCCNTENA is bit 0
constexpr std::uintptr_t dwt_cyccnt = 0xE0001004u;
constexpr std::uintptr_t dwt_lar = 0xE0001FB0u;  // lock access (Cortex-M7 parts need the key before writes)

// Enables the counter and tells whether it counts (it does not under QEMU, and on parts without a DWT).
bool cycle_counter_start() {
  reg(demcr) |= 1u << 24;
  reg(dwt_lar) = 0xC5ACCE55u;
  reg(dwt_cyccnt) = 0;
  reg(dwt_ctrl) |= 1u;
  const std::uint32_t t0 = reg(dwt_cyccnt);
  for (volatile int i = 0; i < 100; ++i) {
  }
  return reg(dwt_cyccnt) != t0;
}
inline std::uint32_t cycles_now() { return reg(dwt_cyccnt); }

// ---- inputs -----------------------------------------------------------------------------------------------
std::uint32_t rng_state = 12345;
float uniform() {  // [-1, 1), xorshift32
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 17;
  rng_state ^= rng_state << 5;
  return static_cast<float>(rng_state >> 8) * (2.0f / 16777216.0f) - 1.0f;
}
void fill(float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = uniform();
}

constexpr std::size_t max_elems = 128 * 64;
float a_buf[max_elems], b_buf[max_elems], c_buf[max_elems], out_buf[max_elems], ref_buf[max_elems];
float scores_buf[128];  // the yardstick's one row of scores
float workspace[ma::attention_workspace_floats(64, 64)];

constexpr std::size_t layer_seq = 64, layer_dim = 64, layer_heads = 4;
float layer_w[layer_dim * layer_dim], layer_bias[layer_dim];
ma::MultiHeadAttention<layer_seq, layer_dim, layer_heads> layer{
    {layer_w, layer_w, layer_w, layer_bias, layer_bias, layer_bias, layer_w, layer_bias}};

// ---- cases ------------------------------------------------------------------------------------------------
enum class Op { matmul, matmul_naive, softmax_rows, attention, attention_causal, attention_naive, layer_forward };
const char* op_name(Op op) {
  switch (op) {
    case Op::matmul:
      return "matmul";
    case Op::matmul_naive:
      return "matmul_naive_O2";
    case Op::softmax_rows:
      return "softmax_rows";
    case Op::attention:
      return "attention";
    case Op::attention_causal:
      return "attention_causal";
    case Op::attention_naive:
      return "attention_naive_O2";
    case Op::layer_forward:
      return "mha_forward";
  }
  return "?";
}

struct Case {
  Op op;
  std::size_t n, d;  // matmul: n = m = k = n (d unused); softmax: n rows × d cols; attention: n × d; layer: n
};
constexpr Case cases[] = {
    {Op::matmul, 16, 0},
    {Op::matmul, 32, 0},
    {Op::matmul, 64, 0},
    {Op::matmul_naive, 64, 0},
    {Op::softmax_rows, 16, 16},
    {Op::softmax_rows, 64, 64},
    {Op::attention, 16, 16},
    {Op::attention, 64, 16},
    {Op::attention, 32, 32},
    {Op::attention, 64, 32},
    {Op::attention, 128, 32},
    {Op::attention, 64, 64},
    {Op::attention_causal, 16, 16},
    {Op::attention_causal, 64, 16},
    {Op::attention_causal, 64, 32},
    {Op::attention_causal, 128, 32},
    {Op::attention_naive, 16, 16},
    {Op::attention_naive, 64, 16},
    {Op::attention_naive, 64, 32},
    {Op::attention_naive, 128, 32},
    {Op::layer_forward, 16, 0},
    {Op::layer_forward, 64, 0},
};

// Work of a case: MACs (elements for softmax_rows).
unsigned long work(const Case& c) {
  const unsigned long n = c.n, d = c.d, dm = layer_dim;
  switch (c.op) {
    case Op::matmul:
    case Op::matmul_naive:
      return n * n * n;
    case Op::softmax_rows:
      return n * d;
    case Op::layer_forward:
      return 4 * n * dm * dm + 2 * n * n * dm;  // q, k, v, out projections + attention
    default:
      return 2 * n * n * d;
  }
}

bool close(const float* x, const float* ref, std::size_t n, float tol) {
  float scale = 0.0f;
  for (std::size_t i = 0; i < n; ++i) scale = std::fmax(scale, std::fabs(ref[i]));
  for (std::size_t i = 0; i < n; ++i)
    if (!(std::fabs(x[i] - ref[i]) <= tol * (scale + 1e-6f))) return false;
  return true;
}

// Runs one case between the markers (inputs prepared before, checks after); returns the cycles and whether
// the result checked out.
bool run_case(const Case& c, std::uint32_t& cycles) {
  const std::size_t n = c.n, d = c.d;
  ma::Status st = ma::Status::ok;
  ma::AttentionOptions causal;
  causal.causal = true;
  std::uint32_t t0 = 0, t1 = 0;
  auto timed = [&](auto&& call) {
    t0 = cycles_now();
    mcu_bench_mark_begin();
    call();
    mcu_bench_mark_end();
    t1 = cycles_now();
  };
  bool ok = true;
  switch (c.op) {
    case Op::matmul:
    case Op::matmul_naive: {
      fill(a_buf, n * n);
      fill(b_buf, n * n);
      if (c.op == Op::matmul)
        timed([&] {
          st = ma::matmul(ma::make_view<const float>(a_buf, n, n), ma::make_view<const float>(b_buf, n, n),
                          ma::make_view(out_buf, n, n), false);
        });
      else
        timed([&] { mcu_bench::naive_matmul(a_buf, b_buf, out_buf, n, n, n); });
      mcu_bench::naive_matmul(a_buf, b_buf, ref_buf, n, n, n);
      ok = close(out_buf, ref_buf, n * n, 1e-5f);
      break;
    }
    case Op::softmax_rows: {
      fill(out_buf, n * d);
      std::memcpy(ref_buf, out_buf, n * d * sizeof(float));
      timed([&] { st = ma::softmax_rows(ma::make_view(out_buf, n, d)); });
      for (std::size_t r = 0; r < n; ++r) {  // each row: positive, sums to 1, ordered as its inputs
        float sum = 0.0f;
        for (std::size_t j = 0; j < d; ++j) {
          sum += out_buf[r * d + j];
          ok = ok && out_buf[r * d + j] > 0.0f &&
               (out_buf[r * d + j] > out_buf[r * d]) == (ref_buf[r * d + j] > ref_buf[r * d]);
        }
        ok = ok && std::fabs(sum - 1.0f) < 1e-5f;
      }
      break;
    }
    case Op::attention:
    case Op::attention_causal:
    case Op::attention_naive: {
      fill(a_buf, n * d);
      fill(b_buf, n * d);
      fill(c_buf, n * d);
      const auto q = ma::make_view<const float>(a_buf, n, d), k = ma::make_view<const float>(b_buf, n, d),
                 v = ma::make_view<const float>(c_buf, n, d);
      const bool is_causal = c.op == Op::attention_causal;
      if (c.op == Op::attention_naive)
        timed([&] { mcu_bench::naive_attention(a_buf, b_buf, c_buf, out_buf, scores_buf, n, d, false); });
      else
        timed([&] {
          st = ma::attention(q, k, v, ma::make_view(out_buf, n, d), workspace, sizeof workspace / sizeof(float),
                             is_causal ? causal : ma::AttentionOptions{});
        });
      mcu_bench::naive_attention(a_buf, b_buf, c_buf, ref_buf, scores_buf, n, d, is_causal);
      ok = close(out_buf, ref_buf, n * d, 1e-5f);
      break;
    }
    case Op::layer_forward: {
      fill(layer_w, layer_dim * layer_dim);
      for (float& w : layer_w) w *= 0.125f;  // ~1/√d, so the scores stay in a sane range
      fill(layer_bias, layer_dim);
      fill(a_buf, n * layer_dim);
      timed([&] {
        st = layer.forward(ma::make_view<const float>(a_buf, n, layer_dim), ma::make_view(out_buf, n, layer_dim));
      });
      for (std::size_t i = 0; i < n * layer_dim; ++i) ok = ok && std::isfinite(out_buf[i]);
      break;
    }
  }
  cycles = t1 - t0;
  return ok && st == ma::Status::ok;
}

}  // namespace

int main(int argc, char** argv) {
  // An argument N runs case N alone (for profiles: scripts/mcu_bench.sh --profile TARGET N).
  const unsigned only = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 0;
  const bool counting = cycle_counter_start();
  std::printf("microattn mcu_bench: kernels %s (%s), attention tile %u queries x %u keys\n", ma::simd_arch(),
              ma::matmul_kernel_name(), static_cast<unsigned>(ma::attention_block_q),
              static_cast<unsigned>(ma::attention_block_kv));
  if (!counting)
    std::printf(
        "DWT CYCCNT does not count here (QEMU, or no DWT): cycles are not available; count "
        "instructions with scripts/mcu_bench.sh\n");
  // Case 0 measures nothing: the cost of the markers themselves, which scripts/mcu_bench.sh subtracts.
  mcu_bench_mark_begin();
  mcu_bench_mark_end();
  std::printf("case 0 | markers | - | 0 | - | -\n");
  std::printf("case # | op | shape | MACs (softmax: elements) | cycles | cycles/MAC\n");
  int failures = 0;
  unsigned index = 1;
  for (const Case& c : cases) {
    if (only != 0 && index != only) {
      ++index;
      continue;
    }
    std::uint32_t cycles = 0;
    const bool ok = run_case(c, cycles);
    failures += ok ? 0 : 1;
    char shape[24];
    if (c.op == Op::matmul || c.op == Op::matmul_naive)
      std::snprintf(shape, sizeof shape, "%ux%ux%u", unsigned(c.n), unsigned(c.n), unsigned(c.n));
    else if (c.op == Op::layer_forward)
      std::snprintf(shape, sizeof shape, "<%u,%u,%u>x%u", unsigned(layer_seq), unsigned(layer_dim),
                    unsigned(layer_heads), unsigned(c.n));
    else
      std::snprintf(shape, sizeof shape, "%ux%u", unsigned(c.n), unsigned(c.d));
    const unsigned long w = work(c);  // newlib-nano's printf has no %llu
    if (counting)
      std::printf("case %u | %s | %s | %lu | %lu | %.3f%s\n", index, op_name(c.op), shape, w,
                  static_cast<unsigned long>(cycles), static_cast<double>(cycles) / static_cast<double>(w),
                  ok ? "" : " | WRONG RESULT");
    else
      std::printf("case %u | %s | %s | %lu | n/a | n/a%s\n", index, op_name(c.op), shape, w,
                  ok ? "" : " | WRONG RESULT");
    ++index;
  }
  if (failures != 0) std::printf("%d case(s) gave a wrong result\n", failures);
  return failures == 0 ? 0 : 1;
}
