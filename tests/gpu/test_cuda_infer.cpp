// test_cuda_infer.cpp: cached chunked inference with the model on CUDA equals the same session on
// the CPU (the oracle; tests/test_infer.cpp checks the CPU against the one-shot forward): exact
// positions with every block retrieved (also equal to one_shot_logits), stingy positions with k
// below the cache at each granularity, no retrieval (k = 0), a capacity, captured attention rows,
// the block store on disk, repeated runs, and a model with a context-miss token (cutoff, drop
// counts). Not a test of the retrieval math itself.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gpu_compare.h"
#include "infer/cuda/chunk_attention.h"
#include "evals/eval.h"
#include "beyond/full_cache.h"
#include "infer/session.h"
#include "tests/infer_fixtures.h"
#include "nn/gpt.h"
#include "landmark/retrieval.h"
#include "tensor/create.h"
#include "tensor/rng.h"

using namespace lm;
using namespace lm::gputest;

namespace {
using infer_test::exact_all;
using infer_test::kCmtId;
using infer_test::kLandmarkId;
using infer_test::make_cmt_model;
using infer_test::make_model;
using infer_test::random_raw;

// Tolerance on logits, absolute, scaled by the largest CPU logit (about 2.4 here). The devices
// differ only in summation orders outside the virtual rows (cuBLAS against the CPU GEMM in the
// dense layers and the retrieval scores) and in exp (CUDA's against glibc's, a few ulps); the
// rows themselves run the same dot order and row function, unfused on both. Measured on the CPU
// with these weights, one device's own rounding error is 3.6e-7 of the largest logit in f32 (f32
// session against f64 session) and chunked against one-shot differs by 3.1e-7 (f32) and 6.7e-16
// (f64). Two devices may each be off by that much: 1e-5 (f32) and 1e-12 (f64) leave a wide
// margin, while a wrong block, place, key set or layout row moves logits by more than 1e-2.
double logit_atol(DType dt, const Tensor& cpu_logits) {
  const double scale = std::max(1.0, max(cpu_logits.reshape({-1}), 0).item());
  return (dt == DType::F32 ? 1e-5 : 1e-12) * scale;
}

struct Run {
  Tensor logits;
  std::vector<RetrievalRecord> log;
  AttentionCapture capture;
  int64_t cached = 0;
};

// Feeds `raw` through a session on `model`, capturing one (layer, head) when `capture_layer` >= 0.
Run run_session(const GPT& model, const InferConfig& cfg, const std::vector<int32_t>& raw, int64_t capture_layer = -1,
                int64_t capture_head = 0) {
  Run r;
  InferenceSession s(model, cfg, kLandmarkId, model.config().context_miss ? kCmtId : -1);
  r.capture.layer = capture_layer;
  r.capture.head = capture_head;
  if (capture_layer >= 0) s.set_capture(&r.capture);
  r.logits = s.feed(raw);
  r.log = s.retrieval_log();
  r.cached = s.cached_blocks();
  return r;
}

// Same logits (within atol), same retrieval statistics, same captured rows (keys and retrieved
// blocks exactly, weights within wtol): `got`, a CUDA run, retrieved what `oracle` (a CPU run, or
// an earlier CUDA run) retrieved.
void require_same_run(const Run& oracle, const Run& got, double atol, double wtol, const std::string& what) {
  require_close(oracle.logits.to(Device::CPU), got.logits, 0.0, atol, what + ": logits");
  CHECK(oracle.cached == got.cached);
  REQUIRE(oracle.log.size() == got.log.size());
  for (size_t e = 0; e < oracle.log.size(); ++e) {
    INFO(what << ": retrieval record " << e);
    CHECK(oracle.log[e].cached == got.log[e].cached);
    CHECK(oracle.log[e].unique == got.log[e].unique);
    CHECK(oracle.log[e].queries == got.log[e].queries);
    CHECK(oracle.log[e].fetched == got.log[e].fetched);
    CHECK(oracle.log[e].cmt_rows == got.log[e].cmt_rows);
  }
  REQUIRE(oracle.capture.rows.size() == got.capture.rows.size());
  for (size_t e = 0; e < oracle.capture.rows.size(); ++e) {
    const AttentionCapture::Row &want = oracle.capture.rows[e], &row = got.capture.rows[e];
    INFO(what << ": captured row " << e << " (query " << want.query << ")");
    REQUIRE(want.query == row.query);
    REQUIRE(want.retrieved == row.retrieved);
    REQUIRE(want.keys == row.keys);
    REQUIRE(want.weights.size() == row.weights.size());
    double worst = 0;
    for (size_t j = 0; j < want.weights.size(); ++j) worst = std::max(worst, std::fabs(want.weights[j] - row.weights[j]));
    CHECK(worst <= wtol);
  }
}
}  // namespace

