// test_cuda_ops.cpp: CUDA equals CPU for creation, copies, elementwise ops, reductions and the
// softmax family (docs/design.md section 4, oracle 6). Each case builds inputs once on the CPU, moves copies to
// the GPU, runs the op on both and compares with a stated tolerance. The layer ops (matmul,
// embedding, concat, layer norm, cross-entropy) are in test_cuda_layers.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "gpu_compare.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::gputest;

namespace {
const DType kFloatTypes[] = {DType::F32, DType::F64};
const DType kAllTypes[] = {DType::F32, DType::F64, DType::I32};
}  // namespace

TEST_CASE("cuda: a device is present and idle", "[cuda][runtime]") {
  REQUIRE(cuda_device_count() > 0);
  Tensor x = zeros({3}, DType::F32, kGpu);
  REQUIRE_NOTHROW(cuda_synchronize());
  REQUIRE(x.device() == kGpu);
}

// The caching allocator (tensor/cuda/runtime.cu): a freed block waits in its size's bin and the
// next tensor of that rounded size takes it; cuda_release_cached gives the idle blocks back. With
// LM_CUDA_CACHE=0 (as under compute-sanitizer) nothing is ever cached.
TEST_CASE("cuda: the caching allocator reuses a freed block and gives idle blocks back", "[cuda][runtime]") {
  const char* env = std::getenv("LM_CUDA_CACHE");
  const bool caching = env == nullptr || std::string(env) != "0";
  cuda_synchronize();
  cuda_release_cached();
  REQUIRE(cuda_cached_bytes() == 0);
  { Tensor a = full({1000}, 1.0, DType::F32, kGpu); }  // 4000 bytes: a block of 4096 (a multiple of 512)
  CHECK(cuda_cached_bytes() == (caching ? 4096u : 0u));
  {
    Tensor b = full({1010}, 3.0, DType::F32, kGpu);  // 4040 bytes: the same bin, the same block
    CHECK(cuda_cached_bytes() == 0);
    require_equal(full({1010}, 3.0, DType::F32), b, "a reused block holds the new tensor's values");
  }
  cuda_release_cached();
  CHECK(cuda_cached_bytes() == 0);
  { Tensor c = zeros({3 << 18}, DType::F32, kGpu); }      // 3 MiB: above 1 MiB, multiples of 1 MiB
  { Tensor d = zeros({(3 << 18) + 1}, DType::F32, kGpu); }  // 4 bytes more: the 4 MiB bin
  CHECK(cuda_cached_bytes() == (caching ? 7u << 20 : 0u));
  cuda_release_cached();
  CHECK(cuda_cached_bytes() == 0);
}

TEST_CASE("cuda: creation ops equal the CPU's", "[cuda][create]") {
  // Fills and integer-step aranges are exact on both devices.
  for (DType dt : kAllTypes) {
    require_equal(zeros({2, 3}, dt), zeros({2, 3}, dt, kGpu), "zeros");
    require_equal(ones({4}, dt), ones({4}, dt, kGpu), "ones");
    require_equal(full({2, 2}, -7.0, dt), full({2, 2}, -7.0, dt, kGpu), "full");
    require_equal(scalar_tensor(3.0, dt), scalar_tensor(3.0, dt, kGpu), "scalar_tensor");
    require_equal(arange(0.0, 10.0, 1.0, dt), arange(0.0, 10.0, 1.0, dt, kGpu), "arange step 1");
    require_equal(arange(5.0, -3.0, -2.0, dt), arange(5.0, -3.0, -2.0, dt, kGpu), "arange step -2");
    Tensor g = full({3, 2}, 2.0, dt, kGpu);
    require_equal(zeros_like(full({3, 2}, 2.0, dt)), zeros_like(g), "zeros_like");
    require_equal(ones_like(full({3, 2}, 2.0, dt)), ones_like(g), "ones_like");
    require_equal(full_like(full({3, 2}, 2.0, dt), 0.5), full_like(g, 0.5), "full_like");
  }
  // start + i * step with an inexact step: both devices round the product and the sum separately
  // (-ffp-contract=off for C++, --fmad=false for CUDA), so even this is bit-equal. (Written before
  // the first GPU run as a tolerance of an ulp; the H100 and H200 runs of 2026-11-27 were exact.)
  for (DType dt : kFloatTypes) require_equal(arange(-1.5, 2.0, 0.1, dt), arange(-1.5, 2.0, 0.1, dt, kGpu), "arange step 0.1");
  require_equal(arange(7), arange(7, DType::I32, kGpu), "arange(n)");
  std::vector<float> v = {1.5f, -2.f, 3.25f, 0.f, 1e-30f, -1e30f};
  require_equal(from_vector(v, {2, 3}), from_vector(v, {2, 3}, kGpu), "from_vector");
}

