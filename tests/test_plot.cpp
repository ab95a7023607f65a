// test_plot.cpp: plot/ checked from the outside: tick choice against hand-worked ranges, colours
// against the published viridis and tab10 values, canvas primitives pixel by pixel, and every chart
// written to a temp folder, read back with stb_image and probed where the geometry says the data
// must be. No image is compared with a stored reference picture.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "plot/canvas.h"
#include "plot/plot.h"
#include "tensor/check.h"
#include "tests/helpers.h"

namespace fs = std::filesystem;
using namespace lm::plot;

namespace lm::plot {
// So that Catch prints colours in failed checks.
std::ostream& operator<<(std::ostream& os, Rgb c) {
  return os << "rgb(" << int(c.r) << ", " << int(c.g) << ", " << int(c.b) << ")";
}
}  // namespace lm::plot

namespace {

// A fresh folder per test, removed with everything in it at the end.
struct TempDir {
  fs::path dir;
  TempDir() {
    static int counter = 0;
    dir = fs::temp_directory_path() / ("lm_test_plot_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

// The message of the lm::Error that f throws (another exception type fails the test).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lm::Error& e) {
    return e.what();
  }
  return "<no lm::Error was thrown>";
}

int round_px(double v) { return static_cast<int>(std::lround(v)); }

// Rows of column x whose pixel is exactly c.
std::vector<int> rows_with(const Image& img, int x, Rgb c) {
  std::vector<int> out;
  for (int y = 0; y < img.height; ++y)
    if (img.at(x, y) == c) out.push_back(y);
  return out;
}

// How many pixels, starting at (x, y) and going up, are exactly c.
int run_up(const Image& img, int x, int y, Rgb c) {
  int n = 0;
  while (y - n >= 0 && img.at(x, y - n) == c) ++n;
  return n;
}

// Whether any pixel in the inclusive rectangle is exactly c.
bool any_pixel(const Image& img, int x0, int y0, int x1, int y1, Rgb c) {
  for (int y = std::max(0, y0); y <= std::min(img.height - 1, y1); ++y)
    for (int x = std::max(0, x0); x <= std::min(img.width - 1, x1); ++x)
      if (img.at(x, y) == c) return true;
  return false;
}

const Rgb kRed{200, 0, 0}, kBlue{0, 0, 200};
// Published colours (matplotlib's viridis at 0, 1/4, 1/2, 3/4, 1 and tab10's first three).
const Rgb kViridis0{68, 1, 84}, kViridis25{59, 82, 139}, kViridis50{33, 145, 140}, kViridis75{94, 201, 98},
    kViridis100{253, 231, 37};
const Rgb kTab0{31, 119, 180}, kTab1{255, 127, 14}, kTab2{44, 160, 44};

}  // namespace

// ---- ticks and labels ----

TEST_CASE("plot: nice_ticks picks the smallest 1-2-5 step that fits, widened outwards", "[plot]") {
  // [0, 7.3]: step 1 would need 0..8 = 8 intervals (> 6); step 2 gives 0..8 in 4.
  Ticks t = nice_ticks(0, 7.3, 6);
  CHECK(t.step == 2);
  CHECK(t.values == std::vector<double>{0, 2, 4, 6, 8});
  CHECK(t.labels == std::vector<std::string>{"0", "2", "4", "6", "8"});
  CHECK(t.lo == 0);
  CHECK(t.hi == 8);

  // [0, 1000]: step 100 needs 10 intervals, 200 needs 5.
  t = nice_ticks(0, 1000, 6);
  CHECK(t.values == std::vector<double>{0, 200, 400, 600, 800, 1000});

  // [-3.2, 4.7]: step 1 needs -4..5 = 9 intervals, step 2 gives -4..6 in 5.
  t = nice_ticks(-3.2, 4.7, 6);
  CHECK(t.values == std::vector<double>{-4, -2, 0, 2, 4, 6});
  CHECK(t.labels == std::vector<std::string>{"-4", "-2", "0", "2", "4", "6"});

  // [0, 0.93]: step 0.1 needs 10 intervals, 0.2 gives 0..1 in 5. The values are the doubles
  // nearest to the decimals (3 * 2 / 10 == 0.6 exactly, where 3 * 0.2 would be 0.6000000000000001).
  t = nice_ticks(0, 0.93, 6);
  CHECK(t.values == std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1.0});
  CHECK(t.labels == std::vector<std::string>{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"});

  // [0.001, 0.0042]: step 0.0005 needs 0.001..0.0045 = 7 intervals, 0.001 gives 4.
  t = nice_ticks(0.001, 0.0042, 6);
  CHECK(t.values == std::vector<double>{0.001, 0.002, 0.003, 0.004, 0.005});
  CHECK(t.labels == std::vector<std::string>{"0.001", "0.002", "0.003", "0.004", "0.005"});

  // Indices 0..2: 0.5 steps fit, but integer_steps forbids them.
  CHECK(nice_ticks(0, 2, 6).values == std::vector<double>{0, 0.5, 1, 1.5, 2});
  CHECK(nice_ticks(0, 2, 6, true).values == std::vector<double>{0, 1, 2});

  // A single value is widened to a range around it that still holds it.
  t = nice_ticks(5, 5, 6);
  CHECK(t.lo < 5);
  CHECK(t.hi > 5);
  CHECK(std::find(t.values.begin(), t.values.end(), 5.0) != t.values.end());

  CHECK_THAT(error_of([] { nice_ticks(1, 0); }), Catch::Contains("lo must be <= hi"));
  CHECK_THAT(error_of([] { nice_ticks(0, NAN); }), Catch::Contains("finite"));
  CHECK_THAT(error_of([] { nice_ticks(0, 1, 1); }), Catch::Contains("max_intervals"));
}

TEST_CASE("plot: log_ticks uses decades when there are enough, else 1-2-5", "[plot]") {
  // [2.3, 10.8]: decades give only 1, 10, 100; 1-2-5 gives 2 5 10 20.
  Ticks t = log_ticks(2.3, 10.8);
  CHECK(t.values == std::vector<double>{2, 5, 10, 20});
  CHECK(t.lo == 2);
  CHECK(t.hi == 20);
  CHECK(t.step == 0);
  // Context lengths 256..8192.
  CHECK(log_ticks(256, 8192).values == std::vector<double>{200, 500, 1000, 2000, 5000, 10000});
  // Four decades are enough on their own.
  t = log_ticks(1e-4, 1);
  CHECK(t.values == std::vector<double>{1e-4, 1e-3, 1e-2, 1e-1, 1});
  CHECK(t.labels == std::vector<std::string>{"0.0001", "0.001", "0.01", "0.1", "1"});
  CHECK_THAT(error_of([] { log_ticks(0, 10); }), Catch::Contains("0 < lo"));
}

TEST_CASE("plot: format_tick", "[plot]") {
  CHECK(format_tick(15, 5) == "15");
  CHECK(format_tick(0.005, 0.005) == "0.005");
  CHECK(format_tick(-0.0, 0.2) == "0.0");   // never "-0.0"
  CHECK(format_tick(1e-17, 0.2) == "0.0");  // rounding noise next to a 0.2 step is zero
  CHECK(format_tick(2500000, 500000) == "2.5e6");
  CHECK(format_tick(0.00015, 0.00005) == "1.5e-4");
  CHECK(format_tick(0, 500000) == "0");
}

// ---- colours ----

TEST_CASE("plot: viridis hits its control points and interpolates between them", "[plot]") {
  CHECK(viridis(0) == kViridis0);
  CHECK(viridis(0.25) == kViridis25);
  CHECK(viridis(0.5) == kViridis50);
  CHECK(viridis(0.75) == kViridis75);
  CHECK(viridis(1) == kViridis100);
  // Halfway between the first two stops #440154 and #472d7b: (69.5, 23, 103.5), rounded half up.
  CHECK(viridis(1.0 / 16) == Rgb{70, 23, 104});
  CHECK(viridis(-3) == kViridis0);
  CHECK(viridis(7) == kViridis100);
  CHECK(viridis(NAN) == kViridis0);
}

TEST_CASE("plot: palette colours are distinct and never the no-data grey", "[plot]") {
  CHECK(palette_color(0) == kTab0);
  CHECK(palette_color(1) == kTab1);
  CHECK(palette_color(2) == kTab2);
  // 40 = a difference anyone sees at a glance (sum of absolute channel differences, out of 765).
  auto dist = [](Rgb a, Rgb b) { return std::abs(a.r - b.r) + std::abs(a.g - b.g) + std::abs(a.b - b.b); };
  for (int i = 0; i < 20; ++i) {
    INFO("colour " << i << " = " << palette_color(i));
    CHECK(dist(palette_color(i), kNanColor) >= 40);
    CHECK(dist(palette_color(i), kWhite) >= 40);
    for (int j = 0; j < i; ++j) CHECK(dist(palette_color(i), palette_color(j)) >= 40);
  }
  CHECK_THAT(error_of([] { palette_color(-1); }), Catch::Contains("index"));
}

// ---- canvas ----

TEST_CASE("plot: canvas: lines, rectangles, clipping and blending land on the expected pixels", "[plot]") {
  Canvas c(40, 30);
  // Thickness 1 on integer y covers exactly that row, from x0 to x1 (round caps reach 0.5 px).
  c.line(5, 10, 30, 10, kBlack, 1);
  for (int x = 0; x < 40; ++x) {
    INFO("x = " << x);
    CHECK(c.at(x, 10) == (x >= 5 && x <= 30 ? kBlack : kWhite));
    CHECK(c.at(x, 9) == kWhite);
    CHECK(c.at(x, 11) == kWhite);
  }
  // Thickness 3: rows within distance 1 are fully covered (1.5 + 0.5 - 1 = 1), distance 2 not at all.
  Canvas v(30, 30);
  v.line(15, 3, 15, 25, kBlack, 3);  // vertical: the other walking direction
  for (int x = 10; x <= 20; ++x) {
    INFO("x = " << x);
    CHECK(v.at(x, 14) == (x >= 14 && x <= 16 ? kBlack : kWhite));
  }
  // Diagonal: (10, 10) is on it; (10, 14) is 2.83 px away.
  Canvas d(30, 30);
  d.line(0, 0, 20, 20, kBlack, 2);
  CHECK(d.at(10, 10) == kBlack);
  CHECK(d.at(10, 14) == kWhite);

  Canvas r(20, 20);
  r.fill_rect(8, 6, 3, 2, kRed);  // corners in any order, inclusive
  CHECK(r.at(3, 2) == kRed);
  CHECK(r.at(8, 6) == kRed);
  CHECK(r.at(9, 6) == kWhite);
  CHECK(r.at(8, 7) == kWhite);
  r.outline_rect(10, 10, 19, 19, kBlue, 2);
  CHECK(r.at(10, 15) == kBlue);
  CHECK(r.at(11, 15) == kBlue);
  CHECK(r.at(12, 15) == kWhite);
  CHECK(r.at(18, 18) == kBlue);
  r.set_clip(0, 0, 4, 4);
  r.fill_rect(0, 0, 19, 19, kBlack);
  CHECK(r.at(4, 4) == kBlack);
  CHECK(r.at(5, 4) == kRed);  // outside the clip: still the red of the first rectangle
  r.clear_clip();
  // Half black over white: 255 + 0.5 * (0 - 255) = 127.5, rounded half up.
  r.blend(15, 5, kBlack, 0.5);
  CHECK(r.at(15, 5) == Rgb{128, 128, 128});
  // Coordinates far outside the image are clipped, not undefined behaviour.
  r.line(-1e12, 3, 1e12, 3, kBlack, 1);
  CHECK(r.at(15, 3) == kBlack);

  CHECK_THAT(error_of([] { Canvas(0, 10); }), Catch::Contains("width and height"));
  CHECK_THAT(error_of([&] { r.at(20, 0); }), Catch::Contains("outside"));
}

TEST_CASE("plot: canvas: text fills exactly its measured box, upright and turned", "[plot]") {
  // 'E' has no descender: its ink spans text_width x text_height from the anchor.
  const int w = text_width("EEE", 2), h = text_height(2);
  CHECK(h == 14);
  CHECK(w > 0);
  auto ink_box = [](const Canvas& c) {
    int x0 = c.width(), y0 = c.height(), x1 = -1, y1 = -1;
    for (int y = 0; y < c.height(); ++y)
      for (int x = 0; x < c.width(); ++x)
        if (c.at(x, y) != kWhite) x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
    return std::vector<int>{x0, y0, x1, y1};
  };
  Canvas c(100, 40);
  c.text(10, 5, "EEE", kBlack, 2);
  CHECK(ink_box(c) == std::vector<int>{10, 5, 10 + w - 1, 5 + h - 1});
  Canvas r(100, 40);
  r.text(90, 30, "EEE", kBlack, 2, HAlign::Right, VAlign::Bottom);
  CHECK(ink_box(r) == std::vector<int>{90 - w, 30 - h, 89, 29});
  // Turned up: the box is h wide and w tall, centred on (50, 50).
  Canvas u(100, 100);
  u.text_up(50, 50, "EEE", kBlack, 2);
  const std::vector<int> b = ink_box(u);
  CHECK(b[2] - b[0] + 1 == h);
  CHECK(b[3] - b[1] + 1 == w);
  CHECK(std::abs((b[0] + b[2]) / 2 - 50) <= 1);
  CHECK(std::abs((b[1] + b[3]) / 2 - 50) <= 1);
}

TEST_CASE("plot: canvas: PNG round trip, no temp file left behind, errors name the path", "[plot]") {
  TempDir tmp;
  Canvas c(7, 5);
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 7; ++x) c.set(x, y, Rgb{uint8_t(30 * x), uint8_t(50 * y), uint8_t(x * y)});
  const std::string path = tmp.file("round.png");
  c.write_png(path);
  CHECK(fs::exists(path));
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const Image img = read_png(path);
  REQUIRE(img.width == 7);
  REQUIRE(img.height == 5);
  CHECK(img.rgb == c.data());  // PNG is lossless

  // Writing again replaces the file (the rename goes over the old one).
  Canvas black(3, 2, kBlack);
  black.write_png(path);
  CHECK(read_png(path).width == 3);

  const std::string bad = tmp.file("no_such_folder/x.png");
  CHECK_THAT(error_of([&] { c.write_png(bad); }), Catch::Contains(bad));
  CHECK_FALSE(fs::exists(bad + ".tmp"));
  CHECK_THAT(error_of([&] { read_png(tmp.file("missing.png")); }), Catch::Contains("missing.png"));
}

TEST_CASE("plot: canvas: a PNG write that fails keeps the old file, and a path that is not a regular file is refused",
          "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("chart.png");
  Canvas old_chart(7, 5, kBlack);
  old_chart.write_png(path);
  const std::uintmax_t old_size = fs::file_size(path);
  // A big image, then a write that fails midway: a file-size limit of 200 bytes stands in for a
  // full disk (writes past it fail with EFBIG as a full disk's fail with ENOSPC). stb's own file
  // writer checked neither its writes nor the close: the truncated file replaced the old one and
  // the call reported success.
  Canvas big(300, 200);
  for (int y = 0; y < 200; ++y)
    for (int x = 0; x < 300; ++x) big.set(x, y, Rgb{uint8_t(x * 7 + y), uint8_t(x * y), uint8_t(y * 13)});
  std::string error;
  {
    lm::test::FileSizeLimit limit(200);
    error = error_of([&] { big.write_png(path); });
  }
  CHECK_THAT(error, Catch::Contains("chart.png.tmp") && Catch::Contains("File too large"));
  CHECK(fs::file_size(path) == old_size);
  CHECK(read_png(path).width == 7);  // still the old picture, whole
  CHECK_FALSE(fs::exists(path + ".tmp"));
  // A FIFO at the path is refused and stays one; so is a device of our own, where we may make one
  // (as root). Both are required: the last case names the system's /dev/null.
  const std::string pipe = tmp.file("pipe.png"), node = tmp.file("null.png");
  REQUIRE(lm::test::make_fifo(pipe));
  REQUIRE_THAT(error_of([&] { old_chart.write_png(pipe); }), Catch::Contains(pipe + " is a FIFO (named pipe)"));
  CHECK(fs::is_fifo(fs::symlink_status(pipe)));
  bool own_device_refused = false;
  if (lm::test::make_char_device(node)) {
    REQUIRE_THAT(error_of([&] { old_chart.write_png(node); }), Catch::Contains(node + " is a device"));
    REQUIRE(fs::is_character_file(fs::symlink_status(node)));
    own_device_refused = true;
  }
  // A symbolic link is refused; its target keeps its picture.
  fs::create_symlink(path, tmp.file("link.png"));
  CHECK_THAT(error_of([&] { big.write_png(tmp.file("link.png")); }), Catch::Contains("is a symbolic link to " + path));
  CHECK(read_png(path).width == 7);
  // /dev/null, a device on every machine: refused, left a device (tried only where a writer that
  // failed the cases above could not replace it).
  if (lm::test::may_aim_at_dev_null(own_device_refused)) {
    CHECK_THAT(error_of([&] { old_chart.write_png("/dev/null"); }), Catch::Contains("/dev/null is a device"));
    CHECK(fs::is_character_file(fs::symlink_status("/dev/null")));
    CHECK_FALSE(fs::exists("/dev/null.tmp"));
  }
}

// ---- line chart ----

TEST_CASE("plot: line_chart: a constant series lands on its pixel row, NaN leaves a gap, the legend sits outside", "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("lines.png");
  Series flat{"five", {}, {}, kRed}, gappy{"two and a half", {}, {}, kBlue};
  for (int i = 0; i <= 100; ++i) {
    flat.x.push_back(i), flat.y.push_back(5.0);
    gappy.x.push_back(i), gappy.y.push_back(i >= 40 && i <= 60 ? NAN : 2.5);
  }
  LineChartOptions opt;
  opt.title = "test";
  opt.x_label = "step";
  opt.y_label = "loss";
  opt.y_range = {{0.0, 10.0}};
  const Frame f = line_chart(path, {flat, gappy}, opt);
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const Image img = read_png(path);
  REQUIRE(img.width == 960);
  REQUIRE(img.height == 600);
  // The fixed y range is kept exactly; x 0..100 fits 5 intervals of 20.
  CHECK(f.y_lo == 0);
  CHECK(f.y_hi == 10);
  CHECK(f.x_lo == 0);
  CHECK(f.x_hi == 100);
  REQUIRE(f.left < f.right);
  REQUIRE(f.top < f.bottom);

  // y = 5 is halfway up the plot area, y = 2.5 a quarter of the way; x = 25 a quarter across.
  const int row5 = round_px(f.bottom - 0.5 * (f.bottom - f.top));
  const int row25 = round_px(f.bottom - 0.25 * (f.bottom - f.top));
  auto col = [&](double x) { return round_px(f.left + x / 100.0 * (f.right - f.left)); };
  CHECK(img.at(col(25), row5) == kRed);
  // Line width 2: only the centre row is fully covered; its anti-aliased neighbours are mixed.
  for (int y : rows_with(img, col(25), kRed)) CHECK(std::abs(y - row5) <= 1);
  CHECK(img.at(col(20), row25) == kBlue);
  CHECK(img.at(col(80), row25) == kBlue);
  CHECK(rows_with(img, col(50), kBlue).empty());  // inside the NaN gap
  // Legend: both swatches to the right of the plot area, none of it inside.
  CHECK(any_pixel(img, f.right + 2, f.top, img.width - 1, f.bottom, kRed));
  CHECK(any_pixel(img, f.right + 2, f.top, img.width - 1, f.bottom, kBlue));
}

TEST_CASE("plot: line_chart: a vertical mark is a dashed grey line at its x, with its label at the top", "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("mark.png");
  Series s{"", {1, 100}, {0, 1}, kRed};
  LineChartOptions opt;
  opt.log_x = true;
  opt.x_range = {{1.0, 100.0}};
  opt.x_marks = {{10.0, "window"}, {1000.0, "outside"}};  // the second lies beyond the x range
  const Frame f = line_chart(path, {s}, opt);
  const Image img = read_png(path);
  const Rgb grey{110, 110, 110};
  // x = 10 is halfway across a 1..100 log axis: the mark's column has grey dashes, 6 of every 10
  // pixels from the top, and the plot area has no other column of them.
  const int col = round_px(f.left + 0.5 * (f.right - f.left));
  int dashes = 0;
  for (int y = f.top + 20; y < f.bottom - 10; y += 10) dashes += img.at(col, y + 2) == grey;
  CHECK(dashes >= (f.bottom - f.top - 30) / 10 - 1);
  CHECK(img.at(col, f.top + 3) == grey);   // inside the first dash (0..6 of the pattern)
  CHECK(img.at(col, f.top + 28) != grey);  // inside a gap (26..30)
  CHECK_FALSE(any_pixel(img, f.right - 3, f.top + 40, f.right - 1, f.bottom - 1, grey));  // nothing drawn for x = 1000
}

TEST_CASE("plot: line_chart: log y puts decades at equal distances, default colours come from the palette", "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("log.png");
  Series s{"", {0, 1, 2, 3}, {1, 10, 100, 1000}, {}};
  Series t{"", {0, 3}, {1000, 1}, {}};
  LineChartOptions opt;
  opt.log_y = true;
  // Width 3 fully covers every pixel centre within 1 px of the line (2 - d >= 1), so a probe at
  // the rounded position of a point on a sloped line (at most 0.71 px off) sees the pure colour.
  opt.line_width = 3;
  const Frame f = line_chart(path, {s, t}, opt);
  const Image img = read_png(path);
  CHECK(f.x_lo == 0);
  CHECK(f.x_hi == 3);
  CHECK(f.y_lo == 1);
  CHECK(f.y_hi == 1000);
  // Point k is at 10^k: k thirds of the way up, k thirds of the way across. The second series
  // crosses the first only at x = 1.5, so the probes at k = 1 and 2 see series 0 alone.
  for (int k = 1; k <= 2; ++k) {
    const int x = round_px(f.left + k / 3.0 * (f.right - f.left));
    const int y = round_px(f.bottom - k / 3.0 * (f.bottom - f.top));
    INFO("k = " << k);
    CHECK(img.at(x, y) == palette_color(0));
  }
  // Series 1 goes down from (0, 1000) to (3, 1): at x = 1.5 it is at 10^1.5, halfway up (and on
  // top, being drawn after series 0, which crosses it there).
  CHECK(img.at(round_px(f.left + 0.5 * (f.right - f.left)), round_px(f.top + 0.5 * (f.bottom - f.top))) ==
        palette_color(1));
}

TEST_CASE("plot: line_chart: bad input throws, naming the argument", "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("bad.png");
  CHECK_THAT(error_of([&] { line_chart(path, {}); }), Catch::Contains("`series` is empty"));
  const Series ok{"a", {0, 1}, {1, 2}, {}};
  const Series mismatched{"b", {0, 1, 2}, {1, 2, 3, 4}, {}};
  CHECK_THAT(error_of([&] { line_chart(path, {ok, mismatched}); }),
             Catch::Contains("series 1 ('b'): x has 3 values but y has 4"));
  CHECK_THAT(error_of([&] { line_chart(path, {Series{"n", {}, {NAN, NAN}, {}}}); }), Catch::Contains("nothing to draw"));
  CHECK_THAT(error_of([&] { line_chart(path, {Series{"e", {}, {}, {}}}); }), Catch::Contains("has no y values"));
  LineChartOptions narrow;
  narrow.width = 50;
  CHECK_THAT(error_of([&] { line_chart(path, {ok}, narrow); }), Catch::Contains("width"));
  LineChartOptions flat_range;
  flat_range.y_range = {{1.0, 1.0}};
  CHECK_THAT(error_of([&] { line_chart(path, {ok}, flat_range); }), Catch::Contains("y_range"));
  LineChartOptions log_from_zero;
  log_from_zero.log_y = true;
  log_from_zero.y_range = {{0.0, 10.0}};
  CHECK_THAT(error_of([&] { line_chart(path, {ok}, log_from_zero); }), Catch::Contains("log axis"));
  CHECK_FALSE(fs::exists(path));
}

// ---- heat map ----

TEST_CASE("plot: heatmap: every cell has the colormap colour of its value, NaN is grey, the colour bar spans the scale",
          "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("heat.png");
  HeatmapOptions opt;
  opt.cell_size = 20;
  opt.title = "weights";
  // Data min 0 and max 1 become the scale, so each value is its own position on viridis.
  const HeatmapFrame hf = heatmap(path, 2, 3, {0, 0.5, 1, NAN, 0.25, 0.75}, opt);
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const Image img = read_png(path);
  CHECK(hf.cell_w == 20);
  CHECK(hf.cell_h == 20);
  CHECK(hf.v_min == 0);
  CHECK(hf.v_max == 1);
  const Rgb expected[2][3] = {{kViridis0, kViridis50, kViridis100}, {kNanColor, kViridis25, kViridis75}};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) {
      // Every pixel of the 20 x 20 cell, not just its centre.
      for (int y = hf.top + 20 * r; y < hf.top + 20 * (r + 1); ++y)
        for (int x = hf.left + 20 * c; x < hf.left + 20 * (c + 1); ++x)
          if (img.at(x, y) != expected[r][c]) {
            FAIL_CHECK("cell (" << r << ", " << c << ") pixel (" << x << ", " << y << ") is " << img.at(x, y)
                                << ", expected " << expected[r][c]);
            r = 2, c = 3, y = 1 << 30, x = 1 << 30;  // one message is enough
          }
    }
  CHECK(kNanColor.r == kNanColor.g);  // a neutral grey
  CHECK(kNanColor.g == kNanColor.b);
  // The colour bar, right of the cells, starts at the top of the grid with the top of the scale
  // and ends 120 px (its minimum height) lower with the bottom of it.
  const int grid_right = hf.left + 3 * 20;
  CHECK(any_pixel(img, grid_right + 1, hf.top, img.width - 1, hf.top, kViridis100));
  CHECK(any_pixel(img, grid_right + 1, hf.top + 119, img.width - 1, hf.top + 119, kViridis0));
}