TEST_CASE("cuda inference: exact positions with every block retrieved equal the CPU and the one-shot forward",
          "[cuda][infer]") {
  for (DType dt : {DType::F64, DType::F32}) {
    INFO(dtype_name(dt));
    auto cpu_model = make_model(dt, Device::CPU);
    auto gpu_model = make_model(dt, kGpu);
    const std::vector<int32_t> raw = random_raw(123, 7);
    const Tensor ref = one_shot_logits(*cpu_model, raw, kLandmarkId);
    const Tensor ref_gpu = one_shot_logits(*gpu_model, raw, kLandmarkId);
    require_close(ref, ref_gpu, 0.0, logit_atol(dt, ref), "one_shot_logits");
    for (int64_t chunk : {123, 37, 5, 1}) {  // 37 and 1 split blocks across chunks; 123 is one chunk
      INFO("chunk " << chunk);
      const Run cpu = run_session(*cpu_model, exact_all(chunk), raw);
      const Run gpu = run_session(*gpu_model, exact_all(chunk), raw);
      REQUIRE(gpu.logits.device() == kGpu);  // logits stay on the model's device
      require_same_run(cpu, gpu, logit_atol(dt, cpu.logits), 0.0, "exact, all blocks");
      // The oracle of DESIGN section 4, on the device: chunked = one-shot.
      require_close(ref, gpu.logits, 0.0, logit_atol(dt, ref), "cuda session vs one_shot_logits");
      CHECK(gpu.cached == 123 / 5);
    }
  }
}

TEST_CASE("cuda inference: stingy positions with k below the cache, at every granularity", "[cuda][infer]") {
  // f64 only: with k < cached a near-tie between two landmark scores could pick different blocks
  // on the two devices in f32 (their retrieval GEMMs round differently), which is not a bug.
  auto cpu_model = make_model(DType::F64, Device::CPU);
  auto gpu_model = make_model(DType::F64, kGpu);
  const std::vector<int32_t> raw = random_raw(200, 10);
  for (Granularity g : {Granularity::TokenHead, Granularity::Token, Granularity::Head}) {
    INFO(granularity_name(g));
    InferConfig c;
    c.chunk_len = 25;
    c.k = 2;  // up to 35 blocks cached: most queries place old blocks in the lowest slots
    c.granularity = g;
    for (int64_t head : {0, 1}) {
      const Run cpu = run_session(*cpu_model, c, raw, 1, head);
      const Run gpu = run_session(*gpu_model, c, raw, 1, head);
      // Weights in [0, 1], products of three f64 probabilities: 1e-12 is ~5000 ulps of margin.
      require_same_run(cpu, gpu, logit_atol(DType::F64, cpu.logits), 1e-12,
                       std::string("stingy k=2 ") + granularity_name(g));
    }
  }
  // Exact positions with k below the cache, layer 0 captured, chunks of one token.
  InferConfig c = exact_all(1);
  c.k = 3;
  const Run cpu = run_session(*cpu_model, c, std::vector<int32_t>(raw.begin(), raw.begin() + 70), 0, 1);
  const Run gpu = run_session(*gpu_model, c, std::vector<int32_t>(raw.begin(), raw.begin() + 70), 0, 1);
  require_same_run(cpu, gpu, logit_atol(DType::F64, cpu.logits), 1e-12, "exact k=3, chunk 1");
}

