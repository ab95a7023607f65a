// progress.h: one line of progress on stderr for long reads (a prompt's prefill): tokens done,
// tokens per second and the time left, rewritten in place about once a second, so a user sees
// that a 32k-token prompt is moving. Only the commands use it; the libraries report progress
// through callbacks.
#pragma once

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
    if (done < total && std::chrono::duration<double>(now - last_).count() < 1.0) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    const double rate = s > 0 ? static_cast<double>(done) / s : 0.0;
    const long eta = rate > 0 ? static_cast<long>(static_cast<double>(total - done) / rate + 0.5) : 0;
    std::fprintf(stderr, "\r%s %s%s%lld/%lld tokens read, %.0f tok/s, ETA %ld:%02ld   ", what_.c_str(), prefix.c_str(),
                 prefix.empty() ? "" : ": ", static_cast<long long>(done), static_cast<long long>(total), rate, eta / 60,
                 eta % 60);
    std::fflush(stderr);
    shown_ = true;
  }
  void restart() { start_ = last_ = clock::now(); }
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
};

}  // namespace app
}  // namespace lm
