// tasks.cpp: the six long-context tasks' names, the haystack and the prompt layout (tasks.h); the
// needles of each task are drawn in tasks_needles.cpp.
#include "train/tasks.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "tensor/check.h"
#include "train/tasks_internal.h"
#include "train/tokenizer.h"

namespace lm {

const std::vector<TaskKind>& all_tasks() {
  static const std::vector<TaskKind> tasks{TaskKind::NiahSingle,     TaskKind::NiahMultikey, TaskKind::NiahMultivalue,
                                           TaskKind::NiahMultiquery, TaskKind::Vartrack,     TaskKind::Freqwords};
  return tasks;
}

const char* task_name(TaskKind t) {
  switch (t) {
    case TaskKind::NiahSingle:
      return "niah-single";
    case TaskKind::NiahMultikey:
      return "niah-multikey";
    case TaskKind::NiahMultivalue:
      return "niah-multivalue";
    case TaskKind::NiahMultiquery:
      return "niah-multiquery";
    case TaskKind::Vartrack:
      return "vartrack";
    case TaskKind::Freqwords:
      return "freqwords";
  }
  return "?";
}

TaskKind parse_task(const std::string& name, const char* flag) {
  std::string known;
  for (TaskKind t : all_tasks()) {
    if (name == task_name(t)) return t;
    known += std::string(known.empty() ? "" : ", ") + task_name(t);
  }
  LM_FAIL(flag << ": unknown task '" << name << "' (the tasks: " << known << ")");
}

bool task_scored_exact(TaskKind t) { return t == TaskKind::NiahSingle || t == TaskKind::NiahMultikey; }

// ---- the haystack ----

namespace {
// A sentence a needle parser could mistake for a needle, or that is not plain prose.
bool usable_sentence(const std::string& s) {
  if (s.size() < 12 || s.size() > 400) return false;
  for (unsigned char c : s)
    if (std::isdigit(c) || c >= 128 || c < 32) return false;
  return s.find("special number") == std::string::npos && s.find("VAR ") == std::string::npos &&
         s.find("The words are") == std::string::npos;
}

// The text without the number opening a line, with the space after it (the King James Bible's
// verse numbers: "  1 In the beginning ..."), so a verse is not left out for its number.
std::string drop_line_numbers(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t line = 0; line < text.size();) {
    const size_t next = std::min(text.find('\n', line), text.size() - 1) + 1;
    size_t p = line;
    while (p < next && (text[p] == ' ' || text[p] == '\t')) ++p;
    size_t q = p;
    while (q < next && std::isdigit(static_cast<unsigned char>(text[q]))) ++q;
    const bool number = q > p && q < next && text[q] == ' ';
    out.append(text, line, p - line);
    out.append(text, number ? q + 1 : p, next - (number ? q + 1 : p));
    line = next;
  }
  return out;
}

// The text with every run of white space made one space.
std::string collapse_space(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    const bool space = std::isspace(c) != 0;
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : static_cast<char>(c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}
}  // namespace

Haystack::Haystack(const std::string& text, const std::string& what) {
  const std::string flat = collapse_space(drop_line_numbers(text));
  size_t begin = 0;
  for (size_t i = 0; i < flat.size(); ++i) {
    const char c = flat[i];
    if (c != '.' && c != '!' && c != '?') continue;
    size_t end = i + 1;  // a closing quote stays with its sentence
    while (end < flat.size() && (flat[end] == '"' || flat[end] == '\'' || flat[end] == ')')) ++end;
    if (end < flat.size() && flat[end] != ' ') continue;
    const std::string s = flat.substr(begin, end - begin);
    if (usable_sentence(s)) sentences_.push_back(s);
    begin = end + 1;
    i = end;
  }
  LM_CHECK(sentences_.size() >= 8, what << ": only " << sentences_.size()
                                        << " usable sentences (at least 8 are needed: prose without digits, 12 to "
                                           "400 bytes each)");
  tokens_.assign(sentences_.size(), -1);
}

int64_t Haystack::tokens(const Tokenizer& tok, size_t i) const {
  if (tokens_[i] < 0) tokens_[i] = static_cast<int64_t>(tok.encode(" " + sentences_[i]).size());
  return tokens_[i];
}

// ---- draws ----

double TaskDraws::uniform() {
  return uniform_from<double>(
      philox::block(base_ + n_++, static_cast<uint32_t>(RngStream::User) + 11 + stream_, seed_));
}

int64_t TaskDraws::uniform_int(int64_t lo, int64_t hi) {
  const int64_t v = lo + static_cast<int64_t>(uniform() * static_cast<double>(hi - lo + 1));
  return std::min(v, hi);
}

// ---- layout ----

namespace {
struct Placed {
  int64_t boundary;
  size_t order;
  const std::string* text;
};

// Boundaries for a group of needles kept in order: the first at `first` (or random in [lo, n]
// when first < 0), the rest sorted random in [that, n].
std::vector<int64_t> group_boundaries(TaskDraws& d, size_t count, int64_t first, int64_t lo, int64_t n) {
  std::vector<int64_t> at(count);
  const bool pinned = first >= 0 && count > 0;
  for (size_t i = 0; i < count; ++i) at[i] = d.uniform_int(pinned ? first : lo, n);
  if (pinned) at[0] = first;
  std::sort(at.begin() + (pinned ? 1 : 0), at.end());
  return at;
}

// The boundary (0..n) whose haystack tokens before it are nearest depth x the haystack's tokens.
int64_t depth_boundary(const Tokenizer& tok, const Haystack& hay, size_t start, int64_t n, double depth) {
  std::vector<int64_t> before(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    before[static_cast<size_t>(i) + 1] =
        before[static_cast<size_t>(i)] + hay.tokens(tok, (start + static_cast<size_t>(i)) % hay.sentences().size());
  const double want = depth * static_cast<double>(before.back());
  int64_t best = 0;
  for (int64_t b = 1; b <= n; ++b)
    if (std::abs(static_cast<double>(before[static_cast<size_t>(b)]) - want) <
        std::abs(static_cast<double>(before[static_cast<size_t>(best)]) - want))
      best = b;
  return best;
}

// The prompt: `n` haystack sentences from `start` (wrapping), the needles at their boundaries,
// then the question. Layout draws come from a fresh copy of `d`, so every n sees the same draws.
std::string lay_out(const Haystack& hay, const TaskContent& c, size_t start, int64_t n, int64_t b0, TaskDraws d) {
  std::vector<Placed> placed;
  size_t order = 0;
  const std::vector<int64_t> need = group_boundaries(d, c.needed.size(), b0, 0, n);
  for (size_t i = 0; i < c.needed.size(); ++i) placed.push_back({need[i], order++, &c.needed[i]});
  for (const std::vector<std::string>& g : c.distractors) {
    const std::vector<int64_t> at = group_boundaries(d, g.size(), -1, 0, n);
    for (size_t i = 0; i < g.size(); ++i) placed.push_back({at[i], order++, &g[i]});
  }
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.boundary != b.boundary ? a.boundary < b.boundary : a.order < b.order;
  });
  std::string text;
  auto add = [&text](const std::string& s) { text += (text.empty() ? "" : " ") + s; };
  size_t p = 0;
  const size_t total = hay.sentences().size();
  for (int64_t b = 0; b <= n; ++b) {
    for (; p < placed.size() && placed[p].boundary == b; ++p) add(*placed[p].text);
    if (b < n) add(hay.sentences()[(start + static_cast<size_t>(b)) % total]);
  }
  add(c.question);
  return text;
}

int64_t count_tokens(const Tokenizer& tok, const std::string& s) { return static_cast<int64_t>(tok.encode(s).size()); }

// Tokens the needles and the question take, each with its leading space.
int64_t fixed_tokens(const Tokenizer& tok, const TaskContent& c) {
  int64_t n = count_tokens(tok, " " + c.question);
  for (const std::string& s : c.needed) n += count_tokens(tok, " " + s);
  for (const auto& g : c.distractors)
    for (const std::string& s : g) n += count_tokens(tok, " " + s);
  return n;
}
}  // namespace

