// test_trainer.cpp: the training loop end to end on real text (the opening of Persuasion, byte
// tokens): the loss falls, a run resumed from a checkpoint equals an uninterrupted run bit for
// bit, same seed gives the same losses, and bad input (tokenizer mismatch, NaN weights, bad
// options, mis-shaped checkpoints) stops with a message naming the problem. Transformer-XL runs
// (segments read window by window) against the explicit XL mask, the gradient of one step against
// a hand-summed loss over its windows, and their resume.
#include "tests/helpers.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <tuple>

#include "infer/model_io.h"
#include "autograd/functions.h"
#include "nn/checkpoint.h"
#include "tensor/rng.h"
#include "train/batch.h"
#include "train/metrics.h"
#include "train/token_file.h"
#include "train/tokenizer.h"
#include "train/trainer.h"
#include "tests/xl_mask.h"

using namespace lm;
using namespace lm::test;
namespace fs = std::filesystem;

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A data directory like `landmark prepare` makes: byte tokens of the sample, 90% / 10% split.
std::string make_data_dir(const std::string& name, const Tokenizer& tok) {
  std::string dir = (fs::temp_directory_path() / ("lm_test_trainer_" + name)).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<int32_t> ids = tok.encode(read_text(std::string(LM_TEST_DATA_DIR) + "/persuasion_opening.txt"));
  size_t cut = ids.size() * 9 / 10;
  save_tokenizer(tok, dir + "/tokenizer.json");
  write_token_file(dir + "/train.tokens", std::vector<int32_t>(ids.begin(), ids.begin() + cut), tok.vocab_size(), tok.fingerprint());
  write_token_file(dir + "/val.tokens", std::vector<int32_t>(ids.begin() + cut, ids.end()), tok.vocab_size(), tok.fingerprint());
  return dir;
}

TrainOptions small_options(const std::string& data, const std::string& out) {
  TrainOptions o;
  o.model.n_layer = 2;
  o.model.n_head = 2;
  o.model.n_embd = 32;
  o.model.block_size = 32;
  o.batch_size = 4;
  o.steps = 8;
  o.lr = 3e-3;
  o.eval_every = 0;
  o.ckpt_every = 0;
  o.data_dir = data;
  o.out_dir = out;
  o.quiet = true;
  return o;
}

std::string out_dir(const std::string& name) {
  std::string d = (fs::temp_directory_path() / ("lm_test_trainer_out_" + name)).string();
  fs::remove_all(d);
  return d;
}
// A run interrupted and resumed against the same run straight through: the same tensors bit for
// bit (names in order), RNG state, data cursor and per-step losses.
void check_same_run(const std::string& straight, const std::string& split) {
  Checkpoint x = load_safetensors(straight + "/checkpoint.safetensors"), y = load_safetensors(split + "/checkpoint.safetensors");
  REQUIRE(x.tensors.size() == y.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    INFO(x.tensors[i].first);
    CHECK(x.tensors[i].first == y.tensors[i].first);
    CHECK(max_abs_diff(x.tensors[i].second, y.tensors[i].second) == 0);
  }
  CHECK(x.metadata["rng"] == y.metadata["rng"]);
  CHECK(x.metadata["data_cursor"] == y.metadata["data_cursor"]);
  CHECK(read_metrics(straight + "/metrics.jsonl").loss == read_metrics(split + "/metrics.jsonl").loss);
}
}  // namespace

TEST_CASE("trainer: loss falls on real text in a short run, the log parses and plots", "[trainer]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("falls", tok), out = out_dir("falls");
  TrainOptions o = small_options(data, out);
  o.steps = 120;
  o.model.n_embd = 64;
  o.model.block_size = 64;
  o.batch_size = 8;
  o.eval_every = 60;
  std::ostringstream log;
  TrainResult r = train(o, log);
  CHECK(r.stop_reason == "done");
  MetricsLog m = read_metrics(out + "/metrics.jsonl");
  REQUIRE(m.loss.size() == 120);
  REQUIRE(m.val_loss.size() == 2);
  // Byte-level English starts at ~ln 256 = 5.55 nats; 120 small steps learn at least the letter
  // frequencies (unigram entropy of English bytes ~ 3 nats).
  CHECK(std::fabs(m.loss.front() - std::log(256.0)) < 0.3);
  CHECK(m.val_loss.back() < 3.2);
  CHECK(m.val_loss.back() < m.val_loss.front());
  plot_loss_curves({out + "/metrics.jsonl"}, {"test"}, out + "/loss.png", "test");
  CHECK(fs::file_size(out + "/loss.png") > 1000);
  // Offsets move a log along the step axis: the same log drawn at step 0 and at step 5000 gives
  // another picture (the axis runs to 5120 instead of 120), and an offset of 0 the same one.
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  plot_loss_curves({out + "/metrics.jsonl"}, {"test"}, out + "/loss0.png", "test", false, {0});
  plot_loss_curves({out + "/metrics.jsonl"}, {"test"}, out + "/loss5000.png", "test", false, {5000});
  CHECK(bytes(out + "/loss0.png") == bytes(out + "/loss.png"));
  CHECK(bytes(out + "/loss5000.png") != bytes(out + "/loss.png"));
  CHECK_THROWS_AS(plot_loss_curves({out + "/metrics.jsonl"}, {"test"}, out + "/x.png", "test", false, {1, 2}), Error);
  CHECK(log.str().find("CPU thread(s)") != std::string::npos);  // the thread count is announced
}

