// plot.h: the project's charts, drawn from plain numbers into PNG files: line charts (training and
// validation loss against step, accuracy against context length), heat maps (attention weights,
// the group of every key for every query, retrieved blocks) and histograms (e.g. the number of
// unique retrieved blocks). It knows nothing of tensors, models or log formats: callers pass
// std::vector<double>. Pixels come from plot/canvas.h; docs/plot.md shows the API in use.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plot/canvas.h"

namespace lm::plot {

// ---- ticks and labels ----

// Axis tick marks: values from lo to hi (both included) and their printed labels.
struct Ticks {
  double lo = 0, hi = 1;  // the axis range the ticks cover
  double step = 1;        // spacing for linear ticks; 0 for log ticks
  std::vector<double> values;
  std::vector<std::string> labels;
};

// Linear ticks with a 1-2-5 step (1, 2, 5, 10, 20, ...) chosen as the smallest step for which
// [lo, hi], widened outwards to multiples of the step, has at most max_intervals intervals. The
// widened range is returned in Ticks::lo/hi: nice_ticks(0, 7.3) -> 0 2 4 6 8. integer_steps
// keeps the step >= 1 (for counts and indices). lo == hi is widened to a small range around it.
Ticks nice_ticks(double lo, double hi, int max_intervals = 6, bool integer_steps = false);

// Ticks for a log axis, lo > 0: decades (1, 10, 100) when they give at least 4 ticks, else
// 1-2-5 multiples, else 1..9 multiples; the range is widened to the nearest ticks outside:
// log_ticks(2.3, 10.8) -> 2 5 10 20. Ticks::step is 0.
Ticks log_ticks(double lo, double hi);

// A tick label with as many decimals as `step` needs ("0.2", "15", "0.005", and "0.0" next to
// "0.2"), never "-0", and a short scientific form ("2.5e6", "1e-5") when the step is >= 1e5 or
// < 1e-4. Log ticks pass their own value as the step.
std::string format_tick(double v, double step);

// ---- colours ----

// Distinct colours for series and categories: 9 hand-picked ones (no grey, which means "no
// data"), then hues spaced by the golden angle. i >= 0.
Rgb palette_color(int i);
// The viridis colour map, linear between its 9 standard control points at t = 0, 1/8, ..., 1
// (#440154 at 0, #21918c at 0.5, #fde725 at 1). t is clamped to [0, 1].
Rgb viridis(double t);
// Cells whose value is NaN (e.g. the masked upper triangle of an attention map).
inline constexpr Rgb kNanColor{205, 205, 205};

// ---- where the data went (returned by the charts, so callers and tests can find it) ----

// The plot area's edge pixels and the axis range at those edges. On a log axis the range is in
// data units; the pixel position is linear in log10 of the value.
struct Frame {
  int left = 0, top = 0, right = 0, bottom = 0;  // inclusive pixel coordinates
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  bool log_x = false, log_y = false;
  double to_px(double x) const;  // data -> pixel x (fractional; pixel centres are integers)
  double to_py(double y) const;  // data -> pixel y (grows downwards)
};

// ---- line chart ----

struct Series {
  std::string label;         // legend text; the legend is left out when every label is empty
  std::vector<double> x;     // empty means 0, 1, 2, ...
  std::vector<double> y;     // NaN (or <= 0 on a log axis) leaves a gap in the line
  std::optional<Rgb> color;  // default: palette_color(index of the series)
};

// A dashed vertical line across the plot area at x, labelled at its top (e.g. a model's window).
struct VerticalMark {
  double x = 0;
  std::string label;
};

struct LineChartOptions {
  std::string title, x_label, y_label;
  std::vector<VerticalMark> x_marks;  // drawn under the series; a mark outside the x range is left out
  int width = 960, height = 600;
  bool log_x = false, log_y = false;
  std::optional<std::pair<double, double>> x_range, y_range;  // default: fitted to the data
  double line_width = 2.0;
  bool markers = false;  // a dot at every point (good for a few points, e.g. accuracy vs length)
};

// Draws every series as a polyline over a grid, with ticks, axis labels and a legend to the right
// of the plot area (so it never covers data). Points outside a given range are clipped.
Frame line_chart(const std::string& path, const std::vector<Series>& series, const LineChartOptions& options = {});

// ---- heat map ----

// Cells [col_begin, col_end) of one row, outlined (e.g. the blocks retrieved for one query).
struct CellSpan {
  int row = 0, col_begin = 0, col_end = 0;
};

struct HeatmapOptions {
  std::string title, x_label, y_label;
  std::string value_label;             // written beside the colour bar (continuous mode)
  int cell_size = 0;                   // pixels per (square) cell; 0 = as large as fits in width x height
  int width = 960, height = 720;       // upper bound on the image when cell_size == 0
  bool square_cells = true;            // false: stretch cells to fill width x height (cell_size == 0)
  std::optional<double> v_min, v_max;  // colour scale; default: min and max of the finite values

  // Categorical mode: every finite value must be an integer >= 0 and is drawn in
  // palette_color(value); a legend maps value -> category_names[value] (or the number).
  bool categorical = false;
  std::map<int, std::string> category_names;

  std::vector<int> marked_columns;  // e.g. landmark positions: a thin line and a tick above
  Rgb mark_color{255, 0, 255};
  std::vector<CellSpan> outlined;  // e.g. retrieved blocks, per query row
  Rgb outline_color{255, 40, 40};
};

// Where the cells went: cell (r, c) covers pixels [left + c*cell_w, left + (c+1)*cell_w) x
// [top + r*cell_h, top + (r+1)*cell_h); row 0 is at the top. Cells narrower than a pixel are
// sampled at pixel centres.
struct HeatmapFrame {
  int left = 0, top = 0;
  double cell_w = 1, cell_h = 1;
  int rows = 0, cols = 0;
  double v_min = 0, v_max = 1;  // the colour scale used (continuous mode)
};

// values: (rows, cols) row-major. NaN cells are drawn in kNanColor.
HeatmapFrame heatmap(const std::string& path, int rows, int cols, const std::vector<double>& values,
                     const HeatmapOptions& options = {});

// ---- histogram ----

struct HistogramOptions {
  std::string title, x_label, y_label = "count";
  int width = 960, height = 600;
  // One bar per integer value from the smallest to the largest (values must be integers);
  // `bins` is then ignored. Otherwise `bins` equal-width bins over `range`.
  bool integer_bins = false;
  std::optional<std::pair<double, double>> range;  // default: min and max of the values
  Rgb color{31, 119, 180};
};

// NaN values are skipped; values outside a given range are not counted. The y axis counts from 0.
Frame histogram(const std::string& path, const std::vector<double>& values, int bins,
                const HistogramOptions& options = {});

}  // namespace lm::plot