TEST_CASE("plot: heatmap: categorical cells take their category's colour and appear in the legend", "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("groups.png");
  HeatmapOptions opt;
  opt.cell_size = 10;
  opt.categorical = true;
  opt.category_names = {{0, "top group"}, {2, "block 1"}};
  const HeatmapFrame hf = heatmap(path, 2, 2, {0, 1, 2, NAN}, opt);
  const Image img = read_png(path);
  auto centre = [&](int r, int c) { return img.at(hf.left + 10 * c + 5, hf.top + 10 * r + 5); };
  CHECK(centre(0, 0) == kTab0);
  CHECK(centre(0, 1) == kTab1);
  CHECK(centre(1, 0) == kTab2);
  CHECK(centre(1, 1) == kNanColor);
  // One legend swatch per category present, right of the cells.
  const int grid_right = hf.left + 20;
  for (Rgb c : {kTab0, kTab1, kTab2}) CHECK(any_pixel(img, grid_right + 1, 0, img.width - 1, img.height - 1, c));

  CHECK_THAT(error_of([&] { heatmap(path, 1, 2, {0, 1.5}, opt); }), Catch::Contains("categorical"));
  CHECK_THAT(error_of([&] { heatmap(path, 1, 2, {0, -1}, opt); }), Catch::Contains("values[1]"));
}

