// test_infer_cmt.cpp: the context-miss token at cached inference (Appendix D): the session against
// the one-shot forward in which the same landmarks are controlled (the cached blocks' landmarks,
// not those still in the window), with and without a cutoff; the drop rate on a hand-worked case;
// and the errors a user gets for a model without a CMT, or a CMT model without its id.
#include "tests/helpers.h"

#include <cmath>

#include "evals/eval.h"
#include "infer/generate.h"
#include "infer/session.h"
#include "tests/infer_fixtures.h"

using namespace lm;
using namespace lm::test;

namespace {
using infer_test::exact_all;
using infer_test::kCmtId;
using infer_test::kLandmarkId;
using infer_test::make_cmt_model;
using infer_test::make_model;
using infer_test::random_raw;
}  // namespace

TEST_CASE("CMT at inference: chunked logits equal the one-shot forward with the cached landmarks controlled",
          "[infer][cmt]") {
  // Exact positions, every cached block retrieved: query i of chunk c sees the CMT, the landmarks
  // of chunks before c as controlled (memory) and those of its own chunk free. one_shot_logits with
  // the same chunk length builds exactly that, one fused training forward per chunk.
  auto model = make_cmt_model(DType::F64);
  std::vector<int32_t> raw = random_raw(83, 13);
  for (int64_t chunk : {83, 30, 17, 6}) {  // 83: one chunk, every landmark free; 17 and 6 split blocks
    for (double cutoff : {0.0, 0.3}) {
      INFO("chunk " << chunk << ", cutoff " << cutoff);
      InferConfig c = exact_all(chunk);
      c.cmt_cutoff = cutoff;
      InferenceSession s(*model, c, kLandmarkId, kCmtId);
      const Tensor got = s.feed(raw);
      const Tensor ref = one_shot_logits(*model, raw, kLandmarkId, 0, OneShotCmt{kCmtId, chunk, cutoff});
      CHECK(max_abs_diff(got, ref) < 1e-12);  // f64: the same math, other summation orders
    }
  }
  // The controlled set matters: with every landmark free (one chunk in the reference) a chunked
  // reading differs.
  InferenceSession s(*model, exact_all(17), kLandmarkId, kCmtId);
  CHECK(max_abs_diff(s.feed(raw), one_shot_logits(*model, raw, kLandmarkId, 0, OneShotCmt{kCmtId, 0, 0.0})) > 1e-6);
}

TEST_CASE("CMT at inference: f32 matches the one-shot forward to ~1e-5", "[infer][cmt]") {
  auto model = make_cmt_model(DType::F32);
  std::vector<int32_t> raw = random_raw(90, 14);
  InferenceSession s(*model, exact_all(20), kLandmarkId, kCmtId);
  const Tensor got = s.feed(raw), ref = one_shot_logits(*model, raw, kLandmarkId, 0, OneShotCmt{kCmtId, 20, 0.0});
  double scale = 1.0;
  for (double v : values(ref)) scale = std::max(scale, std::fabs(v));
  CHECK(max_abs_diff(got, ref) < 1e-5 * scale);  // f32 rounding of logits of size ~`scale`
}

TEST_CASE("CMT at inference: a cutoff of 1 is no retrieval at all, the cutoff changes only what it should",
          "[infer][cmt]") {
  // With S(CMT) set to 0 everywhere, every retrieved block weighs 0: the result is that of k = 0.
  // (Exact positions: in stingy mode k also moves the chunk, and with it the CMT's distance.)
  auto model = make_cmt_model(DType::F64);
  std::vector<int32_t> raw = random_raw(70, 15);
  InferConfig c;
  c.chunk_len = 12;
  c.k = 3;
  c.positions = PositionMode::Exact;
  c.cmt_cutoff = 1.0;
  const Tensor all_dropped = InferenceSession(*model, c, kLandmarkId, kCmtId).feed(raw);
  c.k = 0;
  c.cmt_cutoff = 0;
  CHECK(max_abs_diff(all_dropped, InferenceSession(*model, c, kLandmarkId, kCmtId).feed(raw)) < 1e-12);
  c.k = 3;
  CHECK(max_abs_diff(all_dropped, InferenceSession(*model, c, kLandmarkId, kCmtId).feed(raw)) > 1e-6);
}

