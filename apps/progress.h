// progress.h: one line of progress on stderr for long reads (a prompt's prefill): tokens done,
// tokens per second and the time left, rewritten in place about once a second on a terminal, so
// a user sees that a 32k-token prompt is moving; into a log (stderr not a terminal) a plain line
// at most every 10 seconds. Only the commands use it; the libraries report progress through
// callbacks.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lm {
namespace app {

class ProgressLine {
 public:
  explicit ProgressLine(std::string what) : what_(std::move(what)), start_(clock::now()), last_(start_) {}
  // `prefix` (optional) goes before the counts, e.g. the trial number.
  void update(int64_t done, int64_t total, const std::string& prefix = "") {
    const auto now = clock::now();
    if (std::chrono::duration<double>(now - last_).count() < (tty_ ? 1.0 : 10.0) && (done < total || !tty_)) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    const double rate = s > 0 ? static_cast<double>(done) / s : 0.0;
    const long eta = rate > 0 ? static_cast<long>(static_cast<double>(total - done) / rate + 0.5) : 0;
    std::fprintf(stderr, "%s%s %s%s%lld/%lld tokens read, %.0f tok/s, ETA %ld:%02ld%s", tty_ ? "\r" : "", what_.c_str(),
                 prefix.c_str(), prefix.empty() ? "" : ": ", static_cast<long long>(done),
                 static_cast<long long>(total), rate, eta / 60, eta % 60, tty_ ? "   " : "\n");
    std::fflush(stderr);
    shown_ = tty_;
  }
  void restart() { start_ = clock::now(); }
  // Ends the line (a newline) if anything was shown.
  void finish() {
    if (shown_) std::fprintf(stderr, "\n");
    shown_ = false;
  }

 private:
  using clock = std::chrono::steady_clock;
  std::string what_;
  clock::time_point start_, last_;
  bool shown_ = false;
  const bool tty_ = isatty(STDERR_FILENO) != 0;
};

}  // namespace app
}  // namespace lm
