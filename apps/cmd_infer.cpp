// cmd_infer.cpp: `landmark generate` and `landmark attn-map`: thin wrappers over infer/
// (generate.h, attention maps through AttentionCapture). The evaluations are apps/cmd_eval.cpp.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "apps/commands.h"
#include "apps/eval_output.h"
#include "apps/infer_flags.h"
#include "apps/progress.h"
#include "beyond/session.h"
#include "infer/generate.h"
#include "infer/model_io.h"
#include "plot/plot.h"
#include "tensor/check.h"

namespace lm {
namespace app {

namespace {
// What the flags beyond the paper did in a generation, on stderr (stdout holds the text): with
// --left-out the adaptive k line and the certificate, with --mass-recall the agreement with the
// oracle, with --no-cmt-skip (or a CMT cutoff) the CMT skip line; the lines eval and passkey print.
void report_generation(const BeyondSession& s, const BeyondConfig& cfg, const GPTConfig& mc, const InferFlags& f) {
  const bool cmt_line = mc.context_miss && (cfg.cmt_cutoff > 0 || (f.no_cmt_skip_opt && f.no_cmt_skip_opt->count()));
  if (!(cfg.left_out >= 0 || cfg.mass_recall || cmt_line)) return;
  int64_t unique = 0, attended = 0, rows = 0, blocks = 0, capped = 0, keys_scored = 0, scored_rows = 0;
  for (const RetrievalRecord& rec : s.retrieval_log()) {
    unique += rec.unique;
    if (rec.cached > 0) keys_scored += rec.keys_scored, scored_rows += rec.queries * mc.n_head;
  }
  CertificateStats certificate;
  OracleAgreement oracle;
  add_extension_records(s, &attended, &rows, &blocks, &capped, &certificate, &oracle);
  if (cmt_line && cfg.cmt_cutoff <= 0)
    std::fprintf(stderr, "CMT skip: no effect here, --cmt-cutoff is 0 (no row is gated off)\n");
  print_trims(cfg, mc.context_miss, unique, attended, rows, blocks, capped, stderr);
  if (cfg.left_out >= 0) print_certificate(certificate, " in the prompt and the generation", stderr);
  if (cfg.mass_recall) print_scoring(cfg, keys_scored, scored_rows, s.summary_bytes_per_block(), oracle, stderr);
}
}  // namespace

Command generate_command(CLI::App& app) {
  auto* sub = app.add_subcommand("generate", "Generate text from a prompt (landmark models read it with retrieval)");
  auto ckpt = std::make_shared<std::string>();
  auto prompt = std::make_shared<std::string>();
  auto prompt_file = std::make_shared<std::string>();
  auto max_new = std::make_shared<int64_t>(200);
  auto sample = std::make_shared<SampleOptions>();
  auto echo = std::make_shared<bool>(false);
  auto flags = std::make_shared<InferFlags>();
  sub->add_option("--checkpoint", *ckpt, "Model checkpoint")->required()->check(CLI::ExistingFile);
  auto* prompt_opt = sub->add_option("--prompt", *prompt, "Prompt text");
  sub->add_flag("--echo", *echo, "Print the prompt before the continuation (default: the continuation only)");
  sub->add_option("--prompt-file", *prompt_file, "Read the prompt from this file (not with --prompt)")
      ->check(CLI::ExistingFile)
      ->excludes(prompt_opt);
  sub->add_option("--max-new", *max_new, "Tokens to generate")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24))
      ->capture_default_str();
  sub->add_option("--temperature", sample->temperature, "0: greedy")->check(real_in(0.0, 1e6))->capture_default_str();
  sub->add_option("--top-k", sample->top_k, "Sample among the k most likely tokens (0: all)")
      ->check(non_negative_count())
      ->capture_default_str();
  sub->add_option("--seed", sample->seed, "Sampling seed")->check(non_negative_int())->capture_default_str();
  flags->add(sub);
  auto run = [=]() {
    LoadedModel m = load_trained_model(*ckpt, flags->dev());
    std::string text = *prompt;
    if (!prompt_file->empty()) {
      text = read_text_file(*prompt_file, "generate");
    }
    LM_CHECK(!text.empty(), "generate: give --prompt or --prompt-file");
    std::vector<int32_t> ids = m.tokenizer->encode(text), out;
    const BeyondConfig cfg = flags->get(m);  // checks the flags against the model
    // A landmark model, or (beyond the paper) a standard one with --scorer, reads the prompt in blocks.
    if (m.model->config().landmark() || cfg.scorer != BlockScorer::Landmark) {
      // The last token generated is not fed: the furthest token read is the prompt's and max-new - 1 more.
      InferFlags::check_reach(cfg, static_cast<int64_t>(ids.size()) + *max_new - 1,
                              std::to_string(ids.size()) + " prompt tokens and --max-new " + std::to_string(*max_new));
      BeyondSession s(*m.model, cfg, m.landmark_id(), m.cmt_id());
      ProgressLine line("prompt:");  // a long prompt's prefill shows its pace on stderr
      Tensor logits = s.read(ids, [&](int64_t done, int64_t total) { line.update(done, total); });
      line.finish();
      out = generate_from(s, logits, *max_new, *sample);
      report_generation(s, cfg, m.model->config(), *flags);
    } else {
      out = generate_windowed(*m.model, ids, m.model->config().block_size, *max_new, *sample);
    }
    std::cout << (*echo ? text : "") << m.tokenizer->decode(out) << "\n";
    return 0;
  };
  return {sub, run};
}

