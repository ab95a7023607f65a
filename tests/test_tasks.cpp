// test_tasks.cpp: the long-context tasks (train/tasks.h) and their scoring (evals/tasks_eval.h).
// Every generator's gold answer is found again by a parser written here from the prompt text
// alone (regular expressions over the needles' wording, not the generators' code); the depth lands
// where asked within a sentence; seeds reproduce bytes; scores of hand-made answers; bad input
// refused with an error naming the flag.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "evals/tasks_eval.h"
#include "tensor/check.h"
#include "train/tasks.h"
#include "train/tokenizer.h"

using namespace lm;

namespace {
const Haystack& persuasion() {
  static const Haystack hay([] {
    std::ifstream in(std::string(LM_TEST_DATA_DIR) + "/persuasion_opening.txt", std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }());
  return hay;
}

// Every match of `re` in `text`: its groups 1..n.
std::vector<std::vector<std::string>> all_matches(const std::string& text, const std::string& re) {
  std::vector<std::vector<std::string>> out;
  const std::regex r(re);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), r); it != std::sregex_iterator(); ++it) {
    std::vector<std::string> g;
    for (size_t i = 1; i < it->size(); ++i) g.push_back((*it)[i].str());
    out.push_back(g);
  }
  return out;
}

std::string ends_with(const std::string& text, const std::string& re) {  // group 1 of a match at the end
  std::smatch m;
  const bool found = std::regex_search(text, m, std::regex(re + "$"));
  return found ? m[1].str() : std::string("<no question>");
}

// The special numbers in text order: (word, number).
std::vector<std::vector<std::string>> specials(const std::string& t) {
  return all_matches(t, "The special number for ([a-z]+) is ([0-9]+)\\.");
}

std::vector<std::string> niah_answer(const std::string& t) {
  const std::string word = ends_with(t, "What is the special number for ([a-z]+)\\? The special number for [a-z]+ is");
  std::vector<std::string> out;
  for (const auto& s : specials(t))
    if (s[0] == word) out.push_back(s[1]);
  return out;  // exactly one when the prompt is right
}

std::vector<std::string> multivalue_answer(const std::string& t) {
  const std::string word = ends_with(t, "What are all the special numbers for ([a-z]+)\\? They are");
  std::vector<std::string> out;
  for (const auto& s : specials(t))
    if (s[0] == word) out.push_back(s[1]);
  return out;
}

std::vector<std::string> multiquery_answer(const std::string& t) {
  std::string asked = ends_with(t, "What are the special numbers for ([a-z, ]+)\\? They are");
  asked = std::regex_replace(asked, std::regex(" and "), ", ");
  std::vector<std::string> out;
  for (const auto& w : all_matches(asked, "([a-z]+)"))
    for (const auto& s : specials(t))
      if (s[0] == w[0]) out.push_back(s[1]);
  return out;
}

// The variables equal to the asked number, in the order their statements stand in the text.
std::vector<std::string> vartrack_answer(const std::string& t) {
  const std::string number = ends_with(t, "Which variables are equal to ([0-9]+)\\? They are");
  std::set<std::string> equal;
  std::vector<std::string> out;
  for (const auto& s : all_matches(t, "VAR ([A-Z]+) = (VAR )?([A-Z0-9]+)\\.")) {
    const bool holds = s[1].empty() ? s[2] == number : equal.count(s[2]) > 0;
    if (holds && equal.insert(s[0]).second) out.push_back(s[0]);
  }
  return out;
}

// The three most frequent words of the lists, most frequent first; empty when the top three are
// not separated from the rest (or among themselves) by their counts.
std::vector<std::string> freqwords_answer(const std::string& t) {
  std::map<std::string, int> count;
  for (const auto& l : all_matches(t, "The words are ([a-z ]+)\\."))
    for (const auto& w : all_matches(l[0], "([a-z]+)")) ++count[w[0]];
  std::vector<std::pair<int, std::string>> by;
  for (const auto& [w, c] : count) by.push_back({-c, w});
  std::sort(by.begin(), by.end());
  if (by.size() < 4 || by[0].first == by[1].first || by[1].first == by[2].first || by[2].first == by[3].first)
    return {};
  return {by[0].second, by[1].second, by[2].second};
}