TEST_CASE("cuda inference: capacity, no retrieval, and repeated runs", "[cuda][infer]") {
  auto cpu_model = make_model(DType::F64, Device::CPU);
  auto gpu_model = make_model(DType::F64, kGpu);
  const std::vector<int32_t> raw = random_raw(200, 10);
  InferConfig c;
  c.chunk_len = 25;
  c.k = 2;
  c.capacity = 6;  // the ring drops blocks every chunk; landmark keys on the device must follow
  const Run cpu = run_session(*cpu_model, c, raw, 1, 0);
  const Run gpu = run_session(*gpu_model, c, raw, 1, 0);
  require_same_run(cpu, gpu, logit_atol(DType::F64, cpu.logits), 1e-12, "capacity 6");
  CHECK(gpu.cached == 6);
  // k = 0: rows hold only [tail | chunk]; nothing is staged.
  c.k = 0;
  const Run cpu0 = run_session(*cpu_model, c, raw);
  require_same_run(cpu0, run_session(*gpu_model, c, raw), logit_atol(DType::F64, cpu0.logits), 0.0, "k = 0");
  // No atomics, fixed orders: a second GPU run gives the same bits, captured weights included.
  c.k = 2;
  const Run again = run_session(*gpu_model, c, raw, 1, 0);
  require_same_run(gpu, again, 0.0, 0.0, "second cuda run");
}

TEST_CASE("cuda inference: block K/V in a file on disk give the same logits as in RAM", "[cuda][infer]") {
  auto cpu_model = make_model(DType::F64, Device::CPU);
  auto gpu_model = make_model(DType::F64, kGpu);
  const std::vector<int32_t> raw = random_raw(150, 11);
  InferConfig c;
  c.chunk_len = 30;
  c.k = 3;
  const Run in_ram = run_session(*gpu_model, c, raw);
  const std::string dir = (std::filesystem::temp_directory_path() / "lm_test_cuda_blocks").string();
  std::filesystem::create_directories(dir);
  c.block_dir = dir;
  const Run on_disk = run_session(*gpu_model, c, raw);
  require_equal(in_ram.logits.to(Device::CPU), on_disk.logits, "cuda: disk vs RAM");  // same bytes staged
  const Run cpu = run_session(*cpu_model, c, raw);
  require_same_run(cpu, on_disk, logit_atol(DType::F64, cpu.logits), 0.0, "cuda disk vs cpu disk");
}

TEST_CASE("cuda inference: block K/V kept on the device give the same logits as offloaded to the host",
          "[cuda][infer]") {
  // The same blocks reach the same kernel either way (a gather kernel instead of a host staging
  // copy), so every logit and captured weight must be equal, not close. The capacity runs make the
  // device ring evict and reuse cells.
  for (DType dt : {DType::F64, DType::F32}) {
    INFO(dtype_name(dt));
    auto gpu_model = make_model(dt, kGpu);
    const std::vector<int32_t> raw = random_raw(200, 12);
    for (int64_t capacity : {0, 6}) {
      for (PositionMode pm : {PositionMode::Stingy, PositionMode::Exact}) {
        INFO("capacity " << capacity << ", " << (pm == PositionMode::Stingy ? "stingy" : "exact"));
        InferConfig c;
        c.chunk_len = 25;
        c.k = 2;
        c.capacity = capacity;
        c.positions = pm;
        const Run host = run_session(*gpu_model, c, raw, 1, 0);
        c.blocks_on_device = true;
        const Run device = run_session(*gpu_model, c, raw, 1, 0);
        require_same_run(host, device, 0.0, 0.0, "blocks on the device vs offloaded");
        CHECK(device.cached == (capacity > 0 ? capacity : 200 / 5));
      }
    }
  }
  // Decoding token by token (one-token chunks, the generate path).
  auto gpu_model = make_model(DType::F64, kGpu);
  const std::vector<int32_t> raw = random_raw(60, 13);
  InferConfig c;
  c.chunk_len = 1;
  c.k = 3;
  const Run host = run_session(*gpu_model, c, raw);
  c.blocks_on_device = true;
  require_same_run(host, run_session(*gpu_model, c, raw), 0.0, 0.0, "one-token chunks, blocks on the device");
  // Refused combinations name the problem.
  c.block_dir = std::filesystem::temp_directory_path().string();
  REQUIRE_THROWS_WITH(InferenceSession(*gpu_model, c, kLandmarkId), Catch::Contains("neither in files"));
}

