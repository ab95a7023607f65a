// cmd_explore.cpp: `landmark explore`: a text read with cached chunked inference, written as one
// self-contained HTML page that shows what retrieval did for every token, layer and head: a thin
// wrapper over beyond/explorer.h. docs/infer.md sections 3 and 9.5.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/infer_flags.h"
#include "beyond/explorer.h"
#include "evals/passkey_eval.h"
#include "infer/model_io.h"
#include "tensor/check.h"
#include "train/file_io.h"

namespace lm {
namespace app {

Command explore_command(CLI::App& app) {
  auto* sub = app.add_subcommand("explore",
                                 "Write an HTML page showing, for every token of a text, the blocks each "
                                 "layer and head retrieved (open it from disk)");
  auto ckpt = std::make_shared<std::string>();
  auto text = std::make_shared<std::string>();
  auto text_file = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>("explore.html");
  auto max_tokens = std::make_shared<int64_t>(8192);
  auto top = std::make_shared<int64_t>(5);
  auto select = std::make_shared<int64_t>(-1);
  auto passkey = std::make_shared<int64_t>(-1);
  auto dump = std::make_shared<std::string>();
  auto flags = std::make_shared<InferFlags>();
  sub->add_option("--checkpoint", *ckpt, "A landmark model's checkpoint, or a standard model's read with --scorer")
      ->required()
      ->check(CLI::ExistingFile);
  auto* text_opt = sub->add_option("--text", *text, "Text to read");
  sub->add_option("--text-file", *text_file, "Read the text from this file (not with --text)")
      ->check(CLI::ExistingFile)
      ->excludes(text_opt);
  sub->add_option("--out", *out, "HTML page to write")->capture_default_str();
  sub->add_option("--max-tokens", *max_tokens, "Read at most this many tokens of the text")
      ->check(CLI::Range(int64_t(1), int64_t(100000)))
      ->capture_default_str();
  sub->add_option("--top", *top, "Next-token candidates shown per token")
      ->check(CLI::Range(int64_t(1), int64_t(50)))
      ->capture_default_str();
  sub->add_option("--select", *select, "Token selected when the page's URL has no #pos=N (default: the last)")
      ->check(non_negative_count());
  sub->add_option("--passkey-key", *passkey,
                  "The pass key to mark (default: the number after \"The pass key is \" in the text, if any)")
      ->check(non_negative_count());
  sub->add_option("--dump-retrieval", *dump,
                  "Also write the retrieved blocks as TSV: pos, layer, head, blocks, scores (for tests and scripts)");
  flags->add(sub, false, false);  // no --mass-recall: the page does not show it
  auto run = [=]() {
    LM_CHECK(flags->dev() == Device::CPU,
             "explore: runs on the CPU (--device cpu): the CPU rows record where each "
             "row's attention went");
    LoadedModel m = load_trained_model(*ckpt, flags->dev());
    const GPTConfig& mc = m.model->config();
    std::string t = text_file->empty() ? *text : read_text_file(*text_file, "explore");
    LM_CHECK(!t.empty(), "explore: the text is empty (give --text or a non-empty --text-file)");
    std::vector<int32_t> ids = m.tokenizer->encode(t);
    LM_CHECK(!ids.empty(), "explore: the text encodes to no tokens");
    if (static_cast<int64_t>(ids.size()) > *max_tokens) {
      std::fprintf(stderr, "note: reading the first %lld of %zu tokens (--max-tokens)\n",
                   static_cast<long long>(*max_tokens), ids.size());
      ids.resize(static_cast<size_t>(*max_tokens));
    }
    const int64_t n = static_cast<int64_t>(ids.size());
    LM_CHECK(*select < n, "explore: --select " << *select << " is past the text's " << n << " tokens");
    const BeyondConfig cfg = flags->get(m);
    InferFlags::check_reach(cfg, n, "the text's tokens, after --max-tokens");
    LM_CHECK(mc.landmark() || cfg.scorer != BlockScorer::Landmark,
             "explore: retrieval is what it shows; " << *ckpt
                                                     << " was trained with standard attention: read it in blocks with "
                                                        "--scorer mean, quest, reps or oracle");
    LM_CHECK(cfg.search == KeySearch::Scan, "explore: --search "
                                                << key_search_name(cfg.search)
                                                << " keeps no scores of the blocks it chose; use --search scan (the "
                                                   "explorer shows every block's score)");

    ExploreData d =
        explore_tokens(*m.model, cfg, ids, m.landmark_id(), m.cmt_id(), std::min<int64_t>(*top, mc.vocab_size));
    const PasskeyInText key = find_passkey(t, *passkey);
    LM_CHECK(*passkey < 0 || !key.spans.empty(),
             "explore: --passkey-key " << *passkey << " does not appear in the text");
    if (!key.spans.empty()) d.key_blocks = passkey_key_blocks(*m.tokenizer, ids, key.spans, mc.landmark_every);

    ExplorePage page;
    page.title = text_file->empty() ? std::string("text") : std::filesystem::path(*text_file).filename().string();
    page.model = std::filesystem::path(*ckpt).filename().string() + ": " + std::to_string(mc.n_layer) + " layers, " +
                 std::to_string(mc.n_head) + " heads, d " + std::to_string(mc.n_embd) + ", trained on windows of " +
                 std::to_string(mc.block_size);
    page.select = *select >= 0 ? *select : n - 1;
    page.passkey = key.key;
    const std::string html = explorer_html(d, *m.tokenizer, page);
    write_file_atomic(*out, html, "explore");
    if (!dump->empty()) write_file_atomic(*dump, retrieval_tsv(d), "explore");
    std::printf("wrote %s (%lld tokens, %.0f KB)", out->c_str(), static_cast<long long>(n),
                static_cast<double>(html.size()) / 1024.0);
    if (!d.key_blocks.empty()) {
      std::printf("; pass key %lld in block", static_cast<long long>(key.key));
      for (size_t i = 0; i < d.key_blocks.size(); ++i)
        std::printf("%s %lld", i ? "," : "", static_cast<long long>(d.key_blocks[i]));
    }
    std::printf("\nopen it in a browser; %s#pos=N selects token N\n", out->c_str());
    return 0;
  };
  return {sub, run};
}

}  // namespace app
}  // namespace lm
