// which_blocks.cpp: read a long text with InferenceSession (infer/session.h) and print, per layer
// and head, which cached blocks its last token retrieved (a RetrievalTrace). The model is a tiny
// landmark GPT with random weights, nothing trained: the choices show the mechanism, not meaning.
// Check: layer 0's landmark scores recomputed from the model's weights (exact positions), and the
// session's choice is their top k. Not shown: stingy positions, CMT models, the GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "infer/session.h"
#include "landmark/tokens.h"
#include "tensor/create.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "train/tokenizer.h"

using namespace lm;

namespace {
std::string read_file(const std::string& path) {  // the whole file; exits 1 when it is missing or empty
  std::ifstream in(path, std::ios::binary);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!text.empty()) return text;
  std::printf("FAILED: cannot read %s, or it is empty\n", path.c_str());
  std::exit(1);
}

// Layer 0's landmark score of every block cached at `st` for head h and augmented position
// `query`, from the weights: embedding, first LayerNorm, q/k projection, rotary at the true
// positions, then q . k / sqrt(HS) with block g's landmark at g (F + 1) + F.
std::vector<double> layer0_scores(const GPT& m, const std::vector<int32_t>& aug, int64_t query, int64_t h,
                                  const RetrievalTrace::Step& st) {
  NoGradGuard no_graph;
  const int64_t N = static_cast<int64_t>(aug.size()), HS = m.config().head_size(), F = m.config().landmark_every;
  const Block& b = *m.blocks[0];
  Var qkv = b.attn.qkv.forward(b.ln1.forward(m.wte.forward(from_vector(aug, {1, N}))));
  RotaryTables rot = rotary_tables(N, HS, m.config().rotary_base, DType::F64, Device::CPU);
  Tensor heads = qkv_heads(qkv, m.config().n_head, rot).value();  // (3, 1, NH, N, HS): q, k, v
  Tensor q = heads.select(0, 0).select(0, 0).select(0, h), k = heads.select(0, 1).select(0, 0).select(0, h);
  std::vector<double> score;
  for (int64_t g = st.first_gid; g < st.first_gid + st.cached; ++g)
    score.push_back(sum(mul(q.select(0, query), k.select(0, g * (F + 1) + F))).item() / std::sqrt(double(HS)));
  return score;
}
}  // namespace

int main(int argc, char** argv) {
  ByteTokenizer tok;
  const int32_t landmark = tok.add_special("<|landmark|>");
  const std::vector<int32_t> ids = tok.encode(read_file(argc > 1 ? argv[1] : LM_EXAMPLE_TEXT));
  GPTConfig c;
  c.vocab_size = tok.vocab_size();
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.attention = AttentionKind::Landmark;
  c.landmark_every = 50;  // F, the paper's
  manual_seed(7);
  GPT model(c);
  model.to(DType::F64);  // f64, so that the check below can be tight

  InferConfig ic;
  ic.chunk_len = 250;
  ic.k = 3;
  ic.positions = PositionMode::Exact;  // every key at its true place in the augmented stream
  InferenceSession session(model, ic, landmark);
  const int64_t F = c.landmark_every, last = static_cast<int64_t>(ids.size()) - 1;
  const int64_t query = AugmentedIndex{F}.augmented_index(last);  // the last token's place, landmarks counted
  RetrievalTrace trace;
  trace.from_query = query;
  trace.detail = true;  // keep each chosen block's landmark score too
  session.set_trace(&trace);
  session.read(ids);
  std::printf("a landmark model with random weights (not trained) read %zu bytes; %lld blocks of %lld cached\n",
              ids.size(), (long long)session.cached_blocks(), (long long)F);
  auto text_at = [&](int64_t from, int64_t n) {  // n raw tokens as text, newlines shown as spaces
    std::string s = tok.decode({ids.begin() + from, ids.begin() + from + n});
    std::replace(s.begin(), s.end(), '\n', ' ');
    return s;
  };
  std::printf("the last token (\"...%s\", raw %lld, augmented %lld) retrieved, k = %lld:\n",
              text_at(last - 19, 20).c_str(), (long long)last, (long long)query, (long long)ic.k);

  const std::vector<int32_t> aug = insert_landmarks({ids.begin(), ids.begin() + last + 1}, F, landmark);
  bool ok = true;
  int64_t checked = 0;  // layer 0's rows of the query, one per head
  for (const RetrievalTrace::Step& st : trace.steps) {
    const int64_t i = query - st.aug_start;  // the query's row in this chunk
    if (i < 0 || i >= st.n) continue;
    for (int64_t h = 0; h < c.n_head; ++h) {
      const std::vector<int32_t>& sel = st.sel[h * st.n + i];
      std::printf("  layer %lld head %lld:", (long long)st.layer, (long long)h);
      for (size_t j = 0; j < sel.size(); ++j) {
        const int64_t g = st.first_gid + sel[j];
        std::printf("  block %lld \"%s...\" (%+.4f)", (long long)g, text_at(g * F, 16).c_str(),
                    st.score[h * st.n + i][j]);
      }
      std::printf("\n");
      if (st.layer != 0) continue;
      // The check. Every landmark has the same key before rotation in layer 0 (same token, no
      // attention yet), so there the scores depend on distance alone.
      const std::vector<double> score = layer0_scores(model, aug, query, h, st);
      double worst_chosen = INFINITY, best_other = -INFINITY;
      for (size_t j = 0; j < sel.size(); ++j) {
        worst_chosen = std::min(worst_chosen, score[sel[j]]);
        // f64 sums of HS = 16 products round by ~1e-17; the k-th and next best differ by ~1e-4 here.
        ok = ok && std::fabs(score[sel[j]] - st.score[h * st.n + i][j]) < 1e-12;
      }
      for (size_t b = 0; b < score.size(); ++b)
        if (std::find(sel.begin(), sel.end(), int32_t(b)) == sel.end()) best_other = std::max(best_other, score[b]);
      ok = ok && int64_t(sel.size()) == std::min(ic.k, st.cached) && worst_chosen >= best_other - 1e-12;
      ++checked;
      std::printf("    recomputed from the weights for the %lld blocks cached: lowest chosen %+.6f, best other %+.6f\n",
                  (long long)st.cached, worst_chosen, best_other);
    }
  }
  if (!ok || checked != c.n_head) {
    std::printf("FAILED: %s\n", checked != c.n_head ? "the trace holds no layer-0 row of the query"
                                                    : "layer 0 did not choose the top k by the recomputed scores");
    return 1;
  }
  std::printf("check passed: layer 0 chose the top %lld blocks by the landmark scores recomputed from the weights\n",
              (long long)ic.k);
  return 0;
}
