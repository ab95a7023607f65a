// cmd_infer.cpp: `landmark passkey`, `landmark eval`, `landmark generate` and `landmark attn-map`:
// thin wrappers over infer/ (passkey_eval.h, eval.h, generate.h, attention maps).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "apps/commands.h"
#include "infer/eval.h"
#include "infer/generate.h"
#include "infer/model_io.h"
#include "infer/passkey_eval.h"
#include "infer/session.h"
#include "plot/plot.h"
#include "tensor/check.h"
#include "train/token_file.h"

namespace lm {
namespace app {

namespace {
// The retrieval flags every inference command shares.
struct InferFlags {
  InferConfig cfg;
  std::string granularity = "token-head", positions = "stingy", device = "cpu";
  void add(CLI::App* sub) {
    sub->add_option("--device", device, "cpu or cuda (block K/V stay in host memory either way)")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    sub->add_option("--chunk", cfg.chunk_len, "Raw tokens per chunk (local context)")->check(CLI::PositiveNumber)->capture_default_str();
    sub->add_option("--k", cfg.k, "Blocks retrieved per query")->check(CLI::NonNegativeNumber)->capture_default_str();
    sub->add_option("--capacity", cfg.capacity, "Keep only the newest S blocks (0: all)")->check(CLI::NonNegativeNumber)->capture_default_str();
    sub->add_option("--granularity", granularity, "token-head | token | head: who shares a retrieval")
        ->check(CLI::IsMember({"token-head", "token", "head"}))
        ->capture_default_str();
    sub->add_option("--positions", positions, "stingy | exact")->check(CLI::IsMember({"stingy", "exact"}))->capture_default_str();
    sub->add_option("--mmap-dir", cfg.mmap_dir, "Keep block K/V in memory-mapped files in this directory");
  }
  Device dev() const { return parse_device(device); }
  InferConfig get() {
    cfg.granularity = parse_granularity(granularity);
    cfg.positions = parse_position_mode(positions);
    return cfg;
  }
};
}  // namespace

Command passkey_command(CLI::App& app) {
  auto* sub = app.add_subcommand("passkey", "Pass-key retrieval accuracy against prompt length (Section 4)");
  auto ckpt = std::make_shared<std::string>();
  auto baseline = std::make_shared<std::string>();
  auto lengths = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384, 32768});
  auto trials = std::make_shared<int64_t>(20);
  auto seed = std::make_shared<uint64_t>(2023);
  auto png = std::make_shared<std::string>();
  auto flags = std::make_shared<InferFlags>();
  sub->add_option("--checkpoint", *ckpt, "A landmark model's checkpoint")->required()->check(CLI::ExistingFile);
  sub->add_option("--baseline", *baseline, "A standard model's checkpoint, evaluated with its own window")
      ->check(CLI::ExistingFile);
  sub->add_option("--lengths", *lengths, "Prompt lengths in tokens")->delimiter(',')->capture_default_str();
  sub->add_option("--trials", *trials, "Prompts per length")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--seed", *seed, "Seed for keys and key positions")->capture_default_str();
  sub->add_option("--plot", *png, "Write accuracy against length to this PNG");
  flags->add(sub);
  auto run = [=]() {
    InferConfig cfg = flags->get();
    LoadedModel lm_model = load_trained_model(*ckpt, flags->dev());
    LoadedModel base;
    if (!baseline->empty()) {
      base = load_trained_model(*baseline, flags->dev());
      LM_CHECK(base.tokenizer->fingerprint() == lm_model.tokenizer->fingerprint(),
               "passkey: the baseline was trained with another tokenizer");
    }
    std::printf("pass-key retrieval: %lld trials per length, k %lld, chunk %lld, %s positions, %s granularity\n",
                static_cast<long long>(*trials), static_cast<long long>(cfg.k), static_cast<long long>(cfg.chunk_len),
                position_mode_name(cfg.positions), granularity_name(cfg.granularity));
    std::printf("%8s  %14s%s\n", "length", "landmark", base.model ? "  baseline (own window)" : "");
    plot::Series s_lm{"landmark (k " + std::to_string(cfg.k) + ")", {}, {}, {}}, s_base{"baseline (window)", {}, {}, {}};
    for (int64_t len : *lengths) {
      PasskeyResult r = passkey_accuracy(*lm_model.model, *lm_model.tokenizer, cfg, len, *trials, *seed);
      std::printf("%8lld  %5.1f%% (%2lld/%2lld)", static_cast<long long>(len), 100 * r.accuracy(),
                  static_cast<long long>(r.correct), static_cast<long long>(r.trials));
      s_lm.x.push_back(static_cast<double>(len));
      s_lm.y.push_back(100 * r.accuracy());
      if (base.model) {
        PasskeyResult b = passkey_accuracy(*base.model, *base.tokenizer, cfg, len, *trials, *seed,
                                           base.model->config().block_size);
        std::printf("  %5.1f%% (%2lld/%2lld)", 100 * b.accuracy(), static_cast<long long>(b.correct),
                    static_cast<long long>(b.trials));
        s_base.x.push_back(static_cast<double>(len));
        s_base.y.push_back(100 * b.accuracy());
      }
      std::printf("   [%.1f s]\n", r.seconds);
      std::fflush(stdout);
    }
    if (!png->empty()) {
      plot::LineChartOptions o;
      o.title = "pass-key retrieval";
      o.x_label = "prompt length (tokens)";
      o.y_label = "accuracy (%)";
      o.log_x = true;
      o.y_range = std::make_pair(0.0, 100.0);
      o.markers = true;
      std::vector<plot::Series> series{s_lm};
      if (base.model) series.push_back(s_base);
      plot::line_chart(*png, series, o);
      std::printf("wrote %s\n", png->c_str());
    }
    return 0;
  };
  return {sub, run};
}