TEST_CASE("cuda: rand and randn draw the CPU's numbers", "[cuda][create][rng]") {
  for (DType dt : kFloatTypes) {
    // A first draw moves the counter offset away from 0, so `offset + i` is really exercised.
    manual_seed(2024);
    (void)rand({37}, dt);
    Tensor u01_cpu = rand({500}, dt);
    Tensor u_cpu = rand({1000}, dt, Device::CPU, -2.0, 3.0);
    Tensor n_cpu = randn({31, 17}, dt, Device::CPU, 0.5, 2.0);
    manual_seed(2024);
    (void)rand({37}, dt, kGpu);
    Tensor u01_gpu = rand({500}, dt, kGpu);
    Tensor u_gpu = rand({1000}, dt, kGpu, -2.0, 3.0);
    Tensor n_gpu = randn({31, 17}, dt, kGpu, 0.5, 2.0);
    // Uniform draws are integer Philox plus exact scaling, then lo + (hi - lo) * u in f64, with
    // the product and the sum rounded separately on both devices (contraction is off on both):
    // bit-equal. (Before the first GPU run an f64 draw on [-2, 3) had an ulp of tolerance for a
    // fused multiply-add on the CPU; the H100 and H200 runs were exact, and the flags rule it out.)
    require_equal(u01_cpu, u01_gpu, "rand [0, 1)");
    require_equal(u_cpu, u_gpu, "rand [-2, 3)");
    // Normal draws go through log and cos, where CUDA and glibc may differ by an ulp of f64;
    // after rounding to f32 that almost never shows.
    Tol t = tol_for(dt, {1e-6, 1e-7}, {1e-13, 1e-13});
    require_close(n_cpu, n_gpu, t.rtol, t.atol, "randn");
    REQUIRE(global_rng().offset == 37 + 500 + 1000 + 31 * 17);
  }
}

TEST_CASE("cuda: to(device) round trips and casts", "[cuda][copy]") {
  for (DType dt : kAllTypes) {
    Tensor x = mul(randn({5, 7}, DType::F64), 100.0).to(dt);
    Tensor back = to_gpu(x).to(Device::CPU);
    REQUIRE(back.device() == Device::CPU);
    REQUIRE(back.to_double_vector() == x.to_double_vector());  // a byte copy both ways
    for (DType to : kAllTypes) require_equal(x.to(to), to_gpu(x).to(to), "cast");  // truncation included
  }
}

