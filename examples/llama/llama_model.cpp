#include "llama_model.hpp"

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace llama {

namespace ma = microattn;

const char* to_string(LoadStatus s) noexcept {
  switch (s) {
    case LoadStatus::ok:
      return "ok";
    case LoadStatus::truncated:
      return "truncated";
    case LoadStatus::bad_magic:
      return "bad_magic";
    case LoadStatus::bad_header:
      return "bad_header";
    case LoadStatus::bad_group:
      return "bad_group";
    case LoadStatus::too_big:
      return "too_big";
    case LoadStatus::size_mismatch:
      return "size_mismatch";
  }
  return "unknown";
}

namespace {

constexpr std::uint32_t magic_ak42 = 0x616b3432u;
constexpr std::size_t v0_header_bytes = 7 * 4;
constexpr std::size_t v2_header_bytes = 256;

LoadResult fail(LoadStatus s, const char* format, ...) __attribute__((format(printf, 2, 3)));
LoadResult fail(LoadStatus s, const char* format, ...) {
  LoadResult r;
  r.status = s;
  va_list args;
  va_start(args, format);
  std::vsnprintf(r.message, sizeof r.message, format, args);
  va_end(args);
  return r;
}

std::int32_t read_i32(const unsigned char* p) {
  std::int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Byte counts in 64 bits with overflow recorded once: every product and sum of the layout goes through here, so a
// header of huge values reports too_big instead of wrapping into a small, plausible size.
struct Checked {
  bool overflow = false;
  std::uint64_t mul(std::uint64_t a, std::uint64_t b) {
    std::uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) overflow = true;
    return r;
  }
  std::uint64_t add(std::uint64_t a, std::uint64_t b) {
    std::uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) overflow = true;
    return r;
  }
};

// Walks the tensors in file order, handing out offsets; `end` is where the next tensor starts.
struct Cursor {
  Checked& c;
  std::uint64_t end;
  std::uint64_t take(std::uint64_t bytes) {
    const std::uint64_t at = end;
    end = c.add(end, bytes);
    return at;
  }
};

LoadResult check_config(const Config& p) {
  const struct {
    const char* name;
    int value;
  } fields[] = {{"dim", p.dim},         {"hidden_dim", p.hidden_dim}, {"n_layers", p.n_layers},
                {"n_heads", p.n_heads}, {"n_kv_heads", p.n_kv_heads}, {"vocab_size", p.vocab_size},
                {"seq_len", p.seq_len}};
  for (const auto& f : fields)
    if (f.value <= 0) return fail(LoadStatus::bad_header, "header field %s is %d, must be positive", f.name, f.value);
  if (p.dim % p.n_heads != 0)
    return fail(LoadStatus::bad_header, "dim %d is not a multiple of n_heads %d", p.dim, p.n_heads);
  if (p.n_heads % p.n_kv_heads != 0)
    return fail(LoadStatus::bad_header, "n_heads %d is not a multiple of n_kv_heads %d", p.n_heads, p.n_kv_heads);
  if (p.head_dim() % 2 != 0)
    return fail(LoadStatus::bad_header, "head dimension %d (dim / n_heads) is odd: rope rotates pairs", p.head_dim());
  return LoadResult{};
}

}  // namespace

void Model::embedding_row(int token, float* out) const noexcept {
  const std::size_t d = embedding.cols, first = static_cast<std::size_t>(token) * d;
  if (embedding.format == ma::Format::f32) {
    std::memcpy(out, static_cast<const float*>(embedding.data) + first, d * sizeof(float));
    return;
  }
  const auto* q = static_cast<const std::int8_t*>(embedding.data);
  for (std::size_t i = 0; i < d; ++i)
    out[i] = static_cast<float>(q[first + i]) * embedding.scales[(first + i) / embedding.group];
}