TEST_CASE("trainer: N steps + save + resume + N steps == 2N steps, bit for bit", "[trainer]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("resume", tok);
  std::ostringstream log;
  std::string straight = out_dir("straight"), split = out_dir("split");
  TrainOptions a = small_options(data, straight);
  a.model.dropout = 0.1;  // so the RNG state must be restored too
  a.grad_accum = 2;
  train(a, log);
  TrainOptions b = a;
  b.out_dir = split;
  b.stop_at = 4;
  TrainResult first = train(b, log);
  CHECK(first.stop_reason == "stop-at");
  CHECK(first.step == 4);
  TrainOptions c = a;
  c.out_dir = split;
  c.resume = split + "/checkpoint.safetensors";
  c.batch_size = 3;  // ignored: a resumed run takes its training settings from the checkpoint
  c.lr = 5.0;
  c.seed = 7;
  TrainResult second = train(c, log);
  CHECK(second.step == 8);
  check_same_run(straight, split);
}

TEST_CASE("trainer: same seed, same losses, another seed, other losses", "[trainer]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("seed", tok);
  std::ostringstream log;
  const std::string d1 = out_dir("seed1"), d2 = out_dir("seed2"), d3 = out_dir("seed3");
  TrainOptions o = small_options(data, d1);
  train(o, log);
  o.out_dir = d2;
  train(o, log);
  o.out_dir = d3;
  o.seed = 99;
  train(o, log);
  std::vector<double> l1 = read_metrics(d1 + "/metrics.jsonl").loss, l2 = read_metrics(d2 + "/metrics.jsonl").loss,
                      l3 = read_metrics(d3 + "/metrics.jsonl").loss;
  CHECK(l1 == l2);
  CHECK(l1 != l3);
}

TEST_CASE("trainer: resuming with a different tokenizer is refused", "[trainer]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("tok_a", tok), out = out_dir("tok");
  std::ostringstream log;
  train(small_options(data, out), log);
  ByteTokenizer other;
  other.add_special("<|landmark|>");  // a different vocabulary: different fingerprint
  std::string data_b = make_data_dir("tok_b", other);
  TrainOptions o = small_options(data_b, out);
  o.steps = 12;
  o.resume = out + "/checkpoint.safetensors";
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("tokenizer") && Catch::Contains(other.fingerprint()));
}

TEST_CASE("trainer: a NaN weight in a checkpoint is refused, naming the tensor", "[trainer]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("nan", tok), out = out_dir("nan");
  std::ostringstream log;
  TrainOptions o = small_options(data, out);
  o.stop_at = 2;
  train(o, log);
  Checkpoint ck = load_safetensors(out + "/checkpoint.safetensors");
  for (auto& [name, t] : ck.tensors)
    if (name == "model.blocks.0.mlp.fc.weight") t.narrow(0, 0, 1).fill_(NAN);
  save_safetensors(out + "/poisoned.safetensors", ck);
  o.stop_at = 0;
  o.resume = out + "/poisoned.safetensors";
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("model.blocks.0.mlp.fc.weight") && Catch::Contains("NaN") &&
                                       Catch::Contains("element 0"));
}

TEST_CASE("loading a trained model checks its tokenizer against the model and the recorded fingerprint", "[trainer]") {
  BpeTokenizer tok = BpeTokenizer::train(read_text(std::string(LM_TEST_DATA_DIR) + "/persuasion_opening.txt"), 300);
  tok.add_special("<|landmark|>");
  REQUIRE(tok.vocab_size() == 301);
  std::string data = make_data_dir("tokcheck", tok), out = out_dir("tokcheck");
  std::ostringstream log;
  train(small_options(data, out), log);
  const std::string path = out + "/checkpoint.safetensors";
  CHECK(load_trained_model(path).tokenizer->fingerprint() == tok.fingerprint());  // as trained: loads
  Checkpoint ck = load_safetensors(path);
  // A tokenizer one merge short: 300 tokens against the model's 301.
  ck.metadata["tokenizer"]["merges"].erase(ck.metadata["tokenizer"]["merges"].size() - 1);
  save_safetensors(out + "/short.safetensors", ck);
  CHECK_THROWS_WITH(load_trained_model(out + "/short.safetensors"),
                    Catch::Contains("short.safetensors") && Catch::Contains("300 tokens") && Catch::Contains("301"));
  // Same size, other content: the specials renamed. Only the fingerprint can tell.
  ck = load_safetensors(path);
  ck.metadata["tokenizer"]["specials"][0] = "<|other|>";  // the same count of tokens
  save_safetensors(out + "/renamed.safetensors", ck);
  CHECK_THROWS_WITH(load_trained_model(out + "/renamed.safetensors"), Catch::Contains("fingerprint"));
  // A config edited to describe a model of 400 layers of d 1024 (5e9 parameters, 20 GB, which
  // this machine's memory check alone would let through) in a file of a few hundred KB: refused
  // before the model is built, naming the file and both counts; so is resuming from it.
  ck = load_safetensors(path);
  ck.metadata["model"]["n_layer"] = 400;
  ck.metadata["model"]["n_embd"] = 1024;
  ck.metadata["model"]["n_head"] = 8;
  save_safetensors(out + "/huge.safetensors", ck);
  CHECK_THROWS_WITH(load_trained_model(out + "/huge.safetensors"),
                    Catch::Contains("huge.safetensors") && Catch::Contains("parameters but the file holds"));
  TrainOptions o = small_options(data, out_dir("tokcheck_resume"));
  o.resume = out + "/huge.safetensors";
  o.steps_given = false;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("huge.safetensors") && Catch::Contains("parameters but the file holds"));
}