TEST_CASE("plot: heatmap: marked columns and outlined spans are drawn over the right cells", "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("marks.png");
  HeatmapOptions opt;
  opt.cell_size = 10;
  opt.marked_columns = {2};
  opt.outlined = {{1, 3, 5}};
  // All values equal: the scale becomes [v - 0.5, v + 0.5], so every cell is viridis(0.5).
  const HeatmapFrame hf = heatmap(path, 4, 6, std::vector<double>(24, 0.0), opt);
  const Image img = read_png(path);
  const int L = hf.left, T = hf.top;
  CHECK(img.at(L + 5, T + 5) == kViridis50);  // an untouched cell
  // Column 2's centre pixel column (x = 25) is magenta at 75% over the cell:
  // 33 + 0.75 * (255 - 33) = 199.5 -> 200, 145 * 0.25 = 36.25 -> 36, 140 + 0.75 * 115 = 226.25 -> 226.
  CHECK(img.at(L + 25, T + 35) == Rgb{200, 36, 226});
  CHECK(img.at(L + 24, T + 35) == kViridis50);
  CHECK(img.at(L + 25, T - 6) == opt.mark_color);  // the tick above the grid
  // Span {row 1, cols [3, 5)} covers x in [30, 49], y in [10, 19]: a 2 px frame (cells >= 8 px).
  CHECK(img.at(L + 30, T + 15) == opt.outline_color);
  CHECK(img.at(L + 31, T + 15) == opt.outline_color);
  CHECK(img.at(L + 49, T + 15) == opt.outline_color);
  CHECK(img.at(L + 40, T + 10) == opt.outline_color);
  CHECK(img.at(L + 40, T + 19) == opt.outline_color);
  CHECK(img.at(L + 40, T + 15) == kViridis50);  // inside the frame
  CHECK(img.at(L + 29, T + 15) == kViridis50);  // just left of it
  CHECK(img.at(L + 40, T + 20) == kViridis50);  // the row below
}

