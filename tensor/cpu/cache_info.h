// cpu/cache_info.h: the data-cache sizes of the CPU this process runs on, read at run time (the
// GEMM's block sizes are derived from them, tensor/cpu/gemm.cpp), so that nothing is tuned to the
// machine the code was written on. Linux describes its caches in sysfs
// (/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size,shared_cpu_list}); glibc's sysconf
// is the second source (on virtual machines it can be wrong: 320 MiB of "L3" on a 2-vCPU guest
// whose sysfs says 32 MiB); fixed assumptions are the last. Every figure is clamped to a sane range.
#pragma once

#include <cstdint>
#include <string>

namespace lm {
namespace cpu {

struct CacheSizes {
  int64_t l1d = 0;          // bytes of level-1 data cache per core
  int64_t l2 = 0;           // bytes of level-2 cache per core
  int64_t l3_per_core = 0;  // the last-level cache's bytes divided by the CPUs that share it
  std::string source;       // "sysfs", "sysconf" or "assumed" (the first source that gave the L1 and L2)
};

// The sizes for this machine, read once (thread-safe) and then cached.
const CacheSizes& cache_sizes();

// Reads a sysfs cache directory laid out like /sys/devices/system/cpu/cpu0/cache (index*/level,
// type, size such as "32K", shared_cpu_list such as "0-1,4"). Missing fields stay 0. Exposed for
// the tests, which give it a hand-made directory.
CacheSizes read_sysfs_caches(const std::string& dir);

// "32K" -> 32768, "1024K" -> 1048576, "2M" -> 2097152, "512" -> 512; -1 for anything else.
int64_t parse_cache_size(const std::string& text);

// The number of CPUs in a list such as "0-3,8,10-11" (-> 7); -1 when malformed.
int64_t count_cpu_list(const std::string& text);

}  // namespace cpu
}  // namespace lm