TaskPrompt make_task_prompt_raised(const Tokenizer& tok, const Haystack& hay, const TaskSpec& spec, bool raise) {
  LM_CHECK(spec.depth >= 0 && spec.depth <= 1,
           "--depth: the needles' depth must be in [0, 100] %, got " << spec.depth * 100);
  TaskDraws d(spec.seed, spec.trial, 1 + static_cast<uint32_t>(spec.task));
  const TaskContent c = draw_task_content(spec.task, d);
  const int64_t fixed = fixed_tokens(tok, c);
  LM_CHECK(raise || spec.length >= fixed,
           "--length " << spec.length << " is below what the needles and the question of " << task_name(spec.task)
                       << " take (" << fixed << " tokens, trial " << spec.trial << ")");
  const size_t total = hay.sentences().size();
  const size_t start = static_cast<size_t>(d.uniform_int(0, static_cast<int64_t>(total) - 1));
  int64_t n = 0;
  for (int64_t used = fixed;; ++n) {
    const int64_t next = hay.tokens(tok, (start + static_cast<size_t>(n)) % total);
    if (used + next > spec.length) break;
    used += next;
  }
  TaskPrompt p;
  p.task = spec.task;
  p.answer = c.answer;
  for (;; --n) {  // encoding the whole can merge differently at the seams: step back until it fits
    p.text = lay_out(hay, c, start, n, depth_boundary(tok, hay, start, n, spec.depth), d);
    p.tokens = count_tokens(tok, p.text);
    if (n == 0 || p.tokens <= spec.length) break;
  }
  p.sentences = n;
  return p;
}

TaskPrompt make_task_prompt(const Tokenizer& tok, const Haystack& hay, const TaskSpec& spec) {
  return make_task_prompt_raised(tok, hay, spec, false);
}

std::string task_answer_text(const std::vector<std::string>& answer) {
  std::string s;
  for (const std::string& a : answer) s += " " + a;
  return s + ".";
}

const char* const kTaskPromptsHeader = "task\tlength\tdepth_pct\ttrial\tscoring\ttokens\tanswer\tprompt";

std::string task_prompt_line(const TaskPrompt& p, int64_t length, double depth_pct, uint64_t trial) {
  std::ostringstream os;
  std::string answer;
  for (const std::string& a : p.answer) answer += (answer.empty() ? "" : " ") + a;
  os << task_name(p.task) << '\t' << length << '\t' << depth_pct << '\t' << trial << '\t'
     << (task_scored_exact(p.task) ? "exact" : "recall") << '\t' << p.tokens << '\t' << answer << '\t' << p.text
     << '\n';
  return os.str();
}

}  // namespace lm
