// llama_run: text generation from a llama2.c checkpoint, with run.c's command line and output.
//   llama_run CHECKPOINT [-t temp] [-p topp] [-s seed] [-n steps] [-i prompt] [-z tokenizer] [-w f16] [-j workers]
// Generated text on stdout, "achieved tok/s: X" on stderr. Exit status 1: bad arguments (usage printed), or a
// prompt of more tokens than the model's context (seq_len); 2: a checkpoint or tokenizer that cannot be read or is
// malformed (the message says which field or offset); 3: out of memory.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "llama_forward.hpp"
#include "llama_model.hpp"
#include "llama_sampler.hpp"
#include "llama_tokenizer.hpp"
#include "microattn/posix_pool.hpp"

namespace {

constexpr int max_workers = 64;

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "Usage:   llama_run <checkpoint> [options]\n"
               "Example: llama_run model.bin -n 256 -i \"Once upon a time\"\n"
               "Options:\n"
               "  -t <float>  temperature in [0,inf], default 1.0; 0, or so small that logits / temperature\n"
               "              overflow (e.g. 1e-45): greedy\n"
               "  -p <float>  p value in top-p (nucleus) sampling in [0,1] default 0.9\n"
               "  -s <int>    random seed, default time(NULL)\n"
               "  -n <int>    number of steps to run for, default 256. 0 = max_seq_len\n"
               "  -i <string> input prompt, at most seq_len tokens with BOS\n"
               "  -z <string> optional path to custom tokenizer\n"
               "  -w f16      fp32 weights converted to f16 at load (half the bytes per token)\n"
               "  -j <int>    workers (threads, this one included) for the projections, 1 to 64, default 1;\n"
               "              the same text for every count\n");
  std::exit(1);
}

// stderr is unbuffered, stdout is not: stdout goes out first, so that a report lands after the text before it
// where both streams reach one terminal or pipe.
__attribute__((format(printf, 1, 2))) void report(const char* format, ...) {
  std::fflush(stdout);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
}

bool parse_float(const char* s, float& out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || errno == ERANGE) return false;
  out = static_cast<float>(v);
  return true;
}

bool parse_int(const char* s, int& out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno == ERANGE || v < INT_MIN || v > INT_MAX) return false;
  out = static_cast<int>(v);
  return true;
}

