// test_rotary_cache.cpp: RotaryCache (infer/rotary_cache.h), the rotary tables inference keeps
// between chunks, against rotary_tables (nn/functional.h), which it must reproduce bit for bit.
#include "tests/helpers.h"

#include "infer/rotary_cache.h"

using namespace lm;
using namespace lm::test;

TEST_CASE("RotaryCache: rows equal rotary_tables, columns are the rows transposed, across growth", "[infer]") {
  // Independent answer: rotary_tables for the same positions. 1500 positions forces a growth past
  // the initial 1024, after which the column tables must have been rebuilt too.
  const int64_t HS = 8, half = HS / 2, P = 1500;
  RotaryCache rc(HS, 10000.0, DType::F64, Device::CPU);
  RotaryTables ref = rotary_tables(P, HS, 10000.0, DType::F64, Device::CPU);  // (1, P, half)
  const std::vector<double> rc_cos = values(ref.cos), rc_sin = values(ref.sin);
  const double* ct = rc.cos_cols<double>(P);
  const double* st = rc.sin_cols<double>(P);
  const int64_t stride = rc.col_stride();
  REQUIRE(stride >= P);
  const double* cr = rc.cos_rows<double>(0, P);  // no growth: P is already covered
  for (int64_t p = 0; p < P; p += 7)
    for (int64_t i = 0; i < half; ++i) {
      CHECK(cr[p * half + i] == rc_cos[p * half + i]);
      CHECK(ct[i * stride + p] == rc_cos[p * half + i]);
      CHECK(st[i * stride + p] == rc_sin[p * half + i]);
    }
}

TEST_CASE("RotaryCache: gathered tables equal rotary_tables at the same positions", "[infer]") {
  // Independent answer: rotary_tables on the same (unordered, repeated) positions, which the
  // cache's rows come from; a gather moves values, so they must agree exactly.
  const int64_t HS = 6;
  RotaryCache rc(HS, 500.0, DType::F32, Device::CPU);
  const std::vector<int32_t> pos{7, 0, 2047, 7, 3};  // 2047 grows the cache past its first 1024 rows
  const RotaryTables got = rc.tables(pos);
  const RotaryTables want = rotary_tables(from_vector(pos, {1, 5}), HS, 500.0, DType::F32, Device::CPU);
  REQUIRE(got.cos.shape() == want.cos.shape());
  CHECK(values(got.cos) == values(want.cos));
  CHECK(values(got.sin) == values(want.sin));
  const RotaryTables r = rc.range(1000, 3);  // positions 1000, 1001, 1002
  const RotaryTables rw = rotary_tables(from_vector(std::vector<int32_t>{1000, 1001, 1002}, {1, 3}), HS, 500.0,
                                        DType::F32, Device::CPU);
  CHECK(values(r.cos) == values(rw.cos));
  CHECK(values(r.sin) == values(rw.sin));
  CHECK_THROWS_AS(rc.tables({-1}), Error);  // negative positions belong to rotary_tables (the CMT's -1)
}
