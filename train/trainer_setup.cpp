// trainer_setup.cpp: what a run is given, checked before it starts (trainer.h): the options, each
// message naming its flag; the tokenizer and token files of --data, checked against each other;
// --doc-starts; the batch against the ranks and the files. Not a checkpoint's settings, which pass
// these same checks on --resume (trainer_checkpoint.cpp), nor --xl-cache's (trainer_xl.cpp).
#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "train/batch.h"
#include "train/token_file.h"
#include "train/tokenizer.h"
#include "train/trainer_internal.h"

namespace lm::trainer_internal {

// The options' own checks, each message naming its flag.
void validate(const TrainOptions& o) {
  LM_CHECK(o.batch_size > 0, "train: --batch must be positive, got " << o.batch_size);
  LM_CHECK(o.steps > 1, "train: --steps must be at least 2, got " << o.steps);
  LM_CHECK(o.grad_accum > 0, "train: --grad-accum must be positive, got " << o.grad_accum);
  // One micro-batch is a (batch, T) tensor of token ids and its activations: past 2^31 tokens it
  // could not be held anyway, and the products below (tokens per step, cursors) must not wrap.
  constexpr int64_t kMaxBatchTokens = int64_t(1) << 31, kMaxAccum = int64_t(1) << 20;
  // With --init-from the model keys not given are the parent's, unknown until it is read: the
  // checks that read the model wait for read_parent, which runs them on the child's whole config
  // (so a parent's T 64, not the preset's 512, is what --segment must divide).
  if (o.init_from.empty()) {
    check_xl_options(o);  // Transformer-XL: --xl-cache and --segment
    const int64_t T = o.model.block_size, S = o.segment;
    const int64_t row = S > 0 ? S : T;
    LM_CHECK(row <= 0 || o.batch_size <= kMaxBatchTokens / row,
             "train: --batch " << o.batch_size << " x " << (S > 0 ? "--segment " : "--block-size ") << row
                               << " is more than " << kMaxBatchTokens << " tokens per micro-batch");
    LM_CHECK(o.model.landmark() || (!o.model.context_miss && o.jump_max == 1),
             "train: --cmt and --jump need --attention landmark");
    // A window of T positions holds a landmark only when a block (F regular tokens and its
    // landmark) fits in it: with F >= T some windows, or all, hold none, and retrieval would read
    // landmark keys that training never shaped.
    LM_CHECK(!o.model.landmark() || o.model.landmark_every < T,
             "train: --landmark-every " << o.model.landmark_every << " must be less than --block-size " << T
                                        << ": a window of " << T << " tokens must hold a landmark, one after every "
                                        << o.model.landmark_every << " regular tokens, for landmark attention to "
                                        << "learn (with --init-from, either may be the parent's)");
  }
  LM_CHECK(o.grad_accum <= kMaxAccum, "train: --grad-accum " << o.grad_accum << " is more than " << kMaxAccum);
  LM_CHECK(std::isfinite(o.lr) && o.lr > 0, "train: --lr must be positive, got " << o.lr);
  LM_CHECK(o.schedule == "one-cycle" || o.schedule == "cosine" || o.schedule == "constant",
           "train: --schedule must be one-cycle, cosine or constant, got '" << o.schedule << "'");
  LM_CHECK(o.grad_clip >= 0, "train: --grad-clip must be >= 0, got " << o.grad_clip);
  LM_CHECK(o.eval_every >= 0 && o.eval_batches > 0, "train: --eval-every must be >= 0 and --eval-batches > 0");
  LM_CHECK(o.ckpt_every >= 0, "train: --ckpt-every must be >= 0, got " << o.ckpt_every);
  LM_CHECK(o.cmt_cutoff >= 0 && o.cmt_cutoff <= 1, "train: --cmt-cutoff must be in [0, 1], got " << o.cmt_cutoff);
  LM_CHECK(std::isfinite(o.time_limit_min) && o.time_limit_min >= 0,
           "train: --time-limit must be >= 0 minutes, got " << o.time_limit_min);
  LM_CHECK(std::isfinite(o.log_every_s) && o.log_every_s >= 0,
           "train: --log-every must be >= 0 seconds, got " << o.log_every_s);
  LM_CHECK(o.train_top_k >= 0, "train: --train-top-k must be >= 0 (0: dense training), got " << o.train_top_k);
  LM_CHECK(o.train_top_k_gates == "chosen" || o.train_top_k_gates == "all",
           "train: --train-top-k-gates must be chosen or all, got '" << o.train_top_k_gates << "'");
  LM_CHECK(!o.data_dir.empty(), "train: --data is required (a directory made by `landmark prepare`)");
  LM_CHECK(!o.out_dir.empty(), "train: --out must not be empty");
  // The run writes --out's checkpoint.safetensors: a parent there would be replaced by its child.
  std::error_code ec;
  LM_CHECK(o.init_from.empty() || !std::filesystem::equivalent(
                                      o.init_from, std::filesystem::path(o.out_dir) / "checkpoint.safetensors", ec),
           "train: --init-from " << o.init_from << " is the checkpoint this run writes in --out " << o.out_dir
                                 << ", and would be replaced by its child; give another --out");
}

void check_sparse_options(const TrainOptions& o, const GPTConfig& mc) {
  if (o.train_top_k == 0) return;
  LM_CHECK(mc.landmark(), "train: --train-top-k " << o.train_top_k
                                                  << " needs a landmark model (--attention landmark); this run's model "
                                                     "has standard attention"
                                                  << (mc.xl_cache > 0 ? " with an XL cache (--xl-cache)" : ""));
  LM_CHECK(!mc.context_miss,
           "train: --train-top-k does not support --cmt: the context-miss token's controlled blocks "
           "would need a choice of their own (train densely, or without --cmt)");
}

TrainData::TrainData(const std::string& dir)
    : tok_path(dir + "/tokenizer.json"),
      tok(load_tokenizer(tok_path)),
      train(dir + "/train.tokens"),
      val(dir + "/val.tokens") {
  for (const TokenFile* f : {&train, &val})
    LM_CHECK(f->fingerprint() == tok->fingerprint(),
             "train: token file " << f->path() << " was made with tokenizer " << f->fingerprint() << " but " << tok_path
                                  << " is " << tok->fingerprint() << "; re-run `landmark prepare`");
}

// --doc-starts: the positions right after each "\n" token where a whole row of `row` tokens (a
// window, or an XL model's segment) still fits (a landmark window may span two more raw tokens:
// landmark_batch.cpp).
void find_document_starts(TrainData& data, const GPTConfig& mc, int64_t row) {
  const std::vector<int32_t> nl = data.tok->encode("\n");
  LM_CHECK(nl.size() == 1, "train: --doc-starts needs \"\\n\" to be one token, but "
                               << data.tok_path << " encodes it as " << nl.size() << " tokens");
  const int64_t spare = mc.landmark() ? 3 : 1;
  for (auto [file, starts] : {std::pair{&data.train, &data.train_starts}, std::pair{&data.val, &data.val_starts}}) {
    *starts = document_starts(*file, nl[0], file->size() - row - spare);
    LM_CHECK(!starts->empty(), "train: --doc-starts: " << file->path() << " has no document start with room for a "
                                                       << (mc.xl_cache > 0 ? "segment" : "window") << " of " << row
                                                       << " tokens");
  }
}

// The run must fit: the batch splits evenly across the ranks, and each token file holds a row and
// its next-token targets.
void check_run_fits(const TrainOptions& o, const TrainData& data, int64_t row, const dist::World& world) {
  LM_CHECK(o.batch_size % world.size == 0, "train: --batch " << o.batch_size
                                                             << (o.resume.empty() ? "" : " (the resumed run's)")
                                                             << " does not split evenly across " << world.size
                                                             << " ranks; give a multiple of " << world.size);
  LM_CHECK(data.train.size() > row + 1 && data.val.size() > row + 1,
           "train: the token files need more than " << (o.segment > 0 ? "--segment" : "block_size")
                                                    << " + 1 = " << row + 1 << " tokens (train has "
                                                    << data.train.size() << ", val " << data.val.size() << ")");
}

}  // namespace lm::trainer_internal
