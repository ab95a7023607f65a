// bench_main.h: what every benchmark program shares at its edges: bad flags and failures end in
// one clear line and an exit status (2: a usage error, 1: a failure), never an uncaught
// exception's abort. Header-only; each bench_*.cpp has a bench_main(argc, argv) and calls
// run_bench_main from main.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

namespace lm {
namespace bench {

// The CPU's model name from /proc/cpuinfo ("unknown CPU" where there is none), printed beside every
// figure: the development machines change from day to day.
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t start = line.find_first_not_of(" \t", line.find(':') == std::string::npos ? line.size() : line.find(':') + 1);
      if (start != std::string::npos) return line.substr(start);
    }
  return "unknown CPU";
}

// A bad command line: the message is printed with the usage, exit status 2.
struct UsageError {
  std::string message;
};

// The integer in `text` for flag `flag`, in [lo, hi]; anything else (a word, trailing junk, out
// of range) is a UsageError naming the flag and the value.
inline int64_t parse_int_flag(const char* flag, const char* text, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    throw UsageError{std::string(flag) + " needs an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got '" + text + "'"};
  return v;
}

// Runs body(argc, argv); a UsageError prints "NAME: MESSAGE" and the usage text (exit 2), any other
// exception "NAME: error: WHAT" (exit 1).
template <class Body>
int run_bench_main(const char* name, const char* usage, int argc, char** argv, Body body) {
  try {
    return body(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n%s", name, e.message.c_str(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace bench
}  // namespace lm
