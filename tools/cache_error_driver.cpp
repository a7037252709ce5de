// Driver of scripts/report_cache_error.py: one nn.MultiheadAttention's weights and an input on stdin (raw float32:
// in_proj_weight 3d×d, in_proj_bias 3d, out_proj.weight d×d, out_proj.bias d, x n×d), a causal self-attention
// forward with an f32, an f16 and a q8 K/V cache, the three outputs (n×d each) on stdout. argv[1]: the shape.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include <microattn/microattn.hpp>

namespace ma = microattn;

namespace {

template <std::size_t N, std::size_t D, std::size_t H, ma::Format F>
bool run(const std::vector<float>& in, std::vector<float>& out) {
  const float* w = in.data();
  const ma::LayerWeights lw{w, w + D * D, w + 2 * D * D, w + 3 * D * D, w + 3 * D * D + D, w + 3 * D * D + 2 * D,
                            w + 3 * D * D + 3 * D, w + 4 * D * D + 3 * D};
  const float* x = w + 4 * D * D + 4 * D;
  auto layer = std::make_unique<ma::MultiHeadAttention<N, D, H, H, true, F>>(lw);
  std::vector<float> y(N * D);
  ma::AttentionOptions o;
  o.causal = true;
  if (layer->forward(ma::make_view(x, N, D), ma::make_view(y.data(), N, D), o) != ma::Status::ok) return false;
  out.insert(out.end(), y.begin(), y.end());
  return true;
}

template <std::size_t N, std::size_t D, std::size_t H>
int shape() {
  std::vector<float> in(4 * D * D + 4 * D + N * D);
  if (std::fread(in.data(), sizeof(float), in.size(), stdin) != in.size()) return 2;
  std::vector<float> out;
  if (!run<N, D, H, ma::Format::f32>(in, out) || !run<N, D, H, ma::Format::f16>(in, out) ||
      !run<N, D, H, ma::Format::q8>(in, out))
    return 3;
  std::fwrite(out.data(), sizeof(float), out.size(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int s = argc > 1 ? std::atoi(argv[1]) : -1;
  switch (s) {
    case 0: return shape<128, 64, 4>();
    case 1: return shape<256, 128, 8>();
    case 2: return shape<512, 256, 8>();
    case 3: return shape<256, 64, 1>();
    default: return 1;
  }
}
