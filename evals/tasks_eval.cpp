// tasks_eval.cpp: reading prompts.tsv, answering and scoring the long-context tasks (tasks_eval.h).
#include "evals/tasks_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "beyond/session.h"
#include "infer/generate.h"
#include "plot/plot.h"
#include "tensor/check.h"
#include "tensor/files.h"
#include "train/tasks.h"
#include "train/tokenizer.h"

namespace lm {

namespace {
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t at; (at = s.find(sep, from)) != std::string::npos; from = at + 1)
    out.push_back(s.substr(from, at - from));
  out.push_back(s.substr(from));
  return out;
}

// A whole number in [lo, hi], else an error naming the place and the column.
int64_t whole(const std::string& s, const std::string& where, const char* column, int64_t lo, int64_t hi) {
  char* end = nullptr;
  const long long v = s.empty() ? 0 : std::strtoll(s.c_str(), &end, 10);
  LM_CHECK(!s.empty() && end && *end == 0 && v >= lo && v <= hi,
           where << ": " << column << " '" << s << "' is not a whole number in [" << lo << ", " << hi << "]");
  return v;
}

TaskPromptRow parse_row(const std::string& line, const std::string& where) {
  const std::vector<std::string> f = split(line, '\t');
  LM_CHECK(f.size() == 8, where << ": " << f.size() << " columns, expected 8 (" << kTaskPromptsHeader << ")");
  TaskPromptRow r;
  r.task = task_name(parse_task(f[0], where.c_str()));
  r.length = whole(f[1], where, "length", 1, int64_t{1} << 40);
  char* end = nullptr;
  r.depth_pct = f[2].empty() ? -1 : std::strtod(f[2].c_str(), &end);
  LM_CHECK(!f[2].empty() && end && *end == 0 && r.depth_pct >= 0 && r.depth_pct <= 100,
           where << ": depth_pct '" << f[2] << "' is not a number in [0, 100]");
  r.trial = whole(f[3], where, "trial", 0, int64_t{1} << 40);
  LM_CHECK(f[4] == "exact" || f[4] == "recall", where << ": scoring '" << f[4] << "' is not exact or recall");
  r.exact = f[4] == "exact";
  r.answer = task_answer_items(f[6]);
  LM_CHECK(!r.answer.empty(), where << ": the answer is empty");
  LM_CHECK(!f[7].empty(), where << ": the prompt is empty");
  r.prompt = f[7];
  return r;
}
}  // namespace

std::vector<TaskPromptRow> parse_task_prompts(const std::string& text, const std::string& what) {
  std::vector<std::string> lines = split(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  LM_CHECK(!lines.empty() && lines[0] == kTaskPromptsHeader,
           what << ": the first line is not the prompts header (" << kTaskPromptsHeader << ")");
  std::vector<TaskPromptRow> rows;
  for (size_t i = 1; i < lines.size(); ++i) rows.push_back(parse_row(lines[i], what + ":" + std::to_string(i + 1)));
  LM_CHECK(!rows.empty(), what << ": no prompts after the header");
  return rows;
}

std::vector<TaskPromptRow> read_task_prompts(const std::string& path) {
  require_regular_file(path, "tasks-eval --prompts");
  std::ifstream in(path, std::ios::binary);
  LM_CHECK(in.good(), "tasks-eval --prompts: cannot open " << path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_task_prompts(ss.str(), path);
}

std::vector<std::string> task_answer_items(const std::string& generated) {
  const std::string body = generated.substr(0, generated.find_first_of(".\n"));
  std::vector<std::string> items;
  for (const std::string& s : split(body, ' '))
    if (!s.empty()) items.push_back(s);
  return items;
}

double score_exact(const std::vector<std::string>& gold, const std::string& generated) {
  return task_answer_items(generated) == gold ? 1.0 : 0.0;
}

double score_recall(const std::vector<std::string>& gold, const std::string& generated) {
  if (gold.empty()) return 0.0;
  const std::vector<std::string> got = task_answer_items(generated);
  const std::set<std::string> have(got.begin(), got.end()), want(gold.begin(), gold.end());
  int64_t found = 0;
  for (const std::string& g : want) found += have.count(g) ? 1 : 0;
  return static_cast<double>(found) / static_cast<double>(want.size());
}

double score_task_answer(const TaskPromptRow& row, const std::string& generated) {
  return row.exact ? score_exact(row.answer, generated) : score_recall(row.answer, generated);
}

TaskAnswer answer_task_prompt(const GPT& model, const Tokenizer& tok, const BeyondConfig& cfg, const TaskPromptRow& row,
                              int64_t window) {
  const auto t0 = std::chrono::steady_clock::now();
  const int32_t landmark = tok.special_id("<|landmark|>"), cmt = tok.special_id("<|cmt|>");
  const std::vector<int32_t> ids = tok.encode(row.prompt);
  const int64_t max_new = static_cast<int64_t>(tok.encode(task_answer_text(row.answer)).size()) + 8;
  std::string so_far;
  auto stop = [&](int32_t id) {  // the answer ends at its full stop (or a newline)
    so_far += tok.decode({id});
    return so_far.find_first_of(".\n") != std::string::npos;
  };
  SampleOptions greedy;
  std::vector<int32_t> out;
  if (window > 0) {
    out = generate_windowed(model, ids, window, max_new, greedy, stop, landmark, cmt);
  } else {
    BeyondSession s(model, cfg, landmark, cmt);
    Tensor first = s.read(ids);
    out = generate_from(s, first, max_new, greedy, stop);
  }
  TaskAnswer a;
  a.generated = tok.decode(out);
  a.score = score_task_answer(row, a.generated);
  a.prompt_tokens = static_cast<int64_t>(ids.size());
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return a;
}

std::vector<TaskCell> task_cells(const std::vector<TaskPromptRow>& rows, const std::vector<TaskAnswer>& answers) {
  LM_CHECK(rows.size() == answers.size(),
           "task_cells: " << rows.size() << " prompts, " << answers.size() << " answers");
  std::vector<TaskCell> cells;
  std::map<std::tuple<std::string, int64_t, double>, size_t> at;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto key = std::make_tuple(rows[i].task, rows[i].length, rows[i].depth_pct);
    auto it = at.find(key);
    if (it == at.end()) {
      it = at.emplace(key, cells.size()).first;
      cells.push_back(TaskCell{rows[i].task, rows[i].length, rows[i].depth_pct, 0, 0});
    }
    ++cells[it->second].prompts;
    cells[it->second].score_sum += answers[i].score;
  }
  return cells;
}

namespace {
std::string one_cell(const std::string& s) {  // a TSV field: tabs, newlines and backslashes escaped
  std::string out;
  for (char c : s) out += c == '\t' ? "\\t" : c == '\n' ? "\\n" : c == '\\' ? "\\\\" : std::string(1, c);
  return out;
}
}  // namespace

std::string task_answers_tsv(const std::string& label, const std::vector<TaskPromptRow>& rows,
                             const std::vector<TaskAnswer>& answers) {
  std::ostringstream os;
  os << "label\ttask\tlength\tdepth_pct\ttrial\tscoring\tscore\tprompt_tokens\tseconds\tgold\tanswer\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const TaskPromptRow& r = rows[i];
    std::string gold;
    for (const std::string& g : r.answer) gold += (gold.empty() ? "" : " ") + g;
    os << label << '\t' << r.task << '\t' << r.length << '\t' << r.depth_pct << '\t' << r.trial << '\t'
       << (r.exact ? "exact" : "recall") << '\t' << answers[i].score << '\t' << answers[i].prompt_tokens << '\t'
       << answers[i].seconds << '\t' << gold << '\t' << one_cell(answers[i].generated) << '\n';
  }
  return os.str();
}