TEST_CASE("cuda inference: block K/V moved from the device to the host mid-stream give the same logits as offloaded "
          "from the start", "[cuda][infer]") {
  // move_blocks_to_host copies every slot's bytes; the blocks then reach the kernel through the
  // host staging path, as in a session that offloaded from the start. So every logit is equal,
  // not close. The capacity run moves a ring that has already evicted (its cells reused out of
  // order), and the store keeps growing and evicting on the host afterwards.
  for (DType dt : {DType::F64, DType::F32}) {
    for (int64_t capacity : {0, 6}) {
      INFO(dtype_name(dt) << ", capacity " << capacity);
      auto gpu_model = make_model(dt, kGpu);
      const std::vector<int32_t> raw = random_raw(260, 14);
      const std::vector<int32_t> prompt(raw.begin(), raw.begin() + 180), rest(raw.begin() + 180, raw.end());
      InferConfig c;
      c.chunk_len = 25;
      c.k = 2;
      c.capacity = capacity;
      InferenceSession host(*gpu_model, c, kLandmarkId);
      c.blocks_on_device = true;
      InferenceSession moved(*gpu_model, c, kLandmarkId);
      require_equal(host.feed(prompt).to(Device::CPU), moved.feed(prompt), "the prompt, before the move");
      REQUIRE(moved.cached_blocks() == host.cached_blocks());
      moved.move_blocks_to_host();
      CHECK_FALSE(moved.config().blocks_on_device);
      moved.move_blocks_to_host();  // a second call: nothing left to move
      require_equal(host.feed(rest).to(Device::CPU), moved.feed(rest), "after the move, in chunks");
      for (int32_t t : {3, 1, 4, 1, 5, 9, 2, 6})  // one-token chunks, the generate path
        require_equal(host.feed_chunk({t}).to(Device::CPU), moved.feed_chunk({t}), "after the move, one token");
      CHECK(moved.cached_blocks() == (capacity > 0 ? capacity : host.cached_blocks()));
      CHECK(moved.cached_blocks() == host.cached_blocks());
    }
  }
}