TEST_CASE("cuda: copies of non-contiguous views are exact", "[cuda][copy]") {
  for (DType dt : kAllTypes) {
    Tensor x = small_ints({3, 4, 5}, dt), gx = to_gpu(x);
    require_equal(x.transpose(0, 2).contiguous(), gx.transpose(0, 2).contiguous(), "transpose");
    require_equal(x.permute({2, 0, 1}).contiguous(), gx.permute({2, 0, 1}).contiguous(), "permute");
    require_equal(x.narrow(1, 1, 2).contiguous(), gx.narrow(1, 1, 2).contiguous(), "narrow");
    require_equal(x.select(2, 3).clone(), gx.select(2, 3).clone(), "select");
    Tensor s = x.narrow(0, 1, 1).narrow(2, 4, 1);  // (1, 4, 1) -> stride-0 broadcast
    Tensor gs = gx.narrow(0, 1, 1).narrow(2, 4, 1);
    require_equal(s.expand({3, 4, 5}).contiguous(), gs.expand({3, 4, 5}).contiguous(), "expand");
    // Strided destination: copy_ into a view, from the same device and from the other one.
    Tensor d = zeros({3, 4, 5}, dt), gd = zeros({3, 4, 5}, dt, kGpu);
    d.narrow(1, 1, 2).copy_(x.transpose(0, 2).narrow(1, 0, 2).transpose(0, 2));
    gd.narrow(1, 1, 2).copy_(gx.transpose(0, 2).narrow(1, 0, 2).transpose(0, 2));
    require_equal(d, gd, "copy_ into a strided view");
    gd.narrow(1, 1, 2).copy_(x.narrow(1, 0, 2));
    d.narrow(1, 1, 2).copy_(x.narrow(1, 0, 2));
    require_equal(d, gd, "copy_ from the cpu");
    d.transpose(0, 1).narrow(0, 0, 2).fill_(4.0);
    gd.transpose(0, 1).narrow(0, 0, 2).fill_(4.0);
    require_equal(d, gd, "fill_ of a strided view");
  }
  // A 9-d view whose last two dims are swapped collapses to three dims and still copies.
  Tensor x9 = small_ints({2, 2, 2, 2, 2, 2, 2, 2, 3}, DType::F32);
  require_equal(x9.transpose(7, 8).contiguous(), to_gpu(x9).transpose(7, 8).contiguous(), "9-d view");
  // Nine dims that cannot merge exceed the CUDA kernels' limit: refused with a message.
  std::vector<int64_t> rev = {8, 7, 6, 5, 4, 3, 2, 1, 0};
  REQUIRE_THROWS_WITH(to_gpu(x9).permute(rev).contiguous(), Catch::Contains("at most 8"));
}

TEST_CASE("cuda: unary ops", "[cuda][elementwise]") {
  const UnaryOp ops[] = {UnaryOp::Neg, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt,
                         UnaryOp::Tanh, UnaryOp::Relu, UnaryOp::Gelu};
  for (DType dt : kFloatTypes) {
    Tensor x = mul(randn({6, 50}, dt), 3.0);
    Tensor pos = add(exp(x), 1e-3);  // log and sqrt want positive inputs
    for (UnaryOp op : ops) {
      Tensor in = (op == UnaryOp::Log || op == UnaryOp::Sqrt) ? pos : x;
      // Neg and relu are exact; exp, log and tanh are within 1-2 ulp in CUDA's libdevice and
      // glibc. gelu is the same arithmetic on both devices (math::normal_cdf in f32, erf in f64),
      // but nvcc and GCC may fuse different multiply-adds, and in f64 gelu's 1 + erf(x) cancels
      // for x << 0, so an ulp of erf times |x| / 2 becomes an absolute error: the absolute term.
      // The f32 gelu has its own tighter case below.
      Tol t = tol_for(dt, {1e-5, 5e-6}, {1e-12, 1e-13});
      require_close(unary(op, in), unary(op, to_gpu(in)), t.rtol, t.atol, unary_op_name(op));
    }
  }
  Tensor xi = arange(-6.0, 6.0, 1.0, DType::I32);
  require_equal(neg(xi), neg(to_gpu(xi)), "neg i32");
  require_equal(relu(xi), relu(to_gpu(xi)), "relu i32");
}