std::string task_cells_tsv(const std::string& label, const std::vector<TaskCell>& cells) {
  std::ostringstream os;
  os << "label\ttask\tlength\tdepth_pct\tprompts\tscore\n";
  for (const TaskCell& c : cells)
    os << label << '\t' << c.task << '\t' << c.length << '\t' << c.depth_pct << '\t' << c.prompts << '\t' << c.mean()
       << '\n';
  return os.str();
}

std::vector<std::string> task_heatmaps(const std::vector<TaskCell>& cells, const std::string& prefix,
                                       const std::string& label) {
  std::vector<std::string> written;
  std::vector<std::string> tasks;
  for (const TaskCell& c : cells)
    if (std::find(tasks.begin(), tasks.end(), c.task) == tasks.end()) tasks.push_back(c.task);
  for (const std::string& task : tasks) {
    std::vector<int64_t> lengths;
    std::vector<double> depths;
    for (const TaskCell& c : cells)
      if (c.task == task) lengths.push_back(c.length), depths.push_back(c.depth_pct);
    std::sort(lengths.begin(), lengths.end());
    lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
    std::sort(depths.begin(), depths.end());
    depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
    std::vector<double> v(lengths.size() * depths.size(), std::nan(""));
    for (const TaskCell& c : cells) {
      if (c.task != task) continue;
      const size_t r =
          static_cast<size_t>(std::lower_bound(depths.begin(), depths.end(), c.depth_pct) - depths.begin());
      const size_t col =
          static_cast<size_t>(std::lower_bound(lengths.begin(), lengths.end(), c.length) - lengths.begin());
      v[r * lengths.size() + col] = c.mean();
    }
    plot::HeatmapOptions o;
    std::ostringstream xs, ys;  // the columns' lengths and the rows' depths, in order
    for (int64_t l : lengths) xs << (xs.tellp() > 0 ? ", " : "") << l;
    for (double dp : depths) ys << (ys.tellp() > 0 ? ", " : "") << dp;
    o.title = task + ": " + label;
    o.x_label = "length " + xs.str() + " (tokens)";
    o.y_label = "depth " + ys.str() + " (%)";
    o.value_label = "score";
    o.v_min = 0;
    o.v_max = 1;
    o.cell_size = 64;
    const std::string path = prefix + task + ".png";
    plot::heatmap(path, static_cast<int>(depths.size()), static_cast<int>(lengths.size()), v, o);
    written.push_back(path);
  }
  return written;
}

}  // namespace lm
