// attention_map.cpp [out.png] [text]: one head's attention over a short text as a PNG heat map, the
// rows an InferenceSession captured (AttentionCapture, infer/session.h) drawn by plot::heatmap
// (plot/plot.h) with landmarks marked and retrieved blocks outlined. The model is a tiny landmark
// GPT with random weights, not trained. Checks: rows sum to 1, landmarks weigh 0, and rows read
// with every block retrieved equal those of one one-shot landmark attention (landmark/attention.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "infer/session.h"
#include "landmark/attention.h"
#include "landmark/tokens.h"
#include "plot/plot.h"
#include "tensor/create.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "train/tokenizer.h"

using namespace lm;

namespace {
constexpr int64_t kLayer = 1, kHead = 0, F = 8;

std::string read_file(const std::string& path) {  // the whole file; exits 1 when it is missing or empty
  std::ifstream in(path, std::ios::binary);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!text.empty()) return text;
  std::printf("FAILED: cannot read %s, or it is empty\n", path.c_str());
  std::exit(1);
}

// The captured head's rows of a session reading `ids` with `cfg`.
AttentionCapture capture(const GPT& m, const InferConfig& cfg, int32_t landmark, const std::vector<int32_t>& ids) {
  AttentionCapture cap;
  cap.layer = kLayer;
  cap.head = kHead;
  InferenceSession s(m, cfg, landmark);
  s.set_capture(&cap);
  s.feed(ids);
  return cap;
}

// The same head's weights (N x N) in one landmark-attention forward over the whole augmented text:
// a core that passes q and k of layer kLayer on to landmark_attention_weights (landmark/attention.h).
std::vector<double> one_shot_weights(const GPT& m, const std::vector<int32_t>& aug, const std::vector<int32_t>& kinds) {
  NoGradGuard no_graph;
  const int64_t N = static_cast<int64_t>(aug.size());
  const LandmarkLayout layout = make_layout(from_vector(kinds, {1, N}));
  int64_t layer = 0;
  Tensor w;
  m.forward(from_vector(aug, {1, N}), Tensor(), [&](const Var& q, const Var& k, const Var& v) {
    if (layer++ == kLayer) w = landmark_attention_weights(q.value(), k.value(), layout);  // (1, NH, N, N)
    return landmark_attention_core(layout)(q, k, v);
  });
  return w.select(1, kHead).contiguous().to_vector<double>();
}
}  // namespace

int main(int argc, char** argv) {
  const std::string png = argc > 1 ? argv[1] : "attention_map.png";
  ByteTokenizer tok;
  const int32_t landmark = tok.add_special("<|landmark|>");
  const std::vector<int32_t> ids = tok.encode(read_file(argc > 2 ? argv[2] : LM_EXAMPLE_TEXT).substr(0, 120));
  GPTConfig c;
  c.vocab_size = tok.vocab_size();
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.attention = AttentionKind::Landmark;
  c.landmark_every = F;
  manual_seed(3);
  GPT model(c);
  for (Var* p : model.parameters())  // random weights x 8, as tests/infer_fixtures.h does: far from uniform
    if (p->dim() == 2) p->value().copy_(mul(p->value(), 8.0));
  model.to(DType::F64);

  // 1. The map: chunks of 40 tokens, each query retrieving its k = 2 best cached blocks.
  InferConfig ic;
  ic.chunk_len = 40;
  ic.k = 2;
  std::vector<int32_t> aug, kinds;  // the text with its landmarks, as the session reads it
  LandmarkInserter(F, landmark).push(ids, aug, &kinds);
  const int64_t N = static_cast<int64_t>(aug.size());
  const AttentionCapture cap = capture(model, ic, landmark, ids);  // one row per augmented position
  std::vector<double> w(static_cast<size_t>(N * N), NAN);          // NaN: not attended (grey)
  plot::HeatmapOptions o;
  double worst_sum = 0, landmark_weight = 0;
  for (const auto& row : cap.rows) {
    worst_sum = std::max(worst_sum, std::fabs(std::accumulate(row.weights.begin(), row.weights.end(), 0.0) - 1));
    for (size_t j = 0; j < row.keys.size(); ++j) {
      w[row.query * N + row.keys[j]] = row.weights[j];
      if (row.keys[j] % (F + 1) == F) landmark_weight = std::max(landmark_weight, std::fabs(row.weights[j]));
    }
    for (int64_t g : row.retrieved) o.outlined.push_back({int(row.query), int(g * (F + 1)), int(g * (F + 1) + F + 1)});
  }
  for (int64_t p = F; p < N; p += F + 1) o.marked_columns.push_back(int(p));
  o.title = "layer 1, head 0 of a random-weight landmark model (k 2, chunks of 40)";
  o.x_label = "key position (landmarks marked, retrieved blocks outlined)";
  o.y_label = "query position";
  o.value_label = "weight";
  o.v_max = 0.3;                             // the colour scale's top: most rows spread over dozens of keys
  plot::heatmap(png, int(N), int(N), w, o);  // PNG written whole or not at all (write_file_atomic)
  std::printf("wrote %s: %lld x %lld positions (tokens and landmarks)\n", png.c_str(), (long long)N, (long long)N);

  // 2. Read again with exact positions and k above the blocks ever cached: every row must then be
  //    the one-shot forward's. Tolerances (1 and 2) 1e-12: f64 sums of <= N = 135 terms round by ~1e-14.
  ic.positions = PositionMode::Exact;
  ic.k = 1000;
  const std::vector<double> ref = one_shot_weights(model, aug, kinds);
  const AttentionCapture all = capture(model, ic, landmark, ids);
  double worst_diff = 0;
  for (const auto& row : all.rows) {  // compared over every key: those the session's row lacks weigh 0
    std::vector<double> dense(static_cast<size_t>(N), 0.0);
    for (size_t j = 0; j < row.keys.size(); ++j) dense[row.keys[j]] = row.weights[j];
    for (int64_t key = 0; key < N; ++key)
      worst_diff = std::max(worst_diff, std::fabs(dense[key] - ref[row.query * N + key]));
  }
  std::printf("rows of the map: largest |sum - 1| %.1e, largest landmark weight %.1e\n", worst_sum, landmark_weight);
  std::printf("all blocks, exact positions vs one-shot landmark attention: largest difference %.1e\n", worst_diff);
  const bool complete = int64_t(cap.rows.size()) == N && int64_t(all.rows.size()) == N;
  if (!complete || worst_sum > 1e-12 || landmark_weight != 0 || worst_diff > 1e-12) {
    std::printf("FAILED: a row does not sum to 1, a landmark has weight, or the session differs from one-shot\n");
    return 1;
  }
  std::printf("attention checks passed\n");
  return 0;
}
