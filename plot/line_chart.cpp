// line_chart.cpp: several series as polylines over a grid, linear or log axes, legend to the right
// of the plot area (so it never covers a curve). Gaps come from NaN points. It reads no logs:
// turning a metrics file into Series is the caller's job (train/, infer/ or a small tool).
#include <algorithm>
#include <cmath>

#include "plot/axes.h"
#include "plot/plot.h"
#include "tensor/check.h"

namespace lm::plot {

namespace {

constexpr int kLegendSwatch = 32;  // length of the line sample in the legend
constexpr int kLegendRow = 26;     // vertical distance between legend entries
constexpr Rgb kLegendBorder{200, 200, 200};
constexpr Rgb kMarkColor{110, 110, 110};  // vertical marks: a grey that reads on the grid

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

// Ticks for one axis: fitted (widened to nice values) or, for a range the caller fixed, the nice
// values inside that exact range.
Ticks axis_ticks(double lo, double hi, bool log, bool fixed, int max_intervals) {
  const Ticks all = log ? log_ticks(lo, hi) : nice_ticks(lo, hi, max_intervals);
  return fixed ? detail::ticks_within(all, lo, hi) : all;
}

void check_range(const std::optional<std::pair<double, double>>& r, bool log, const char* name) {
  if (!r) return;
  LM_CHECK(std::isfinite(r->first) && std::isfinite(r->second) && r->first < r->second,
           "line_chart: " << name << " must be finite with lo < hi, got [" << r->first << ", " << r->second << "]");
  LM_CHECK(!log || r->first > 0, "line_chart: " << name << " must be > 0 on a log axis, got lo = " << r->first);
}

// The extent of the points that can be drawn (finite, and > 0 on a log axis), checking each series
// on the way; any_label: some series has a legend entry.
struct Extent {
  double x_min, x_max, y_min, y_max;
  bool any_label;
};

Extent data_extent(const std::vector<Series>& series, const LineChartOptions& opt) {
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  bool any_label = false;
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    LM_CHECK(!s.y.empty(), "line_chart: series " << i << " ('" << s.label << "') has no y values");
    LM_CHECK(s.x.empty() || s.x.size() == s.y.size(), "line_chart: series " << i << " ('" << s.label << "'): x has "
                                                                            << s.x.size() << " values but y has "
                                                                            << s.y.size());
    any_label = any_label || !s.label.empty();
    for (size_t j = 0; j < s.y.size(); ++j) {
      const double x = s.x.empty() ? static_cast<double>(j) : s.x[j], y = s.y[j];
      if (!usable(x, opt.log_x) || !usable(y, opt.log_y)) continue;
      x_min = std::min(x_min, x), x_max = std::max(x_max, x);
      y_min = std::min(y_min, y), y_max = std::max(y_max, y);
    }
  }
  LM_CHECK(x_min <= x_max, "line_chart: no point of any series has a finite x and y"
                               << (opt.log_x || opt.log_y ? " (> 0 on log axes)" : "") << "; nothing to draw");
  return Extent{x_min, x_max, y_min, y_max, any_label};
}

// Dashed vertical lines (dashes of 6 px, gaps of 4), each labelled at its top right.
void draw_x_marks(Canvas& canvas, const Frame& f, const LineChartOptions& opt) {
  using namespace detail;
  for (const VerticalMark& m : opt.x_marks) {
    if (!usable(m.x, opt.log_x)) continue;
    const double px = f.to_px(m.x);
    if (px < f.left || px > f.right) continue;
    for (double y = f.top; y < f.bottom; y += 10)
      canvas.line(px, y, px, std::min<double>(y + 6, f.bottom), kMarkColor, 1.5);
    canvas.text(static_cast<int>(px) + 5, f.top + 6, m.label, kMarkColor, kLabelScale, HAlign::Left, VAlign::Top);
  }
}

// One series: segments between neighbouring drawable points, and a dot on every point (markers)
// or on each isolated one (it would vanish otherwise).
void draw_series(Canvas& canvas, const Frame& f, const Series& s, Rgb color, const LineChartOptions& opt) {
  const size_t n = s.y.size();
  std::vector<double> px(n, NAN), py(n, NAN);
  for (size_t j = 0; j < n; ++j) {
    const double x = s.x.empty() ? static_cast<double>(j) : s.x[j];
    if (usable(x, opt.log_x) && usable(s.y[j], opt.log_y)) px[j] = f.to_px(x), py[j] = f.to_py(s.y[j]);
  }
  auto ok = [&](size_t j) { return std::isfinite(px[j]); };
  for (size_t j = 0; j + 1 < n; ++j)
    if (ok(j) && ok(j + 1)) canvas.line(px[j], py[j], px[j + 1], py[j + 1], color, opt.line_width);
  for (size_t j = 0; j < n; ++j) {
    const bool isolated = ok(j) && (j == 0 || !ok(j - 1)) && (j + 1 == n || !ok(j + 1));
    if (opt.markers)
      canvas.dot(px[j], py[j], opt.line_width + 1.5, color);
    else if (isolated)
      canvas.dot(px[j], py[j], opt.line_width, color);
  }
}

Rgb series_color(const std::vector<Series>& series, size_t i) {
  return series[i].color ? *series[i].color : palette_color(static_cast<int>(i));
}

// The legend, legend_w wide, to the right of the plot area: a line sample and the label per series.
void draw_legend(Canvas& canvas, const Frame& f, const std::vector<Series>& series, int legend_w,
                 const LineChartOptions& opt) {
  using namespace detail;
  const int x0 = f.right + 1 + kPad, y0 = f.top;
  const int y1 = y0 + 8 + kLegendRow * static_cast<int>(series.size());
  canvas.fill_rect(x0, y0, x0 + legend_w - 1, y1, kWhite);
  canvas.outline_rect(x0, y0, x0 + legend_w - 1, y1, kLegendBorder);
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const Rgb color = series_color(series, i);
    const int cy = y0 + 4 + kLegendRow * static_cast<int>(i) + kLegendRow / 2;
    canvas.line(x0 + 12, cy, x0 + 12 + kLegendSwatch, cy, color, std::max(opt.line_width, 2.0));
    if (opt.markers) canvas.dot(x0 + 12 + kLegendSwatch / 2.0, cy, opt.line_width + 1.5, color);
    canvas.text(x0 + 12 + kLegendSwatch + 10, cy, s.label, kTextColor, kLabelScale, HAlign::Left, VAlign::Middle);
  }
}

}  // namespace