std::vector<std::string> parse_answer(TaskKind task, const std::string& t) {
  switch (task) {
    case TaskKind::NiahSingle:
    case TaskKind::NiahMultikey:
      return niah_answer(t);
    case TaskKind::NiahMultivalue:
      return multivalue_answer(t);
    case TaskKind::NiahMultiquery:
      return multiquery_answer(t);
    case TaskKind::Vartrack:
      return vartrack_answer(t);
    case TaskKind::Freqwords:
      return freqwords_answer(t);
  }
  return {};
}

TaskPrompt prompt(TaskKind task, int64_t length, double depth, uint64_t seed, uint64_t trial) {
  ByteTokenizer tok;
  return make_task_prompt(tok, persuasion(), TaskSpec{task, length, depth, seed, trial});
}

// The text without its needles and question: the haystack bytes before `at` and in all.
std::pair<size_t, size_t> haystack_bytes(const std::string& text, size_t at) {
  const std::regex needle(
      "(The special number for [a-z]+ is [0-9]+\\.|VAR [A-Z]+ = (VAR )?[A-Z0-9]+\\.|The words are [a-z ]+\\.) ?");
  const std::string before = std::regex_replace(text.substr(0, at), needle, "");
  const size_t what = text.rfind(" What "), which = text.rfind(" Which ");
  const size_t q = what == std::string::npos ? which : which == std::string::npos ? what : std::max(what, which);
  const std::string all = std::regex_replace(text.substr(0, q), needle, "");
  return {before.size(), all.size()};
}
}  // namespace

TEST_CASE("tasks: every generator's answer is found again by an independent parser of the prompt", "[tasks]") {
  ByteTokenizer tok;
  for (TaskKind task : all_tasks())
    for (int64_t length : {500, 1500})
      for (uint64_t trial = 0; trial < 12; ++trial) {
        const double depth = static_cast<double>(trial % 5) / 4.0;
        const TaskPrompt p = prompt(task, length, depth, 7, trial);
        INFO(task_name(task) << " length " << length << " trial " << trial << "\n" << p.text);
        CHECK(parse_answer(task, p.text) == p.answer);
        CHECK(p.tokens <= length);
        CHECK(p.tokens == static_cast<int64_t>(tok.encode(p.text).size()));
        CHECK(p.text.find('\t') == std::string::npos);
        CHECK(p.text.find('\n') == std::string::npos);
        const size_t keys = specials(p.text).size();
        if (task == TaskKind::NiahSingle) CHECK(keys == 1);
        if (task == TaskKind::NiahMultikey) CHECK((keys >= 2 && keys <= 8));
        if (task == TaskKind::NiahMultivalue) CHECK((p.answer.size() >= 2 && p.answer.size() <= 4));
        if (task == TaskKind::NiahMultiquery) CHECK((p.answer.size() >= 2 && p.answer.size() <= 4 && keys <= 8));
        if (task == TaskKind::Freqwords) CHECK(p.answer.size() == 3);
      }
}

TEST_CASE("tasks: the prompt fills its length with real sentences, none of them a needle", "[tasks]") {
  for (const std::string& s : persuasion().sentences()) {
    CHECK(s.find_first_of("0123456789") == std::string::npos);
    CHECK(s.find("special number") == std::string::npos);
  }
  const TaskPrompt p = prompt(TaskKind::NiahSingle, 4000, 0.5, 1, 0);
  CHECK(p.tokens > 4000 - 400);  // the longest sentence is at most 400 bytes
  CHECK(p.text.find("Sir Walter") != std::string::npos);
}

TEST_CASE("tasks: a verse number opening a line is dropped, not the verse", "[tasks]") {
  const Haystack h(
      "Genesis 1\n\n  1 In the beginning God created the heaven and the earth.\n  2 And the earth was without "
      "form, and void.\n  10 And God called the dry land Earth. He saw it.\nIn 1818 it was printed. Chapter\n3 "
      "words stay? No.\n  12x is no verse number. Yes it is kept. And a last one here. One more for eight. Nine. The "
      "ninth is here. And the tenth.");
  // The heading without a full stop joins the first verse: "Genesis 1 In the beginning ..." has a
  // digit and is left out.
  const std::vector<std::string> want{"And the earth was without form, and void.",
                                      "And God called the dry land Earth.",
                                      "Chapter words stay?",
                                      "Yes it is kept.",
                                      "And a last one here.",
                                      "One more for eight.",
                                      "The ninth is here.",
                                      "And the tenth."};
  CHECK(h.sentences() == want);
}