namespace {
// What loading `path` as a trained model says: the error's message, or "(loaded)".
std::string load_outcome(const std::string& path) {
  try {
    load_trained_model(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}
}  // namespace

TEST_CASE("a checkpoint's metadata: a flipped bit, a missing or out-of-range config key, no fingerprint: refused",
          "[trainer][checkpoint]") {
  // A landmark model whose head layout a one-bit flip could change with every shape intact:
  // n_embd 48 with n_head 2 (head size 24), where '2' ^ 0x04 = '6' gives 6 heads of 8.
  ByteTokenizer tok;
  tok.add_special("<|landmark|>");
  std::string data = make_data_dir("meta", tok), out = out_dir("meta");
  TrainOptions o = small_options(data, out);
  o.model.attention = AttentionKind::Landmark;
  o.model.landmark_every = 8;
  o.model.n_embd = 48;
  o.steps = 2;
  std::ostringstream log;
  train(o, log);
  const std::string path = out + "/checkpoint.safetensors", edited = out + "/edited.safetensors";
  REQUIRE(load_outcome(path) == "(loaded)");

  SECTION("one flipped bit in the metadata: the header's checksum refuses it") {
    const std::string valid = read_text(path);
    // (word in the header, offset of the byte to flip, mask): "cttention", "landmark_ever}", n_head 6.
    for (const auto& [word, at, mask] : {std::tuple<std::string, size_t, char>{"attention", 0, 0x02},
                                         std::tuple<std::string, size_t, char>{"landmark_every", 13, 0x04},
                                         std::tuple<std::string, size_t, char>{R"(n_head\":)", 9, 0x04}}) {
      const size_t pos = valid.find(word);
      REQUIRE(pos != std::string::npos);
      std::string flipped = valid;
      flipped[pos + at] = static_cast<char>(flipped[pos + at] ^ mask);
      std::ofstream(edited, std::ios::binary) << flipped;
      INFO(word << " flipped: " << flipped.substr(pos, word.size() + 1));
      CHECK_THAT(load_outcome(edited), Catch::Contains("edited.safetensors") && Catch::Contains("header") &&
                                           Catch::Contains("CRC-32"));
    }
  }
  SECTION("every architecture key of the model config is required") {
    const Checkpoint ck = load_safetensors(path);
    for (const auto& [key, value] : ck.metadata["model"].items()) {
      Checkpoint c = ck;
      c.metadata["model"].erase(key);
      save_safetensors(edited, c);
      INFO("without " << key);
      CHECK_THAT(load_outcome(edited), Catch::Contains("'" + key + "'") && Catch::Contains("missing"));
    }
  }
  SECTION("config values out of range or of the wrong kind are refused, naming the key in words") {
    const Checkpoint ck = load_safetensors(path);
    const std::vector<std::pair<std::string, nlohmann::json>> bad = {
        {"rotary_base", 1e308}, {"rotary_base", 1.0},   {"ln_eps", 0.0},      {"ln_eps", -1e-5},
        {"vocab_size", 257.5},  {"n_layer", 2.5},       {"n_head", "2"},      {"bias", 1},
        {"landmark_every", 0},  {"attention", "cttention"}, {"xl_cache", -1}, {"dropout", 1.0}};
    for (const auto& [key, value] : bad) {
      Checkpoint c = ck;
      c.metadata["model"][key] = value;
      save_safetensors(edited, c);
      INFO(key << " = " << value.dump());
      CHECK_THAT(load_outcome(edited), Catch::Contains(key) && !Catch::Contains("json.exception"));
    }
    // A context-miss token belongs to landmark attention (train refuses --cmt without it).
    Checkpoint c = ck;
    c.metadata["model"]["attention"] = "standard";
    c.metadata["model"]["context_miss"] = true;
    save_safetensors(edited, c);
    CHECK_THAT(load_outcome(edited), Catch::Contains("context_miss") && Catch::Contains("landmark"));
  }
  SECTION("the tokenizer fingerprint is required") {
    Checkpoint c = load_safetensors(path);
    c.metadata.erase("tokenizer_fingerprint");
    save_safetensors(edited, c);
    CHECK_THAT(load_outcome(edited), Catch::Contains("edited.safetensors") && Catch::Contains("tokenizer_fingerprint"));
  }
}

TEST_CASE("trainer: bad options and inputs are reported clearly", "[trainer]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("bad", tok);
  std::ostringstream log;
  TrainOptions o = small_options(data, out_dir("bad"));
  o.steps = 1;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--steps"));
  o = small_options(data + "_missing", out_dir("bad"));
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("tokenizer.json"));
  o = small_options(data, out_dir("bad"));
  o.schedule = "linear";
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--schedule"));
  o = small_options(data, out_dir("bad"));
  o.model.block_size = 100000;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("block_size"));
  // Weights of another shape: the loader names the tensor and both shapes.
  o = small_options(data, out_dir("bad"));
  train(o, log);
  GPTConfig other = o.model;
  other.vocab_size = 256;
  other.n_embd = 64;
  GPT m(other);
  CHECK_THROWS_WITH(load_model_weights(load_safetensors(o.out_dir + "/checkpoint.safetensors"), m, nullptr),
                    Catch::Contains("model.wte.weight") && Catch::Contains("[256, 64]"));
  // Sizes whose products would wrap: an error naming the flag before anything is allocated.
  o = small_options(data, out_dir("bad"));
  o.batch_size = std::numeric_limits<int64_t>::max();
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--batch") && Catch::Contains("tokens per micro-batch"));
  o = small_options(data, out_dir("bad"));
  o.grad_accum = int64_t(1) << 40;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--grad-accum"));
  // A resumed run checks the settings stored in the checkpoint as it checks the command line's:
  // grad_accum 0 there (a file edited by hand) once "trained" with loss 0 and exit 0.
  o = small_options(data, out_dir("bad"));
  train(o, log);
  Checkpoint ck = load_safetensors(o.out_dir + "/checkpoint.safetensors");
  REQUIRE(ck.metadata["train"].contains("grad_accum"));
  ck.metadata["train"]["grad_accum"] = 0;
  save_safetensors(o.out_dir + "/edited.safetensors", ck);
  o.resume = o.out_dir + "/edited.safetensors";
  o.steps = 20;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("edited.safetensors") && Catch::Contains("--grad-accum"));
}

