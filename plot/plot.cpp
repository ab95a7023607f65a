// plot.cpp: what every chart shares: tick choice (1-2-5 linear, log), tick labels, the colour
// palette and viridis, data-to-pixel mapping, and the axes (margins, grid, frame, labels, title).
// The charts themselves are in line_chart.cpp, heatmap.cpp and histogram.cpp.
#include "plot/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "plot/axes.h"
#include "tensor/check.h"

namespace lm::plot {

namespace {

// m * 10^k, dividing for negative k so that e.g. 3 * 2 / 10 prints as 0.6, not 0.6000000000000001.
double decimal(double m, int k) { return k >= 0 ? m * std::pow(10.0, k) : m / std::pow(10.0, -k); }

Ticks with_labels(Ticks t) {
  t.labels.clear();
  for (double v : t.values) t.labels.push_back(format_tick(v, t.step > 0 ? t.step : v));
  return t;
}

}  // namespace

Ticks nice_ticks(double lo, double hi, int max_intervals, bool integer_steps) {
  LM_CHECK(std::isfinite(lo) && std::isfinite(hi) && std::isfinite(hi - lo),
           "nice_ticks: the range must be finite, got [" << lo << ", " << hi << "]");
  LM_CHECK(lo <= hi, "nice_ticks: lo must be <= hi, got [" << lo << ", " << hi << "]");
  // With one interval a range around 0 could never fit (0 is a multiple of every step).
  LM_CHECK(max_intervals >= 2, "nice_ticks: max_intervals must be >= 2, got " << max_intervals);
  if (lo == hi) {
    const double pad = (integer_steps || lo == 0) ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad, hi += pad;
  }
  // Try steps 1, 2, 5 x 10^k upwards from just below the raw step; the first that fits wins.
  // The 1e-9 slack keeps 7.9999999999 / 2 from counting as one more interval.
  const int k0 = static_cast<int>(std::floor(std::log10((hi - lo) / max_intervals)));
  for (int k = std::max(k0, -320);; ++k) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = decimal(m, k);
      if (!(step > 0) || !std::isfinite(step) || (integer_steps && step < 1)) continue;
      const double a = std::floor(lo / step + 1e-9), b = std::ceil(hi / step - 1e-9);
      if (b - a > max_intervals) continue;
      Ticks t;
      t.step = step;
      for (double i = a; i <= b; ++i) t.values.push_back(k >= 0 ? i * step : i * m / std::pow(10.0, -k));
      t.lo = t.values.front();
      t.hi = t.values.back();
      return with_labels(t);
    }
  }
}