TEST_CASE("plot: heatmap: bad input throws, naming the argument", "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("bad.png");
  CHECK_THAT(error_of([&] { heatmap(path, 2, 3, {1, 2, 3, 4, 5}); }),
             Catch::Contains("values has 5 entries but rows x cols = 2 x 3 = 6"));
  CHECK_THAT(error_of([&] { heatmap(path, 0, 3, {}); }), Catch::Contains("rows and cols"));
  HeatmapOptions marks;
  marks.marked_columns = {3};
  CHECK_THAT(error_of([&] { heatmap(path, 1, 3, {1, 2, 3}, marks); }), Catch::Contains("marked_columns holds 3"));
  HeatmapOptions spans;
  spans.outlined = {{0, 2, 2}};
  CHECK_THAT(error_of([&] { heatmap(path, 1, 3, {1, 2, 3}, spans); }), Catch::Contains("outlined span"));
  HeatmapOptions scale;
  scale.v_min = 1, scale.v_max = 1;
  CHECK_THAT(error_of([&] { heatmap(path, 1, 3, {1, 2, 3}, scale); }), Catch::Contains("v_min"));
  HeatmapOptions small;
  small.height = 100;
  CHECK_THAT(error_of([&] { heatmap(path, 1, 3, {1, 2, 3}, small); }), Catch::Contains("height"));
  CHECK_THAT(error_of([&] { heatmap(path, 1, 2, {1, INFINITY}); }), Catch::Contains("values[1]"));
  CHECK_FALSE(fs::exists(path));
}