TEST_CASE("trainer: --resume refuses a cursor, seed, RNG state or setting out of range, naming the field in words",
          "[trainer][resume]") {
  // A run of 4 steps stopped at 2, batch 4: its checkpoint holds step 2, data_cursor 2 x 4 = 8
  // (the windows drawn so far), seed 1337 and the generator's state. Each edit below is saved
  // through the writer (valid checksums): only the values are wrong.
  ByteTokenizer tok;
  std::string data = make_data_dir("resume_fields", tok), out = out_dir("resume_fields");
  TrainOptions o = small_options(data, out);
  o.steps = 4;
  o.stop_at = 2;
  std::ostringstream log;
  train(o, log);
  const Checkpoint ck = load_safetensors(out + "/checkpoint.safetensors");
  REQUIRE(ck.metadata["data_cursor"] == 8);
  REQUIRE(ck.metadata["rng"]["seed"] == 1337);
  const std::string edited = out + "/edited.safetensors";
  o.stop_at = 0;
  o.resume = edited;
  o.out_dir = out_dir("resume_fields_child");
  auto outcome = [&](const Checkpoint& c) {
    save_safetensors(edited, c);
    try {
      train(o, log);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(resumed)");
  };
  REQUIRE(outcome(ck) == "(resumed)");
  const uint64_t u64_max = std::numeric_limits<uint64_t>::max();
  // (path of the field, a bad value, the field as the message must name it). A seed of 2^64 - 1 is
  // one --seed accepts, but not the one the generator was seeded with (rng.seed 1337).
  const std::vector<std::tuple<std::vector<std::string>, nlohmann::json, std::string>> bad = {
      {{"data_cursor"}, -1, "data_cursor"},       {{"data_cursor"}, u64_max, "data_cursor"},
      {{"data_cursor"}, 17, "data_cursor"},       {{"data_cursor"}, "8", "data_cursor"},
      {{"seed"}, -1, "seed"},                     {{"seed"}, u64_max, "seed"},
      {{"rng", "offset"}, -1, "rng.offset"},      {{"rng", "offset"}, u64_max, "rng.offset"},
      {{"rng", "seed"}, 7, "rng.seed"},           {{"step"}, -3, "step"},
      {{"step"}, 2.5, "step"},                    {{"train", "batch_size"}, 2.5, "batch_size"},
      {{"train", "lr"}, "fast", "lr"},            {{"train", "doc_starts"}, 1, "doc_starts"},
      {{"tokenizer_fingerprint"}, 42, "tokenizer_fingerprint"}};
  for (const auto& [path, value, name] : bad) {
    Checkpoint c = ck;
    nlohmann::json* field = &c.metadata;
    for (const std::string& key : path) field = &(*field)[key];
    *field = value;
    INFO(name << " = " << value.dump());
    CHECK_THAT(outcome(c), Catch::Contains("edited.safetensors") && Catch::Contains(name) &&
                               !Catch::Contains("json.exception"));
  }
  for (const char* key : {"data_cursor", "seed", "step", "rng"}) {
    Checkpoint c = ck;
    c.metadata.erase(key);
    INFO("without " << key);
    CHECK_THAT(outcome(c), Catch::Contains(key) && Catch::Contains("missing") && !Catch::Contains("json.exception"));
  }
}

namespace {
// A Transformer-XL run on the small model: windows of 16, a cache of 16, segments of 64 (4 windows).
TrainOptions xl_options(const std::string& data, const std::string& out) {
  TrainOptions o = small_options(data, out);
  o.model.block_size = 16;
  o.model.xl_cache = 16;
  o.segment = 64;
  o.batch_size = 2;
  return o;
}

// The mean loss over every token of the segments at (seed, cursor), computed without forward_xl:
// each segment in one GPT::forward with the explicit XL mask (tests/xl_mask.h).
double naive_xl_loss(GPT& m, const TokenFile& f, const TrainOptions& o, uint64_t seed, uint64_t cursor) {
  Batch b = sample_batch(f, o.batch_size, o.segment, seed, cursor);
  Var logits = m.forward(b.x, Tensor(), xl_mask_core(o.model.block_size, o.model.xl_cache));
  return cross_entropy(reshape(logits, {-1, m.config().vocab_size}), b.y.reshape({-1})).item();
}
}  // namespace

TEST_CASE("trainer: an XL model reads each segment window by window, and its losses are the XL mask's", "[trainer][xl]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("xl_loss", tok), out = out_dir("xl_loss");
  TrainOptions o = xl_options(data, out);
  o.steps = 2;
  o.eval_every = 2;
  o.eval_batches = 2;
  std::ostringstream log;
  TrainResult r = train(o, log);
  CHECK(r.stop_reason == "done");
  // A step reads batch x segment tokens: the accounting that lets --steps match another model's tokens.
  CHECK(log.str().find("; 128 tokens per step;") != std::string::npos);
  CHECK(log.str().find("segments of 64 tokens read as 4 windows") != std::string::npos);
  MetricsLog ml = read_metrics(out + "/metrics.jsonl");
  REQUIRE(ml.loss.size() == 2);
  REQUIRE(ml.val_loss.size() == 1);
  GPTConfig mc = o.model;
  mc.vocab_size = tok.vocab_size();
  TokenFile train_file(data + "/train.tokens"), val_file(data + "/val.tokens");
  {
    // Step 1's loss is the fresh model's (the seed draws the weights first) on the segments at cursor 0.
    manual_seed(o.seed);
    GPT fresh(mc);
    // f32, the same function summed in other orders (one long masked forward against four windows).
    CHECK(std::fabs(ml.loss[0] - naive_xl_loss(fresh, train_file, o, o.seed, 0)) < 1e-5);
  }
  // Validation reads segments the same way: the final checkpoint's weights on the fixed validation
  // segments (seed ^ 0x5EEDEFA1, cursors 0, B, ...) give the logged validation loss.
  Checkpoint ck = load_safetensors(out + "/checkpoint.safetensors");
  CHECK(ck.metadata["model"]["xl_cache"] == 16);
  CHECK(ck.metadata["train"]["segment"] == 64);
  GPT trained(gpt_config_from_json(ck.metadata["model"]));
  load_model_weights(ck, trained, nullptr);
  double val = 0;
  for (int64_t i = 0; i < o.eval_batches; ++i)
    val += naive_xl_loss(trained, val_file, o, o.seed ^ 0x5EEDEFA1ULL, static_cast<uint64_t>(i * o.batch_size));
  CHECK(std::fabs(ml.val_loss[0] - val / static_cast<double>(o.eval_batches)) < 1e-5);  // f32, as above
}

namespace {
// The gradient of one XL step computed by hand, without forward_xl, prefix_attention or the
// trainer: window w's loss is one GPT::forward over the segment's first (w + 1) T tokens with the
// explicit XL mask (tests/xl_mask.h), scored on window w only. With `detach`, the keys and values
// of every position before window w are constants in that forward (Transformer-XL's
// stop-gradient on its cache: they were computed when the earlier windows were read), so the
// gradient reaches the parameters only through window w's own positions. Without it, one graph
// spans the whole segment. The windows' losses are summed, divided by `divide_by`, and
// backpropagated once. Returns the gradients in named_parameters() order.
std::vector<Tensor> hand_xl_gradient(GPT& m, const Batch& b, int64_t T, int64_t M, bool detach, double divide_by) {
  const int64_t W = b.x.size(1) / T, V = m.config().vocab_size;
  m.zero_grad();
  Var total;
  for (int64_t w = 0; w < W; ++w) {
    const int64_t N = (w + 1) * T;
    std::vector<double> own(static_cast<size_t>(N), 0.0);  // 1 at window w's positions
    for (int64_t j = w * T; j < N; ++j) own[static_cast<size_t>(j)] = 1.0;
    const Tensor is_own = from_vector(own, {N, 1});
    const AttentionFn mask = xl_mask_core(T, M);
    AttentionFn core = [&](const Var& q, const Var& k, const Var& v) {
      if (!detach) return mask(q, k, v);
      return mask(q, where(is_own, k, Var(k.value().clone())), where(is_own, v, Var(v.value().contiguous())));
    };
    Var logits = m.forward(b.x.narrow(1, 0, N).contiguous(), Tensor(), core);
    Var lw = cross_entropy(reshape(contiguous(narrow(logits, 1, w * T, T)), {-1, V}),
                           b.y.narrow(1, w * T, T).contiguous().reshape({-1}));
    total = total.defined() ? add(total, lw) : lw;
  }
  mul(total, 1.0 / divide_by).backward();
  std::vector<Tensor> g;
  for (auto& p : m.named_parameters()) g.push_back(p.second->grad().clone());
  return g;
}

double max_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, max_abs_diff(a[i], b[i]));
  return d;
}
}  // namespace