// f32 GELU goes through math::normal_cdf (tensor/elementwise_math.h) on both devices. The GPU's
// gelu and gelu' are held to the bounds the CPU's are held to in tests/test_elementwise.cpp,
// against Phi in f64 every 1/1024 over [-13, 7] (the independent answer), at the same edges, and
// to the CPU's own values.
TEST_CASE("cuda: f32 gelu and gelu' through normal_cdf: Phi over [-13, 7], the left tail, the edges", "[cuda][elementwise]") {
  std::vector<float> xs;
  for (int i = -13 * 1024; i <= 7 * 1024; ++i) xs.push_back(static_cast<float>(i) / 1024.0f);  // exact in f32
  const size_t grid = xs.size();
  const float inf = std::numeric_limits<float>::infinity(), big = 3e38f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float e : {inf, big, -big, -20.0f, -14.0f, -6.0f, 0.0f, nan}) xs.push_back(e);
  const Shape shape = {static_cast<int64_t>(xs.size())};
  const Tensor x = from_vector(xs, shape), g = ones(shape, DType::F32);
  const Tensor cpu_gelu = gelu(x), cpu_grad = gelu_backward(x, g);
  const Tensor gpu_gelu = gelu(to_gpu(x)), gpu_grad = gelu_backward(to_gpu(x), to_gpu(g));
  const std::vector<float> y = gpu_gelu.to(Device::CPU).to_vector<float>();
  const std::vector<float> dy = gpu_grad.to(Device::CPU).to_vector<float>();
  double worst_gelu = 0, worst_grad = 0, worst_rel = 0;
  for (size_t i = 0; i < grid; ++i) {
    const double xd = xs[i];
    const double phi = 0.5 * std::erfc(-xd / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * xd * xd) / std::sqrt(2.0 * M_PI);
    worst_gelu = std::max(worst_gelu, std::fabs(y[i] - xd * phi));
    worst_grad = std::max(worst_grad, std::fabs(dy[i] - (phi + xd * pdf)));
    // Phi itself, read back as gelu / x, on the left tail where 1 + erf would have cancelled
    // (x * Phi stays a normal float for Phi > 1e-36; the division adds an ulp).
    if (xd < -1.0 && phi > 1e-36) worst_rel = std::max(worst_rel, std::fabs(y[i] / xd - phi) / phi);
  }
  INFO("gelu " << worst_gelu << " gelu' " << worst_grad << " Phi relative on the left tail " << worst_rel);
  // The CPU test's bounds, with its reasons: gelu within 3e-6 (13 x 2e-7 plus the product's
  // rounding), gelu' within 5e-7, Phi within 3e-5 relative on the tail (the rounding of z^2 in
  // the exponent; 1.6e-5 measured on the CPU) plus 2 ulp for the product and the division.
  CHECK(worst_gelu < 3e-6);
  CHECK(worst_grad < 5e-7);
  CHECK(worst_rel < 3e-5 + 2.4e-7);
  // Edges, as on the CPU: +inf and +3e38 pass through, far-left values give 0, NaN stays NaN;
  // gelu' is 1 and 0 at the ends (no x times exp's floor); Phi(-6) = 9.8658765e-10 survives.
  const size_t e = grid;
  CHECK(y[e] == inf);
  CHECK(y[e + 1] == big);
  CHECK(y[e + 2] == 0.0f);
  CHECK(y[e + 3] == 0.0f);
  CHECK(std::fabs(y[e + 5] / -6.0 / 9.8658765e-10 - 1.0) < 3e-5 + 2.4e-7);
  CHECK(y[e + 6] == 0.0f);
  CHECK(std::isnan(y[e + 7]));
  CHECK(dy[e + 1] == 1.0f);
  CHECK(dy[e + 2] == 0.0f);
  CHECK(dy[e + 4] == 0.0f);
  CHECK(dy[e + 6] == 0.5f);
  CHECK(std::isnan(dy[e + 7]));
  // Against the CPU: the same bits. normal_cdf and exp_softmax are + - * /, floorf and bit moves,
  // each correctly rounded, and contraction is off on both sides (docs/cuda.md section 3), so
  // nothing may differ; the H200 gave 0 of 20,489 differing (2026-11-28).
  require_equal(cpu_gelu, gpu_gelu, "gelu f32 over [-13, 7] and edges");
  require_equal(cpu_grad, gpu_grad, "gelu' f32 over [-13, 7] and edges");
}