// ---- histogram ----

TEST_CASE("plot: histogram: integer bins, bar heights proportional to counts", "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("hist.png");
  HistogramOptions opt;
  opt.integer_bins = true;
  // Counts: value 1 once, 2 three times, 3 six times; NaN is skipped.
  const std::vector<double> v = {3, 2, 3, 1, 3, NAN, 2, 3, 3, 2, 3};
  const Frame f = histogram(path, v, 0, opt);
  CHECK_FALSE(fs::exists(path + ".tmp"));
  const Image img = read_png(path);
  // y from 0 to a nice bound above 6 (with headroom for the labels: 6 * 1.08 -> step 2, 0..8).
  CHECK(f.y_lo == 0);
  CHECK(f.y_hi == 8);
  // Bars are centred on their integers: the axis runs from 0.5 to 3.5.
  CHECK(f.x_lo == 0.5);
  CHECK(f.x_hi == 3.5);
  const int counts[3] = {1, 3, 6};
  for (int k = 0; k < 3; ++k) {
    const int x = round_px(f.left + (k + 0.5) / 3.0 * (f.right - f.left));
    const int height = run_up(img, x, f.bottom, opt.color);
    // A bar of count n spans rows round(bottom - n / 8 * plot height) .. bottom: +-1 px of rounding.
    const double expected = counts[k] / 8.0 * (f.bottom - f.top) + 1;
    INFO("bar for value " << k + 1);
    CHECK(std::abs(height - expected) <= 1.0);
  }
}