TEST_CASE("trainer: the gradient of one XL step is one backward of the mean of its windows' losses", "[trainer][xl]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("xl_grad", tok);
  TokenFile train_file(data + "/train.tokens");
  // One micro-batch, and two accumulated (rows at cursors 0 and B, each micro-batch's gradient / 2).
  for (int64_t accum : {1, 2}) {
    INFO("grad_accum " << accum);
    std::string out = out_dir("xl_grad");
    TrainOptions o = xl_options(data, out);  // T 16, M 16, segments of 64 = 4 windows, 2 rows
    o.steps = 2;
    o.stop_at = 1;      // a run has at least two steps; this one stops after the first
    o.grad_accum = accum;
    o.grad_clip = 0;    // the gradient as backward left it
    o.adamw.beta1 = 0;  // AdamW's first moment after one step is then the gradient itself, bit for bit
    std::ostringstream log;
    train(o, log);
    GPTConfig mc = o.model;
    mc.vocab_size = tok.vocab_size();
    manual_seed(o.seed);  // the weights step 1 started from (the seed draws them first)
    GPT m(mc);
    Checkpoint ck = load_safetensors(out + "/checkpoint.safetensors");
    std::vector<Tensor> trainer;  // the gradient of step 1 as the trainer computed it (f32)
    double largest = 0;
    for (auto& [name, p] : m.named_parameters()) {
      trainer.push_back(ck.get("optim." + name + ".exp_avg", p->value().shape(), DType::F32));
      for (double x : values(trainer.back())) largest = std::max(largest, std::fabs(x));
    }
    m.to(DType::F64);
    const int64_t T = mc.block_size, M = mc.xl_cache, W = o.segment / T;
    // The hand-made gradient of the step: each micro-batch's windows, summed and divided by
    // W x grad_accum (the mean over every window the step reads).
    auto hand = [&](int64_t cache, bool detach, double divide_by) {
      std::vector<Tensor> g;
      for (int64_t k = 0; k < accum; ++k) {
        Batch b = sample_batch(train_file, o.batch_size, o.segment, o.seed, static_cast<uint64_t>(k * o.batch_size));
        std::vector<Tensor> gk = hand_xl_gradient(m, b, T, cache, detach, divide_by);
        if (g.empty()) g = gk;
        else for (size_t i = 0; i < g.size(); ++i) g[i] = add(g[i], gk[i]);
      }
      return g;
    };
    const double mean = static_cast<double>(W * accum);
    const double d = max_diff(trainer, hand(M, true, mean));
    INFO("largest gradient entry " << largest << ", trainer (f32) - hand (f64) " << d);
    // f32 forward and backward against f64 (measured 4.4e-8 and 3.2e-8): f32 rounds at 6e-8
    // relative, the entries are at most 0.21, and the sums run in other orders; 1e-6 is about 70
    // ulps of the largest entry and 20,000x below the smallest difference a wrong reading below
    // makes (0.021).
    CHECK(d < 1e-6);
    CHECK(largest > 1e-2);  // not a vacuous comparison of zeros
    // What the check tells apart, each against the trainer's gradient:
    // the sum of the windows' losses instead of their mean (W x the gradient);
    CHECK(max_diff(trainer, hand(M, true, static_cast<double>(accum))) > 1e-2);
    // no stop-gradient: one graph over the segment, so window w's loss reaches the earlier positions;
    CHECK(max_diff(trainer, hand(M, false, mean)) > 1e-2);
    // no cache carried: every window read alone (M = 0 in the mask).
    CHECK(max_diff(trainer, hand(0, true, mean)) > 1e-2);
  }
}

