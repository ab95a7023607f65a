// cpu/parallel.cpp: the parallel grain (parallel.h), chosen from the same environment variables
// libgomp reads, so that it matches what a parallel region will cost.
#include "tensor/cpu/parallel.h"

#include <cctype>
#include <cstdlib>
#include <string>

#include "tensor/check.h"

namespace lm {
namespace cpu {

namespace {
std::string lower(const char* s) {
  std::string out = s ? s : "";
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

int64_t default_parallel_grain() {
  if (const char* g = std::getenv("LANDMARK_PARALLEL_GRAIN")) {
    char* end = nullptr;
    const long long v = std::strtoll(g, &end, 10);
    LM_CHECK(end != g && *end == '\0' && v >= 1,
             "LANDMARK_PARALLEL_GRAIN must be a positive integer (elements of work), got '" << g << "'");
    return static_cast<int64_t>(v);
  }
  // libgomp: an explicit GOMP_SPINCOUNT decides; otherwise PASSIVE means a spin count of 0 (sleep
  // at once) and anything else spins for a while.
  bool sleeps;
  if (const char* sc = std::getenv("GOMP_SPINCOUNT")) {
    const std::string v = lower(sc);
    sleeps = v != "infinite" && v != "infinity" && std::strtoll(sc, nullptr, 10) == 0;
  } else {
    sleeps = lower(std::getenv("OMP_WAIT_POLICY")) == "passive";
  }
  return sleeps ? kGrainSleepingThreads : kGrainSpinningThreads;
}

int64_t& parallel_grain_setting() {
  static int64_t grain = default_parallel_grain();
  return grain;
}

void set_parallel_grain(int64_t grain) {
  LM_CHECK(grain >= 1, "set_parallel_grain: the grain must be >= 1, got " << grain);
  parallel_grain_setting() = grain;
}

}  // namespace cpu
}  // namespace lm