Frame line_chart(const std::string& path, const std::vector<Series>& series, const LineChartOptions& opt) {
  using namespace detail;
  check_image_size(opt.width, opt.height, "line_chart");
  LM_CHECK(!series.empty(), "line_chart: `series` is empty; pass at least one Series");
  LM_CHECK(opt.line_width > 0 && opt.line_width <= 50,
           "line_chart: line_width must be in (0, 50] pixels, got " << opt.line_width);
  check_range(opt.x_range, opt.log_x, "x_range");
  check_range(opt.y_range, opt.log_y, "y_range");
  Extent e = data_extent(series, opt);
  if (opt.x_range) e.x_min = opt.x_range->first, e.x_max = opt.x_range->second;
  if (opt.y_range) e.y_min = opt.y_range->first, e.y_max = opt.y_range->second;

  const int max_x_intervals = std::clamp(opt.width / 120, 2, 10);
  const int max_y_intervals = std::clamp(opt.height / 90, 2, 10);
  const Ticks xt = axis_ticks(e.x_min, e.x_max, opt.log_x, opt.x_range.has_value(), max_x_intervals);
  const Ticks yt = axis_ticks(e.y_min, e.y_max, opt.log_y, opt.y_range.has_value(), max_y_intervals);

  // Legend geometry first: it decides how much room the plot area leaves on the right.
  int legend_w = 0;
  if (e.any_label) {
    int widest = 0;
    for (const Series& s : series) widest = std::max(widest, text_width(s.label, kLabelScale));
    legend_w = 12 + kLegendSwatch + 10 + widest + 12;
  }
  const AxesText text{opt.title, opt.x_label, opt.y_label};
  Frame f = layout_axes(opt.width, opt.height, text, xt, yt, legend_w > 0 ? legend_w + kPad : 0, "line_chart");
  f.log_x = opt.log_x, f.log_y = opt.log_y;

  Canvas canvas(opt.width, opt.height);
  draw_grid(canvas, f, xt, yt);
  canvas.set_clip(f.left, f.top, f.right, f.bottom);
  draw_x_marks(canvas, f, opt);
  for (size_t i = 0; i < series.size(); ++i) draw_series(canvas, f, series[i], series_color(series, i), opt);
  draw_axes(canvas, f, xt, yt, text);
  if (e.any_label) draw_legend(canvas, f, series, legend_w, opt);
  canvas.write_png(path);
  return f;
}

}  // namespace lm::plot