Ticks log_ticks(double lo, double hi) {
  LM_CHECK(lo > 0 && std::isfinite(lo) && std::isfinite(hi) && lo <= hi,
           "log_ticks: need 0 < lo <= hi, both finite, got [" << lo << ", " << hi << "]");
  if (lo == hi) lo /= 2, hi *= 2;
  const int d0 = static_cast<int>(std::floor(std::log10(lo))) - 1;
  const int d1 = static_cast<int>(std::ceil(std::log10(hi))) + 1;
  const std::vector<std::vector<double>> mantissas = {{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  Ticks t;
  for (size_t s = 0; s < mantissas.size(); ++s) {
    std::vector<double> cand;
    for (int d = d0; d <= d1; ++d)
      for (double m : mantissas[s]) cand.push_back(decimal(m, d));
    // Widen to the nearest candidates outside [lo, hi] (with a relative slack for rounding).
    double a = cand.front(), b = cand.back();
    for (double c : cand)
      if (c <= lo * (1 + 1e-12)) a = c;
    for (auto it = cand.rbegin(); it != cand.rend(); ++it)
      if (*it >= hi * (1 - 1e-12)) b = *it;
    t.values.clear();
    for (double c : cand)
      if (c >= a && c <= b) t.values.push_back(c);
    if (t.values.size() >= 4 || s + 1 == mantissas.size()) break;
  }
  // Many decades: keep every n-th one so about 10 remain, widening hi to a kept decade.
  if (t.values.size() > 12) {
    const size_t every = (t.values.size() + 9) / 10;
    std::vector<double> kept;
    for (size_t i = 0; i < t.values.size(); i += every) kept.push_back(t.values[i]);
    if (kept.back() < t.values.back()) kept.push_back(kept.back() * std::pow(10.0, static_cast<double>(every)));
    t.values = kept;
  }
  t.lo = t.values.front();
  t.hi = t.values.back();
  t.step = 0;
  return with_labels(t);
}

std::string format_tick(double v, double step) {
  step = std::fabs(step);
  if (step > 0 && std::fabs(v) < step * 1e-9) v = 0;  // 1e-17 from rounding is 0
  char buf[64];
  if (step >= 1e5 || (step > 0 && step < 1e-4)) {
    if (v == 0) return "0";
    // Enough significant digits to tell neighbouring ticks apart, then "2.50e+06" -> "2.5e6".
    const int sig =
        std::max(1, static_cast<int>(std::floor(std::log10(std::fabs(v))) - std::floor(std::log10(step)) + 1));
    std::snprintf(buf, sizeof buf, "%.*e", std::min(sig, 15) - 1, v);
    std::string s = buf;
    const size_t e = s.find('e');
    std::string mant = s.substr(0, e), ex = s.substr(e + 1);
    if (mant.find('.') != std::string::npos) {
      while (mant.back() == '0') mant.pop_back();
      if (mant.back() == '.') mant.pop_back();
    }
    const bool neg = ex[0] == '-';
    ex = ex.substr(1);
    while (ex.size() > 1 && ex[0] == '0') ex.erase(0, 1);
    return mant + "e" + (neg ? "-" : "") + ex;
  }
  const int decimals = step > 0 && step < 1 ? static_cast<int>(std::ceil(-std::log10(step) - 1e-9)) : 0;
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v == 0 ? 0.0 : v);  // v == 0 turns -0 into 0
  return buf;
}

Rgb palette_color(int i) {
  LM_CHECK(i >= 0, "palette_color: index must be >= 0, got " << i);
  // matplotlib's tab10 without its grey (grey means "no data" here).
  static const Rgb kFixed[] = {{31, 119, 180}, {255, 127, 14},  {44, 160, 44},  {214, 39, 40}, {148, 103, 189},
                               {140, 86, 75},  {227, 119, 194}, {188, 189, 34}, {23, 190, 207}};
  constexpr int kN = sizeof kFixed / sizeof kFixed[0];
  if (i < kN) return kFixed[i];
  // Beyond that, hues spaced by the golden angle never repeat and stay far apart for a while.
  const double h = std::fmod((i - kN) * 137.50776405, 360.0) / 60.0, s = 0.65, v = 0.85;
  const double c = v * s, x = c * (1 - std::fabs(std::fmod(h, 2.0) - 1)), m = v - c;
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(h)) {
    case 0:
      r = c, g = x;
      break;
    case 1:
      r = x, g = c;
      break;
    case 2:
      g = c, b = x;
      break;
    case 3:
      g = x, b = c;
      break;
    case 4:
      r = x, b = c;
      break;
    default:
      r = c, b = x;
      break;
  }
  auto u8 = [m](double f) { return static_cast<uint8_t>(std::lround((f + m) * 255)); };
  return {u8(r), u8(g), u8(b)};
}