TEST_CASE("trainer: an XL run: N steps + save + resume + N steps == 2N steps, bit for bit", "[trainer][xl]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("xl_resume", tok);
  std::ostringstream log;
  std::string straight = out_dir("xl_straight"), split = out_dir("xl_split");
  TrainOptions a = xl_options(data, straight);
  a.model.dropout = 0.1;  // the RNG state must be restored, and windows draw their masks in order
  a.grad_accum = 2;
  train(a, log);
  TrainOptions b = a;
  b.out_dir = split;
  b.stop_at = 4;
  CHECK(train(b, log).step == 4);
  TrainOptions c = small_options(data, split);  // no XL flags: the model and the segment come from the checkpoint
  c.resume = split + "/checkpoint.safetensors";
  c.steps = a.steps;
  CHECK(train(c, log).step == 8);
  check_same_run(straight, split);
}

TEST_CASE("trainer: --xl-cache and --segment refuse what cannot work, naming the flag", "[trainer][xl]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("xl_bad", tok);
  std::ostringstream log;
  TrainOptions o = xl_options(data, out_dir("xl_bad"));
  o.segment = 0;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--xl-cache 16 needs --segment"));
  o = xl_options(data, out_dir("xl_bad"));
  o.model.xl_cache = 0;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--segment 64") && Catch::Contains("--xl-cache M too"));
  o = xl_options(data, out_dir("xl_bad"));
  o.segment = 40;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--segment 40 must be a multiple of --block-size 16"));
  o.segment = 16;  // one window: the cache would never be read in training
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("at least two windows"));
  o = xl_options(data, out_dir("xl_bad"));
  o.model.attention = AttentionKind::Landmark;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--xl-cache") && Catch::Contains("--attention standard"));
  o = xl_options(data, out_dir("xl_bad"));
  o.device = Device::CUDA;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--xl-cache runs on the CPU only"));
  o = xl_options(data, out_dir("xl_bad"));
  o.segment = 16 * 1000;  // more than the validation text holds
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--segment + 1 = 16001"));
  o = xl_options(data, out_dir("xl_bad"));
  o.batch_size = int64_t(1) << 30;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--segment 64") && Catch::Contains("tokens per micro-batch"));
}

TEST_CASE("trainer: a landmark model (with CMT and positional jumps) learns and resumes bit for bit", "[trainer][landmark]") {
  ByteTokenizer tok;
  tok.add_special("<|landmark|>");
  tok.add_special("<|cmt|>");
  std::string data = make_data_dir("landmark", tok);
  std::ostringstream log;
  std::string straight = out_dir("lm_straight"), split = out_dir("lm_split");
  TrainOptions a = small_options(data, straight);
  a.model.attention = AttentionKind::Landmark;
  a.model.landmark_every = 5;
  a.model.context_miss = true;
  a.jump_max = 4;
  a.cmt_cutoff = 1.0;  // validation drops every controlled block (each P(CMT) < 1) and logs how often
  a.steps = 60;
  a.eval_every = 30;
  a.model.n_embd = 48;
  a.batch_size = 8;
  TrainResult r = train(a, log);
  MetricsLog m = read_metrics(straight + "/metrics.jsonl");
  CHECK(m.val_loss.back() < 3.6);  // from ln(258) = 5.55; a standard model of this size gets ~3.3 here
  CHECK(log.str().find("landmark attention every 5 + CMT") != std::string::npos);
  CHECK(r.last_cmt_drop_rate == 1.0);  // by hand: a cutoff of 1 drops every row
  CHECK(read_text(straight + "/metrics.jsonl").find("\"cmt_drop_rate\":") != std::string::npos);
  TrainOptions b = a;
  b.out_dir = split;
  b.stop_at = 25;
  train(b, log);
  TrainOptions c = a;
  c.out_dir = split;
  c.resume = split + "/checkpoint.safetensors";
  train(c, log);
  Checkpoint x = load_safetensors(straight + "/checkpoint.safetensors"), y = load_safetensors(split + "/checkpoint.safetensors");
  REQUIRE(x.tensors.size() == y.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i) CHECK(max_abs_diff(x.tensors[i].second, y.tensors[i].second) == 0);
  CHECK(y.metadata["model"]["attention"] == "landmark");
  CHECK(y.metadata["model"]["context_miss"] == true);
  CHECK(r.stop_reason == "done");
}

TEST_CASE("trainer: a landmark model needs the landmark token in the tokenizer", "[trainer][landmark]") {
  ByteTokenizer tok;
  std::string data = make_data_dir("nolandmark", tok);
  std::ostringstream log;
  TrainOptions o = small_options(data, out_dir("nolandmark"));
  o.model.attention = AttentionKind::Landmark;
  o.model.landmark_every = 8;  // below the window (32): a window that holds no landmark is refused first
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("<|landmark|>"));
}