Command eval_command(CLI::App& app) {
  auto* sub = app.add_subcommand("eval", "Perplexity over long windows with cached retrieval (the paper's Table 1)");
  auto ckpt = std::make_shared<std::string>();
  auto tokens = std::make_shared<std::string>();
  auto length = std::make_shared<int64_t>(2048);
  auto windows = std::make_shared<int64_t>(0);
  auto hist = std::make_shared<std::string>();
  auto flags = std::make_shared<InferFlags>();
  sub->add_option("--checkpoint", *ckpt, "Model checkpoint")->required()->check(CLI::ExistingFile);
  sub->add_option("--tokens", *tokens, "A token file made by `landmark prepare` with the same tokenizer (e.g. val.tokens)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--length", *length, "Evaluation length: raw tokens per window")->check(CLI::Range(int64_t(2), int64_t(1) << 30))->capture_default_str();
  sub->add_option("--windows", *windows, "Evaluate at most this many windows (0: all)")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--hist", *hist, "Write the histogram of unique retrieved blocks (Appendix F) to this PNG");
  flags->add(sub);
  auto run = [=]() {
    InferConfig cfg = flags->get();
    LoadedModel m = load_trained_model(*ckpt, flags->dev());
    TokenFile data(*tokens);
    data.check_fingerprint(m.tokenizer->fingerprint());
    PerplexityResult r = evaluate_perplexity(*m.model, data.tokens(), cfg, m.landmark_id(), *length, *windows,
                                             [](int64_t d, int64_t t) { std::fprintf(stderr, "\rwindow %lld/%lld", (long long)d, (long long)t); });
    std::fprintf(stderr, "\n");
    const bool landmark = m.model->config().attention == "landmark";
    const int64_t F = m.model->config().landmark_every;
    std::printf("%-12s %-8s %-9s %-7s %-3s %-15s %s\n", "Eval. Length", "l_local", "XL cache", "Blocks", "k", "Attention Size",
                "Perplexity");
    if (landmark)
      std::printf("%-12lld %-8lld %-9s %-7s %-3lld %-15lld %.3f\n", (long long)*length, (long long)cfg.chunk_len, "None",
                  cfg.capacity > 0 ? std::to_string(cfg.capacity).c_str() : "all", (long long)cfg.k,
                  (long long)(cfg.chunk_len + cfg.k * (F + 1)), r.perplexity());
    else
      std::printf("%-12lld %-8lld %-9s %-7s %-3s %-15lld %.3f\n", (long long)*length, (long long)*length, "None", "None", "-",
                  (long long)*length, r.perplexity());
    std::printf("(%lld windows, %lld tokens scored, %.3f nats/token, %.1f s; attention size = chunk + k (F + 1))\n",
                (long long)r.windows, (long long)r.tokens, r.nll, r.seconds);
    if (!r.unique_blocks.empty()) {
      double mean = 0;
      for (int64_t u : r.unique_blocks) mean += static_cast<double>(u);
      mean /= static_cast<double>(r.unique_blocks.size());
      std::printf("unique blocks retrieved in the penultimate chunk: mean %.2f of %lld cached (%s granularity)\n", mean,
                  (long long)r.cached_at_penultimate, granularity_name(cfg.granularity));
      if (!hist->empty()) {
        plot::HistogramOptions o;
        o.title = "unique retrieved blocks, penultimate chunk (" + std::string(granularity_name(cfg.granularity)) + ")";
        o.x_label = "unique blocks (of " + std::to_string(r.cached_at_penultimate) + " cached)";
        o.y_label = "count (windows x layers)";
        o.integer_bins = true;
        std::vector<double> v(r.unique_blocks.begin(), r.unique_blocks.end());
        plot::histogram(*hist, v, 0, o);
        std::printf("wrote %s\n", hist->c_str());
      }
    }
    return 0;
  };
  return {sub, run};
}