Rgb viridis(double t) {
  static const Rgb kStops[9] = {{68, 1, 84},    {71, 45, 123}, {59, 82, 139},  {44, 114, 142}, {33, 145, 140},
                                {40, 174, 128}, {94, 201, 98}, {173, 220, 48}, {253, 231, 37}};
  if (!(t > 0)) t = 0;  // NaN lands here too; callers draw NaN cells in kNanColor themselves
  if (t > 1) t = 1;
  const double pos = t * 8;
  const int i = std::min(static_cast<int>(pos), 7);
  const double f = pos - i;
  auto mix = [f](uint8_t a, uint8_t b) { return static_cast<uint8_t>(std::lround(a + f * (b - a))); };
  return {mix(kStops[i].r, kStops[i + 1].r), mix(kStops[i].g, kStops[i + 1].g), mix(kStops[i].b, kStops[i + 1].b)};
}

namespace {
// Position of v in [lo, hi] as a fraction, linear or in log10; NaN when v cannot be placed.
double fraction(double v, double lo, double hi, bool log) {
  if (log) {
    if (!(v > 0)) return NAN;
    return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  }
  return (v - lo) / (hi - lo);
}
}  // namespace

double Frame::to_px(double x) const { return left + fraction(x, x_lo, x_hi, log_x) * (right - left); }
double Frame::to_py(double y) const { return bottom - fraction(y, y_lo, y_hi, log_y) * (bottom - top); }

// ---------------------------------------------------------------------------------------------
// Shared axes.

namespace detail {

Ticks ticks_within(const Ticks& all, double lo, double hi) {
  Ticks t = all;
  t.values.clear(), t.labels.clear();
  const double slack = (hi - lo) * 1e-9;
  for (size_t i = 0; i < all.values.size(); ++i)
    if (all.values[i] >= lo - slack && all.values[i] <= hi + slack) {
      t.values.push_back(all.values[i]);
      t.labels.push_back(all.labels[i]);
    }
  t.lo = lo, t.hi = hi;
  return t;
}

void check_image_size(int width, int height, const char* who) {
  LM_CHECK(width >= 200 && width <= 16384, who << ": width must be in [200, 16384] pixels, got " << width);
  LM_CHECK(height >= 150 && height <= 16384, who << ": height must be in [150, 16384] pixels, got " << height);
}

int title_block_height(const std::string& title) {
  return title.empty() ? kPad : kPad + text_height(kTitleScale) + 2 * kPad;
}

int left_margin(const std::string& y_label, const Ticks& y_ticks) {
  int widest = 0;
  for (const std::string& s : y_ticks.labels) widest = std::max(widest, text_width(s, kTickScale));
  const int label = y_label.empty() ? 0 : text_height(kLabelScale) + kLabelGap;
  return kPad + label + widest + kTickGap + kTickLen;
}

int bottom_margin(const std::string& x_label) {
  // Tick labels, their descender room, then the x label (with descenders) and the border.
  const int ticks = kTickLen + kTickGap + text_height(kTickScale) + 2 * kTickScale;
  const int label = x_label.empty() ? 0 : kLabelGap + text_height(kLabelScale) + 2 * kLabelScale;
  return ticks + label + kPad;
}

Frame layout_axes(int width, int height, const AxesText& text, const Ticks& x_ticks, const Ticks& y_ticks,
                  int right_reserve, const char* who) {
  Frame f;
  f.left = left_margin(text.y_label, y_ticks);
  f.top = title_block_height(text.title);
  // The last x tick label is centred on the right edge: leave room for its right half.
  const int half_last = x_ticks.labels.empty() ? 0 : text_width(x_ticks.labels.back(), kTickScale) / 2;
  f.right = width - 1 - std::max(kPad + right_reserve, half_last + kPad);
  f.bottom = height - 1 - bottom_margin(text.x_label);
  LM_CHECK(f.right - f.left >= 60, who << ": width " << width << " leaves only " << (f.right - f.left)
                                       << " pixels for the plot area after labels and legend; make it wider");
  LM_CHECK(f.bottom - f.top >= 60, who << ": height " << height << " leaves only " << (f.bottom - f.top)
                                       << " pixels for the plot area after title and labels; make it taller");
  f.x_lo = x_ticks.lo, f.x_hi = x_ticks.hi;
  f.y_lo = y_ticks.lo, f.y_hi = y_ticks.hi;
  return f;
}

void draw_grid(Canvas& canvas, const Frame& f, const Ticks& x_ticks, const Ticks& y_ticks) {
  for (double v : x_ticks.values) {
    const int x = static_cast<int>(std::lround(f.to_px(v)));
    if (x > f.left && x < f.right) canvas.fill_rect(x, f.top, x, f.bottom, kGridColor);
  }
  for (double v : y_ticks.values) {
    const int y = static_cast<int>(std::lround(f.to_py(v)));
    if (y > f.top && y < f.bottom) canvas.fill_rect(f.left, y, f.right, y, kGridColor);
  }
}

void draw_x_tick_labels(Canvas& canvas, const std::vector<double>& px, const std::vector<std::string>& labels,
                        int axis_y) {
  int last_right = -1000000;
  for (size_t i = 0; i < px.size(); ++i) {
    const int x = static_cast<int>(std::lround(px[i]));
    canvas.fill_rect(x, axis_y + 1, x, axis_y + kTickLen, kAxisColor);
    const int w = text_width(labels[i], kTickScale);
    if (x - w / 2 < last_right + 3 * kTickScale * 2) continue;  // would touch its left neighbour
    canvas.text(x, axis_y + kTickLen + kTickGap, labels[i], kTickTextColor, kTickScale, HAlign::Center);
    last_right = x - w / 2 + w;
  }
}

void draw_y_tick_labels(Canvas& canvas, const std::vector<double>& py, const std::vector<std::string>& labels,
                        int right_x) {
  // From the bottom up, so the labels near the origin win over those further up.
  std::vector<size_t> order(py.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&py](size_t a, size_t b) { return py[a] > py[b]; });
  int last_top = 1000000;
  for (size_t i : order) {
    const int y = static_cast<int>(std::lround(py[i]));
    canvas.fill_rect(right_x - kTickLen, y, right_x - 1, y, kAxisColor);
    const int h = text_height(kTickScale);
    if (y + h / 2 > last_top - 2 * kTickScale) continue;
    canvas.text(right_x - kTickLen - kTickGap, y, labels[i], kTickTextColor, kTickScale, HAlign::Right, VAlign::Middle);
    last_top = y - h / 2;
  }
}