#ifdef LANDMARK_WITH_CUDA  // top_k_rows exists only in a CUDA build (the other tests here use the public API)
TEST_CASE("cuda top_k_rows: the top k of each row equal select_blocks', ties and short rows included",
          "[cuda][infer][retrieval]") {
  // The independent answer: select_blocks on the host (landmark/retrieval.h; itself tested against
  // a full stable sort in tests/test_retrieval.cpp). Scores drawn from a few values, so that many
  // rows have ties across lanes and inside one lane's columns; widths below, at and far above the
  // 32 lanes; k from 1 to the device limit.
  manual_seed(21);
  for (int64_t nb : {1, 3, 31, 32, 33, 100, 2049}) {
    for (int64_t k : {int64_t(1), int64_t(2), int64_t(4), int64_t(16)}) {
      const int64_t kk = std::min(k, nb), rows = 37;
      INFO("nb " << nb << ", k " << kk);
      for (DType dt : {DType::F32, DType::F64}) {
        // values 0..6 (ties), plus below 1e-3 on wide rows (near-ties)
        const std::vector<double> u = rand({rows * nb}, DType::F64, Device::CPU, 0.0, 1.0).to_vector<double>();
        const std::vector<double> e = rand({rows * nb}, DType::F64, Device::CPU, 0.0, 1e-3).to_vector<double>();
        std::vector<double> v(u.size());
        for (size_t x = 0; x < v.size(); ++x) v[x] = std::floor(7 * u[x]) + (nb > 40 ? e[x] : 0.0);
        const Tensor scores = from_vector(v, {rows, nb}).to(dt);
        std::vector<std::vector<int32_t>> want;
        if (dt == DType::F32) want = select_blocks<float>(scores.data<float>(), 1, rows, nb, kk, Granularity::TokenHead);
        else want = select_blocks<double>(scores.data<double>(), 1, rows, nb, kk, Granularity::TokenHead);
        const std::vector<int32_t> got = cuda::top_k_rows(scores.to(kGpu), kk).to_vector<int32_t>();
        for (int64_t r = 0; r < rows; ++r) {
          INFO("row " << r);
          REQUIRE(std::vector<int32_t>(got.begin() + r * kk, got.begin() + (r + 1) * kk) == want[r]);
        }
      }
    }
  }
  REQUIRE_THROWS_WITH(cuda::top_k_rows(zeros({2, 40}, DType::F32, kGpu), cuda::kMaxDeviceTopK + 1),
                      Catch::Contains("top_k_rows"));
}
#endif

TEST_CASE("cuda inference: a model with a context-miss token equals the CPU (exact and stingy, with a cutoff)",
          "[cuda][infer][cmt]") {
  for (DType dt : {DType::F64, DType::F32}) {
    INFO(dtype_name(dt));
    auto cpu_model = make_cmt_model(dt, Device::CPU);
    auto gpu_model = make_cmt_model(dt, kGpu);
    const std::vector<int32_t> raw = random_raw(110, 18);
    // Exact positions, every block: also the one-shot forward with the cached landmarks controlled.
    const Tensor ref = one_shot_logits(*cpu_model, raw, kLandmarkId, 0, OneShotCmt{kCmtId, 23, 0.0});
    const Run gpu_all = run_session(*gpu_model, exact_all(23), raw, 1, 1);
    require_same_run(run_session(*cpu_model, exact_all(23), raw, 1, 1), gpu_all, logit_atol(dt, ref), dt == DType::F32 ? 1e-5 : 1e-12,
                     "CMT, exact, all blocks");
    require_close(ref, gpu_all.logits, 0.0, logit_atol(dt, ref), "CMT: cuda session vs one_shot_logits");
    for (double cutoff : {0.0, 0.3}) {
      INFO("cutoff " << cutoff);
      InferConfig c;
      c.chunk_len = 17;
      c.k = 2;
      c.cmt_cutoff = cutoff;
      const Run cpu = run_session(*cpu_model, c, raw), gpu = run_session(*gpu_model, c, raw);
      require_same_run(cpu, gpu, logit_atol(dt, cpu.logits), 0.0, "CMT, stingy, k 2");
      // Drop counts: a row whose S(CMT) lands within rounding of the cutoff may flip in f32.
      if (dt == DType::F64)
        for (size_t e = 0; e < cpu.log.size(); ++e) CHECK(cpu.log[e].cmt_dropped == gpu.log[e].cmt_dropped);
    }
  }
}

// make_model's shape with standard attention, from one seed on either device (matrices scaled by 8
// as make_model's).
std::unique_ptr<GPT> standard_model(DType dt, Device d) {
  GPTConfig c = make_model(DType::F32)->config();
  c.attention = AttentionKind::Standard;
  manual_seed(103);
  auto m = std::make_unique<GPT>(c);
  for (Var* p : m->parameters())
    if (p->dim() == 2) p->value().copy_(mul(p->value(), 8.0));
  m->to(dt);
  m->to(d);
  return m;
}

