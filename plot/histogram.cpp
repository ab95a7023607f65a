// histogram.cpp: counts of values in equal-width bins, or one bar per integer value (e.g. "number of
// unique retrieved blocks per query"), with the count printed above each bar when it fits. The
// y axis always starts at 0 so bar heights are proportional to counts. No density or cumulative mode.
#include <algorithm>
#include <cmath>

#include "plot/axes.h"
#include "plot/plot.h"
#include "tensor/check.h"

namespace lm::plot {

Frame histogram(const std::string& path, const std::vector<double>& values, int bins, const HistogramOptions& opt) {
  using namespace detail;
  check_image_size(opt.width, opt.height, "histogram");
  LM_CHECK(!values.empty(), "histogram: `values` is empty; nothing to count");
  if (!opt.integer_bins) LM_CHECK(bins > 0 && bins <= 100000, "histogram: bins must be in [1, 100000], got " << bins);
  if (opt.range)
    LM_CHECK(
        std::isfinite(opt.range->first) && std::isfinite(opt.range->second) && opt.range->first <= opt.range->second,
        "histogram: range must be finite with lo <= hi, got [" << opt.range->first << ", " << opt.range->second << "]");
  double v_min = INFINITY, v_max = -INFINITY;
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (std::isnan(v)) continue;
    LM_CHECK(std::isfinite(v),
             "histogram: values[" << i << "] is " << v << "; only finite values (or NaN, skipped) can be counted");
    LM_CHECK(!opt.integer_bins || v == std::floor(v),
             "histogram: integer_bins needs integer values, but values[" << i << "] = " << v);
    v_min = std::min(v_min, v), v_max = std::max(v_max, v);
  }
  LM_CHECK(v_min <= v_max, "histogram: every one of the " << values.size() << " values is NaN; nothing to count");

  // Bin k covers [edge0 + k * width, edge0 + (k + 1) * width); the last one also takes its right edge.
  double lo = opt.range ? opt.range->first : v_min, hi = opt.range ? opt.range->second : v_max;
  int n = bins;
  double edge0 = lo, width = 0;
  if (opt.integer_bins) {
    lo = std::ceil(lo), hi = std::floor(hi);
    LM_CHECK(lo <= hi, "histogram: range [" << opt.range->first << ", " << opt.range->second << "] holds no integer");
    LM_CHECK(hi - lo < 100000, "histogram: integer_bins over ["
                                   << lo << ", " << hi
                                   << "] would draw more than 100000 bars; use equal-width bins instead");
    n = static_cast<int>(hi - lo) + 1;
    edge0 = lo - 0.5, width = 1;
  } else {
    if (lo == hi) lo -= 0.5, hi += 0.5;
    edge0 = lo, width = (hi - lo) / n;
  }
  const double edge_end = edge0 + n * width;
  std::vector<long> counts(n, 0);
  for (double v : values) {
    if (std::isnan(v) || v < edge0 || v > edge_end) continue;
    counts[std::min(n - 1, static_cast<int>(std::floor((v - edge0) / width)))] += 1;
  }
  const long max_count = *std::max_element(counts.begin(), counts.end());

  // y from 0, with about 8% headroom for the count labels above the bars.
  const Ticks yt = nice_ticks(0, std::max(1.0, max_count * 1.08), std::clamp(opt.height / 90, 2, 10), true);
  const int max_x_intervals = std::clamp(opt.width / 120, 2, 10);
  const Ticks xt = opt.integer_bins ? ticks_within(nice_ticks(lo, hi, max_x_intervals, true), lo, hi)
                                    : ticks_within(nice_ticks(lo, hi, max_x_intervals), lo, hi);
  const AxesText text{opt.title, opt.x_label, opt.y_label};
  Frame f = layout_axes(opt.width, opt.height, text, xt, yt, 0, "histogram");
  f.x_lo = edge0, f.x_hi = edge_end;  // integer bars are centred on their value

  Canvas canvas(opt.width, opt.height);
  draw_grid(canvas, f, Ticks{}, yt);
  const bool show_counts = n <= 60;
  for (int k = 0; k < n; ++k) {
    int xa = static_cast<int>(std::lround(f.to_px(edge0 + k * width)));
    int xb = static_cast<int>(std::lround(f.to_px(edge0 + (k + 1) * width))) - 1;
    if (xb - xa >= 5) xa += 1, xb -= 1;  // a white gap between wide bars
    if (counts[k] == 0) continue;
    const int top = static_cast<int>(std::lround(f.to_py(static_cast<double>(counts[k]))));
    canvas.fill_rect(xa, top, std::max(xa, xb), f.bottom, opt.color);
    const std::string label = std::to_string(counts[k]);
    if (show_counts && text_width(label, kTickScale) + 4 <= xb - xa + 1)
      canvas.text((xa + xb + 1) / 2, top - 4, label, kTickTextColor, kTickScale, HAlign::Center, VAlign::Bottom);
  }
  draw_axes(canvas, f, xt, yt, text);
  canvas.write_png(path);
  return f;
}

}  // namespace lm::plot