TEST_CASE("plot: histogram: equal-width bins over a fixed range", "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("hist2.png");
  HistogramOptions opt;
  opt.range = {{0.0, 4.0}};
  // Bins [0,1) [1,2) [2,3) [3,4]: 5, 1, 1, 2 (4.0 falls in the last bin; -0.5 and 4.5 in none).
  const std::vector<double> v = {0.1, 0.2, 0.6, 0.7, 0.8, 1.9, 2.5, 3.9, 4.0, -0.5, 4.5};
  const Frame f = histogram(path, v, 4, opt);
  const Image img = read_png(path);
  CHECK(f.x_lo == 0);
  CHECK(f.x_hi == 4);
  const int counts[4] = {5, 1, 1, 2};
  for (int k = 0; k < 4; ++k) {
    const int x = round_px(f.left + (k + 0.5) / 4.0 * (f.right - f.left));
    const int height = run_up(img, x, f.bottom, opt.color);
    const double expected = counts[k] / f.y_hi * (f.bottom - f.top) + 1;
    INFO("bin " << k);
    CHECK(std::abs(height - expected) <= 1.0);
  }
}

TEST_CASE("plot: histogram: bad input throws, naming the argument", "[plot]") {
  TempDir tmp;
  const std::string path = tmp.file("bad.png");
  CHECK_THAT(error_of([&] { histogram(path, {1, 2}, 0); }), Catch::Contains("bins must be"));
  CHECK_THAT(error_of([&] { histogram(path, {}, 5); }), Catch::Contains("`values` is empty"));
  CHECK_THAT(error_of([&] { histogram(path, {NAN, NAN}, 5); }), Catch::Contains("NaN"));
  CHECK_THAT(error_of([&] { histogram(path, {1, INFINITY}, 5); }), Catch::Contains("values[1]"));
  HistogramOptions ints;
  ints.integer_bins = true;
  CHECK_THAT(error_of([&] { histogram(path, {1, 1.5}, 0, ints); }), Catch::Contains("integer_bins"));
  HistogramOptions tiny;
  tiny.height = 20;
  CHECK_THAT(error_of([&] { histogram(path, {1, 2}, 5, tiny); }), Catch::Contains("height"));
  CHECK_FALSE(fs::exists(path));
}
