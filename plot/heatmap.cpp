// heatmap.cpp: a (rows, cols) matrix as coloured cells, row 0 at the top: viridis with a colour bar,
// or categories with a legend; NaN cells grey; marked columns (landmarks) and outlined row spans
// (retrieved blocks) drawn over the cells. Cells smaller than a pixel are sampled, not averaged.
#include <algorithm>
#include <cmath>
#include <set>

#include "plot/axes.h"
#include "plot/plot.h"
#include "tensor/check.h"

namespace lm::plot {

namespace {

constexpr int kMarkStrip = 12;  // room above the grid for the marked-column ticks
constexpr int kSideGap = 24;    // grid to colour bar or legend
constexpr int kBarWidth = 20;
constexpr int kSwatch = 16;
constexpr int kLegendRow = 24;
constexpr int kMaxLegendRows = 30;

// Ticks for cell indices 0..n-1 (integer steps only).
Ticks index_ticks(int n, int max_intervals) {
  if (n == 1) return detail::ticks_within(nice_ticks(0, 0, 2, true), 0, 0);
  return detail::ticks_within(nice_ticks(0, n - 1, max_intervals, true), 0, n - 1);
}

std::string category_name(const HeatmapOptions& opt, int v) {
  auto it = opt.category_names.find(v);
  return it == opt.category_names.end() ? std::to_string(v) : it->second;
}

}  // namespace

HeatmapFrame heatmap(const std::string& path, int rows, int cols, const std::vector<double>& values,
                     const HeatmapOptions& opt) {
  using namespace detail;
  LM_CHECK(rows >= 1 && cols >= 1, "heatmap: rows and cols must be >= 1, got rows = " << rows << ", cols = " << cols);
  LM_CHECK(values.size() == static_cast<size_t>(rows) * cols,
           "heatmap: values has " << values.size() << " entries but rows x cols = " << rows << " x " << cols << " = "
                                  << static_cast<size_t>(rows) * cols);
  LM_CHECK(opt.cell_size >= 0 && opt.cell_size <= 200, "heatmap: cell_size must be in [0, 200], got " << opt.cell_size);
  if (opt.cell_size == 0) check_image_size(opt.width, opt.height, "heatmap");
  for (int c : opt.marked_columns)
    LM_CHECK(c >= 0 && c < cols, "heatmap: marked_columns holds " << c << ", outside [0, " << cols << ")");
  for (const CellSpan& s : opt.outlined)
    LM_CHECK(s.row >= 0 && s.row < rows && s.col_begin >= 0 && s.col_begin < s.col_end && s.col_end <= cols,
             "heatmap: outlined span {row " << s.row << ", cols [" << s.col_begin << ", " << s.col_end
                                            << ")} is empty or outside the " << rows << " x " << cols << " grid");

  // The colour scale (continuous) or the set of categories present.
  HeatmapFrame hf;
  hf.rows = rows, hf.cols = cols;
  std::set<int> categories;
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (std::isnan(v)) continue;
    LM_CHECK(std::isfinite(v), "heatmap: values[" << i << "] (row " << i / cols << ", col " << i % cols << ") is " << v
                                                   << "; use NaN for 'no value'");
    if (opt.categorical) {
      LM_CHECK(v >= 0 && v <= 1e6 && v == std::floor(v),
               "heatmap: categorical mode needs integer values in [0, 1e6], but values["
                   << i << "] (row " << i / cols << ", col " << i % cols << ") = " << v);
      categories.insert(static_cast<int>(v));
    }
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (!(lo <= hi)) lo = 0, hi = 1;  // every cell is NaN: any scale will do
  if (opt.v_min && opt.v_max)
    LM_CHECK(*opt.v_min < *opt.v_max, "heatmap: v_min (" << *opt.v_min << ") must be < v_max (" << *opt.v_max << ")");
  if (opt.v_min) lo = *opt.v_min;
  if (opt.v_max) hi = *opt.v_max;
  if (!(lo < hi)) {
    if (opt.v_min) hi = lo + 1;
    else if (opt.v_max) lo = hi - 1;
    else lo -= 0.5, hi += 0.5;
  }
  hf.v_min = lo, hf.v_max = hi;

  // Layout: margins from the label sizes, then the largest cell that fits (or the one asked for).
  const int expected_w = opt.cell_size > 0 ? cols * opt.cell_size : opt.width - 300;
  const int expected_h = opt.cell_size > 0 ? rows * opt.cell_size : opt.height - 200;
  const Ticks col_ticks = index_ticks(cols, std::clamp(expected_w / 70, 2, 10));
  const Ticks row_ticks = index_ticks(rows, std::clamp(expected_h / 50, 2, 10));
  const Ticks bar_ticks = ticks_within(nice_ticks(lo, hi, 5), lo, hi);
  int side_w = 0;  // colour bar with its labels, or the legend
  std::vector<int> shown(categories.begin(), categories.end());
  if (shown.size() > static_cast<size_t>(kMaxLegendRows)) shown.resize(kMaxLegendRows - 1);
  if (opt.categorical) {
    int widest = text_width("+" + std::to_string(categories.size()) + " more", kLabelScale);
    for (int v : shown) widest = std::max(widest, text_width(category_name(opt, v), kLabelScale));
    side_w = kSideGap + 10 + kSwatch + 10 + widest + 10 + kPad;
  } else {
    int widest = 0;
    for (const std::string& s : bar_ticks.labels) widest = std::max(widest, text_width(s, kTickScale));
    side_w = kSideGap + kBarWidth + kTickLen + kTickGap + widest + kPad;
    if (!opt.value_label.empty()) side_w += kLabelGap + text_height(kLabelScale);
  }
  const int left = left_margin(opt.y_label, row_ticks);
  const int top = title_block_height(opt.title) + (opt.marked_columns.empty() ? 0 : kMarkStrip);
  const int bottom = bottom_margin(opt.x_label);
  double cw = opt.cell_size, ch = opt.cell_size;
  if (opt.cell_size == 0) {
    const int avail_w = opt.width - left - side_w, avail_h = opt.height - top - bottom;
    LM_CHECK(avail_w >= 20, "heatmap: width " << opt.width << " leaves " << avail_w
                                              << " pixels for the cells after labels and the colour bar; make it wider");
    LM_CHECK(avail_h >= 20, "heatmap: height " << opt.height << " leaves " << avail_h
                                               << " pixels for the cells after title and labels; make it taller");
    cw = static_cast<double>(avail_w) / cols, ch = static_cast<double>(avail_h) / rows;
    if (opt.square_cells) cw = ch = std::min(cw, ch);
    if (cw >= 1) cw = std::floor(cw);  // whole pixels per cell keep the edges crisp
    if (ch >= 1) ch = std::floor(ch);
  }
  const int grid_w = std::max(1, static_cast<int>(std::lround(cols * cw)));
  const int grid_h = std::max(1, static_cast<int>(std::lround(rows * ch)));
  hf.left = left, hf.top = top, hf.cell_w = cw, hf.cell_h = ch;

  const int bar_h = std::max(grid_h, 120);
  const int legend_rows = static_cast<int>(shown.size() + (shown.size() < categories.size() ? 1 : 0));
  const int side_h = opt.categorical ? 8 + kLegendRow * legend_rows : bar_h;
  const int width = std::max({left + grid_w + side_w, text_width(opt.title, kTitleScale) + 2 * kPad, 200});
  const int height = top + std::max(grid_h, side_h) + bottom;
  Canvas canvas(width, height);

  // Cells, sampled at pixel centres.
  for (int py = 0; py < grid_h; ++py) {
    const int r = std::min(rows - 1, static_cast<int>((py + 0.5) / ch));
    for (int px = 0; px < grid_w; ++px) {
      const int c = std::min(cols - 1, static_cast<int>((px + 0.5) / cw));
      const double v = values[static_cast<size_t>(r) * cols + c];
      Rgb color = kNanColor;
      if (!std::isnan(v)) color = opt.categorical ? palette_color(static_cast<int>(v)) : viridis((v - lo) / (hi - lo));
      canvas.set(left + px, top + py, color);
    }
  }
  // Marked columns: a tick above the grid and a thin line down the middle of the column.
  for (int c : opt.marked_columns) {
    const int xa = left + static_cast<int>(std::lround(c * cw));
    const int xb = std::max(xa + 1, left + static_cast<int>(std::lround((c + 1) * cw)) - 1);
    canvas.fill_rect(xa, top - kMarkStrip + 2, xb, top - 4, opt.mark_color);
    const int xm = left + static_cast<int>(std::floor((c + 0.5) * cw));
    canvas.blend_rect(xm, top, xm, top + grid_h - 1, opt.mark_color, 0.75);
  }
  for (const CellSpan& s : opt.outlined) {
    const int x0 = left + static_cast<int>(std::lround(s.col_begin * cw));
    const int x1 = left + static_cast<int>(std::lround(s.col_end * cw)) - 1;
    const int y0 = top + static_cast<int>(std::lround(s.row * ch));
    const int y1 = top + static_cast<int>(std::lround((s.row + 1) * ch)) - 1;
    canvas.outline_rect(x0, y0, std::max(x0, x1), std::max(y0, y1), opt.outline_color, ch >= 8 && cw >= 8 ? 2 : 1);
  }

  // Frame, index ticks, labels, title.
  Frame box;
  box.left = left, box.top = top, box.right = left + grid_w - 1, box.bottom = top + grid_h - 1;
  canvas.outline_rect(box.left - 1, box.top - 1, box.right + 1, box.bottom + 1, kAxisColor);
  std::vector<double> px, py;
  for (double v : col_ticks.values) px.push_back(left + (v + 0.5) * cw);
  for (double v : row_ticks.values) py.push_back(top + (v + 0.5) * ch);
  draw_x_tick_labels(canvas, px, col_ticks.labels, box.bottom + 1);
  draw_y_tick_labels(canvas, py, row_ticks.labels, box.left - 1);
  draw_axis_titles(canvas, box, AxesText{opt.title, opt.x_label, opt.y_label});

  const int side_x = box.right + 1 + kSideGap;
  if (opt.categorical) {
    const int y1 = top + side_h - 1;
    canvas.outline_rect(side_x, top, width - 1 - kPad, y1, Rgb{200, 200, 200});
    for (size_t i = 0; i < shown.size(); ++i) {
      const int cy = top + 4 + kLegendRow * static_cast<int>(i) + kLegendRow / 2;
      canvas.fill_rect(side_x + 10, cy - kSwatch / 2, side_x + 10 + kSwatch - 1, cy + kSwatch / 2 - 1,
                       palette_color(shown[i]));
      canvas.text(side_x + 10 + kSwatch + 10, cy, category_name(opt, shown[i]), kTextColor, kLabelScale,
                  HAlign::Left, VAlign::Middle);
    }
    if (shown.size() < categories.size()) {
      const int cy = top + 4 + kLegendRow * static_cast<int>(shown.size()) + kLegendRow / 2;
      canvas.text(side_x + 10, cy, "+" + std::to_string(categories.size() - shown.size()) + " more", kTextColor,
                  kLabelScale, HAlign::Left, VAlign::Middle);
    }
  } else {
    // Colour bar: row y shows the value at its height; ticks and labels on its right.
    const int bar_bottom = top + bar_h - 1;
    for (int y = top; y <= bar_bottom; ++y)
      canvas.fill_rect(side_x, y, side_x + kBarWidth - 1, y, viridis(static_cast<double>(bar_bottom - y) / (bar_h - 1)));
    canvas.outline_rect(side_x - 1, top - 1, side_x + kBarWidth, bar_bottom + 1, kAxisColor);
    int last_top = 1000000, widest = 0;
    for (size_t i = 0; i < bar_ticks.values.size(); ++i) {
      const int y = static_cast<int>(std::lround(bar_bottom - (bar_ticks.values[i] - lo) / (hi - lo) * (bar_h - 1)));
      const int x = side_x + kBarWidth + 1;
      canvas.fill_rect(x, y, x + kTickLen - 1, y, kAxisColor);
      if (y + text_height(kTickScale) / 2 > last_top - 2 * kTickScale) continue;
      canvas.text(x + kTickLen + kTickGap, y, bar_ticks.labels[i], kTickTextColor, kTickScale, HAlign::Left,
                  VAlign::Middle);
      widest = std::max(widest, text_width(bar_ticks.labels[i], kTickScale));
      last_top = y - text_height(kTickScale) / 2;
    }
    if (!opt.value_label.empty()) {
      const int x = side_x + kBarWidth + 1 + kTickLen + kTickGap + widest + kLabelGap + text_height(kLabelScale) / 2;
      canvas.text_up(x, top + bar_h / 2, opt.value_label, kTextColor, kLabelScale);
    }
  }
  canvas.write_png(path);
  return hf;
}

}  // namespace lm::plot
