// The peer module of the two comparison programs, bench_peers (n × n attention) and bench_decode_peers (decoding
// shapes, small-m matmul), so that both time the same peers, checked the same way:
//   - the problems: attention (n_q queries, n_kv keys, head size d, dense or causal with the bottom-right offset
//     n_kv − n_q, which is the ordinary causal mask when n_q = n_kv) and matmul (m × k by k × k, b transposed or
//     not), their inputs and the test suite's double-precision reference (tests/reference.cpp);
//   - microattn and the peers that compute the same thing — Eigen, CBLAS (OpenBLAS when it is the one found),
//     oneDNN — each compiled in only when Meson found it (MICROATTN_PEER_*, set for peers.cpp alone);
//   - the check-then-time loop every benchmark of both programs runs, with its counters;
//   - the peers' single-thread set-up and the report of what each one runs, or why it is missing;
//   - the median over repetitions the programs' summary tables are made of.
// The programs keep their shapes, their benchmark names and their summary tables.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace bench::peers {

// ---- problems ----------------------------------------------------------------------------------------------------
// Inputs uniform in [-1, 1] with seeds 1, 2, 3 (q, k, v), as bench_attention's, so the programs' microattn rows agree.
struct AttentionProblem {
  std::size_t n_q = 0, n_kv = 0, d = 0;
  bool causal = false;
  float scale = 0.0f;  // 1/sqrt(d)
  std::vector<float> q, k, v;
  std::vector<double> want, weighted_abs, score_abs;  // ref::attention's outputs
  // Query i sees key j <= i + causal_offset(): the new queries of a decoding step see the whole cache.
  std::size_t causal_offset() const { return n_kv - n_q; }
};

// Built on first use and kept: every implementation of a point is checked against the same numbers. n_q <= n_kv.
const AttentionProblem& attention_problem(std::size_t n_q, std::size_t n_kv, std::size_t d, bool causal);

// y = x·Wᵀ (transpose_b, nn.Linear) or x·W: a m × kn, b kn × kn. Seeds 4 (a) and 5 (b).
struct MatmulProblem {
  std::size_t m = 0, kn = 0;
  bool transpose_b = false;
  std::vector<float> a, b;
  std::vector<double> want, abs_sum;  // ref::matmul's outputs
};

const MatmulProblem& matmul_problem(std::size_t m, std::size_t kn, bool transpose_b);

// Largest |got − want| / tolerance over an output (NaN or inf: infinity); <= 1 passes.
double error_ratio(const AttentionProblem& p, const float* out);
double error_ratio(const MatmulProblem& p, const float* c);

// ---- implementations ---------------------------------------------------------------------------------------------
// One implementation bound to a problem and its output: constructed outside the timed loop, run() is what is timed.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual bool run() = 0;  // false: the implementation reported an error
};

// How the peers lay out attention (microattn ignores it).
struct PeerPlan {
  // Causal: query rows per block. A competent user of a GEMM library does not compute the whole score matrix and
  // mask what is hidden: block [i0, i0 + rows) sees keys [0, i0 + rows + n_kv − n_q) only, so they compute that
  // slab, set the hidden corner to −inf, take the row softmax and multiply by as many rows of V. 0: one block of
  // all queries, which computes every score (few queries: the hidden ones are a small triangle).
  std::size_t block_q = 0;
  // Eigen: divide the probabilities by their row sums before ·V (bench_decode_peers, as in its recorded results)
  // rather than the rows of O after (bench_peers).
  bool normalize_probabilities = false;
};

struct AttentionImpl {
  const char* name;  // the benchmark names' field: "microattn", "eigen", blas_name, "onednn"
  std::unique_ptr<Runner> (*make)(const AttentionProblem& p, float* out, const PeerPlan& plan);
};
struct MatmulImpl {
  const char* name;
  std::unique_ptr<Runner> (*make)(const MatmulProblem& p, float* c);
};

// "cblas" when the CBLAS found is not OpenBLAS (no thread or core control), else "openblas" (also the name of the
// column that stays empty when no BLAS is compiled in).
extern const char* const blas_name;

// microattn first, then the peers compiled in, in this order: Eigen, CBLAS, oneDNN (attention only, when asked).
std::vector<AttentionImpl> attention_impls(bool with_onednn);
std::vector<MatmulImpl> matmul_impls();

// ---- benchmarks --------------------------------------------------------------------------------------------------
// Sets the implementation up and runs it once, compares that output with the reference and only then times run():
// a failure (an exception while setting up, an error status, a mismatch) turns the benchmark into an error and
// nothing else stops. Counters: GFLOPS and pct_peak (bench::set_flop_counters: 4·n_q·n_kv·d for attention, dense
// and causal alike, so causal speed-ups show directly; 2·m·kn² for matmul), err_tol (the error_ratio above).
void time_checked(benchmark::State& state, const AttentionImpl& impl, const AttentionProblem& p, const PeerPlan& plan);
void time_checked(benchmark::State& state, const MatmulImpl& impl, const MatmulProblem& p);

// ---- set-up and report -------------------------------------------------------------------------------------------
// Prints "  key: value" under the peers heading and adds the pair to the JSON context.
void note(const std::string& key, const std::string& value);

// One thread for every peer (OpenMP, Eigen, OpenBLAS), oneDNN held to the build's instruction set when it is
// compared (with_onednn), and a "peers" heading with one note each: version and the instruction set it runs, or
// that it is compiled out and why.
void set_up(bool with_onednn);

// ---- summaries ---------------------------------------------------------------------------------------------------
// A value per benchmark and repetition (a summary reporter chooses which: GFLOP/s, CPU time), and their median.
// With --benchmark_display_aggregates_only the console reporter sees only the aggregates: then their median.
class Medians {
 public:
  void record(const benchmark::BenchmarkReporter::Run& run, double value);
  // < 0 when the benchmark has none (an error, filtered out).
  double median(const std::string& name) const;

 private:
  std::map<std::string, std::vector<double>> repetitions_;
  std::map<std::string, double> aggregate_median_;
};

}  // namespace bench::peers
