// test_infer.cpp: cached chunked inference against its oracle, the one-shot forward of the
// landmark-augmented sequence (exact positions, every cached block retrieved, no capacity), in
// f64 and f32, across chunk boundaries that split blocks; plus what changes when k is smaller,
// stingy against exact positions, capacity, and the block store (RAM and disk) (the retrieval math itself:
// tests/test_retrieval.cpp).
#include "tests/helpers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include "infer/block_store.h"
#include "infer/chunk_attention.h"
#include "infer/session.h"
#include "tests/infer_fixtures.h"
#include "landmark/retrieval.h"
#include "landmark/tokens.h"
#include "nn/gpt.h"
#include "tensor/cpu/parallel.h"
#include "tensor/rng.h"
#include "tensor/storage.h"

using namespace lm;
using namespace lm::test;

namespace {
using infer_test::exact_all;
using infer_test::kLandmarkId;
using infer_test::make_model;
using infer_test::random_raw;

// An empty directory of this process's own under the system's temp directory (the caller removes it).
std::string scratch_dir(const std::string& name) {
  const std::string dir = (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}
}  // namespace

TEST_CASE("inference: chunked logits equal the one-shot forward (exact positions, all blocks, f64)", "[infer]") {
  auto model = make_model(DType::F64);
  std::vector<int32_t> raw = random_raw(123, 7);
  Tensor ref = one_shot_logits(*model, raw, kLandmarkId);
  REQUIRE(ref.shape() == Shape{123, 41});
  for (int64_t chunk : {123, 50, 37, 5, 1}) {  // 37 and 1 split blocks across chunks; 123 is one chunk
    INFO("chunk " << chunk);
    InferenceSession s(*model, exact_all(chunk), kLandmarkId);
    Tensor got = s.feed(raw);
    CHECK(max_abs_diff(got, ref) < 1e-12);  // f64: same math, different summation order
    CHECK(s.tokens_fed() == 123);
    CHECK(s.cached_blocks() == 123 / 5);
  }
}

TEST_CASE("inference: f32 chunked logits match the one-shot forward to ~1e-5", "[infer]") {
  auto model = make_model(DType::F32);
  std::vector<int32_t> raw = random_raw(140, 8);
  Tensor ref = one_shot_logits(*model, raw, kLandmarkId);
  InferenceSession s(*model, exact_all(33), kLandmarkId);
  Tensor got = s.feed(raw);
  const double scale = std::max(1.0, max(ref.reshape({-1}), 0).item());
  CHECK(max_abs_diff(got, ref) < 1e-5 * scale * 10);  // f32 rounding of logits of size ~`scale`
}

TEST_CASE("inference: exactly k blocks cached is the one-shot forward, fewer retrieved blocks converge as k grows",
          "[infer]") {
  auto model = make_model(DType::F64);
  std::vector<int32_t> raw = random_raw(100, 9);  // 20 blocks of 5
  Tensor ref = one_shot_logits(*model, raw, kLandmarkId);
  // The last chunk starts after 60 raw tokens = 12 full blocks: k = 12 retrieves all of them.
  InferConfig c = exact_all(60);
  c.k = 12;
  InferenceSession s(*model, c, kLandmarkId);
  Tensor first = s.feed_chunk(std::vector<int32_t>(raw.begin(), raw.begin() + 60));
  REQUIRE(s.cached_blocks() == 12);
  Tensor second = s.feed_chunk(std::vector<int32_t>(raw.begin() + 60, raw.end()));
  CHECK(max_abs_diff(concat({first, second}, 0), ref) < 1e-12);
  // With k below the cache size the result differs, and the error shrinks to 0 as k grows.
  std::vector<double> err;
  for (int64_t k : {1, 2, 4, 8, 12, 19}) {
    InferConfig ck = exact_all(10);
    ck.k = k;
    InferenceSession sk(*model, ck, kLandmarkId);
    err.push_back(max_abs_diff(sk.feed(raw), ref));
  }
  CHECK(err.front() > 1e-3);
  CHECK(err.back() < 1e-12);  // 19 = every block cached before the last chunk
  CHECK(err[4] < err[0]);
}

TEST_CASE("inference: with at most k cached blocks, stingy positions equal exact ones and the one-shot forward",
          "[infer][retrieval]") {
  // Every cached block is retrieved and the stingy slots of the k newest are their true relative
  // places, so only the origin of the positions differs from exact mode: rotary scores depend on
  // differences of positions alone. 60 raw tokens = 12 blocks of 5; chunks of 20 leave 4 and 8
  // blocks cached before the second and third chunk.
  auto model = make_model(DType::F64);
  std::vector<int32_t> raw = random_raw(60, 12);
  Tensor ref = one_shot_logits(*model, raw, kLandmarkId);
  for (int64_t k : {8, 9, 15}) {  // k = 8: exactly k blocks cached before the last chunk
    INFO("k " << k);
    InferConfig c;
    c.chunk_len = 20;
    c.k = k;
    c.positions = PositionMode::Stingy;
    Tensor stingy = InferenceSession(*model, c, kLandmarkId).feed(raw);
    c.positions = PositionMode::Exact;
    Tensor exact = InferenceSession(*model, c, kLandmarkId).feed(raw);
    // f64: the same sums, rotary angles of shifted positions (computed in f64) round differently.
    CHECK(max_abs_diff(stingy, exact) < 1e-10);
    CHECK(max_abs_diff(stingy, ref) < 1e-10);
  }
  // One block more than k in the cache and the two modes part: older blocks move to slot 0.
  InferConfig c;
  c.chunk_len = 20;
  c.k = 3;
  Tensor stingy = InferenceSession(*model, c, kLandmarkId).feed(raw);
  c.positions = PositionMode::Exact;
  CHECK(max_abs_diff(stingy, InferenceSession(*model, c, kLandmarkId).feed(raw)) > 1e-6);
}

TEST_CASE("inference: stingy positions change the result but keep it finite, capacity keeps the newest blocks",
          "[infer]") {
  auto model = make_model(DType::F64);
  std::vector<int32_t> raw = random_raw(200, 10);
  InferConfig c;
  c.chunk_len = 25;
  c.k = 2;
  InferenceSession stingy(*model, c, kLandmarkId);
  Tensor a = stingy.feed(raw);
  CHECK(a.shape() == Shape{200, 41});
  CHECK(std::isfinite(sum(a).item()));
  c.capacity = 6;
  InferenceSession capped(*model, c, kLandmarkId);
  AttentionCapture cap;
  cap.layer = 1;
  cap.head = 0;
  capped.set_capture(&cap);
  capped.feed(raw);
  CHECK(capped.cached_blocks() == 6);
  // Every retrieval of the last chunk came from the newest 6 blocks held at that time.
  const int64_t blocks_before_last = (200 - 25) / 5;
  for (const auto& row : cap.rows)
    if (row.query >= (200 - 25) + (200 - 25) / 5)
      for (int64_t g : row.retrieved) CHECK(g >= blocks_before_last - 6);
}

TEST_CASE("inference: feed and read hand back the shared rotated keys and idle small buffers when they finish", "[infer]") {
  // Every row of a chunk retrieves every block at its true position (k 1000, exact), so the
  // rows share rotated block keys (attend_cpu) and the reading thread keeps them from chunk to
  // chunk. feed_chunk leaves them for the next chunk, and the thread's cache of small buffers
  // (tensor/storage.h) fills; a whole reading gives both back, so that between readings a
  // session holds only its caches (issue 14's memory point).
  auto model = make_model(DType::F32);
  const std::vector<int32_t> raw = random_raw(120, 11);
  InferenceSession s(*model, exact_all(20), kLandmarkId);
  release_chunk_scratch();
  REQUIRE(chunk_scratch_bytes() == 0);
  for (int64_t at = 0; at < 60; at += 20) s.feed_chunk(std::vector<int32_t>(raw.begin() + at, raw.begin() + at + 20));
  CHECK(chunk_scratch_bytes() > 0);  // the path under test ran, and kept its buffer
#if !defined(__SANITIZE_ADDRESS__)  // (the small-buffer cache is off under AddressSanitizer)
  CHECK(host_cached_bytes() > 0);  // and the chunks' small tensors wait in this thread's cache
#endif
  {
    const Tensor logits = s.feed(std::vector<int32_t>(raw.begin() + 60, raw.begin() + 90));
    CHECK(chunk_scratch_bytes() == 0);
    CHECK(host_cached_bytes() == 0);
  }
  s.feed_chunk(std::vector<int32_t>(raw.begin() + 90, raw.begin() + 110));
  CHECK(chunk_scratch_bytes() > 0);
  const Tensor last = s.read(std::vector<int32_t>(raw.begin() + 110, raw.end()));
  CHECK(chunk_scratch_bytes() == 0);
  CHECK(host_cached_bytes() == 0);
}

TEST_CASE("block store: ring order under a capacity, in RAM and on disk", "[infer]") {
  const std::string dir = scratch_dir("lm_test_blocks");
  for (const std::string& where : {std::string(), dir}) {
    INFO((where.empty() ? "RAM" : "disk"));
    BlockStore ring(4, DType::F32, 3, where);
    CHECK(ring.on_disk() == !where.empty());
    for (int b = 0; b < 5; ++b) {
      float k[4] = {float(b), 0, 0, 0}, v[4] = {0, float(b), 0, 0};
      ring.append(k, v);
    }
    CHECK(ring.size() == 3);
    CHECK(ring.evicted() == 2);
    ring.fetch({2, 0, 1, 0});  // any order, repeats allowed
    for (int i = 0; i < 3; ++i) {
      CHECK(static_cast<const float*>(ring.k(i))[0] == float(i + 2));  // oldest held first
      CHECK(static_cast<const float*>(ring.v(i))[1] == float(i + 2));
    }
    CHECK_THROWS_AS(ring.k(3), Error);
    CHECK_THROWS_AS(ring.fetch({3}), Error);
    if (ring.on_disk()) {
      ring.fetch({1});  // a fetch replaces the last one: block 0 is no longer readable
      CHECK(static_cast<const float*>(ring.k(1))[0] == 3.0f);
      CHECK_THROWS_WITH(ring.k(0), Catch::Contains("not fetched"));
      float k[4] = {9, 0, 0, 0}, v[4] = {0, 9, 0, 0};
      ring.append(k, v);  // an append voids the fetch too (held indices move on)
      CHECK_THROWS_WITH(ring.k(1), Catch::Contains("not fetched"));
      CHECK(ring.reserved_bytes() == 3 * ring.bytes_per_block());  // a ring reserves its capacity, no more
    }
  }
  // Unbounded, across several RAM segments: every block reads back what was written.
  const int64_t n = 3 * BlockStore::kSegmentBlocks + 5;
  for (const std::string& where : {std::string(), dir}) {
    BlockStore store(2, DType::F64, 0, where);
    for (int64_t b = 0; b < n; ++b) {
      double k[2] = {double(b), -double(b)}, v[2] = {0.5 * double(b), 1};
      store.append(k, v);
    }
    std::vector<int32_t> all(static_cast<size_t>(n));
    for (int64_t b = 0; b < n; ++b) all[static_cast<size_t>(b)] = static_cast<int32_t>(b);
    store.fetch(all);
    int64_t wrong = 0;
    for (int64_t b = 0; b < n; ++b) {
      const double* k = static_cast<const double*>(store.k(b));
      const double* v = static_cast<const double*>(store.v(b));
      wrong += (k[0] != double(b) || k[1] != -double(b) || v[0] != 0.5 * double(b) || v[1] != 1);
    }
    CHECK(wrong == 0);
  }
  // Files on disk are unlinked at once: two stores (two runs) share the directory, leave nothing
  // in it, and never touch a file of the user's there, even one with the old fixed name.
  {
    std::ofstream(dir + "/layer0.blocks") << "the user's file";
    BlockStore a(4, DType::F32, 0, dir), b(4, DType::F32, 0, dir);
    float k[4] = {1, 2, 3, 4}, v[4] = {5, 6, 7, 8}, k2[4] = {-1, -2, -3, -4};
    a.append(k, v);
    b.append(k2, v);
    a.fetch({0});
    b.fetch({0});
    CHECK(static_cast<const float*>(a.k(0))[3] == 4.0f);
    CHECK(static_cast<const float*>(b.k(0))[3] == -4.0f);
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
    CHECK(names == std::vector<std::string>{"layer0.blocks"});
    std::ifstream in(dir + "/layer0.blocks");
    std::string text;
    std::getline(in, text);
    CHECK(text == "the user's file");
  }
  // No room for the file (here a file-size limit, which fails the reservation as a full disk
  // would, with EFBIG instead of ENOSPC): an error naming the file, not a signal. SIGXFSZ is
  // ignored, as the limit would otherwise kill the process.
  {
    struct rlimit saved {};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = saved;
    small.rlim_cur = 1 << 20;  // 1 MiB: below the first 64 MiB reservation
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    BlockStore store(1 << 14, DType::F32, 0, dir);  // 64 KiB of K per block
    std::vector<float> k(1 << 14, 1.0f);
    std::string what;
    try {
      store.append(k.data(), k.data());
    } catch (const Error& e) {
      what = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    CHECK_THAT(what, Catch::Contains("cannot reserve") && Catch::Contains(dir));
    CHECK(store.size() == 0);
  }
  // Bad directories and sizes are errors naming the problem.
  CHECK_THROWS_WITH(BlockStore(4, DType::F32, 0, dir + "/missing"), Catch::Contains("is not a directory"));
  CHECK_THROWS_WITH(BlockStore(4, DType::F32, int64_t(1) << 62), Catch::Contains("capacity"));
  CHECK_THROWS_WITH(BlockStore(int64_t(1) << 62, DType::F32), Catch::Contains("block size"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("inference: block K/V on disk give the same logits as in RAM", "[infer]") {
  auto model = make_model(DType::F32);
  std::vector<int32_t> raw = random_raw(150, 11);
  InferConfig c;
  c.chunk_len = 30;
  c.k = 3;
  Tensor in_ram = InferenceSession(*model, c, kLandmarkId).feed(raw);
  const std::string dir = scratch_dir("lm_test_disk");
  c.block_dir = dir;
  InferenceSession on_disk(*model, c, kLandmarkId);
  CHECK(max_abs_diff(on_disk.feed(raw), in_ram) == 0);
  CHECK(on_disk.cached_blocks() > 3);  // more blocks than k: retrieval chose among them
  // read() keeps only the last row of what feed() returns, bit for bit (same chunks, same math).
  Tensor last = InferenceSession(*model, c, kLandmarkId).read(raw);
  REQUIRE(last.shape() == std::vector<int64_t>{1, in_ram.size(1)});
  CHECK(max_abs_diff(last, in_ram.narrow(0, in_ram.size(0) - 1, 1)) == 0);
  CHECK_THROWS_WITH(InferenceSession(*model, c, kLandmarkId).read({}), Catch::Contains("at least one token"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("block store in f16: half the bytes, every value the nearest half, in RAM and on disk", "[infer]") {
  // Independent of the store: each float read back must be the half closest to what went in
  // (relative error at most 2^-11 for normal halves), and the store holds 2 bytes per element.
  const std::string dir = scratch_dir("lm_test_f16");
  for (const std::string& where : {std::string(), dir}) {
    INFO((where.empty() ? "RAM" : "disk"));
    BlockStore half(6, DType::F32, 3, where, true), full(6, DType::F32, 3, where);
    CHECK(half.bytes_per_block() * 2 == full.bytes_per_block());
    CHECK(half.needs_fetch());
    std::vector<std::vector<float>> ks;
    for (int b = 0; b < 5; ++b) {  // 5 blocks into a ring of 3: blocks 2, 3, 4 stay
      std::vector<float> k = {0.1f * float(b), -3.14159f, 1e-6f, 700.123f + float(b), 1e5f, -2e-8f};
      std::vector<float> v(6, 0.333333f * float(b + 1));
      half.append(k.data(), v.data());
      ks.push_back(k);
    }
    CHECK_THROWS_WITH(half.k(0), Catch::Contains("not fetched"));
    half.fetch({0, 2});
    for (int32_t i : {0, 2}) {
      const float* k = static_cast<const float*>(half.k(i));
      const float* v = static_cast<const float*>(half.v(i));
      const std::vector<float>& want = ks[static_cast<size_t>(i + 2)];
      for (int e = 0; e < 6; ++e) {
        const float w = want[static_cast<size_t>(e)];
        if (std::fabs(w) > 65504.0f) {
          CHECK(k[e] == std::copysign(65504.0f, w));  // saturated, not infinite
        } else if (std::fabs(w) >= 6.1035156e-05f) {
          CHECK(std::fabs(k[e] - w) <= std::fabs(w) * 0x1p-11f);  // normal range: 11 significant bits
        } else {
          CHECK(std::fabs(k[e] - w) <= 0x1p-25f);  // subnormal halves: steps of 2^-24
        }
      }
      CHECK(std::fabs(v[0] - 0.333333f * float(i + 3)) <= 0.333333f * float(i + 3) * 0x1p-11f);
    }
  }
  CHECK_THROWS_WITH(BlockStore(4, DType::F64, 0, "", true), Catch::Contains("f16 storage converts from f32"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("inference: block K/V in f16 stay within f16 rounding of f32 logits", "[infer]") {
  // f16 keeps 11 significant bits of each cached K and V; the logits of a small random model move
  // by a fraction of that: 3.0e-4 at most here. The bound 2e-3 (absolute, logits of order 1)
  // leaves room for other compilers' rounding; a broken conversion (a wrong exponent, K and V
  // swapped) moves logits by far more. With no block in the store nothing may change at all.
  auto model = make_model(DType::F32);
  std::vector<int32_t> raw = random_raw(150, 11);
  InferConfig c;
  c.chunk_len = 30;
  c.k = 3;
  Tensor f32 = InferenceSession(*model, c, kLandmarkId).feed(raw);
  InferConfig h = c;
  h.kv_f16 = true;
  InferenceSession session(*model, h, kLandmarkId);
  Tensor f16 = session.feed(raw);
  CHECK(session.cached_blocks() > 3);
  const double diff = max_abs_diff(f16, f32);
  CHECK(diff > 0);  // the stored blocks were read back through f16
  CHECK(diff < 2e-3);
  std::vector<int32_t> short_raw(raw.begin(), raw.begin() + 25);  // one chunk: no block is ever cached
  CHECK(max_abs_diff(InferenceSession(*model, h, kLandmarkId).feed(short_raw),
                     InferenceSession(*model, c, kLandmarkId).feed(short_raw)) == 0);
}

TEST_CASE("inference: bad configurations and models are refused", "[infer]") {
  auto model = make_model(DType::F32);
  InferConfig c;
  c.chunk_len = 0;
  CHECK_THROWS_WITH(InferenceSession(*model, c, kLandmarkId), Catch::Contains("chunk length"));
  c.chunk_len = 10;
  CHECK_THROWS_WITH(InferenceSession(*model, c, 99), Catch::Contains("landmark id 99"));
  InferenceSession s(*model, c, kLandmarkId);
  CHECK_THROWS_WITH(s.feed_chunk(std::vector<int32_t>(11, 1)), Catch::Contains("chunk length"));
  CHECK_THROWS_WITH(s.feed({77}), Catch::Contains("token 77"));
  // A k whose stingy slots would need millions of rotary positions is refused up front, naming k
  // (it once allocated gigabytes for a 5-token prompt); exact positions do not use the slots.
  c.k = 1000000;
  CHECK_THROWS_WITH(InferenceSession(*model, c, kLandmarkId), Catch::Contains("k 1000000"));
  c.k = std::numeric_limits<int64_t>::max();
  CHECK_THROWS_WITH(InferenceSession(*model, c, kLandmarkId), Catch::Contains("stingy positions"));
  c.positions = PositionMode::Exact;
  InferenceSession exact(*model, c, kLandmarkId);
  CHECK(exact.feed({1, 2, 3}).size(0) == 3);
}

TEST_CASE("inference: decoding gives the same bits whether its loops run on one thread or split", "[infer]") {
  // The decode path splits per-head rows, GEMVs and score products across threads only above the
  // parallel grain (tensor/cpu/parallel.h); every split must give bit-identical logits.
  auto model = make_model(DType::F32);
  std::vector<int32_t> raw = random_raw(90, 21);
  InferConfig cfg;
  cfg.chunk_len = 1;  // token by token, like generation
  cfg.k = 2;
  const int64_t saved = cpu::parallel_grain();
  auto run = [&](int64_t grain) {
    cpu::set_parallel_grain(grain);
    InferenceSession s(*model, cfg, kLandmarkId);
    return values(s.feed(raw));
  };
  std::vector<double> serial = run(int64_t(1) << 40), split = run(1);
  cpu::set_parallel_grain(saved);
  CHECK(serial == split);
}

TEST_CASE("retrieval scores: the CPU loop equals the tensor ops (stingy and exact, f64 and f32)", "[infer][retrieval]") {
  // A layer cache holding 5 blocks (NH 2, F 3, HS 8), random keys; 3 queries. The tensor path
  // (rotary op + matmul + mul) is the independent answer for the CPU loop's in-place rescoring.
  for (DType dt : {DType::F64, DType::F32}) {
    const int64_t NH = 2, F = 3, HS = 8, blocks = 5, L = blocks * (F + 1) + 2;
    manual_seed(31);
    Tensor k = randn({NH, L, HS}, dt), v = randn({NH, L, HS}, dt), q = randn({NH, 3, HS}, dt);
    std::vector<int32_t> kinds(static_cast<size_t>(L), kRegular);
    for (int64_t j = F; j < blocks * (F + 1); j += F + 1) kinds[j] = kLandmark;
    RotaryCache rope(HS, 10000.0, dt, Device::CPU);
    for (PositionMode pm : {PositionMode::Stingy, PositionMode::Exact}) {
      LayerCache cache(NH, F, HS, dt, 0, "");
      REQUIRE(cache.absorb(k, v, kinds, rope, pm, 0) == blocks);
      ChunkContext ctx;
      ctx.F = F;
      ctx.k = 2;
      ctx.positions = pm;
      ctx.blocks_done = blocks;
      ctx.rope = &rope;
      Tensor loop = retrieval_scores(cache, ctx, q, true), ops = retrieval_scores(cache, ctx, q, false);
      REQUIRE(loop.shape() == Shape{NH, 3, blocks});
      // Same rotation and scale; only the dot product's summation order may differ: f64 1e-13,
      // f32 1e-5 (scores of size ~3, a few f32 ulps).
      CHECK(max_abs_diff(loop, ops) < (dt == DType::F64 ? 1e-13 : 1e-5));
    }
  }
}

TEST_CASE("layer cache: landmark keys kept through buffer growth and a capacity, CPU scores equal the tensor ops",
          "[infer][retrieval]") {
  // 30 chunks of 3 blocks each (NH 2, F 3, HS 8) into a cache that keeps 7 blocks: the key buffers
  // grow and drop their oldest columns many times. The keys held must be the newest 7 landmark
  // keys fed, in order (the independent answer: our own list of every landmark key), and the
  // CPU scores (one GEMM per head into the buffers) must equal the tensor ops on the views.
  const int64_t NH = 2, F = 3, HS = 8, per = 3, L = per * (F + 1), keep = 7;
  for (DType dt : {DType::F64, DType::F32}) {
    manual_seed(41);
    RotaryCache rope(HS, 10000.0, dt, Device::CPU);
    LayerCache cache(NH, F, HS, dt, keep, "");
    std::vector<int32_t> kinds(static_cast<size_t>(L), kRegular);
    for (int64_t j = F; j < L; j += F + 1) kinds[j] = kLandmark;
    std::vector<Tensor> fed;  // every landmark key, (NH, 1, HS), rotated at position F (stingy slot 0)
    for (int c = 0; c < 30; ++c) {
      Tensor k = randn({NH, L, HS}, dt), v = randn({NH, L, HS}, dt);
      for (int64_t j = F; j < L; j += F + 1)
        fed.push_back(rotary(k.narrow(1, j, 1).unsqueeze(0), rope.range(F, 1)).squeeze(0).contiguous());
      REQUIRE(cache.absorb(k, v, kinds, rope, PositionMode::Stingy, c * per) == per);
      const int64_t held = std::min<int64_t>(keep, static_cast<int64_t>(fed.size()));
      REQUIRE(cache.key_count == held);
      std::vector<Tensor> newest(fed.end() - held, fed.end());
      CHECK(max_abs_diff(cache.landmark_keys_rot_t().transpose(1, 2), concat(newest, 1)) == 0);
      // Read in place, as the CPU rows read them: the same values.
      for (int64_t h = 0; h < NH; ++h)
        for (int64_t b = 0; b < held; ++b) {
          const std::vector<double> want = newest[b].select(0, h).reshape({HS}).to_double_vector();
          LM_DISPATCH_FLOAT(dt, "test", {
            int64_t stride = 0;
            const scalar_t* got = cache.scored_key<scalar_t>(h, b, &stride);
            for (int64_t d = 0; d < HS; ++d) REQUIRE(static_cast<double>(got[d * stride]) == want[d]);
          });
        }
    }
    CHECK(cache.key_capacity >= keep);
    ChunkContext ctx;
    ctx.F = F;
    ctx.k = 2;
    ctx.blocks_done = 30 * per;
    ctx.rope = &rope;
    Tensor q = randn({NH, 5, HS}, dt);
    Tensor loop = retrieval_scores(cache, ctx, q, true), ops = retrieval_scores(cache, ctx, q, false);
    REQUIRE(loop.shape() == Shape{NH, 5, keep});
    CHECK(max_abs_diff(loop, ops) < (dt == DType::F64 ? 1e-13 : 1e-5));  // as in the test above
  }
}

TEST_CASE("layer cache: blocks keep their F regular tokens, landmark keys are kept once and rotated on for gates",
          "[infer][retrieval]") {
  // 3 blocks (NH 2, F 3, HS 8) absorbed in stingy and in exact mode. Independent answers: the
  // K/V slices of the input (the store must hold the regular tokens' K transposed and V as they
  // were, and nothing of the landmark), and the landmark key rotated directly at the gate's
  // position by the rotary op (the cache keeps it rotated once, at its scoring position, and turns it
  // on from there, which may differ in the last bits: 1e-12 in f64, 1e-5 in f32 on keys of size
  // ~1). gate_keys (the tensor ops the CUDA rows use) must give what the CPU rows compute from
  // scored_key with rotate_key_on, bit for bit: both are nnmath::rotate_pair's arithmetic.
  const int64_t NH = 2, F = 3, HS = 8, nb = 3, L = nb * (F + 1);
  for (DType dt : {DType::F64, DType::F32}) {
    for (PositionMode pm : {PositionMode::Stingy, PositionMode::Exact}) {
      INFO(dtype_name(dt) << (pm == PositionMode::Stingy ? " stingy" : " exact"));
      manual_seed(77);
      RotaryCache rope(HS, 10000.0, dt, Device::CPU);
      LayerCache cache(NH, F, HS, dt, 0, "");
      std::vector<int32_t> kinds(static_cast<size_t>(L), kRegular);
      for (int64_t j = F; j < L; j += F + 1) kinds[j] = kLandmark;
      const Tensor k = randn({NH, L, HS}, dt), v = randn({NH, L, HS}, dt);
      const int64_t first_gid = 5;  // as if 5 blocks were absorbed before (exact positions count from there)
      REQUIRE(cache.absorb(k, v, kinds, rope, pm, first_gid) == nb);
      CHECK(cache.store->bytes_per_block() == 2 * NH * F * HS * static_cast<int64_t>(dtype_size(dt)));
      for (int64_t b = 0; b < nb; ++b) {
        Tensor kb({NH, HS, F}, dt), vb({NH, F, HS}, dt);
        std::memcpy(kb.raw_data(), cache.store->k(b), static_cast<size_t>(NH * HS * F) * dtype_size(dt));
        std::memcpy(vb.raw_data(), cache.store->v(b), static_cast<size_t>(NH * F * HS) * dtype_size(dt));
        CHECK(max_abs_diff(kb, k.narrow(1, b * (F + 1), F).transpose(1, 2)) == 0);
        CHECK(max_abs_diff(vb, v.narrow(1, b * (F + 1), F)) == 0);
      }
      // Gates of blocks 2, 0, 2 at places 0, 8, 4 (stingy slots), or at their true places (exact).
      const std::vector<int32_t> blocks{2, 0, 2};
      std::vector<int32_t> places, turns;
      for (size_t p = 0; p < blocks.size(); ++p) {
        const int64_t place = pm == PositionMode::Stingy ? std::vector<int64_t>{0, 8, 4}[p] : (first_gid + blocks[p]) * (F + 1);
        places.push_back(static_cast<int32_t>(place));
        turns.push_back(static_cast<int32_t>(gate_turn(pm, place)));
      }
      const Tensor gates = cache.gate_keys(blocks, turns, rope);  // (3, NH, 1, HS)
      REQUIRE(gates.shape() == Shape{3, NH, 1, HS});
      for (size_t p = 0; p < blocks.size(); ++p) {
        const Tensor raw = k.narrow(1, blocks[p] * (F + 1) + F, 1).unsqueeze(0);  // (1, NH, 1, HS)
        const Tensor want = rotary(raw, rope.range(places[p] + F, 1)).squeeze(0);        // (NH, 1, HS)
        CHECK(max_abs_diff(gates.select(0, static_cast<int64_t>(p)), want) < (dt == DType::F64 ? 1e-12 : 1e-5));
        LM_DISPATCH_FLOAT(dt, "test", {
          for (int64_t h = 0; h < NH; ++h) {
            int64_t stride = 0;
            const scalar_t* key = cache.scored_key<scalar_t>(h, blocks[p], &stride);
            std::vector<scalar_t> mine(static_cast<size_t>(HS));
            rotate_key_on(key, stride, rope.cos_rows<scalar_t>(turns[p], 1), rope.sin_rows<scalar_t>(turns[p], 1), 1, HS,
                          mine.data());
            const std::vector<double> got = gates.select(0, static_cast<int64_t>(p)).select(0, h).reshape({HS}).to_double_vector();
            for (int64_t d = 0; d < HS; ++d) REQUIRE(got[d] == static_cast<double>(mine[d]));
          }
        });
      }
    }
  }
}

TEST_CASE("retrieval plan: scoring and choosing in pieces gives the two-step scan's blocks (beyond one piece)",
          "[infer][retrieval]") {
  // 2600 cached blocks (more than two of plan_retrieval's 1024-block pieces) and 7 queries, NH 2,
  // F 3, HS 8; the independent answer: select_blocks over the whole score matrix of
  // retrieval_scores (its CPU loop, checked against the tensor ops above). Stingy and exact
  // positions; k 1, 4 and 9; f32 and f64. Keys repeat in groups of 13 so that ties are common.
  const int64_t NH = 2, F = 3, HS = 8, blocks = 2600, L = blocks * (F + 1), n = 7;
  for (DType dt : {DType::F32, DType::F64}) {
    manual_seed(53);
    Tensor k = randn({NH, 13 * (F + 1), HS}, dt);
    std::vector<Tensor> reps(static_cast<size_t>(blocks / 13), k);
    k = concat(reps, 1);
    Tensor v = randn({NH, L, HS}, dt), q = randn({NH, n, HS}, dt);
    std::vector<int32_t> kinds(static_cast<size_t>(L), kRegular);
    for (int64_t j = F; j < L; j += F + 1) kinds[j] = kLandmark;
    RotaryCache rope(HS, 10000.0, dt, Device::CPU);
    for (PositionMode pm : {PositionMode::Stingy, PositionMode::Exact}) {
      LayerCache cache(NH, F, HS, dt, 0, "");
      REQUIRE(cache.absorb(k, v, kinds, rope, pm, 0) == blocks);
      for (int64_t kk : {1, 4, 9}) {
        ChunkContext ctx;
        ctx.F = F;
        ctx.k = kk;
        ctx.positions = pm;
        ctx.blocks_done = blocks;
        ctx.rope = &rope;
        const Tensor scores = retrieval_scores(cache, ctx, q, true).contiguous();
        std::vector<std::vector<int32_t>> want;
        if (dt == DType::F32) want = select_blocks<float>(scores.data<float>(), NH, n, blocks, kk, Granularity::TokenHead);
        else want = select_blocks<double>(scores.data<double>(), NH, n, blocks, kk, Granularity::TokenHead);
        const RetrievalPlan plan = plan_retrieval(cache, ctx, q);
        INFO((dt == DType::F32 ? "f32" : "f64") << " positions " << (pm == PositionMode::Stingy ? "stingy" : "exact")
                                                << " k " << kk);
        CHECK(plan.sel == want);
        CHECK(plan.keys_scored == NH * n * blocks);
        for (size_t r = 0; r < plan.sel.size(); ++r) CHECK(plan.places[r].size() == plan.sel[r].size());
      }
    }
  }
}

TEST_CASE("retrieval log: the unique-block count (Appendix C) on cases with a known answer", "[infer][retrieval]") {
  auto model = make_model(DType::F64);
  std::vector<int32_t> raw = random_raw(80, 41);
  // Every block retrieved by every query: unique == cached in every record.
  InferenceSession all(*model, exact_all(20), kLandmarkId);
  all.feed(raw);
  for (const RetrievalRecord& r : all.retrieval_log()) CHECK(r.unique == r.cached);
  // k = 1 shared by each head across its chunk: at most one block per head (2 heads).
  InferConfig one;
  one.chunk_len = 20;
  one.k = 1;
  one.granularity = Granularity::Head;
  InferenceSession s(*model, one, kLandmarkId);
  s.feed(raw);
  bool some = false;
  for (const RetrievalRecord& r : s.retrieval_log()) {
    CHECK(r.unique <= std::min<int64_t>(2, r.cached));
    some = some || r.unique > 0;
  }
  CHECK(some);
}
