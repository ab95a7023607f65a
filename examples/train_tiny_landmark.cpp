// train_tiny_landmark.cpp: train a tiny landmark-attention GPT on a text file with the library's
// training loop (train/trainer.h): byte tokens, 2 layers, a landmark after every 8 bytes, 40 steps
// on the CPU. It checks that the loss starts at ln(vocabulary) and falls by more than 1 nat, and
// that a second run with the same seed ends with the same loss bit for bit. Not shown: BPE,
// validation, checkpoints and resuming, the GPU; the model is far too small to be useful.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "train/metrics.h"
#include "train/token_file.h"
#include "train/tokenizer.h"
#include "train/trainer.h"

using namespace lm;

namespace {
std::string read_file(const std::string& path) {  // the whole file; exits 1 when it is missing or empty
  std::ifstream in(path, std::ios::binary);
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (!text.empty()) return text;
  std::printf("FAILED: cannot read %s, or it is empty\n", path.c_str());
  std::exit(1);
}

int failed(const char* why) {
  std::printf("FAILED: %s\n", why);
  return 1;
}

// 1. The data directory `landmark prepare --tokenizer bytes` makes: the tokenizer (bytes plus the
//    landmark token) and the text as token files, 90% to train on, 10% held out.
void prepare_bytes(const std::string& text, const std::string& dir) {
  ByteTokenizer tok;
  tok.add_special("<|landmark|>");
  const std::vector<int32_t> ids = tok.encode(text);
  std::filesystem::create_directories(dir);
  save_tokenizer(tok, dir + "/tokenizer.json");
  const auto cut = ids.begin() + static_cast<std::ptrdiff_t>(ids.size() * 9 / 10);
  write_token_file(dir + "/train.tokens", {ids.begin(), cut}, tok.vocab_size(), tok.fingerprint());
  write_token_file(dir + "/val.tokens", {cut, ids.end()}, tok.vocab_size(), tok.fingerprint());
}
}  // namespace

int main(int argc, char** argv) {
  const std::string text = read_file(argc > 1 ? argv[1] : LM_EXAMPLE_TEXT);
  if (text.size() < 10000) return failed("need a text file of at least 10,000 bytes");
  prepare_bytes(text, "tiny_landmark_data");

  // 2. The run: a tiny landmark model (vocab_size comes from the tokenizer), 40 steps.
  TrainOptions o;
  o.model.attention = AttentionKind::Landmark;
  o.model.landmark_every = 8;  // F
  o.model.n_layer = 2;
  o.model.n_head = 2;
  o.model.n_embd = 48;
  o.model.block_size = 64;  // training windows of 64 tokens, landmarks included
  o.batch_size = 8;
  o.steps = 40;
  o.lr = 3e-3;
  o.eval_every = 0;    // no validation passes, to stay fast
  o.log_every_s = 10;  // progress lines: the first step, the last, and one every 10 s between
  o.data_dir = "tiny_landmark_data";
  o.out_dir = "tiny_landmark_run";
  const TrainResult first = train(o, std::cout);
  const MetricsLog log = read_metrics(o.out_dir + "/metrics.jsonl");  // one line per step
  for (size_t i = 0; i < log.loss.size(); ++i)
    if (i == 0 || (i + 1) % 10 == 0) std::printf("  step %2.0f  loss %.4f\n", log.step[i], log.loss[i]);
  o.out_dir = "tiny_landmark_run_again";
  std::ostringstream quiet;  // the second run's log is not shown
  const TrainResult again = train(o, quiet);

  // 3. The checks. Step 1's loss is the untrained model's: its logits are near 0, so about
  //    ln(257) nats (uniform over the vocabulary).
  const double start = log.loss.front(), end = log.loss.back(), uniform = std::log(257.0);
  std::printf("loss at step 1 %.4f (ln 257 = %.4f), at step %lld %.4f: fell by %.4f nats\n", start, uniform,
              static_cast<long long>(first.step), end, start - end);
  std::printf("same seed, second run: final loss %.17g vs %.17g\n", first.last_loss, again.last_loss);
  if (std::fabs(start - uniform) > 0.3) return failed("the untrained loss is not near ln(257)");
  if (!(end < start - 1.0)) return failed("the loss did not fall by more than 1 nat in 40 steps");
  if (first.last_loss != again.last_loss) return failed("two runs with the same seed differ");
  std::printf("training checks passed\n");
  return 0;
}