Command generate_command(CLI::App& app) {
  auto* sub = app.add_subcommand("generate", "Generate text from a prompt (landmark models read it with retrieval)");
  auto ckpt = std::make_shared<std::string>();
  auto prompt = std::make_shared<std::string>();
  auto prompt_file = std::make_shared<std::string>();
  auto max_new = std::make_shared<int64_t>(200);
  auto sample = std::make_shared<SampleOptions>();
  auto flags = std::make_shared<InferFlags>();
  sub->add_option("--checkpoint", *ckpt, "Model checkpoint")->required()->check(CLI::ExistingFile);
  sub->add_option("--prompt", *prompt, "Prompt text");
  sub->add_option("--prompt-file", *prompt_file, "Read the prompt from this file")->check(CLI::ExistingFile);
  sub->add_option("--max-new", *max_new, "Tokens to generate")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--temperature", sample->temperature, "0: greedy")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--top-k", sample->top_k, "Sample among the k most likely tokens (0: all)")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--seed", sample->seed, "Sampling seed")->capture_default_str();
  flags->add(sub);
  auto run = [=]() {
    LoadedModel m = load_trained_model(*ckpt, flags->dev());
    std::string text = *prompt;
    if (!prompt_file->empty()) {
      text = read_text_file(*prompt_file, "generate");
    }
    LM_CHECK(!text.empty(), "generate: give --prompt or --prompt-file");
    std::vector<int32_t> ids = m.tokenizer->encode(text), out;
    if (m.model->config().attention == "landmark") {
      InferenceSession s(*m.model, flags->get(), m.landmark_id());
      out = generate(s, ids, *max_new, *sample);
    } else {
      out = generate_windowed(*m.model, ids, m.model->config().block_size, *max_new, *sample);
    }
    std::cout << text << m.tokenizer->decode(out) << "\n";
    return 0;
  };
  return {sub, run};
}

Command attn_map_command(CLI::App& app) {
  auto* sub = app.add_subcommand("attn-map", "Heat map of one layer and head over a text, with landmarks and retrieved blocks");
  auto ckpt = std::make_shared<std::string>();
  auto text = std::make_shared<std::string>();
  auto text_file = std::make_shared<std::string>();
  auto layer = std::make_shared<int64_t>(0);
  auto head = std::make_shared<int64_t>(0);
  auto max_tokens = std::make_shared<int64_t>(400);
  auto out = std::make_shared<std::string>("attention.png");
  auto flags = std::make_shared<InferFlags>();
  sub->add_option("--checkpoint", *ckpt, "A landmark model's checkpoint")->required()->check(CLI::ExistingFile);
  sub->add_option("--text", *text, "Text to read");
  sub->add_option("--text-file", *text_file, "Read the text from this file")->check(CLI::ExistingFile);
  sub->add_option("--layer", *layer, "Layer")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--head", *head, "Head")->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--max-tokens", *max_tokens, "Read at most this many tokens (the map is square in them)")
      ->check(CLI::Range(int64_t(2), int64_t(4000)))
      ->capture_default_str();
  sub->add_option("--out", *out, "PNG to write")->capture_default_str();
  flags->add(sub);
  auto run = [=]() {
    LoadedModel m = load_trained_model(*ckpt, flags->dev());
    LM_CHECK(m.model->config().attention == "landmark", "attn-map: needs a landmark model (retrieval is what it shows)");
    LM_CHECK(*layer < m.model->config().n_layer && *head < m.model->config().n_head,
             "attn-map: the model has " << m.model->config().n_layer << " layers and " << m.model->config().n_head << " heads");
    std::string t = *text;
    if (!text_file->empty()) {
      t = read_text_file(*text_file, "attn-map");
    }
    LM_CHECK(!t.empty(), "attn-map: give --text or --text-file");
    std::vector<int32_t> ids = m.tokenizer->encode(t);
    if (static_cast<int64_t>(ids.size()) > *max_tokens) ids.resize(static_cast<size_t>(*max_tokens));
    InferenceSession s(*m.model, flags->get(), m.landmark_id());
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
        o.outlined.push_back({static_cast<int>(row.query), static_cast<int>(g * (F + 1)), static_cast<int>(g * (F + 1) + F + 1)});
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
