// config.cpp: the names of the inference knobs and their checks (config.h).
#include "infer/config.h"

#include "tensor/check.h"

namespace lm {

PositionMode parse_position_mode(const std::string& s) {
  if (s == "stingy") return PositionMode::Stingy;
  if (s == "exact") return PositionMode::Exact;
  LM_FAIL("unknown position mode '" << s << "' (expected stingy or exact)");
}
const char* position_mode_name(PositionMode m) { return m == PositionMode::Stingy ? "stingy" : "exact"; }

KeySearch parse_key_search(const std::string& s) {
  if (s == "bounded") return KeySearch::Bounded;
  if (s == "scan") return KeySearch::Scan;
  if (s == "approx") return KeySearch::Approx;
  LM_FAIL("unknown landmark search '" << s << "' (expected scan, bounded or approx)");
}

const char* key_search_name(KeySearch s) {
  return s == KeySearch::Bounded ? "bounded" : s == KeySearch::Approx ? "approx" : "scan";
}

void InferConfig::validate() const {
  LM_CHECK(chunk_len > 0, "inference: chunk length must be positive, got " << chunk_len);
  LM_CHECK(k >= 0, "inference: k must be >= 0, got " << k);
  LM_CHECK(capacity >= 0, "inference: capacity must be >= 0 (0 = unlimited), got " << capacity);
  LM_CHECK(cmt_cutoff >= 0 && cmt_cutoff <= 1, "inference: the CMT cutoff must be in [0, 1], got " << cmt_cutoff);
  LM_CHECK(search_tiles >= 1 && search_tiles <= (int64_t{1} << 30),
           "inference: the approximate search's tile budget must be in [1, 2^30], got " << search_tiles);
  LM_CHECK(!blocks_on_device || (block_dir.empty() && !kv_f16),
           "inference: block K/V kept on the device are neither in files (block_dir) nor f16 (kv_f16)");
}

}  // namespace lm