Command attn_map_command(CLI::App& app) {
  auto* sub =
      app.add_subcommand("attn-map", "Heat map of one layer and head over a text, with landmarks and retrieved blocks");
  auto ckpt = std::make_shared<std::string>();
  auto text = std::make_shared<std::string>();
  auto text_file = std::make_shared<std::string>();
  auto layer = std::make_shared<int64_t>(0);
  auto head = std::make_shared<int64_t>(0);
  auto max_tokens = std::make_shared<int64_t>(400);
  auto out = std::make_shared<std::string>("attention.png");
  auto flags = std::make_shared<InferFlags>();
  sub->add_option("--checkpoint", *ckpt, "A landmark model's checkpoint")->required()->check(CLI::ExistingFile);
  auto* text_opt = sub->add_option("--text", *text, "Text to read");
  sub->add_option("--text-file", *text_file, "Read the text from this file (not with --text)")
      ->check(CLI::ExistingFile)
      ->excludes(text_opt);
  sub->add_option("--layer", *layer, "Layer")->check(non_negative_count())->capture_default_str();
  sub->add_option("--head", *head, "Head")->check(non_negative_count())->capture_default_str();
  sub->add_option("--max-tokens", *max_tokens, "Read at most this many tokens (the map is square in them)")
      ->check(CLI::Range(int64_t(2), int64_t(4000)))
      ->capture_default_str();
  sub->add_option("--out", *out, "PNG to write")->capture_default_str();
  flags->add(sub, false, false);  // no --mass-recall: the map does not show it
  auto run = [=]() {
    LoadedModel m = load_trained_model(*ckpt, flags->dev());
    LM_CHECK(m.model->config().landmark(), "attn-map: needs a landmark model (retrieval is what it shows)");
    LM_CHECK(*layer < m.model->config().n_layer && *head < m.model->config().n_head,
             "attn-map: the model has " << m.model->config().n_layer << " layers and " << m.model->config().n_head
                                        << " heads");
    std::string t = *text;
    if (!text_file->empty()) {
      t = read_text_file(*text_file, "attn-map");
    }
    LM_CHECK(!t.empty(), "attn-map: give --text or --text-file");
    std::vector<int32_t> ids = m.tokenizer->encode(t);
    if (static_cast<int64_t>(ids.size()) > *max_tokens) {
      std::fprintf(stderr, "note: reading the first %lld of %zu tokens (--max-tokens)\n",
                   static_cast<long long>(*max_tokens), ids.size());
      ids.resize(static_cast<size_t>(*max_tokens));
    }
    BeyondSession s(*m.model, flags->get(m), m.landmark_id(), m.cmt_id());
    AttentionCapture cap;
    cap.layer = *layer;
    cap.head = *head;
    s.set_capture(&cap);
    s.feed(ids);
    // The map is over augmented positions (tokens + landmarks): rows = queries, cols = keys.
    const int64_t N = s.augmented_fed(), F = m.model->config().landmark_every;
    std::vector<double> w(static_cast<size_t>(N * N), NAN);
    plot::HeatmapOptions o;
    for (const auto& row : cap.rows) {
      for (size_t j = 0; j < row.keys.size(); ++j) w[row.query * N + row.keys[j]] = row.weights[j];
      for (int64_t g : row.retrieved)
        o.outlined.push_back(
            {static_cast<int>(row.query), static_cast<int>(g * (F + 1)), static_cast<int>(g * (F + 1) + F + 1)});
    }
    for (int64_t p = F; p < N; p += F + 1) o.marked_columns.push_back(static_cast<int>(p));
    o.title = "layer " + std::to_string(*layer) + ", head " + std::to_string(*head) + ": attention weights (" +
              std::to_string(ids.size()) + " tokens, k " + std::to_string(s.config().k) + ", chunk " +
              std::to_string(s.config().chunk_len) + ")";
    o.x_label = "key position (landmarks marked, retrieved blocks outlined)";
    o.y_label = "query position";
    o.value_label = "weight";
    o.width = 1000;
    o.height = 900;
    plot::heatmap(*out, static_cast<int>(N), static_cast<int>(N), w, o);
    std::printf("wrote %s (%lld positions; grey = not attended)\n", out->c_str(), (long long)N);
    return 0;
  };
  return {sub, run};
}

}  // namespace app
}  // namespace lm
