// test_decode_step.cpp: the one-token decode step (beyond/decode_step.h) against the chunk path
// it replaces for a generated token. Both sessions read the same prompt through the chunk path,
// then decode the same tokens one at a time, one with decode_step and one without: the logits must
// be equal bit for bit and the retrieval records field for field, at every step. The oracle is the
// chunk path, itself held against the one-shot forward in test_infer.cpp. decode_steps() shows
// that the fast path really ran (a test that compared a path with itself could not fail).
#include "tests/helpers.h"

#include <filesystem>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "beyond/session.h"
#include "tensor/cpu/parallel.h"
#include "tests/infer_fixtures.h"

using namespace lm;
using namespace lm::test;

namespace {
using infer_test::kCmtId;
using infer_test::kLandmarkId;
using infer_test::random_raw;

// The two sessions' logits, step by step: every element equal (not within a tolerance: the decode
// step uses the chunk path's very sums).
void check_same(const Tensor& fast, const Tensor& slow) {
  REQUIRE(fast.shape() == slow.shape());
  const std::vector<double> a = values(fast), b = values(slow);
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  CHECK(differ == 0);
}

void check_same_records(const BeyondSession& fast, const BeyondSession& slow) {
  const auto& a = fast.retrieval_log();
  const auto& b = slow.retrieval_log();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("record " << i);
    CHECK(a[i].chunk == b[i].chunk);
    CHECK(a[i].layer == b[i].layer);
    CHECK(a[i].cached == b[i].cached);
    CHECK(a[i].unique == b[i].unique);
    CHECK(a[i].queries == b[i].queries);
    CHECK(a[i].fetched == b[i].fetched);
    CHECK(a[i].cmt_rows == b[i].cmt_rows);
    CHECK(a[i].cmt_dropped == b[i].cmt_dropped);
    CHECK(a[i].keys_scored == b[i].keys_scored);
    CHECK(a[i].budget_cut == b[i].budget_cut);
  }
}

// Reads a 60-token prompt in chunks of 13 (blocks split across chunks), then decodes 40 tokens one
// by one in both sessions; returns how many went through decode_step.
int64_t run_pair(const GPT& model, BeyondConfig cfg, int32_t cmt_id = -1) {
  cfg.decode_step = true;
  BeyondSession fast(model, cfg, kLandmarkId, cmt_id);
  cfg.decode_step = false;
  BeyondSession slow(model, cfg, kLandmarkId, cmt_id);
  const std::vector<int32_t> prompt = random_raw(60, 11), next = random_raw(40, 12);
  check_same(fast.feed(prompt), slow.feed(prompt));
  for (size_t i = 0; i < next.size(); ++i) {
    INFO("decoded token " << i);
    check_same(fast.feed_chunk({next[i]}), slow.feed_chunk({next[i]}));
  }
  check_same_records(fast, slow);
  CHECK(slow.decode_steps() == 0);
  return fast.decode_steps();
}

// Runs body with T OpenMP threads and a parallel grain of 1, then puts both back: decode_step
// uses its threads only when a C x C product reaches the grain (CTest runs with sleeping threads,
// grain 2^18, and this model has C = 16), and the threaded path is the one to test.
template <class Fn> void with_threads(int T, Fn&& body) {
  const int64_t grain = cpu::parallel_grain();
  cpu::set_parallel_grain(1);
#ifdef _OPENMP
  const int before = omp_get_max_threads();
  omp_set_num_threads(T);
  body();
  omp_set_num_threads(before);
#else
  (void)T;
  body();
#endif
  cpu::set_parallel_grain(grain);
}

BeyondConfig config(int64_t chunk, int64_t k, PositionMode positions) {
  BeyondConfig c;
  c.chunk_len = chunk;
  c.k = k;
  c.positions = positions;
  return c;
}
}  // namespace

TEST_CASE("decode_step: bit-equal to the chunk path (stingy and exact, k, capacity, threads, f32/f64)", "[decode_step]") {
  // After 60 prompt tokens (12 whole blocks, F = 5), 8 of the 40 decoded tokens complete a block
  // (a chunk of two: the token and a landmark) and take the chunk path; the other 32 decode_step.
  for (DType dt : {DType::F32, DType::F64}) {
    auto model = infer_test::make_model(dt);
    for (int T : {1, 2, 3}) {
      for (PositionMode pm : {PositionMode::Stingy, PositionMode::Exact}) {
        for (int64_t k : {0, 1, 2, 1000}) {
          INFO(dtype_name(dt) << ", " << T << " thread(s), " << position_mode_name(pm) << ", k " << k);
          with_threads(T, [&] { CHECK(run_pair(*model, config(13, k, pm)) == 32); });
        }
      }
      BeyondConfig ring = config(13, 2, PositionMode::Stingy);
      ring.capacity = 3;  // a ring of 3 blocks: the oldest evicted while decoding
      INFO(dtype_name(dt) << ", " << T << " thread(s), capacity 3");
      with_threads(T, [&] { CHECK(run_pair(*model, ring) == 32); });
    }
  }
}

TEST_CASE("decode_step: a context-miss token and its cutoff, as the chunk path", "[decode_step]") {
  auto model = infer_test::make_cmt_model(DType::F32);
  for (double cutoff : {0.0, 0.3, 0.9}) {
    BeyondConfig c = config(13, 2, PositionMode::Stingy);
    c.cmt_cutoff = cutoff;
    INFO("cutoff " << cutoff);
    with_threads(2, [&] { CHECK(run_pair(*model, c, kCmtId) == 32); });
  }
}

TEST_CASE("decode_step: block K/V that must be fetched (f16 store, files on disk)", "[decode_step]") {
  auto model = infer_test::make_model(DType::F32);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("lm_decode_step_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  BeyondConfig half = config(13, 2, PositionMode::Stingy);
  half.kv_f16 = true;
  BeyondConfig disk = config(13, 2, PositionMode::Exact);
  disk.block_dir = dir;
  with_threads(2, [&] {
    CHECK(run_pair(*model, half) == 32);
    CHECK(run_pair(*model, disk) == 32);
  });
  std::filesystem::remove_all(dir);
}

TEST_CASE("decode_step: what it does not serve goes through the chunk path", "[decode_step]") {
  auto model = infer_test::make_model(DType::F32);
  BeyondConfig c = config(13, 2, PositionMode::Stingy);
  c.granularity = Granularity::Token;  // one selection shared by the heads: the chunk path's
  BeyondSession s(*model, c, kLandmarkId);
  s.feed(random_raw(30, 3));
  s.feed_chunk({7});
  CHECK(s.decode_steps() == 0);

  BeyondConfig bounded = config(13, 2, PositionMode::Stingy);
  bounded.search = KeySearch::Bounded;  // the landmark key index
  BeyondSession b(*model, bounded, kLandmarkId);
  b.feed(random_raw(30, 3));
  b.feed_chunk({7});
  CHECK(b.decode_steps() == 0);

  BeyondSession captured(*model, config(13, 2, PositionMode::Stingy), kLandmarkId);
  AttentionCapture cap;
  captured.set_capture(&cap);
  captured.feed(random_raw(30, 3));
  captured.feed_chunk({7});
  CHECK(captured.decode_steps() == 0);
  CHECK(cap.rows.size() == 30 + 30 / 5 + 1);  // every position's row, the decoded token's too
  captured.set_capture(nullptr);
  captured.feed_chunk({8});
  CHECK(captured.decode_steps() == 1);
}
