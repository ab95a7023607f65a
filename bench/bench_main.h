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
#include <algorithm>
#include <string>

#include <chrono>

#ifdef _OPENMP
#include <omp.h>
#endif

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

// The f32 FMA peak of this machine in GFLOP/s on `threads` threads, measured: every thread runs
// twelve independent chains of vector fused multiply-adds (as wide as the build's vectors, the
// GEMM micro-kernel's width) from registers, best of three runs of about 0.1 s (after a warm-up run that starts the threads). Twelve chains
// cover the latency of two FMA units of four cycles each. A benchmark divides its GFLOP/s by this
// to say how much of the hardware it used.
// (The attribute: the project compiles in ISO C++ mode, where GCC does not fuse a * b + c unless
// asked; unfused, the probe measured 190 instead of 234 GFLOP/s on a 2-vCPU Zen 4.)
__attribute__((optimize("fp-contract=fast"))) inline double fma_peak_gflops(int threads) {
#if defined(__AVX512F__)
  typedef float vec __attribute__((vector_size(64)));
#elif defined(__AVX__)
  typedef float vec __attribute__((vector_size(32)));
#else
  typedef float vec __attribute__((vector_size(16)));
#endif
  constexpr int lanes = sizeof(vec) / sizeof(float), chains = 12;
  const long iters = 25000000;  // about 0.1 s per run at 100 GFLOP/s per thread
  double best = 0;
  for (int run = 0; run < 4; ++run) {  // run 0 is the warm-up
    const auto t0 = std::chrono::steady_clock::now();
    float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      vec acc[chains], a = vec{} + 0.999f, b = vec{} + 1e-3f;
      for (int i = 0; i < chains; ++i) acc[i] = vec{} + static_cast<float>(i);
      for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
        for (int i = 0; i < chains; ++i) acc[i] = acc[i] * a + b;
        __asm__ volatile("" : "+x"(a));  // keeps the loop from being folded away
      }
      vec total = vec{};
      for (int i = 0; i < chains; ++i) total += acc[i];
      for (int l = 0; l < lanes; ++l) sink += total[l];
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sink == 12345.678f) std::printf(" ");  // uses the result
#ifdef _OPENMP
    const int ran = threads;
#else
    const int ran = 1;
#endif
    if (run > 0) best = std::max(best, 2.0 * lanes * chains * static_cast<double>(iters) * ran / s * 1e-9);
  }
  return best;
}

// One line naming the machine and the threads, printed first by every benchmark:
//   CPU: <model> | threads N | caches L1d 32 KiB, L2 1024 KiB, L3 share 16384 KiB (sysfs)
// The cache figures are what the GEMM's blocks were derived from (tensor/cpu/cache_info.h); the
// caller passes them in so that this header needs no library.
inline void print_machine_line(int threads, long long l1d, long long l2, long long l3_share, const char* source) {
  std::printf("CPU: %s | threads %d | caches L1d %lld KiB, L2 %lld KiB, L3 share %lld KiB (%s)\n", cpu_model().c_str(),
              threads, l1d / 1024, l2 / 1024, l3_share / 1024, source);
}

}  // namespace bench
}  // namespace lm
