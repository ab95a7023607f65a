// fuzz_rdata.cpp: an R lazy-load database (the janeaustenr package's Rdata.rdx + Rdata.rdb,
// read by `corpus`). The input is split in two (fuzz_util.h split_two): the index, then the data.
// Covers gzip/zlib inflation, R's XDR unserialisation and the index checks.
#include "fuzz/fuzz_util.h"
#include "tensor/check.h"
#include "train/corpus.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string base = lm::fuzz::scratch_path("Rdata");
  std::string rdx, rdb;
  lm::fuzz::split_two(data, size, rdx, rdb);
  lm::fuzz::write_scratch(base + ".rdx", reinterpret_cast<const uint8_t*>(rdx.data()), rdx.size());
  lm::fuzz::write_scratch(base + ".rdb", reinterpret_cast<const uint8_t*>(rdb.data()), rdb.size());
  try {
    lm::read_lazyload_db(base);
  } catch (const lm::Error&) {
  }
  return 0;
}