// `landmark eval --device cuda` (evals/eval.cpp): the same windows scored on both devices. Every
// per-token loss is a log-softmax entry, which moves by at most twice the largest change of a
// logit; the logits agree within logit_atol (above: 1e-5 in f32, 1e-12 in f64, times the largest
// logit, about 2.4 for this model). So each token's nats may differ by 2 * 1e-5 * 2.4 < 5e-5 in
// f32 (1e-11 in f64), and a window's sum by that times its tokens. A lost target, a wrong device
// or a misplaced block shifts the sums by far more.
TEST_CASE("cuda evaluation: perplexity equals the CPU's, landmark reading and a standard window", "[cuda][infer][eval]") {
  const int64_t L = 60, windows = 3;
  const std::vector<int32_t> tokens = random_raw(windows * L + 1, 31);
  InferConfig cfg;
  cfg.chunk_len = 25;
  cfg.k = 2;  // stingy positions, retrieval below the cache's size
  for (DType dt : {DType::F64, DType::F32}) {
    INFO(dtype_name(dt));
    const double per_token = dt == DType::F32 ? 5e-5 : 1e-11;
    auto cpu_model = make_model(dt, Device::CPU);
    auto gpu_model = make_model(dt, kGpu);
    const PerplexityResult c = evaluate_perplexity(*cpu_model, tokens, cfg, kLandmarkId, -1, L);
    const PerplexityResult g = evaluate_perplexity(*gpu_model, tokens, cfg, kLandmarkId, -1, L);
    REQUIRE(c.windows == windows);
    REQUIRE(g.windows == windows);
    require_close(from_vector(c.window_nll, {windows}), to_gpu(from_vector(g.window_nll, {windows})), 0.0,
                  per_token * static_cast<double>(L), "landmark model: nats per window");

    // A standard model reads each window whole (L <= its block size).
    auto std_cpu = standard_model(dt, Device::CPU), std_gpu = standard_model(dt, kGpu);
    const PerplexityResult cs = evaluate_perplexity(*std_cpu, tokens, cfg, -1, -1, L);
    const PerplexityResult gs = evaluate_perplexity(*std_gpu, tokens, cfg, -1, -1, L);
    REQUIRE(gs.windows == windows);
    require_close(from_vector(cs.window_nll, {windows}), to_gpu(from_vector(gs.window_nll, {windows})), 0.0,
                  per_token * static_cast<double>(L), "standard model: nats per window");
  }
}

// The full KV cache's generic step (beyond/full_cache.cpp), which a CUDA model takes: logits token
// by token equal the CPU's (its own generic step and its hand-written step) within the logit
// tolerance above, and after fill_random both devices hold the same numbers.
TEST_CASE("cuda full KV cache: token-by-token logits equal the CPU's", "[cuda][infer]") {
  auto cpu_model = standard_model(DType::F32, Device::CPU), gpu_model = standard_model(DType::F32, kGpu);
  const std::vector<int32_t> t = random_raw(40, 17);
  FullKVCache cpu(*cpu_model, 60), gpu(*gpu_model, 60);
  REQUIRE(gpu.tensor_ops());
  for (int32_t tok : t) {
    const Tensor c = cpu.step(tok), g = gpu.step(tok);
    REQUIRE(g.device() == kGpu);
    require_close(c, g, 0.0, logit_atol(DType::F32, c), "full cache step");
  }
  FullKVCache cpu_r(*cpu_model, 60), gpu_r(*gpu_model, 60);
  cpu_r.fill_random(30, 9);
  gpu_r.fill_random(30, 9);
  const Tensor c = cpu_r.step(5);
  require_close(c, gpu_r.step(5), 0.0, logit_atol(DType::F32, c), "full cache step after fill_random");
}
