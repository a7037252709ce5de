// Proves the library allocates nothing: every malloc-family call and every operator new in this program is
// counted (malloc family through the linker's --wrap, operator new by replacement), and the counter is
// armed only around library calls. Throwing is covered by -fno-exceptions on the library and by
// tests/check_symbols.py, which fails on any allocation or exception symbol the archive references.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <vector>

#include "microattn/microattn.hpp"

namespace {
volatile bool armed = false;
volatile int heap_calls = 0;
void count() {
  if (armed) heap_calls = heap_calls + 1;
}
}  // namespace

extern "C" {
void* __real_malloc(std::size_t);
void* __real_calloc(std::size_t, std::size_t);
void* __real_realloc(void*, std::size_t);
void __real_free(void*);
void* __wrap_malloc(std::size_t n) {
  count();
  return __real_malloc(n);
}
void* __wrap_calloc(std::size_t n, std::size_t s) {
  count();
  return __real_calloc(n, s);
}
void* __wrap_realloc(void* p, std::size_t n) {
  count();
  return __real_realloc(p, n);
}
void __wrap_free(void* p) {
  if (p != nullptr) count();
  __real_free(p);
}
}

void* operator new(std::size_t n) {
  count();
  if (void* p = __real_malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { __wrap_free(p); }
void operator delete[](void* p) noexcept { __wrap_free(p); }
void operator delete(void* p, std::size_t) noexcept { __wrap_free(p); }
void operator delete[](void* p, std::size_t) noexcept { __wrap_free(p); }

namespace {

struct Armed {
  Armed() {
    heap_calls = 0;
    armed = true;
  }
  ~Armed() { armed = false; }
};

void* volatile g_escape;  // pointers stored here are observable, so no compiler may elide the allocations

TEST(NoAlloc, TheCounterSeesAllocations) {  // the check itself can fail
  int seen;
  {
    Armed a;
    void* p = std::malloc(16);
    g_escape = p;
    std::free(p);
    auto* q = new int(3);
    g_escape = q;
    delete q;
    seen = heap_calls;
  }
  EXPECT_EQ(seen, 4);
}

TEST(NoAlloc, KernelsAllocateNothing) {
  namespace ma = microattn;
  std::vector<float> a(300 * 300, 0.5f), b(300 * 300, 0.25f), c(300 * 300), x(1000);
  int seen;
  {
    Armed armed_scope;
    EXPECT_EQ(ma::matmul(ma::make_view<const float>(a.data(), 300, 300), ma::make_view<const float>(b.data(), 300, 300),
                         ma::make_view(c.data(), 300, 300)),
              ma::Status::ok);
    EXPECT_EQ(ma::matmul(ma::make_view<const float>(a.data(), 300, 300), ma::make_view<const float>(b.data(), 300, 300),
                         ma::make_view(c.data(), 300, 300), true),
              ma::Status::ok);
    EXPECT_EQ(ma::softmax_rows(ma::make_view(c.data(), 300, 300)), ma::Status::ok);
    EXPECT_EQ(ma::exp_elements(x.data(), x.data(), x.size()), ma::Status::ok);
    EXPECT_EQ(ma::matmul(ma::make_view<const float>(nullptr, 3, 3), ma::make_view<const float>(b.data(), 3, 3),
                         ma::make_view(c.data(), 3, 3)),
              ma::Status::null_pointer);
    (void)ma::to_string(ma::Status::aliasing);
    seen = heap_calls;
  }
  EXPECT_EQ(seen, 0);
}

microattn::MultiHeadAttention<128, 64, 4, 2> g_layer{{nullptr, nullptr, nullptr}};

TEST(NoAlloc, AttentionAndLayersAllocateNothing) {
  namespace ma = microattn;
  std::vector<float> q(300 * 64, 0.1f), k(300 * 64, 0.2f), v(300 * 64, 0.3f), out(300 * 64);
  std::vector<float> ws(ma::attention_workspace_floats(64, 64));
  std::vector<float> w(64 * 64, 0.01f), x(128 * 64, 0.5f), y(128 * 64), mask(128 * 128, 0.0f);
  ma::MultiHeadAttention<128, 64, 4, 2> local{
      {w.data(), w.data(), w.data(), w.data(), w.data(), w.data(), w.data(), w.data()}};
  g_layer = local;
  int seen;
  {
    Armed armed_scope;
    ma::AttentionOptions o;
    EXPECT_EQ(
        ma::attention(ma::make_view<const float>(q.data(), 300, 64), ma::make_view<const float>(k.data(), 300, 64),
                      ma::make_view<const float>(v.data(), 300, 64), ma::make_view(out.data(), 300, 64), ws.data(),
                      ws.size(), o),
        ma::Status::ok);
    o.causal = true;
    EXPECT_EQ(
        ma::attention(ma::make_view<const float>(q.data(), 300, 64), ma::make_view<const float>(k.data(), 300, 64),
                      ma::make_view<const float>(v.data(), 300, 64), ma::make_view(out.data(), 300, 64), ws.data(),
                      ws.size(), o),
        ma::Status::ok);
    o.mask = ma::make_view<const float>(mask.data(), 128, 128);
    EXPECT_EQ(g_layer.forward(ma::make_view<const float>(x.data(), 128, 64), ma::make_view(y.data(), 128, 64), o),
              ma::Status::ok);
    EXPECT_EQ(g_layer.forward(ma::make_view<const float>(x.data(), 128, 64), ma::make_view(x.data(), 128, 64)),
              ma::Status::ok);
    EXPECT_EQ(local.forward(ma::make_view<const float>(x.data(), 5, 64), ma::make_view<const float>(y.data(), 100, 64),
                            ma::make_view(x.data(), 5, 64)),
              ma::Status::ok);
    seen = heap_calls;
  }
  EXPECT_EQ(seen, 0);
}

}  // namespace