TEST_CASE("cuda: binary ops with broadcasting", "[cuda][elementwise]") {
  const BinaryOp ops[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Eq,
                          BinaryOp::Ne,  BinaryOp::Lt,  BinaryOp::Le,  BinaryOp::Gt,  BinaryOp::Ge,
                          BinaryOp::Max, BinaryOp::Min, BinaryOp::ReluBackward, BinaryOp::GeluBackward};
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}}, {{4}, {2, 3, 4}}, {{2, 1, 4}, {1, 3, 1}}, {{}, {3, 2}}};
  for (DType dt : kAllTypes) {
    for (const auto& sh : shapes) {
      Tensor a = small_ints(sh.first, dt), b = small_ints(sh.second, dt);
      if (is_floating(dt)) {  // non-integers too, and no zero divisors
        a = add(a, mul(rand(sh.first, dt), 0.5));
        b = add(b, 5.25);
      }
      // A transposed view as an input: the kernel must honour its strides.
      Tensor at = a.dim() == 3 ? a.transpose(0, 2).contiguous().transpose(0, 2) : a;
      for (BinaryOp op : ops) {
        if (!is_floating(dt) && (op == BinaryOp::Div || op == BinaryOp::GeluBackward)) continue;
        if ((op == BinaryOp::ReluBackward || op == BinaryOp::GeluBackward) && sh.first != sh.second) continue;
        // + - * / are correctly rounded on both devices and comparisons are exact; only
        // gelu' goes through erf and exp (1-2 ulp apart, see the unary case), scaled by |g| < 10.
        Tol t = op == BinaryOp::GeluBackward ? tol_for(dt, {1e-5, 1e-5}, {1e-12, 1e-12}) : Tol{0.0, 0.0};
        require_close(binary(op, at, b), binary(op, to_gpu(at), to_gpu(b)), t.rtol, t.atol, binary_op_name(op));
        if (sh.first == sh.second)
          require_close(binary(op, b, at), binary(op, to_gpu(b), to_gpu(at)), t.rtol, t.atol, binary_op_name(op));
      }
    }
  }
}

TEST_CASE("cuda: scalar ops and where", "[cuda][elementwise]") {
  for (DType dt : kAllTypes) {
    Tensor x = small_ints({4, 6}, dt), gx = to_gpu(x);
    // Exact: one correctly rounded operation per element on both devices.
    require_equal(add(x, 2.0), add(gx, 2.0), "add scalar");
    require_equal(sub(x, 3.0), sub(gx, 3.0), "sub scalar");
    require_equal(mul(x, -2.0), mul(gx, -2.0), "mul scalar");
    require_equal(rsub(1.0, x), rsub(1.0, gx), "rsub");
    require_equal(binary_scalar(BinaryOp::Ge, x, 0.0), binary_scalar(BinaryOp::Ge, gx, 0.0), "ge scalar");
    require_equal(binary_scalar(BinaryOp::Max, x, 1.0, true), binary_scalar(BinaryOp::Max, gx, 1.0, true), "max");
    if (is_floating(dt)) {
      require_equal(div(x, 0.3), div(gx, 0.3), "div scalar");
      require_equal(rdiv(2.5, add(x, 0.5)), rdiv(2.5, add(gx, 0.5)), "rdiv");
      require_equal(2.0 * x - 1.0, 2.0 * gx - 1.0, "operators");
    }
    // where: the condition may have any dtype, and all three operands broadcast.
    for (DType ct : kAllTypes) {
      Tensor cond = gt(small_ints({4, 1}, ct), full({}, 0.0, ct));
      Tensor b = small_ints({6}, dt);
      require_equal(where(cond, x, b), where(to_gpu(cond), gx, to_gpu(b)), "where");
    }
  }
}