TEST_CASE("CMT at inference: the drop rate on a hand-worked case", "[infer][cmt]") {
  // Query projections zeroed: every score is 0 and S(CMT) = 1 / (size of the query's top group) =
  // 1 / (1 + its own block's regular tokens up to it + the free landmarks before it in the
  // window). F 5, chunks of 7 raw tokens, 14 raw tokens:
  //   chunk 0: r0..r4 L0 r5 r6         S(CMT) = 1/2 1/3 1/4 1/5 1/6, 1/6 (L0: its 5 tokens), 1/3 1/4
  //   chunk 1: r7 r8 r9 L1 r10..r13    block 0 is cached (controlled, not in the top group) and the
  //            tail r5 r6 joins block 1: 1/4 1/5 1/6, 1/6, then with L1 free: 1/3 1/4 1/5 1/6
  // The same 16 values in every layer and head.
  auto model = make_cmt_model(DType::F64, Device::CPU, true);
  std::vector<int32_t> raw = random_raw(15, 16);
  struct Case {
    double cutoff;
    int64_t dropped;  // of the 16 values per (layer, head)
  };
  for (Case cs : {Case{0.0, 0}, Case{0.21, 8}, Case{0.3, 12}, Case{0.51, 16}, Case{1.0, 16}}) {
    INFO("cutoff " << cs.cutoff);
    InferConfig c;
    c.chunk_len = 7;
    c.k = 2;
    c.cmt_cutoff = cs.cutoff;
    InferenceSession s(*model, c, kLandmarkId, kCmtId);
    s.feed(std::vector<int32_t>(raw.begin(), raw.begin() + 14));
    int64_t rows = 0, dropped = 0;
    for (const RetrievalRecord& r : s.retrieval_log()) {
      rows += r.cmt_rows;
      dropped += r.cmt_dropped;
    }
    CHECK(rows == 16 * 2 * 2);  // 16 queries x 2 layers x 2 heads
    CHECK(dropped == cs.dropped * 4);
    // The same through the evaluation: one window of 14 tokens (scored against tokens 1..14).
    PerplexityResult e = evaluate_perplexity(*model, raw, c, kLandmarkId, kCmtId, 14);
    CHECK(e.drop_rate() == static_cast<double>(cs.dropped) / 16.0);
  }
}

TEST_CASE("CMT at inference: clear errors", "[infer][cmt]") {
  auto plain = make_model(DType::F32);
  InferConfig c;
  c.cmt_cutoff = 0.2;
  CHECK_THROWS_WITH(InferenceSession(*plain, c, kLandmarkId), Catch::Contains("needs a model trained with a context-miss token"));
  c.cmt_cutoff = 1.5;
  auto cmt = make_cmt_model(DType::F32);
  CHECK_THROWS_WITH(InferenceSession(*cmt, c, kLandmarkId, kCmtId), Catch::Contains("cutoff must be in [0, 1]"));
  c.cmt_cutoff = 0;
  CHECK_THROWS_WITH(InferenceSession(*cmt, c, kLandmarkId), Catch::Contains("<|cmt|>"));
  CHECK_THROWS_WITH(one_shot_logits(*cmt, {1, 2, 3}, kLandmarkId), Catch::Contains("context-miss token"));
}

TEST_CASE("CMT at inference: generation through the cache equals one-shot greedy decoding", "[infer][cmt]") {
  // Chunks of one token (the prompt too): each generated token is read as its own chunk, and the
  // one-shot reference with chunk length 1 controls the landmarks of every earlier token.
  auto model = make_cmt_model(DType::F64);
  std::vector<int32_t> prompt = random_raw(21, 17);
  InferenceSession s(*model, exact_all(1), kLandmarkId, kCmtId);
  std::vector<int32_t> out = generate(s, prompt, 8, SampleOptions{});
  REQUIRE(out.size() == 8);
  std::vector<int32_t> text = prompt;
  for (int32_t tok : out) {
    Tensor logits = one_shot_logits(*model, text, kLandmarkId, 0, OneShotCmt{kCmtId, 1, 0.0});
    CHECK(sample_token(logits.select(0, logits.size(0) - 1), SampleOptions{}, 0) == tok);
    text.push_back(tok);
  }
}
