// test_rotary_cache.cpp: RotaryCache (infer/rotary_cache.h), the rotary tables inference keeps
// between chunks, against rotary_tables (nn/functional.h), which it must reproduce bit for bit
// whatever window of positions it holds.
#include "tests/helpers.h"

#include "infer/rotary_cache.h"

using namespace lm;
using namespace lm::test;

namespace {
// rotary_tables at one position: the independent answer for that position's row (HS/2 values).
std::vector<double> want_row(int64_t p, int64_t HS, double base, DType dt, bool sine) {
  const RotaryTables t = rotary_tables(from_vector(std::vector<int32_t>{static_cast<int32_t>(p)}, {1, 1}), HS, base, dt,
                                       Device::CPU);
  return values(sine ? t.sin : t.cos);
}
}  // namespace

TEST_CASE("RotaryCache: rows equal rotary_tables, columns are the rows transposed, across growth", "[infer]") {
  // Independent answer: rotary_tables for the same positions. The cache first holds [0, 1024);
  // asking for 1500 grows it, after which the column tables must have been rebuilt too.
  const int64_t HS = 8, half = HS / 2, P = 1500;
  RotaryCache rc(HS, 10000.0, DType::F64, Device::CPU);
  rc.cover(0, 1024);
  RotaryTables ref = rotary_tables(P, HS, 10000.0, DType::F64, Device::CPU);  // (1, P, half)
  const std::vector<double> rc_cos = values(ref.cos), rc_sin = values(ref.sin);
  const RotaryColumns<double> cols = rc.columns<double>(0, P);
  REQUIRE(cols.origin == 0);
  REQUIRE(cols.stride >= P);
  const double* cr = rc.cos_rows<double>(0, P);  // no growth: P is already covered
  for (int64_t p = 0; p < P; p += 7)
    for (int64_t i = 0; i < half; ++i) {
      CHECK(cr[p * half + i] == rc_cos[p * half + i]);
      CHECK(cols.cos_at(p)[i * cols.stride] == rc_cos[p * half + i]);
      CHECK(cols.sin_at(p)[i * cols.stride] == rc_sin[p * half + i]);
    }
}

TEST_CASE("RotaryCache: gathered tables equal rotary_tables at the same positions", "[infer]") {
  // Independent answer: rotary_tables on the same (unordered, repeated) positions, which the
  // cache's rows come from; a gather moves values, so they must agree exactly.
  const int64_t HS = 6;
  RotaryCache rc(HS, 500.0, DType::F32, Device::CPU);
  const std::vector<int32_t> pos{7, 0, 2047, 7, 3};
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
  CHECK_THROWS_AS(rc.cover(-1, 3), Error);
}

TEST_CASE("RotaryCache: a window far from position 0, asked high, then low, then between", "[infer]") {
  // What a stingy session asks for: the chunk's positions near (k + 1)(F + 1) first, then the
  // slots just below them as blocks are cached. The rows held must stay near the positions asked
  // for (growth at most doubles the window: below 2x the span asked for, here 2 x 86), and every
  // row, whatever the window held when it was read, must equal rotary_tables at its position.
  const int64_t HS = 8, half = HS / 2;
  const double base = 10000.0;
  for (DType dt : {DType::F64, DType::F32}) {
    INFO(dtype_name(dt));
    RotaryCache rc(HS, base, dt, Device::CPU);
    // High: 20 positions from 120000 (k 20000, F 5: the chunk at 20001 * 6 = 120006).
    std::vector<int32_t> high;
    for (int32_t p = 120006; p < 120026; ++p) high.push_back(p);
    const RotaryTables h = rc.tables(high);
    CHECK(rc.first_held() == 120006);
    CHECK(rc.rows_held() == 20);
    // Low: one position 60 below, then one more; the window grows down, not from 0.
    const RotaryTables lo1 = rc.range(119946, 1), lo2 = rc.range(119940, 2);
    CHECK(rc.first_held() <= 119940);
    CHECK(rc.rows_held() <= 2 * (120026 - 119940));
    // Between: held already, no growth.
    const int64_t held = rc.rows_held();
    const RotaryTables mid = rc.tables({119990, 119950, 120010});
    CHECK(rc.rows_held() == held);
    // Every row read, against rotary_tables at its position.
    for (size_t j = 0; j < high.size(); ++j)
      CHECK(values(h.cos.narrow(1, static_cast<int64_t>(j), 1)) == want_row(high[j], HS, base, dt, false));
    CHECK(values(lo1.cos) == want_row(119946, HS, base, dt, false));
    CHECK(values(lo1.sin) == want_row(119946, HS, base, dt, true));
    CHECK(values(lo2.sin.narrow(1, 1, 1)) == want_row(119941, HS, base, dt, true));
    CHECK(values(mid.cos.narrow(1, 1, 1)) == want_row(119950, HS, base, dt, false));
    CHECK(values(mid.sin.narrow(1, 2, 1)) == want_row(120010, HS, base, dt, true));
    // The raw rows and the columns read relative to the window's first position.
    if (dt == DType::F64) {
      const double* cr = rc.cos_rows<double>(119990, 1);
      const RotaryColumns<double> cols = rc.columns<double>(119940, 120026);
      CHECK(cols.origin == rc.first_held());
      const std::vector<double> c = want_row(119990, HS, base, dt, false), s = want_row(119990, HS, base, dt, true);
      for (int64_t i = 0; i < half; ++i) {
        CHECK(cr[i] == c[i]);
        CHECK(cols.cos_at(119990)[i * cols.stride] == c[i]);
        CHECK(cols.sin_at(119990)[i * cols.stride] == s[i]);
      }
    }
    // A lone position far below (a landmark key at slot 0's position F): computed, not held.
    const RotaryTables f = rc.at(5);
    CHECK(rc.rows_held() == held);
    CHECK(values(f.cos) == want_row(5, HS, base, dt, false));
    CHECK(values(f.sin) == want_row(5, HS, base, dt, true));
    CHECK(values(rc.at(119990).cos) == want_row(119990, HS, base, dt, false));  // inside: the held row
  }
}

TEST_CASE("RotaryCache: a window grown one position at a time stays within twice what was asked", "[infer]") {
  // Downwards one row at a time (as cached blocks push the stingy slots down), then upwards (as
  // decoding moves exact positions up): each growth at least doubles the window, so it is never
  // more than twice the span asked for, and it never goes below position 0.
  RotaryCache rc(4, 10000.0, DType::F64, Device::CPU);
  for (int64_t p = 5000; p >= 4000; --p) rc.range(p, 1);
  CHECK(rc.first_held() <= 4000);
  CHECK(rc.rows_held() <= 2 * 1001);
  for (int64_t p = 5001; p < 6000; ++p) rc.range(p, 1);
  CHECK(rc.rows_held() <= 2 * 2000);
  rc.range(10, 1);  // far below: the window reaches down to 10 (the hull of what was asked), not past 0
  CHECK(rc.first_held() >= 0);
  CHECK(rc.first_held() <= 10);
  CHECK(values(rc.range(0, 1).cos) == std::vector<double>{1.0, 1.0});  // position 0: cos 0 = 1 in every pair
}