LoadResult load_checkpoint(const unsigned char* data, std::size_t size, Model& model) {
  model = Model{};
  if (data == nullptr) return fail(LoadStatus::truncated, "no data");
  if (size < v0_header_bytes)
    return fail(LoadStatus::truncated, "file of %zu bytes is shorter than the 28-byte header", size);

  Config p;
  std::uint32_t magic;
  std::memcpy(&magic, data, sizeof magic);
  std::size_t header_bytes = v0_header_bytes;
  const unsigned char* fields = data;
  if (magic == magic_ak42) {
    if (size < v2_header_bytes)
      return fail(LoadStatus::truncated, "file of %zu bytes is shorter than the 256-byte version-2 header", size);
    const std::int32_t version = read_i32(data + 4);
    if (version != 2)
      return fail(LoadStatus::bad_magic, "checkpoint version %d: only 0 (run.c) and 2 (runq.c) are read", version);
    p.version = 2;
    header_bytes = v2_header_bytes;
    fields = data + 8;
  }
  p.dim = read_i32(fields + 0);
  p.hidden_dim = read_i32(fields + 4);
  p.n_layers = read_i32(fields + 8);
  p.n_heads = read_i32(fields + 12);
  p.n_kv_heads = read_i32(fields + 16);
  const std::int32_t vocab = read_i32(fields + 20);
  p.seq_len = read_i32(fields + 24);
  if (p.version == 0) {
    // run.c: a negative vocab_size says the classifier follows as a tensor of its own.
    if (vocab == INT_MIN) return fail(LoadStatus::bad_header, "header field vocab_size is %d", vocab);
    p.shared_classifier = vocab > 0;
    p.vocab_size = vocab < 0 ? -vocab : vocab;
  } else {
    p.vocab_size = vocab;
    const unsigned char shared = fields[28];
    if (shared > 1) return fail(LoadStatus::bad_header, "shared_classifier byte is %u, must be 0 or 1", shared);
    p.shared_classifier = shared == 1;
    p.group_size = read_i32(fields + 29);
  }
  LoadResult r = check_config(p);
  if (!r.ok()) return r;

  const std::uint64_t dim = static_cast<std::uint64_t>(p.dim), hidden = static_cast<std::uint64_t>(p.hidden_dim),
                      layers = static_cast<std::uint64_t>(p.n_layers),
                      vocab_n = static_cast<std::uint64_t>(p.vocab_size),
                      kv_dim = static_cast<std::uint64_t>(p.kv_dim()),
                      head_dim = static_cast<std::uint64_t>(p.head_dim()), seq = static_cast<std::uint64_t>(p.seq_len);
  Checked c;
  const std::uint64_t n_embedding = c.mul(vocab_n, dim), n_wq = c.mul(dim, dim), n_wkv = c.mul(kv_dim, dim),
                      n_ffn = c.mul(hidden, dim);
  if (p.version == 2) {
    if (p.group_size <= 0) return fail(LoadStatus::bad_group, "group_size is %d, must be positive", p.group_size);
    const std::uint64_t g = static_cast<std::uint64_t>(p.group_size);
    const struct {
      const char* name;
      std::uint64_t n;
    } tensors[] = {{"embedding (vocab_size x dim)", n_embedding},
                   {"wq/wo (dim x dim)", n_wq},
                   {"wk/wv (kv_dim x dim)", n_wkv},
                   {"w1/w2/w3 (hidden_dim x dim)", n_ffn}};
    for (const auto& t : tensors)
      if (!c.overflow && t.n % g != 0)
        return fail(LoadStatus::bad_group, "group_size %d does not divide the %llu values of %s", p.group_size,
                    static_cast<unsigned long long>(t.n), t.name);
  }

  // Offsets of every tensor, in file order.
  Cursor at{c, header_bytes};
  const std::uint64_t f = sizeof(float);
  std::uint64_t off_embedding = 0, off_att_norm, off_ffn_norm, off_final_norm, off_classifier = 0;
  std::uint64_t off_w[7];  // first layer's tensor of wq wk wv wo w1 w2 w3
  const std::uint64_t n_w[7] = {n_wq, n_wkv, n_wkv, n_wq, n_ffn, n_ffn, n_ffn};
  std::uint64_t stride_w[7];  // bytes from one layer's tensor to the next
  const std::uint64_t g = p.version == 2 ? static_cast<std::uint64_t>(p.group_size) : 1;
  auto q8_bytes = [&](std::uint64_t n) { return c.add(n, c.mul(n / g, f)); };
  if (p.version == 0) {
    off_embedding = at.take(c.mul(n_embedding, f));
    off_att_norm = at.take(c.mul(c.mul(layers, dim), f));
    for (int i = 0; i < 4; ++i) {
      stride_w[i] = c.mul(n_w[i], f);
      off_w[i] = at.take(c.mul(layers, stride_w[i]));
    }
    off_ffn_norm = at.take(c.mul(c.mul(layers, dim), f));
    for (int i = 4; i < 7; ++i) {
      stride_w[i] = c.mul(n_w[i], f);
      off_w[i] = at.take(c.mul(layers, stride_w[i]));
    }
    off_final_norm = at.take(c.mul(dim, f));
    at.take(c.mul(c.mul(c.mul(seq, head_dim / 2), 2), f));  // the unused rope tables (freq_cis real, imaginary)
    if (!p.shared_classifier) off_classifier = at.take(c.mul(n_embedding, f));
  } else {
    off_att_norm = at.take(c.mul(c.mul(layers, dim), f));
    off_ffn_norm = at.take(c.mul(c.mul(layers, dim), f));
    off_final_norm = at.take(c.mul(dim, f));
    off_embedding = at.take(q8_bytes(n_embedding));
    for (int i = 0; i < 7; ++i) {
      stride_w[i] = q8_bytes(n_w[i]);
      off_w[i] = at.take(c.mul(layers, stride_w[i]));
    }
    if (!p.shared_classifier) off_classifier = at.take(q8_bytes(n_embedding));
  }
  if (c.overflow) return fail(LoadStatus::too_big, "the header's shapes overflow 64-bit byte counts");
  const std::uint64_t need = at.end, have = static_cast<std::uint64_t>(size);
  if (have < need)
    return fail(LoadStatus::truncated, "file of %llu bytes is shorter than the %llu bytes its header's shapes need",
                static_cast<unsigned long long>(have), static_cast<unsigned long long>(need));
  if (have > need)
    return fail(LoadStatus::size_mismatch, "file of %llu bytes is longer than the %llu bytes its header's shapes need",
                static_cast<unsigned long long>(have), static_cast<unsigned long long>(need));

  // From here on every offset lies inside the file and fits size_t.
  Model m;
  m.config = p;
  auto floats = [&](std::uint64_t off) { return reinterpret_cast<const float*>(data + off); };
  auto q8 = [&](std::uint64_t off, std::size_t rows, std::size_t cols) {
    const std::size_t n = rows * cols;
    const unsigned char* scales = data + off + n;
    const float* s = reinterpret_cast<const float*>(scales);
    if (reinterpret_cast<std::uintptr_t>(scales) % alignof(float) != 0) {
      m.owned_scales.emplace_back(n / static_cast<std::size_t>(g));
      std::memcpy(m.owned_scales.back().data(), scales, m.owned_scales.back().size() * sizeof(float));
      s = m.owned_scales.back().data();
    }
    return ma::weights_q8(reinterpret_cast<const std::int8_t*>(data + off), s, rows, cols, static_cast<std::size_t>(g));
  };
  const std::size_t d = static_cast<std::size_t>(dim), h = static_cast<std::size_t>(hidden),
                    kv = static_cast<std::size_t>(kv_dim), v = static_cast<std::size_t>(vocab_n);
  const std::size_t rows_w[7] = {d, kv, kv, d, h, d, h}, cols_w[7] = {d, d, d, d, d, h, d};
  if (p.version == 2) m.owned_scales.reserve(static_cast<std::size_t>(2 + 7 * layers));  // pointers stay valid
  m.embedding = p.version == 0 ? ma::weights_f32(floats(off_embedding), v, d) : q8(off_embedding, v, d);
  m.layers.resize(static_cast<std::size_t>(layers));
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    LayerWeights& lw = m.layers[l];
    lw.attention_norm = floats(off_att_norm + l * d * f);
    lw.ffn_norm = floats(off_ffn_norm + l * d * f);
    ma::WeightMatrix* w[7] = {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w1, &lw.w2, &lw.w3};
    for (int i = 0; i < 7; ++i) {
      const std::uint64_t off = off_w[i] + l * stride_w[i];
      *w[i] = p.version == 0 ? ma::weights_f32(floats(off), rows_w[i], cols_w[i]) : q8(off, rows_w[i], cols_w[i]);
    }
  }
  m.final_norm = floats(off_final_norm);
  if (p.shared_classifier)
    m.classifier = m.embedding;
  else
    m.classifier = p.version == 0 ? ma::weights_f32(floats(off_classifier), v, d) : q8(off_classifier, v, d);
  model = std::move(m);
  return LoadResult{};
}

}  // namespace llama