TEST_CASE("tasks: the answer's first needle stands at the depth asked, within a sentence", "[tasks]") {
  size_t longest = 0;
  for (const std::string& s : persuasion().sentences()) longest = std::max(longest, s.size());
  for (TaskKind task : {TaskKind::NiahSingle, TaskKind::NiahMultivalue, TaskKind::Vartrack, TaskKind::Freqwords})
    for (double depth : {0.0, 0.25, 0.5, 0.75, 1.0})
      for (uint64_t trial = 0; trial < 3; ++trial) {
        const TaskPrompt p = prompt(task, 6000, depth, 3, trial);
        // The first needle holding a gold item (freqwords: the first list).
        size_t at = std::string::npos;
        if (task == TaskKind::Freqwords) at = p.text.find("The words are");
        if (task == TaskKind::Vartrack) at = p.text.find("VAR " + p.answer[0] + " =");
        if (task == TaskKind::NiahSingle || task == TaskKind::NiahMultivalue)
          at = p.text.find("is " + p.answer[0] + ".");
        REQUIRE(at != std::string::npos);
        at =
            p.text.rfind("The ", at) == std::string::npos || task == TaskKind::Vartrack ? at : p.text.rfind("The ", at);
        const auto [before, all] = haystack_bytes(p.text, at);
        INFO(task_name(task) << " depth " << depth << " trial " << trial << ": " << before << " of " << all);
        CHECK(std::abs(static_cast<double>(before) - depth * static_cast<double>(all)) <=
              static_cast<double>(longest + 1));
        // Every other gold needle stands after it.
        for (const std::string& a : p.answer)
          if (task != TaskKind::Freqwords) CHECK(p.text.find(a) >= at);
      }
}

TEST_CASE("tasks: the same seed writes the same bytes, another seed other bytes", "[tasks]") {
  ByteTokenizer tok;
  const TaskMix mix = parse_task_mix("all@64-300");
  const std::string a = task_training_text(tok, persuasion(), mix, 40, 5);
  CHECK(a == task_training_text(tok, persuasion(), mix, 40, 5));
  CHECK(a != task_training_text(tok, persuasion(), mix, 40, 6));
  for (TaskKind task : all_tasks()) {
    CHECK(prompt(task, 800, 0.3, 9, 2).text == prompt(task, 800, 0.3, 9, 2).text);
    CHECK(prompt(task, 800, 0.3, 9, 2).text != prompt(task, 800, 0.3, 10, 2).text);
  }
  // Each training document is a prompt and its answer, of every task.
  std::istringstream in(a);
  std::set<std::string> questions;
  for (std::string line; std::getline(in, line);) {
    const std::smatch m = [&] {
      std::smatch r;
      std::regex_search(line, r, std::regex("\\? (The special number for [a-z]+ is|They are) ([A-Z0-9a-z ]+)\\.$"));
      return r;
    }();
    REQUIRE(!m.empty());
    questions.insert(line.substr(line.rfind('?') - 12, 12));
  }
  CHECK(questions.size() >= 6);
}

TEST_CASE("tasks: exact and recall scores of hand-made answers", "[tasks]") {
  CHECK(score_exact({"12345"}, " 12345.") == 1.0);
  CHECK(score_exact({"12345"}, "12345") == 1.0);
  CHECK(score_exact({"12345"}, " 1234.") == 0.0);
  CHECK(score_exact({"12345"}, " 12345 12345.") == 0.0);
  CHECK(score_exact({"12345"}, " 54321. 12345.") == 0.0);
  CHECK(score_exact({"12345"}, "") == 0.0);
  CHECK(score_recall({"a", "b", "c", "d"}, " a c x.") == 0.5);
  CHECK(score_recall({"a", "b", "c", "d"}, " a a a.") == 0.25);
  CHECK(score_recall({"a", "b", "c", "d"}, " d c b a x y.") == 1.0);
  CHECK(score_recall({"a", "b", "c", "d"}, " a\nb c d.") == 0.25);
  CHECK(score_recall({"a", "b", "c"}, " b. a c") == Approx(1.0 / 3));
  CHECK(score_recall({"a", "b"}, "") == 0.0);
  TaskPromptRow exact, recall;
  exact.answer = {"1", "2"};
  recall.exact = false;
  recall.answer = {"1", "2"};
  CHECK(score_task_answer(exact, " 2 1.") == 0.0);
  CHECK(score_task_answer(recall, " 2 1.") == 1.0);
}