// A read-only mapping of a whole file (page-aligned, so every fp32 tensor of a checkpoint is aligned).
struct MappedFile {
  const unsigned char* data = nullptr;
  std::size_t size = 0;
  bool open(const char* path, std::string& error) {
    const int fd = ::open(path, O_RDONLY);
    if (fd < 0) {
      error = std::string("cannot open ") + path + ": " + std::strerror(errno);
      return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      error = std::string(path) + " is not a regular file";
      ::close(fd);
      return false;
    }
    size = static_cast<std::size_t>(st.st_size);
    if (size == 0) {
      static const unsigned char empty[4] = {};
      data = empty;  // mmap refuses length 0; the loaders report the empty file as truncated
      ::close(fd);
      return true;
    }
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
      error = std::string("cannot map ") + path + ": " + std::strerror(errno);
      return false;
    }
    data = static_cast<const unsigned char*>(p);
    return true;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const char* checkpoint_path = nullptr;
  const char* tokenizer_path = "tokenizer.bin";
  float temperature = 1.0f, topp = 0.9f;
  int steps = 256, seed = 0;
  const char* prompt = "";
  llama::Storage storage = llama::Storage::as_stored;
  int workers = 1;
  if (argc < 2) usage();
  checkpoint_path = argv[1];
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc || argv[i][0] != '-' || std::strlen(argv[i]) != 2) usage();
    const char* value = argv[i + 1];
    switch (argv[i][1]) {
      case 't':
        if (!parse_float(value, temperature)) usage();
        break;
      case 'p':
        if (!parse_float(value, topp)) usage();
        break;
      case 's':
        if (!parse_int(value, seed)) usage();
        break;
      case 'n':
        if (!parse_int(value, steps)) usage();
        break;
      case 'i':
        prompt = value;
        break;
      case 'z':
        tokenizer_path = value;
        break;
      case 'w':
        if (std::strcmp(value, "f16") != 0) usage();
        storage = llama::Storage::f16;
        break;
      case 'j':
        if (!parse_int(value, workers) || workers < 1 || workers > max_workers) usage();
        break;
      default:
        usage();
    }
  }
  // run.c's overrides. Its seed is an int converted to unsigned long long; 0 means the time.
  unsigned long long rng_seed = static_cast<unsigned long long>(static_cast<long long>(seed));
  if (rng_seed == 0) rng_seed = static_cast<unsigned int>(std::time(nullptr));
  if (!(temperature >= 0.0f)) temperature = 0.0f;
  if (!(topp >= 0.0f && topp <= 1.0f)) topp = 0.9f;
  if (steps < 0) steps = 0;

  std::string error;
  MappedFile checkpoint_file, tokenizer_file;
  if (!checkpoint_file.open(checkpoint_path, error)) {
    std::fprintf(stderr, "llama_run: %s\n", error.c_str());
    return 2;
  }
  llama::Model model;
  const llama::LoadResult loaded = llama::load_checkpoint(checkpoint_file.data, checkpoint_file.size, model);
  if (!loaded.ok()) {
    std::fprintf(stderr, "llama_run: %s: %s (%s)\n", checkpoint_path, loaded.message, llama::to_string(loaded.status));
    return 2;
  }
  const llama::Config& p = model.config;
  if (steps == 0 || steps > p.seq_len) steps = p.seq_len;

  if (!tokenizer_file.open(tokenizer_path, error)) {
    std::fprintf(stderr, "llama_run: %s\n", error.c_str());
    return 2;
  }
  llama::Tokenizer tokenizer;
  const llama::LoadResult tok_loaded = tokenizer.load(tokenizer_file.data, tokenizer_file.size, p.vocab_size);
  if (!tok_loaded.ok()) {
    std::fprintf(stderr, "llama_run: %s: %s (%s)\n", tokenizer_path, tok_loaded.message,
                 llama::to_string(tok_loaded.status));
    return 2;
  }

  std::vector<int> prompt_tokens;
  if (!tokenizer.encode(prompt, true, false, prompt_tokens, error)) {
    std::fprintf(stderr, "llama_run: cannot encode the prompt: %s\n", error.c_str());
    return 2;
  }
  // Token k of the prompt goes in at position k; beyond seq_len positions run.c stops inside the prompt, silently.
  if (prompt_tokens.size() > static_cast<std::size_t>(p.seq_len)) {
    std::fprintf(stderr,
                 "llama_run: the prompt is %zu tokens (with BOS), more than the model's context of %d (seq_len)\n",
                 prompt_tokens.size(), p.seq_len);
    return 1;
  }

  if (storage == llama::Storage::f16 && !llama::fits_f16(model)) {
    std::fprintf(stderr, "llama_run: %s: a weight beyond f16's range (|w| >= 65520): -w f16 refused\n",
                 checkpoint_path);
    return 2;
  }
  llama::RunState state;
  if (!llama::init_state(model, static_cast<std::size_t>(steps), state, llama::default_fuse_limit_bytes, storage)) {
    std::fprintf(stderr, "llama_run: out of memory for %d positions\n", steps);
    return 3;
  }
  // Threads started once, before the clock; a thread that cannot start leaves its share to the others.
  microattn::PosixPool<max_workers> pool(static_cast<std::size_t>(workers));
  if (workers > 1) state.parallel = pool.parallel();
  llama::Sampler sampler(p.vocab_size, temperature, topp, rng_seed);

  // run.c's generation loop: the prompt's tokens are forced, BOS ends the text, the clock starts after the first
  // token (whose time includes page faults of the mapping).
  using clock = std::chrono::steady_clock;
  clock::time_point start{};
  bool started = false;
  // LLAMA_RUN_TIES=REL (e.g. 1e-4): report each sampled position whose two best logits lie within REL relative
  // (where the summation order of another implementation may pick the other token), with the text's length so far.
  const char* ties_env = std::getenv("LLAMA_RUN_TIES");
  const float tie_rel = ties_env != nullptr ? std::strtof(ties_env, nullptr) : 0.0f;
  const bool report_ties = tie_rel > 0.0f;
  // LLAMA_RUN_TOKENS=1: the ids of the printed tokens (prompt and generated, BOS excluded) as one stderr line, for
  // comparing with another implementation's ids where equal text could hide a different tokenization.
  const char* tokens_env = std::getenv("LLAMA_RUN_TOKENS");
  const bool report_tokens = tokens_env != nullptr && std::strcmp(tokens_env, "1") == 0;
  std::vector<int> emitted;
  std::size_t printed = 0;
  int token = prompt_tokens[0];
  int pos = 0;
  const int n_prompt = static_cast<int>(prompt_tokens.size());
  while (pos < steps) {
    float* logits = const_cast<float*>(llama::forward(model, state, token, static_cast<std::size_t>(pos)));
    if (report_ties && pos >= n_prompt - 1) {
      float best = logits[0], second = -INFINITY;
      for (int i = 1; i < p.vocab_size; ++i) {
        if (logits[i] > best) {
          second = best;
          best = logits[i];
        } else if (logits[i] > second) {
          second = logits[i];
        }
      }
      if (best - second <= tie_rel * std::fabs(best))
        report("near-tie at position %d after %zu bytes: %g %g\n", pos, printed, static_cast<double>(best),
               static_cast<double>(second));
    }
    const int next = pos < n_prompt - 1 ? prompt_tokens[static_cast<std::size_t>(pos) + 1] : sampler.sample(logits);
    ++pos;
    if (next == llama::Tokenizer::bos) break;
    if (report_tokens) emitted.push_back(next);
    const std::string piece = tokenizer.decode(token, next);
    if (llama::Tokenizer::printable(piece)) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      printed += piece.size();
    }
    std::fflush(stdout);
    token = next;
    if (!started) {
      start = clock::now();
      started = true;
    }
  }
  std::printf("\n");
  if (report_tokens) {
    std::string line = "tokens:";
    for (int t : emitted) line += " " + std::to_string(t);
    report("%s\n", line.c_str());
  }
  if (pos > 1) {
    const double seconds = std::chrono::duration<double>(clock::now() - start).count();
    report("achieved tok/s: %f\n", seconds > 0 ? (pos - 1) / seconds : 0.0);
  }
  return 0;
}
