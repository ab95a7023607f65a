// cmd_data.cpp: `landmark prepare` (text -> tokenizer + token files) and
// `landmark extract-austen` (extract Jane Austen's novels from the r-cran-janeaustenr package data).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <tuple>

#include "apps/commands.h"
#include "tensor/check.h"
#include "tensor/files.h"
#include "train/corpus.h"
#include "train/file_io.h"
#include "train/passkey.h"
#include "train/token_file.h"
#include "train/tokenizer.h"

namespace lm {
namespace app {

std::string read_text_file(const std::string& path, const char* what) {
  require_regular_file(path, std::string(what) + ":");
  std::ifstream in(path, std::ios::binary);
  LM_CHECK(in.good(), what << ": cannot open " << path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {
std::string read_all(const std::string& path, int64_t max_bytes) {
  std::string s = read_text_file(path, "prepare");
  if (max_bytes > 0 && static_cast<int64_t>(s.size()) > max_bytes) s.resize(static_cast<size_t>(max_bytes));
  return s;
}

void progress_bar(const char* what, int64_t done, int64_t total) {
  std::fprintf(stderr, "\r%s: %5.1f%%", what,
               total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0);
  if (done >= total) std::fprintf(stderr, "\n");
}
}  // namespace

Command prepare_command(CLI::App& app) {
  auto* sub = app.add_subcommand("prepare", "Build a tokenizer and token files (train.tokens, val.tokens) from text");
  auto train_txt = std::make_shared<std::vector<std::string>>();
  auto val_txt = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto kind = std::make_shared<std::string>("bpe");
  auto vocab = std::make_shared<int64_t>(4096);
  auto sample_mb = std::make_shared<double>(8.0);
  auto gpt2 = std::make_shared<std::vector<std::string>>();
  auto split_digits = std::make_shared<bool>(false);
  auto tokenizer_from = std::make_shared<std::string>();
  sub->add_option("--train", *train_txt, "Training text files")->required()->check(CLI::ExistingFile);
  sub->add_option("--val", *val_txt, "Validation text files")->required()->check(CLI::ExistingFile);
  sub->add_option("--out", *out, "Output directory")->required();
  sub->add_option("--tokenizer", *kind, "bytes | bpe (trained on the training text) | gpt2 (needs --gpt2-files)")
      ->check(CLI::IsMember({"bytes", "bpe", "gpt2"}))
      ->capture_default_str();
  sub->add_option("--vocab", *vocab, "BPE vocabulary size (base, before special tokens)")
      ->check(CLI::Range(int64_t(257), int64_t(1) << 20))
      ->capture_default_str();
  sub->add_option("--bpe-sample-mb", *sample_mb, "Train BPE on the first N MB of the training text")
      ->check(real_in(1e-6, 1e6))
      ->capture_default_str();
  sub->add_option("--gpt2-files", *gpt2, "GPT-2's encoder.json and vocab.bpe")->expected(2)->check(CLI::ExistingFile);
  sub->add_flag("--split-digits", *split_digits,
                "BPE: never merge a digit, so numbers are read one digit per token (as LLaMA's tokenizer does)");
  sub->add_option("--tokenizer-from", *tokenizer_from,
                  "Reuse this tokenizer.json (from another prepared directory) instead of making one: token files "
                  "of different text that one model can train on in turn (e.g. a curriculum, or fine-tuning)")
      ->check(CLI::ExistingFile)
      ->excludes("--gpt2-files")
      ->excludes("--split-digits");
  auto run = [=]() {
    LM_CHECK(!*split_digits || *kind == "bpe",
             "prepare: --split-digits applies to a BPE trained here "
             "(--tokenizer bpe), not to --tokenizer "
                 << *kind);
    std::filesystem::create_directories(*out);
    std::unique_ptr<Tokenizer> tok;
    if (!tokenizer_from->empty()) {
      tok = load_tokenizer(*tokenizer_from);
    } else if (*kind == "bytes") {
      tok = std::make_unique<ByteTokenizer>();
    } else if (*kind == "gpt2") {
      LM_CHECK(gpt2->size() == 2, "prepare: --tokenizer gpt2 needs --gpt2-files encoder.json vocab.bpe");
      tok = std::make_unique<BpeTokenizer>(BpeTokenizer::load_gpt2((*gpt2)[0], (*gpt2)[1]));
    } else {
      std::string sample;
      const int64_t budget = static_cast<int64_t>(*sample_mb * 1024 * 1024);
      for (const std::string& p : *train_txt) {
        if (static_cast<int64_t>(sample.size()) >= budget) break;
        sample += read_all(p, budget - static_cast<int64_t>(sample.size()));
      }
      std::cerr << "training BPE to " << *vocab << " tokens on " << sample.size() << " bytes\n";
      tok = std::make_unique<BpeTokenizer>(BpeTokenizer::train(
          sample, *vocab, [](int64_t d, int64_t t) { progress_bar("bpe merges", d, t); }, *split_digits));
    }
    // Every tokenizer carries the two special tokens landmark models need, so one prepared
    // directory serves standard and landmark training alike (specials are part of the fingerprint).
    // (idempotent: a reused tokenizer made by prepare keeps its ids and its fingerprint)
    tok->add_special("<|landmark|>");
    tok->add_special("<|cmt|>");
    const std::string tok_path = *out + "/tokenizer.json";
    save_tokenizer(*tok, tok_path);
    PrepareStats tr = prepare_tokens(*train_txt, *tok, *out + "/train.tokens",
                                     [](int64_t d, int64_t t) { progress_bar("train tokens", d, t); });
    PrepareStats va = prepare_tokens(*val_txt, *tok, *out + "/val.tokens",
                                     [](int64_t d, int64_t t) { progress_bar("val tokens", d, t); });
    std::cout << "tokenizer " << tok->kind() << " (vocab " << tok->vocab_size() << ") -> " << tok_path << "\n"
              << "train: " << tr.bytes << " bytes -> " << tr.tokens << " tokens (" << *out << "/train.tokens)\n"
              << "val:   " << va.bytes << " bytes -> " << va.tokens << " tokens (" << *out << "/val.tokens)\n";
    return 0;
  };
  return {sub, run};
}

Command corpus_command(CLI::App& app) {
  auto* sub = app.add_subcommand("extract-austen", "Extract Jane Austen's novels from r-cran-janeaustenr's data/ dir");
  auto dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  sub->add_option("rdata_dir", *dir, "The package's data directory (holding Rdata.rdb and Rdata.rdx)")
      ->required()
      ->check(CLI::ExistingDirectory);
  sub->add_option("out_dir", *out, "Where to write one .txt per novel")->required();
  auto run = [=]() {
    for (const std::string& f : write_austen(*dir, *out)) std::cout << "wrote " << f << "\n";
    return 0;
  };
  return {sub, run};
}

Command passkey_data_command(CLI::App& app) {
  auto* sub = app.add_subcommand("passkey-data", "Write synthetic pass-key training text (train.txt, val.txt)");
  auto out = std::make_shared<std::string>();
  auto docs = std::make_shared<int64_t>(20000);
  auto max_fill = std::make_shared<int64_t>(6);
  auto min_fill = std::make_shared<int64_t>(0);
  auto filler_only = std::make_shared<double>(0.1);
  auto uniform_distance = std::make_shared<bool>(false);
  auto list_docs = std::make_shared<double>(0.0);
  auto questions = std::make_shared<int64_t>(1);
  auto list_items = std::make_shared<int64_t>(8);
  auto list_fillers = std::make_shared<int64_t>(18);
  auto seed = std::make_shared<uint64_t>(1);
  sub->add_option("--out", *out, "Output directory")->required();
  sub->add_option("--docs", *docs, "Training documents")->check(positive_count())->capture_default_str();
  sub->add_option("--max-fillers", *max_fill, "Filler sentences per document, at most")
      ->check(non_negative_count())
      ->capture_default_str();
  sub->add_option("--min-fillers", *min_fill,
                  "Filler sentences per document, at least (uniform from here to --max-fillers)")
      ->check(non_negative_count())
      ->capture_default_str();
  sub->add_option("--filler-only", *filler_only, "Fraction of documents that are plain filler")
      ->check(real_in(0.0, 1.0))
      ->capture_default_str();
  sub->add_flag("--uniform-distance", *uniform_distance,
                "Draw the fillers after the key (how far back the answer lies) uniformly in 0..--max-fillers, "
                "so far keys are as common as near ones (default: the total is uniform and split at random)");
  sub->add_option("--questions", *questions,
                  "Ask each document's question this many times, each after its own 0..--max-fillers fillers "
                  "(the same key every time: more answers per token, none contradicted)")
      ->check(CLI::Range(int64_t{1}, int64_t{60}))
      ->capture_default_str();
  sub->add_option("--list-docs", *list_docs,
                  "Fraction of documents that are number lists asked back after filler (\"The list is N1 N2. ... What "
                  "is the list? The list is N1 N2.\"): the answer's copy, many tokens per document")
      ->check(real_in(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--list-items", *list_items, "Numbers per list document, at most (uniform from 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{60}))
      ->capture_default_str();
  sub->add_option("--list-fillers", *list_fillers,
                  "Filler sentences between a list and its repeat, at most (uniform from 0)")
      ->check(non_negative_count())
      ->capture_default_str();
  sub->add_option("--seed", *seed, "Seed (the validation text uses seed + 1)")
      ->check(non_negative_int())
      ->capture_default_str();
  auto run = [=]() {
    LM_CHECK(*min_fill <= *max_fill,
             "passkey-data: --min-fillers " << *min_fill << " is above --max-fillers " << *max_fill);
    // About 90 bytes per filler sentence and 250 for the rest of a document; refuse before
    // building a string that cannot fit in memory.
    const double fillers =
        std::max(0.5 * static_cast<double>(*min_fill + *max_fill), 0.5 * static_cast<double>(*list_fillers));
    const double gb = static_cast<double>(*docs) * static_cast<double>(*questions) *
                      (fillers * 90.0 + 250.0 + 12.0 * static_cast<double>(*list_items)) / 1e9;
    LM_CHECK(gb < 8.0, "passkey-data: --docs " << *docs << " with --max-fillers " << *max_fill << ", --questions "
                                               << *questions << ", --list-fillers " << *list_fillers
                                               << " and --list-items " << *list_items << " is about " << gb
                                               << " GB of text; lower --docs, --max-fillers, --questions or "
                                                  "--list-fillers (at most 8 GB)");
    std::filesystem::create_directories(*out);
    for (auto [name, n, s] :
         {std::tuple<std::string, int64_t, uint64_t>{"train.txt", *docs, *seed},
          std::tuple<std::string, int64_t, uint64_t>{"val.txt", std::max<int64_t>(*docs / 20, 50), *seed + 1}}) {
      const std::string path = *out + "/" + name;
      PasskeyDataOptions o;
      o.docs = n;
      o.min_fillers = *min_fill;
      o.max_fillers = *max_fill;
      o.filler_only = *filler_only;
      o.uniform_distance = *uniform_distance;
      o.list_docs = *list_docs;
      o.questions = *questions;
      o.list_max_items = *list_items;
      o.list_max_fillers = *list_fillers;
      o.seed = s;
      const std::string text = passkey_training_text(o);
      write_file_atomic(path, text, "passkey-data");
      std::cout << "wrote " << path << " (" << n << " documents, " << text.size() << " bytes)\n";
    }
    return 0;
  };
  return {sub, run};
}

std::vector<Command> register_commands(CLI::App& app) {
  std::vector<Command> all{prepare_command(app), corpus_command(app),     passkey_data_command(app),
                           train_command(app),   plot_command(app),       plot_table_command(app),
                           info_command(app),    groups_command(app),     passkey_command(app),
                           eval_command(app),    generate_command(app),   attn_map_command(app),
                           explore_command(app), tasks_data_command(app), tasks_eval_command(app)};
  refuse_empty_numbers(app);  // every numeric flag of every subcommand (commands.h)
  return all;
}

}  // namespace app
}  // namespace lm