TEST_CASE("tasks: prompts.tsv lines are read back, cells averaged", "[tasks]") {
  const TaskPrompt p = prompt(TaskKind::NiahMultiquery, 500, 0.25, 1, 3);
  const std::string text = std::string(kTaskPromptsHeader) + "\n" + task_prompt_line(p, 500, 25, 3) +
                           task_prompt_line(prompt(TaskKind::NiahSingle, 500, 1, 1, 0), 500, 100, 0);
  const std::vector<TaskPromptRow> rows = parse_task_prompts(text, "mem");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].task == "niah-multiquery");
  CHECK((rows[0].length == 500 && rows[0].depth_pct == 25 && rows[0].trial == 3 && !rows[0].exact));
  CHECK(rows[0].answer == p.answer);
  CHECK(rows[0].prompt == p.text);
  CHECK(rows[1].exact);
  std::vector<TaskAnswer> answers(2);
  answers[0].score = 0.5;
  answers[1].score = 1;
  const std::vector<TaskCell> cells = task_cells({rows[0], rows[0], rows[1]}, {answers[0], answers[1], answers[1]});
  REQUIRE(cells.size() == 2);
  CHECK((cells[0].prompts == 2 && cells[0].mean() == 0.75 && cells[1].mean() == 1.0));
  const std::string tsv = task_cells_tsv("m", cells);
  CHECK(tsv.find("m\tniah-multiquery\t500\t25\t2\t0.75\n") != std::string::npos);
  CHECK(tsv.find("m\tniah-single\t500\t100\t1\t1\n") != std::string::npos);
  answers[0].generated = "a\tb\nc";
  const std::string per_prompt = task_answers_tsv("m", {rows[0]}, {answers[0]});
  CHECK(per_prompt.find("\t0.5\t0\t0\t" + rows[0].answer[0] + " ") != std::string::npos);
  CHECK(per_prompt.find("a\\tb\\nc\n") != std::string::npos);
}

TEST_CASE("tasks: bad input is an error naming the flag", "[tasks]") {
  ByteTokenizer tok;
  auto throws_with = [](auto f, const std::string& what) {
    try {
      f();
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(what) != std::string::npos);
      return;
    }
    FAIL("no error; expected one naming " << what);
  };
  throws_with([] { parse_task("niah-double"); }, "--task: unknown task 'niah-double'");
  throws_with([] { parse_task(""); }, "--task: unknown task ''");
  throws_with(
      [&] {
        make_task_prompt(tok, persuasion(), TaskSpec{TaskKind::NiahMultikey, 30, 0.5, 1, 0});
      },
      "--length 30");
  throws_with([&] { make_task_prompt(tok, persuasion(), TaskSpec{TaskKind::NiahSingle, 500, 1.01, 1, 0}); }, "--depth");
  throws_with([&] { make_task_prompt(tok, persuasion(), TaskSpec{TaskKind::NiahSingle, 500, -0.5, 1, 0}); }, "--depth");
  throws_with([] { parse_task_mix(""); }, "--mix");
  throws_with([] { parse_task_mix("all@9-3"); }, "--mix");
  throws_with([] { parse_task_mix("vartrack:0"); }, "--mix");
  throws_with([] { parse_task_mix("all@1-99999999999"); }, "MAX <= 67108864");
  throws_with([] { parse_task_mix("vartrack,,freqwords"); }, "--mix");
  throws_with([] { parse_task_mix("wordcount"); }, "--mix: unknown task 'wordcount'");
  throws_with([] { Haystack h("One sentence here. And 2 more sentences with 3 digits."); }, "usable sentences");
  const std::string head = std::string(kTaskPromptsHeader) + "\n";
  throws_with([&] { parse_task_prompts("x\n", "p.tsv"); }, "p.tsv: the first line");
  throws_with([&] { parse_task_prompts(head + "vartrack\t500\t50\t0\trecall\t9\t\tQ?\n", "p.tsv"); },
              "p.tsv:2: the answer is empty");
  throws_with([&] { parse_task_prompts(head + "vartrack\t500\t150\t0\trecall\t9\tA\tQ?\n", "p.tsv"); },
              "p.tsv:2: depth_pct");
  throws_with([&] { parse_task_prompts(head + "wc\t500\t50\t0\trecall\t9\tA\tQ?\n", "p.tsv"); },
              "p.tsv:2: unknown task");
  throws_with([&] { parse_task_prompts(head + "vartrack\t500\t50\n", "p.tsv"); }, "p.tsv:2: 3 columns");
}