void draw_title(Canvas& canvas, const std::string& title) {
  if (!title.empty()) canvas.text(canvas.width() / 2, kPad, title, kTextColor, kTitleScale, HAlign::Center);
}

void draw_axes(Canvas& canvas, const Frame& f, const Ticks& x_ticks, const Ticks& y_ticks, const AxesText& text) {
  canvas.clear_clip();
  canvas.outline_rect(f.left - 1, f.top - 1, f.right + 1, f.bottom + 1, kAxisColor);
  std::vector<double> px, py;
  for (double v : x_ticks.values) px.push_back(f.to_px(v));
  for (double v : y_ticks.values) py.push_back(f.to_py(v));
  draw_x_tick_labels(canvas, px, x_ticks.labels, f.bottom + 1);
  draw_y_tick_labels(canvas, py, y_ticks.labels, f.left - 1);
  draw_axis_titles(canvas, f, text);
}

void draw_axis_titles(Canvas& canvas, const Frame& f, const AxesText& text) {
  if (!text.x_label.empty()) {
    const int y = f.bottom + 1 + kTickLen + kTickGap + text_height(kTickScale) + 2 * kTickScale + kLabelGap;
    canvas.text((f.left + f.right) / 2, y, text.x_label, kTextColor, kLabelScale, HAlign::Center);
  }
  if (!text.y_label.empty())
    canvas.text_up(kPad + text_height(kLabelScale) / 2, (f.top + f.bottom) / 2, text.y_label, kTextColor, kLabelScale);
  draw_title(canvas, text.title);
}

}  // namespace detail

}  // namespace lm::plot