TEST_CASE("cuda: sum, mean, max, argmax over a dim, with keepdim", "[cuda][reduce]") {
  // Sums accumulate in f64 on both devices but in a different order: f32 results agree to an
  // ulp or so, f64 ones to a few ulps of the sum's size. Max and argmax are exact.
  // The shapes reach both CUDA paths: a block per output (few outputs, or long contiguous rows
  // as in {3000, 40}) and a thread per output (many outputs with inner > 1, or short rows).
  const std::vector<Shape> shapes = {{3, 4, 5}, {2, 5000}, {5000, 3}, {3000, 40}, {3, 100, 1000}};
  for (DType dt : kAllTypes) {
    Tol t = tol_for(dt, {1e-6, 1e-6}, {1e-12, 1e-12});
    for (const Shape& s : shapes) {
      Tensor x = is_floating(dt) ? randn(s, dt) : small_ints(s, dt), gx = to_gpu(x);
      for (int64_t d = -1; d < x.dim(); ++d)
        for (bool keep : {false, true}) {
          require_close(sum(x, d, keep), sum(gx, d, keep), t.rtol, t.atol, "sum");
          if (is_floating(dt)) require_close(mean(x, d, keep), mean(gx, d, keep), t.rtol, t.atol, "mean");
          require_equal(max(x, d, keep), max(gx, d, keep), "max");
          require_equal(argmax(x, d, keep), argmax(gx, d, keep), "argmax");
        }
      require_close(sum(x), sum(gx), t.rtol, t.atol * 100, "sum all");  // sums of 3e5 values
      if (is_floating(dt)) require_close(mean(x), mean(gx), t.rtol, t.atol, "mean all");
    }
  }
  // Ties (first maximum wins) and NaNs (max is NaN, argmax the first NaN), on both CUDA paths:
  // a block per output (few outputs) and a thread per output (many outputs, inner > 1).
  for (DType dt : kFloatTypes) {
    for (const Shape& s : std::vector<Shape>{{7, 300}, {1, 10, 4096}}) {
      Tensor ties = small_ints(s, dt);
      Tensor nan_mask = gt(rand(s, dt), full({}, 0.97, dt));
      Tensor with_nan = where(nan_mask, full({}, NAN, dt), ties);
      for (const Tensor& x : {ties, with_nan})
        for (int64_t d = 0; d < x.dim(); ++d) {
          require_equal(max(x, d), max(to_gpu(x), d), "max with ties/NaN");
          require_equal(argmax(x, d), argmax(to_gpu(x), d), "argmax with ties/NaN");
        }
    }
  }
}

TEST_CASE("cuda: sum_to undoes broadcasting", "[cuda][reduce]") {
  Tensor x = randn({2, 3, 4}, DType::F32), gx = to_gpu(x);
  for (const Shape& s : std::vector<Shape>{{3, 1}, {1, 4}, {4}, {2, 1, 1}, {}, {2, 3, 4}})
    require_close(sum_to(x, s), sum_to(gx, s), 1e-6, 1e-6, "sum_to " + shape_str(s));  // f64 sums, as above
}

TEST_CASE("cuda: softmax, log_softmax and their backwards", "[cuda][softmax]") {
  for (DType dt : kFloatTypes) {
    for (const Shape& s : std::vector<Shape>{{4, 7}, {2, 3, 5}, {3, 2000}}) {
      Tensor x = mul(randn(s, dt), 3.0);
      // Masked entries (-inf), as causal attention makes them; some rows may be fully masked,
      // which gives NaN on both devices.
      Tensor masked = where(gt(rand(s, dt), full({}, 0.7, dt)), full({}, -INFINITY, dt), x);
      Tensor g = randn(s, dt);
      // The CPU sums a row sequentially in the input dtype and CUDA in a tree: in f32 the
      // relative difference grows like eps * sqrt(cols) at worst eps * cols.
      // In log-softmax that relative error of the sum is an absolute error of every output.
      Tol t = tol_for(dt, {1e-4, 1e-6}, {1e-12, 1e-13});
      for (const Tensor& in : {x, masked}) {
        Tensor y = softmax(in), ly = log_softmax(in);
        require_close(y, softmax(to_gpu(in)), t.rtol, t.atol, "softmax");
        require_close(ly, log_softmax(to_gpu(in)), t.rtol, t.atol, "log_softmax");
        require_close(softmax_backward(y, g), softmax_backward(to_gpu(y), to_gpu(g)), t.rtol, t.atol * 10,
                      "softmax_backward");
        require_close(log_softmax_backward(ly, g), log_softmax_backward(to_gpu(ly), to_gpu(g)), t.rtol,
                      t.atol * 10, "log_softmax_backward");
      }
    }
  }
}
