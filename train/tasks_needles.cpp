// tasks_needles.cpp: what each long-context task hides in the text, what it asks and its answer
// (train/tasks_internal.h draw_task_content).
#include <algorithm>
#include <set>

#include "tensor/check.h"
#include "train/tasks_internal.h"

namespace lm {

namespace {
// Keys of the special numbers and the words of the frequency lists: short common nouns, none of
// them a word of the questions.
const char* const kWords[] = {
    "apple",  "river",  "candle", "garden",  "window", "pepper",  "silver", "castle", "meadow", "button",
    "forest", "ribbon", "harbor", "lemon",   "marble", "pillow",  "rocket", "saddle", "tiger",  "violin",
    "wagon",  "anchor", "basket", "cactus",  "dragon", "feather", "goblet", "hammer", "island", "jacket",
    "kettle", "ladder", "magnet", "needle",  "orange", "parrot",  "rabbit", "salmon", "tomato", "walnut",
    "barrel", "cherry", "falcon", "guitar",  "helmet", "lantern", "mirror", "oyster", "pebble", "quartz",
    "spider", "turnip", "velvet", "whistle", "yogurt", "zipper",  "bucket", "donkey", "engine", "carrot"};
constexpr int64_t kWordCount = static_cast<int64_t>(sizeof(kWords) / sizeof(kWords[0]));

// `count` distinct draws from make(), in draw order.
template <class Make>
std::vector<std::string> distinct(size_t count, Make make) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  while (out.size() < count) {
    std::string s = make();
    if (seen.insert(s).second) out.push_back(s);
  }
  return out;
}

std::vector<std::string> words(TaskDraws& d, size_t count) {
  return distinct(count, [&] { return std::string(kWords[d.uniform_int(0, kWordCount - 1)]); });
}
std::vector<std::string> numbers(TaskDraws& d, size_t count) {
  return distinct(count, [&] { return std::to_string(d.uniform_int(10000, 99999)); });
}
std::vector<std::string> variable_names(TaskDraws& d, size_t count) {
  return distinct(count, [&] {
    std::string s(5, 'A');
    for (char& c : s) c = static_cast<char>('A' + d.uniform_int(0, 25));
    return s;
  });
}

std::string special(const std::string& word, const std::string& number) {
  return "The special number for " + word + " is " + number + ".";
}

// "a, b and c"
std::string listed(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return s;
}

// One key asked among `keys` keyed lines (niah-single: 1; niah-multikey: 2-8).
TaskContent niah(TaskDraws& d, int64_t keys) {
  const std::vector<std::string> w = words(d, static_cast<size_t>(keys)), v = numbers(d, static_cast<size_t>(keys));
  TaskContent c;
  c.needed = {special(w[0], v[0])};
  for (int64_t i = 1; i < keys; ++i) c.distractors.push_back({special(w[i], v[i])});
  c.question = "What is the special number for " + w[0] + "? The special number for " + w[0] + " is";
  c.answer = {v[0]};
  return c;
}

TaskContent multivalue(TaskDraws& d) {
  const int64_t values = d.uniform_int(2, 4), others = d.uniform_int(1, 3);
  const std::vector<std::string> w = words(d, static_cast<size_t>(1 + others));
  const std::vector<std::string> v = numbers(d, static_cast<size_t>(values + others));
  TaskContent c;
  for (int64_t i = 0; i < values; ++i) c.needed.push_back(special(w[0], v[i]));
  for (int64_t i = 0; i < others; ++i) c.distractors.push_back({special(w[1 + i], v[values + i])});
  c.question = "What are all the special numbers for " + w[0] + "? They are";
  c.answer.assign(v.begin(), v.begin() + values);
  return c;
}

TaskContent multiquery(TaskDraws& d) {
  const int64_t asked = d.uniform_int(2, 4), keys = d.uniform_int(asked, 8);
  const std::vector<std::string> w = words(d, static_cast<size_t>(keys)), v = numbers(d, static_cast<size_t>(keys));
  TaskContent c;
  for (int64_t i = 0; i < asked; ++i) c.needed.push_back(special(w[i], v[i]));
  for (int64_t i = asked; i < keys; ++i) c.distractors.push_back({special(w[i], v[i])});
  c.question = "What are the special numbers for " + listed({w.begin(), w.begin() + asked}) + "? They are";
  c.answer.assign(v.begin(), v.begin() + asked);
  return c;
}

// A chain: "VAR A = n." then "VAR B = VAR A." ... in order.
std::vector<std::string> chain(const std::vector<std::string>& names, const std::string& number) {
  std::vector<std::string> out{"VAR " + names[0] + " = " + number + "."};
  for (size_t i = 1; i < names.size(); ++i) out.push_back("VAR " + names[i] + " = VAR " + names[i - 1] + ".");
  return out;
}

TaskContent vartrack(TaskDraws& d) {
  const int64_t length = d.uniform_int(2, 5), other = d.uniform_int(2, 3);
  const std::vector<std::string> names = variable_names(d, static_cast<size_t>(length + other));
  const std::vector<std::string> v = numbers(d, 2);
  TaskContent c;
  c.needed = chain({names.begin(), names.begin() + length}, v[0]);
  c.distractors.push_back(chain({names.begin() + length, names.end()}, v[1]));
  c.question = "Which variables are equal to " + v[0] + "? They are";
  c.answer.assign(names.begin(), names.begin() + length);
  return c;
}

// Three words repeated c + 2, c + 1 and c times (c 3..4), 4..8 others once or twice, shuffled and
// cut into 3..5 lists: the answer is the three, most frequent first, and every list counts.
TaskContent freqwords(TaskDraws& d) {
  const int64_t base = d.uniform_int(3, 4), others = d.uniform_int(4, 8), lists = d.uniform_int(3, 5);
  const std::vector<std::string> w = words(d, static_cast<size_t>(3 + others));
  std::vector<std::string> bag;
  for (int64_t i = 0; i < 3 + others; ++i) {
    const int64_t times = i < 3 ? base + 2 - i : d.uniform_int(1, 2);
    for (int64_t t = 0; t < times; ++t) bag.push_back(w[static_cast<size_t>(i)]);
  }
  for (size_t i = bag.size() - 1; i > 0; --i)  // Fisher-Yates
    std::swap(bag[i], bag[static_cast<size_t>(d.uniform_int(0, static_cast<int64_t>(i)))]);
  TaskContent c;
  for (int64_t l = 0; l < lists; ++l) {
    const size_t from = bag.size() * static_cast<size_t>(l) / static_cast<size_t>(lists);
    const size_t to = bag.size() * static_cast<size_t>(l + 1) / static_cast<size_t>(lists);
    std::string s = "The words are";
    for (size_t i = from; i < to; ++i) s += " " + bag[i];
    c.needed.push_back(s + ".");
  }
  c.question = "What are the three most frequent words? They are";
  c.answer.assign(w.begin(), w.begin() + 3);
  return c;
}
}  // namespace

TaskContent draw_task_content(TaskKind task, TaskDraws& d) {
  switch (task) {
    case TaskKind::NiahSingle:
      return niah(d, 1);
    case TaskKind::NiahMultikey:
      return niah(d, d.uniform_int(2, 8));
    case TaskKind::NiahMultivalue:
      return multivalue(d);
    case TaskKind::NiahMultiquery:
      return multiquery(d);
    case TaskKind::Vartrack:
      return vartrack(d);
    case TaskKind::Freqwords:
      return freqwords(d);
  }
  LM_FAIL("tasks: unknown task");
}

}  // namespace lm