TEST_CASE("trainer: the schedule position follows the steps, or the clock when a time limit is set", "[trainer]") {
  // Hand-worked: 100 steps, a 60 s limit.
  CHECK(schedule_position(10, 100, 30.0, 0.0) == 10);    // no limit: the step
  CHECK(schedule_position(10, 100, 30.0, 60.0) == 50);   // half the time gone: half the schedule
  CHECK(schedule_position(70, 100, 30.0, 60.0) == 70);   // the steps are ahead of the clock
  CHECK(schedule_position(10, 100, 59.7, 60.0) == 99);   // floor(99.5)
  CHECK(schedule_position(10, 100, 600.0, 60.0) == 99);  // past the limit: the last position
  CHECK(schedule_position(100, 100, 0.0, 0.0) == 99);
  CHECK_THROWS_AS(schedule_position(-1, 100, 0.0, 0.0), Error);

  // ScheduleClock: 1000 steps in a 100 s limit, so the margin is 20 steps (2%). A run on course
  // (0.09 s a step) whose first step took 0.3 s: the clock says 3 at step 0 and about 3 ahead
  // later, never 20, so the positions are the steps themselves.
  ScheduleClock on_course;
  double t = 0.3;
  for (int64_t step = 0; step < 1000; ++step, t += 0.09) CHECK(on_course.position(step, 1000, t, 100.0) == step);
  CHECK_FALSE(on_course.following);
  // A run too slow for its steps (0.2 s a step: 500 steps in the limit) falls behind by 20 steps at
  // step 20 (t = 4.0 s: the clock at 40) and follows the clock from then on, to the last position.
  ScheduleClock slow;
  CHECK(slow.position(19, 1000, 19 * 0.2, 100.0) == 19);  // the clock at 38: 19 ahead, not yet 20
  CHECK(slow.position(20, 1000, 20 * 0.2, 100.0) == 40);
  CHECK(slow.following);
  CHECK(slow.position(21, 1000, 4.01, 100.0) == 40);  // the clock barely moved: no step back (floor(40.1))
  CHECK(slow.position(400, 1000, 99.95, 100.0) == 999);
  // Without a limit nothing follows a clock.
  ScheduleClock none;
  CHECK(none.position(5, 10, 1e9, 0.0) == 5);
  CHECK(none.position(10, 10, 1e9, 0.0) == 9);
}

TEST_CASE("trainer: a run cut by its time limit ends at the schedule's final learning rate", "[trainer]") {
  // 100000 steps cannot finish in 1.5 s: the schedule follows the clock, and the last step runs
  // at the one-cycle schedule's last value (after a step that overran the limit, one more step
  // runs at that value).
  ByteTokenizer tok;
  std::string data = make_data_dir("time", tok);
  std::ostringstream log;
  TrainOptions o = small_options(data, out_dir("time"));
  o.steps = 100000;
  o.time_limit_min = 1.5 / 60.0;
  TrainResult r = train(o, log);
  CHECK(r.stop_reason == "time limit");
  CHECK(r.step > 2);
  CHECK(r.step < o.steps);
  MetricsLog m = read_metrics(o.out_dir + "/metrics.jsonl");
  REQUIRE(!m.lr.empty());
  const double final_lr = lr_one_cycle(o.steps - 1, o.steps, o.lr);  // peak / 100 / 0.05 = 6e-4
  CHECK(std::fabs(m.lr.back() - final_lr) <= 1e-7 * final_lr);  // the log keeps 8 significant digits
  CHECK(m.lr.front() < m.lr[m.lr.size() / 2]);  // warming up first, then annealing
  CHECK(r.seconds < 1.5 + 1.0);                  // it stopped near the limit (one step past it at most)
}

TEST_CASE("trainer: --init-from copies a standard model into a landmark one, new rows at the mean embedding",
          "[trainer][landmark]") {
  ByteTokenizer tok;
  tok.add_special("<|landmark|>");
  tok.add_special("<|cmt|>");
  std::string data = make_data_dir("init_from", tok), parent_dir = out_dir("init_parent"), child = out_dir("init_child");
  std::ostringstream log;
  TrainOptions p = small_options(data, parent_dir);
  p.steps = 60;
  train(p, log);
  const std::string parent_path = parent_dir + "/checkpoint.safetensors";
  const Checkpoint parent = load_safetensors(parent_path);

  // The weights as init_from_parent leaves them, compared with the parent tensor by tensor.
  GPTConfig c = p.model;
  c.vocab_size = tok.vocab_size();
  c.attention = AttentionKind::Landmark;
  c.context_miss = true;
  GPT model(c);
  const InitReport r = init_from_parent(model, parent, tok);
  CHECK(r.fresh.empty());
  CHECK(r.unused.empty());
  CHECK(r.copied.size() == model.named_parameters().size());
  REQUIRE(r.rows.size() == 2);  // the landmark and the context-miss rows: the parent read neither
  std::vector<int32_t> new_ids{tok.special_id("<|landmark|>"), tok.special_id("<|cmt|>")};
  for (auto& [name, v] : model.named_parameters()) {
    const Tensor& t = parent.get("model." + name);
    if (name != "wte.weight") {
      CHECK(max_abs_diff(v->value(), t) == 0);
      continue;
    }
    // The embedding: rows of regular tokens equal the parent's; the two new ones, the mean of the
    // 256 byte rows summed here in double (tolerance: float rounding of a mean of values ~0.02).
    const std::vector<float> got = v->value().to_vector<float>(), want = t.to_vector<float>();
    const int64_t C = c.n_embd, V = c.vocab_size;
    for (int64_t id = 0; id < V; ++id) {
      const bool fresh = std::find(new_ids.begin(), new_ids.end(), id) != new_ids.end();
      for (int64_t j = 0; j < C; ++j) {
        if (!fresh) {
          CHECK(got[id * C + j] == want[id * C + j]);
          continue;
        }
        double mean = 0;
        for (int64_t b = 0; b < 256; ++b) mean += want[b * C + j];
        CHECK(std::abs(got[id * C + j] - mean / 256) < 1e-7);
      }
    }
  }

  // A parameter the parent lacks keeps its fresh value and is listed; one only the parent has is
  // listed as unused (what a block type added later, or removed, would look like).
  Checkpoint edited;
  edited.metadata = parent.metadata;
  for (const auto& [name, t] : parent.tensors)
    if (name != "model.ln_f.weight") edited.add(name, t);
  edited.add("model.extra.weight", parent.get("model.ln_f.weight"));
  GPT fresh_model(c);
  const Tensor before = fresh_model.ln_f.weight.value().clone();
  const InitReport r2 = init_from_parent(fresh_model, edited, tok);
  CHECK(r2.fresh == std::vector<std::string>{"ln_f.weight"});
  CHECK(r2.unused == std::vector<std::string>{"extra.weight"});
  CHECK(max_abs_diff(fresh_model.ln_f.weight.value(), before) == 0);

  // Through train(): a landmark run from the parent, recorded in its checkpoint and metrics, its
  // loss at step 1 far below that of the same run from fresh weights because the weights came along.
  TrainOptions f = small_options(data, child);
  f.model.attention = AttentionKind::Landmark;
  f.model.landmark_every = 5;
  f.given = {"landmark_every", "attention"};  // given: not the parent's (standard, and F 50 unused by it)
  f.steps = 6;
  f.init_from = parent_path;
  f.quiet = false;
  std::ostringstream flog;
  train(f, flog);
  // What was not given came from the parent, and the log says so.
  CHECK(flog.str().find("from the parent (not given here): n_layer 2, n_embd 32, n_head 2, block_size 32, "
                        "xl_cache 0, rotary_base 10000.0, ln_eps 1e-05, bias false\n") != std::string::npos);
  CHECK(flog.str().find("<|landmark|> row (id 256) set to the mean token embedding") != std::string::npos);
  CHECK(flog.str().find("a fresh optimizer and schedule") != std::string::npos);
  const Checkpoint ck = load_safetensors(child + "/checkpoint.safetensors");
  REQUIRE(ck.metadata.contains("parent"));
  CHECK(ck.metadata["parent"]["path"] == parent_path);
  CHECK(ck.metadata["parent"]["crc32"].get<std::string>().size() == 8);
  CHECK(ck.metadata["parent"]["attention"] == "standard");
  CHECK(ck.metadata["step"] == 6);  // a fresh schedule: the parent's 60 steps are not counted
  MetricsLog m = read_metrics(child + "/metrics.jsonl");  // the parent record is skipped
  REQUIRE(m.loss.size() == 6);
  TrainOptions scratch = f;
  scratch.init_from.clear();
  scratch.out_dir = out_dir("init_scratch");
  train(scratch, log);
  MetricsLog sm = read_metrics(scratch.out_dir + "/metrics.jsonl");
  INFO("first loss: from the parent " << m.loss[0] << ", from scratch " << sm.loss[0]);
  CHECK(m.loss[0] < sm.loss[0] - 1.0);
  CHECK(read_text(child + "/metrics.jsonl").rfind("{\"parent\":", 0) == 0);
  // Resuming the fine-tune keeps the parent's record.
  TrainOptions g = f;
  g.init_from.clear();
  g.resume = child + "/checkpoint.safetensors";
  g.steps = 8;
  train(g, flog);
  CHECK(load_safetensors(child + "/checkpoint.safetensors").metadata["parent"]["crc32"] == ck.metadata["parent"]["crc32"]);
}

