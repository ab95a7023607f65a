// cpu/cache_info.cpp: where the cache sizes come from (see cache_info.h).
#include "tensor/cpu/cache_info.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace lm {
namespace cpu {

int64_t parse_cache_size(const std::string& text) {
  size_t i = 0;
  int64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (v > (int64_t(1) << 40)) return -1;  // no cache is a terabyte: refuse before overflowing
    v = v * 10 + (text[i++] - '0');
  }
  if (i == 0) return -1;
  int64_t unit = 1;
  if (i < text.size() && (text[i] == 'K' || text[i] == 'k'))
    unit = 1024, ++i;
  else if (i < text.size() && (text[i] == 'M' || text[i] == 'm'))
    unit = 1024 * 1024, ++i;
  else if (i < text.size() && (text[i] == 'G' || text[i] == 'g'))
    unit = int64_t(1024) * 1024 * 1024, ++i;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  return i == text.size() ? v * unit : -1;
}

int64_t count_cpu_list(const std::string& text) {
  int64_t count = 0;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.back()))) part.pop_back();
    if (part.empty()) return -1;
    const size_t dash = part.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        std::stoll(part, &used);
        if (used != part.size()) return -1;
        count += 1;
      } else {
        const std::string lo_s = part.substr(0, dash), hi_s = part.substr(dash + 1);
        const long long lo = std::stoll(lo_s, &used);
        if (used != lo_s.size()) return -1;
        const long long hi = std::stoll(hi_s, &used);
        if (used != hi_s.size() || hi < lo || hi - lo > 1000000) return -1;
        count += hi - lo + 1;
      }
    } catch (const std::exception&) {
      return -1;
    }
  }
  return count > 0 ? count : -1;
}

namespace {
std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}
}  // namespace

CacheSizes read_sysfs_caches(const std::string& dir) {
  CacheSizes c;
  for (int index = 0; index < 16; ++index) {
    const std::string base = dir + "/index" + std::to_string(index) + "/";
    const std::string level = read_line(base + "level"), type = read_line(base + "type");
    if (level.empty()) continue;
    const int64_t size = parse_cache_size(read_line(base + "size"));
    if (size <= 0 || type == "Instruction") continue;
    if (level == "1")
      c.l1d = size;
    else if (level == "2")
      c.l2 = size;
    else if (level == "3") {
      const int64_t sharers = count_cpu_list(read_line(base + "shared_cpu_list"));
      c.l3_per_core = size / std::max<int64_t>(1, sharers);
    }
  }
  return c;
}

const CacheSizes& cache_sizes() {
  static const CacheSizes sizes = [] {
    CacheSizes c = read_sysfs_caches("/sys/devices/system/cpu/cpu0/cache");
    c.source = "sysfs";
    if (c.l1d <= 0 || c.l2 <= 0) {
      c.source = "sysconf";
#ifdef _SC_LEVEL1_DCACHE_SIZE
      if (c.l1d <= 0) c.l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
      if (c.l2 <= 0) c.l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        // sysconf's L3 is for the whole package and unreliable on virtual machines: left to the
        // assumption below unless sysfs gave it.
#endif
    }
    if (c.l1d <= 0 || c.l2 <= 0) c.source = "assumed";
    if (c.l1d <= 0) c.l1d = 32 * 1024;
    if (c.l2 <= 0) c.l2 = 512 * 1024;
    if (c.l3_per_core <= 0) c.l3_per_core = 2 * 1024 * 1024;
    // Clamp to what real CPUs have, so that a bogus report cannot make a block absurd.
    c.l1d = std::clamp<int64_t>(c.l1d, 16 * 1024, 256 * 1024);
    c.l2 = std::clamp<int64_t>(c.l2, 128 * 1024, 32 * 1024 * 1024);
    c.l3_per_core = std::clamp<int64_t>(c.l3_per_core, 256 * 1024, 128 * 1024 * 1024);
    return c;
  }();
  return sizes;
}

}  // namespace cpu
}  // namespace lm
