// cmd_train.cpp: `landmark train`, `landmark plot` and `landmark info`.
#include <csignal>
#include <iostream>
#include <memory>
#include <utility>

#include "apps/commands.h"
#include "nn/checkpoint.h"
#include "tensor/check.h"
#include "train/distributed.h"
#include "train/metrics.h"
#include "train/trainer.h"

namespace lm {
namespace app {

namespace {
// Ctrl-C (SIGINT), `kill` (SIGTERM) and a closed terminal (SIGHUP) all ask the loop to finish
// its step, checkpoint and return; the exit status is then 128 + the signal's number, as a shell
// reports a process killed by it.
volatile std::sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) {
  g_stop_signal = sig;
  stop_requested() = true;
}
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Presets set the model size and batch; explicit flags given after them still win.
struct Preset {
  int64_t layers, embd, heads, block, batch;
};
Preset preset_of(const std::string& name) {
  if (name == "tiny") return {4, 256, 4, 512, 8};
  if (name == "small") return {6, 512, 8, 512, 8};
  return {12, 1024, 8, 512, 8};  // "paper": 12 layers, 8 heads of 128, d 1024 (batch 128 via --grad-accum 16)
}

// The flags that set a key of the model config or a training setting (TrainOptions::given): with
// --resume they must agree with the checkpoint, and with --init-from the model's not given are the
// parent's. An explicit --preset gives the five keys it sets.
constexpr std::pair<const char*, const char*> kFlagKeys[] = {{"--layers", "n_layer"},
                                                             {"--embd", "n_embd"},
                                                             {"--heads", "n_head"},
                                                             {"--block-size", "block_size"},
                                                             {"--batch", "batch_size"},
                                                             {"--attention", "attention"},
                                                             {"--landmark-every", "landmark_every"},
                                                             {"--cmt", "context_miss"},
                                                             {"--xl-cache", "xl_cache"},
                                                             {"--dropout", "dropout"},
                                                             {"--cmt-prob", "cmt_prob"},
                                                             {"--jump", "jump_max"},
                                                             {"--segment", "segment"},
                                                             {"--train-top-k", "train_top_k"},
                                                             {"--train-top-k-gates", "train_top_k_gates"},
                                                             {"--doc-starts", "doc_starts"},
                                                             {"--lr", "lr"},
                                                             {"--schedule", "schedule"},
                                                             {"--warmup", "warmup"},
                                                             {"--min-lr", "min_lr"},
                                                             {"--weight-decay", "weight_decay"},
                                                             {"--beta1", "beta1"},
                                                             {"--beta2", "beta2"},
                                                             {"--grad-clip", "grad_clip"},
                                                             {"--grad-accum", "grad_accum"},
                                                             {"--seed", "seed"}};
}  // namespace

Command train_command(CLI::App& app) {
  auto* sub = app.add_subcommand("train", "Train a GPT on a prepared token directory (see `landmark prepare`)");
  auto o = std::make_shared<TrainOptions>();
  auto preset = std::make_shared<std::string>("tiny");
  auto device = std::make_shared<std::string>("cpu");
  auto attention = std::make_shared<std::string>("standard");
  auto layers = std::make_shared<int64_t>(0), embd = std::make_shared<int64_t>(0), heads = std::make_shared<int64_t>(0),
       block = std::make_shared<int64_t>(0), batch = std::make_shared<int64_t>(0);
  sub->add_option("--preset", *preset,
                  "Model size: tiny (4 layers, d 256, 4 heads, T 512, B 8), small (6, 512, 8), "
                  "paper (12, 1024, 8)")
      ->check(CLI::IsMember({"tiny", "small", "paper"}))
      ->capture_default_str();
  sub->add_option("--data", o->data_dir, "Directory with tokenizer.json, train.tokens, val.tokens")->required();
  sub->add_option("--out", o->out_dir, "Output directory (checkpoint, metrics.jsonl, loss.png)")->capture_default_str();
  sub->add_option("--layers", *layers, "Override the preset's number of layers")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  sub->add_option("--embd", *embd, "Override the preset's embedding size")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  sub->add_option("--heads", *heads, "Override the preset's number of heads")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  sub->add_option("--block-size", *block, "Override the preset's context length T")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  sub->add_option("--batch", *batch, "Override the preset's batch size B")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  sub->add_option("--attention", *attention, "standard (causal) or landmark (grouped softmax, Section 3.1)")
      ->check(CLI::IsMember({"standard", "landmark"}))
      ->capture_default_str();
  sub->add_option("--landmark-every", o->model.landmark_every, "F: regular tokens per landmark block")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->capture_default_str();
  sub->add_flag("--cmt", o->model.context_miss, "Train a context-miss token (Appendix D; landmark attention only)");
  sub->add_option("--cmt-prob", o->cmt_prob, "P_CMT: chance that a landmark is CMT-controlled in training")
      ->check(real_in(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--cmt-cutoff", o->cmt_cutoff,
                  "Validation with a CMT: drop the controlled blocks where P(CMT) < this "
                  "(Appendix D); the drop rate is logged")
      ->check(real_in(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--jump", o->jump_max,
                  "p_jump: positions advance by U{1..p_jump} after each landmark in training "
                  "(Appendix E; 1 = off)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->capture_default_str();
  sub->add_option(
         "--xl-cache", o->model.xl_cache,
         "Transformer-XL: each window also sees this many cached positions (keys and values, per layer) of "
         "the windows before it, with no gradient through them; needs --segment (0: off; standard attention, CPU)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 24))
      ->capture_default_str();
  sub->add_option(
         "--segment", o->segment,
         "With --xl-cache: the tokens of each batch row, a multiple of --block-size read as consecutive windows "
         "with the cache carried across (the paper: --block-size 256 --xl-cache 256 --segment 2048); one "
         "optimizer step per batch of segments")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30))
      ->capture_default_str();
  auto* top_k = sub->add_option("--train-top-k", o->train_top_k,
                                "Training with the cache (beyond the paper): each query attends to the tokens of "
                                "only its K best-scored earlier blocks, as cached inference does (0: the paper's "
                                "dense training; landmark models without --cmt)")
                    ->check(CLI::Range(int64_t(0), int64_t(1) << 20))
                    ->capture_default_str();
  sub->add_option("--train-top-k-gates", o->train_top_k_gates,
                  "With --train-top-k: chosen (only the chosen blocks' landmarks in the top group's softmax, the "
                  "softmax cached inference computes) or all (every earlier landmark stays in it; the blocks left "
                  "out lose their mass, logged per layer as left_out_mass)")
      ->check(CLI::IsMember({"chosen", "all"}))
      ->needs(top_k)
      ->capture_default_str();
  top_k->excludes("--xl-cache");
  sub->add_flag("--doc-starts", o->doc_starts,
                "Start every window at a document (right after a newline token) "
                "instead of anywhere: each window then holds a whole document, as a prompt does");
  sub->add_option("--dropout", o->model.dropout, "Dropout probability")
      ->check(real_in(0.0, 0.95))
      ->capture_default_str();
  sub->add_option("--steps", o->steps, "Total optimizer steps")
      ->check(CLI::Range(int64_t(2), int64_t(1) << 40))
      ->capture_default_str();
  sub->add_option("--lr", o->lr, "Peak learning rate")->check(real_positive())->capture_default_str();
  sub->add_option("--schedule", o->schedule,
                  "one-cycle (paper: lr/100, 2% cosine warm-up, cosine to lr/5) | cosine | constant")
      ->check(CLI::IsMember({"one-cycle", "cosine", "constant"}))
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Warm-up steps (cosine schedule)")
      ->check(non_negative_count())
      ->capture_default_str();
  sub->add_option("--min-lr", o->min_lr, "Final learning rate (cosine schedule)")
      ->check(real_non_negative())
      ->capture_default_str();
  sub->add_option("--weight-decay", o->adamw.weight_decay, "AdamW weight decay (Linear weights only)")
      ->check(real_non_negative())
      ->capture_default_str();
  sub->add_option("--beta1", o->adamw.beta1, "AdamW beta1")->check(real_in(0.0, 0.9999))->capture_default_str();
  sub->add_option("--beta2", o->adamw.beta2, "AdamW beta2")->check(real_in(0.0, 0.99999))->capture_default_str();
  sub->add_option("--grad-clip", o->grad_clip, "Clip the global gradient norm (0: off)")
      ->check(real_non_negative())
      ->capture_default_str();
  sub->add_option("--grad-accum", o->grad_accum, "Micro-batches per step")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->capture_default_str();
  sub->add_option("--eval-every", o->eval_every, "Validation every N steps and at the end (0: never)")
      ->check(non_negative_count())
      ->capture_default_str();
  sub->add_option("--eval-batches", o->eval_batches, "Batches per validation")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->capture_default_str();
  sub->add_option("--ckpt-every", o->ckpt_every, "Checkpoint every N steps (always at the end and on Ctrl-C)")
      ->check(non_negative_count())
      ->capture_default_str();
  sub->add_option("--time-limit", o->time_limit_min,
                  "Stop and checkpoint after this many minutes (0: none); the learning-rate schedule follows the clock "
                  "when it runs ahead of the steps, so a cut run ends annealed")
      ->check(real_in(0.0, 525600.0))
      ->capture_default_str();
  sub->add_option("--stop-at", o->stop_at, "Stop and checkpoint at this step (the schedule still spans --steps)")
      ->check(non_negative_count());
  sub->add_option("--seed", o->seed, "Seed for initialisation, dropout and batches")
      ->check(non_negative_int())
      ->capture_default_str();
  sub->add_option("--device", *device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  auto* resume_opt = sub->add_option("--resume", o->resume,
                                     "Continue from this checkpoint: the model and training settings (seed, batch, lr, "
                                     "schedule, ...) come from it, and a model or training flag that contradicts them "
                                     "is an error; --steps may extend the run")
                         ->check(CLI::ExistingFile);
  sub->add_option("--init-from", o->init_from,
                  "Start a new run from this checkpoint's weights (fine-tuning, e.g. a standard model with --attention "
                  "landmark): --layers/--embd/--heads must be the parent's; they, --block-size, --attention, "
                  "--landmark-every and --xl-cache (with its --segment) default to the parent's (the log lists what "
                  "it took); a fresh optimizer and schedule")
      ->check(CLI::ExistingFile)
      ->excludes(resume_opt);
  sub->add_flag("--quiet", o->quiet, "No progress lines");
  sub->add_option("--log-every", o->log_every_s, "Seconds between progress lines (0: a line every step)")
      ->check(real_in(0.0, 86400.0))
      ->capture_default_str();
  auto run = [=]() {
    const Preset p = preset_of(*preset);
    o->given.clear();
    for (const auto& [flag, key] : kFlagKeys)
      if (sub->count(flag) > 0) o->given.insert(key);
    if (sub->count("--preset") > 0) o->given.insert({"n_layer", "n_embd", "n_head", "block_size", "batch_size"});
    o->model.n_layer = *layers ? *layers : p.layers;
    o->model.n_embd = *embd ? *embd : p.embd;
    o->model.n_head = *heads ? *heads : p.heads;
    o->model.block_size = *block ? *block : p.block;
    o->batch_size = *batch ? *batch : p.batch;
    o->steps_given = sub->count("--steps") > 0;  // on --resume, absent means the checkpoint's total
    o->device = parse_device(*device);
    o->model.attention = parse_attention_kind(*attention);  // the checks that read it: train/trainer_setup.cpp
    LM_CHECK(o->train_top_k == 0 || sub->count("--attention") == 0 || o->model.landmark(),
             "train: --train-top-k needs --attention landmark, not --attention standard");
    g_stop_signal = 0;
    for (int sig : kStopSignals) std::signal(sig, on_stop_signal);
    TrainResult r = train(*o, std::cout);
    for (int sig : kStopSignals) std::signal(sig, SIG_DFL);
    const int status =
        r.stop_reason == "interrupted" ? 128 + (g_stop_signal ? static_cast<int>(g_stop_signal) : SIGINT) : 0;
    if (!dist::world().root()) return status;  // rank 0 draws and reports for all
    const std::string png = o->out_dir + "/loss.png";
    plot_loss_curves({o->out_dir + "/metrics.jsonl"}, {""}, png, "training " + *preset + " (" + o->out_dir + ")");
    std::cout << "stopped: " << r.stop_reason << " at step " << r.step << "; last loss " << r.last_loss
              << (r.last_val_loss >= 0 ? "; validation loss " + std::to_string(r.last_val_loss) : "") << "\n"
              << "checkpoint: " << r.checkpoint << "\nloss curve: " << png << "\n";
    return status;
  };
  return {sub, run};
}

Command plot_command(CLI::App& app) {
  auto* sub = app.add_subcommand("plot", "Draw loss curves from one or more metrics.jsonl logs");
  auto paths = std::make_shared<std::vector<std::string>>();
  auto labels = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>("loss.png");
  auto title = std::make_shared<std::string>("training loss");
  sub->add_option("metrics", *paths, "metrics.jsonl files")->required()->check(CLI::ExistingFile);
  sub->add_option("--labels", *labels, "One label per file (default: the file names)");
  sub->add_option("--out", *out, "PNG to write")->capture_default_str();
  sub->add_option("--title", *title, "Chart title")->capture_default_str();
  auto log_y = std::make_shared<bool>(false);
  sub->add_flag("--log-y", *log_y, "A log-scale loss axis");
  auto offsets = std::make_shared<std::vector<int64_t>>();
  sub->add_option(
         "--offsets", *offsets,
         "One step offset per file, added to its steps (a run that continued another, drawn where its parent stopped)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  auto run = [=]() {
    std::vector<std::string> l = *labels;
    if (l.empty()) l = *paths;
    LM_CHECK(l.size() == paths->size(), "plot: got " << l.size() << " labels for " << paths->size() << " files");
    LM_CHECK(offsets->empty() || offsets->size() == paths->size(),
             "plot: got " << offsets->size() << " --offsets for " << paths->size() << " files");
    plot_loss_curves(*paths, l, *out, *title, *log_y, *offsets);
    std::cout << "wrote " << *out << "\n";
    return 0;
  };
  return {sub, run};
}

Command plot_table_command(CLI::App& app) {
  auto* sub = app.add_subcommand("plot-table",
                                 "Draw every column of a tab-separated table against its first "
                                 "(e.g. pass-key accuracy per model against length)");
  auto path = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>("table.png");
  auto o = std::make_shared<TableChartOptions>();
  auto y_range = std::make_shared<std::vector<double>>();
  sub->add_option("table", *path, "A .tsv file: a header of column names, then rows of numbers ('-' for none)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--out", *out, "PNG to write")->capture_default_str();
  sub->add_option("--title", o->title, "Chart title");
  sub->add_option("--x-label", o->x_label, "x axis label (default: the first column's name)");
  sub->add_option("--y-label", o->y_label, "y axis label");
  sub->add_flag("--log-x", o->log_x, "A log-scale x axis");
  sub->add_option("--y-range", *y_range, "y axis range, e.g. 0,100")
      ->delimiter(',')
      ->expected(2)
      ->check(real_in(-1e30, 1e30));
  auto run = [=]() {
    if (!y_range->empty()) {
      LM_CHECK((*y_range)[0] < (*y_range)[1],
               "plot-table: --y-range needs low < high, got " << (*y_range)[0] << "," << (*y_range)[1]);
      o->y_range = std::make_pair((*y_range)[0], (*y_range)[1]);
    }
    plot_number_table(*path, *out, *o);
    std::cout << "wrote " << *out << "\n";
    return 0;
  };
  return {sub, run};
}

Command info_command(CLI::App& app) {
  auto* sub = app.add_subcommand("info", "Print a checkpoint's metadata and tensor list");
  auto path = std::make_shared<std::string>();
  sub->add_option("checkpoint", *path, "A .safetensors checkpoint")->required()->check(CLI::ExistingFile);
  auto run = [=]() {
    Checkpoint ck = load_safetensors(*path);
    nlohmann::json meta = ck.metadata;
    if (meta.contains("tokenizer"))
      meta["tokenizer"] = "(" + meta["tokenizer"].value("kind", std::string("?")) + " tokenizer, omitted)";
    std::cout << meta.dump(2) << "\n" << ck.tensors.size() << " tensors:\n";
    for (auto& [name, t] : ck.tensors) std::cout << "  " << name << "  " << describe(t) << "\n";
    return 0;
  };
  return {sub, run};
}

}  // namespace app
}  // namespace lm