TEST_CASE("trainer: --init-from refuses other shapes, another tokenizer, and --resume", "[trainer]") {
  ByteTokenizer tok;
  tok.add_special("<|landmark|>");
  std::string data = make_data_dir("init_bad", tok), parent_dir = out_dir("init_bad_parent");
  std::ostringstream log;
  train(small_options(data, parent_dir), log);
  const std::string parent = parent_dir + "/checkpoint.safetensors";
  TrainOptions o = small_options(data, out_dir("init_bad_child"));
  o.init_from = parent;
  o.model.n_embd = 48;
  o.given = {"n_embd"};
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("n_embd is 48 on the command line but 32 in the parent"));
  GPTConfig wide = o.model;  // init_from_parent itself, called with a model of another width
  wide.vocab_size = tok.vocab_size();
  GPT wide_model(wide);
  CHECK_THROWS_WITH(init_from_parent(wide_model, load_safetensors(parent), tok),
                    Catch::Contains("'wte.weight'") && Catch::Contains("[257, 32] in the parent") &&
                        Catch::Contains("[257, 48] in the new model"));
  o.model.n_embd = 32;
  o.resume = parent;
  CHECK_THROWS_WITH(train(o, log), Catch::Contains("--init-from") && Catch::Contains("--resume"));
  ByteTokenizer other;  // no landmark token: another fingerprint
  TrainOptions q = small_options(make_data_dir("init_bad_other", other), out_dir("init_bad_child2"));
  q.init_from = parent;
  CHECK_THROWS_WITH(train(q, log), Catch::Contains("tokenizer") && Catch::Contains(other.fingerprint()));
}

TEST_CASE("tables: read_number_table reads what passkey --tsv writes, bad cells name line and column", "[metrics]") {
  const std::string dir = out_dir("table");
  fs::create_directories(dir);
  const std::string good = dir + "/t.tsv", ragged = dir + "/r.tsv", word = dir + "/w.tsv", png = dir + "/t.png";
  std::ofstream(good) << "length\tbase\tfine-tuned\n512\t100.0\t95.0\n\n2048\t-\t90\n";
  const NumberTable t = read_number_table(good);
  CHECK(t.columns == std::vector<std::string>{"length", "base", "fine-tuned"});
  REQUIRE(t.rows.size() == 2);  // the blank line is skipped
  CHECK(t.rows[0] == std::vector<double>{512, 100, 95});
  CHECK(t.rows[1][0] == 2048);
  CHECK(std::isnan(t.rows[1][1]));  // "-": no value
  CHECK(t.rows[1][2] == 90);
  std::ofstream(ragged) << "a\tb\n1\t2\t3\n";
  CHECK_THROWS_WITH(read_number_table(ragged), Catch::Contains("line 2 has 3 cells, the header 2"));
  std::ofstream(word) << "a\tb\n1\t2x\n";
  CHECK_THROWS_WITH(read_number_table(word), Catch::Contains("line 2, column 'b': '2x' is not a number"));
  TableChartOptions o;
  o.log_x = true;
  plot_number_table(good, png, o);
  CHECK(fs::file_size(png) > 1000);
}
