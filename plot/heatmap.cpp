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

// The arguments that do not depend on the values: sizes, cell size, marked columns and outlined spans.
void check_arguments(int rows, int cols, const std::vector<double>& values, const HeatmapOptions& opt) {
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
}

// The colour scale [lo, hi] (continuous) or the set of categories present.
struct Scale {
  double lo = INFINITY, hi = -INFINITY;
  std::set<int> categories;
};

Scale value_scale(int cols, const std::vector<double>& values, const HeatmapOptions& opt) {
  Scale sc;
  double& lo = sc.lo;
  double& hi = sc.hi;
  for (size_t i = 0; i < values.size(); ++i) {
    const double v = values[i];
    if (std::isnan(v)) continue;
    LM_CHECK(std::isfinite(v), "heatmap: values[" << i << "] (row " << i / cols << ", col " << i % cols << ") is " << v
                                                  << "; use NaN for 'no value'");
    if (opt.categorical) {
      LM_CHECK(v >= 0 && v <= 1e6 && v == std::floor(v),
               "heatmap: categorical mode needs integer values in [0, 1e6], but values["
                   << i << "] (row " << i / cols << ", col " << i % cols << ") = " << v);
      sc.categories.insert(static_cast<int>(v));
    }
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (!(lo <= hi)) lo = 0, hi = 1;  // every cell is NaN: any scale will do
  if (opt.v_min && opt.v_max)
    LM_CHECK(*opt.v_min < *opt.v_max, "heatmap: v_min (" << *opt.v_min << ") must be < v_max (" << *opt.v_max << ")");
  if (opt.v_min) lo = *opt.v_min;
  if (opt.v_max) hi = *opt.v_max;
  if (!(lo < hi)) {
    if (opt.v_min)
      hi = lo + 1;
    else if (opt.v_max)
      lo = hi - 1;
    else
      lo -= 0.5, hi += 0.5;
  }
  return sc;
}

// Where everything goes: the grid at (left, top), cells cw x ch pixels, and on its right the colour
// bar or the legend (side_w x side_h).
struct Layout {
  Ticks col_ticks, row_ticks, bar_ticks;
  std::vector<int> shown;  // the categories the legend lists
  int left = 0, top = 0, side_w = 0, side_h = 0, bar_h = 0, grid_w = 0, grid_h = 0, width = 0, height = 0;
  double cw = 0, ch = 0;
};

// Margins from the label sizes, then the largest cell that fits (or the one asked for).
Layout layout_heatmap(int rows, int cols, const Scale& sc, const HeatmapOptions& opt) {
  using namespace detail;
  Layout L;
  const int expected_w = opt.cell_size > 0 ? cols * opt.cell_size : opt.width - 300;
  const int expected_h = opt.cell_size > 0 ? rows * opt.cell_size : opt.height - 200;
  L.col_ticks = index_ticks(cols, std::clamp(expected_w / 70, 2, 10));
  L.row_ticks = index_ticks(rows, std::clamp(expected_h / 50, 2, 10));
  L.bar_ticks = ticks_within(nice_ticks(sc.lo, sc.hi, 5), sc.lo, sc.hi);
  L.shown.assign(sc.categories.begin(), sc.categories.end());
  if (L.shown.size() > static_cast<size_t>(kMaxLegendRows)) L.shown.resize(kMaxLegendRows - 1);
  if (opt.categorical) {
    int widest = text_width("+" + std::to_string(sc.categories.size()) + " more", kLabelScale);
    for (int v : L.shown) widest = std::max(widest, text_width(category_name(opt, v), kLabelScale));
    L.side_w = kSideGap + 10 + kSwatch + 10 + widest + 10 + kPad;
  } else {
    int widest = 0;
    for (const std::string& s : L.bar_ticks.labels) widest = std::max(widest, text_width(s, kTickScale));
    L.side_w = kSideGap + kBarWidth + kTickLen + kTickGap + widest + kPad;
    if (!opt.value_label.empty()) L.side_w += kLabelGap + text_height(kLabelScale);
  }
  L.left = left_margin(opt.y_label, L.row_ticks);
  L.top = title_block_height(opt.title) + (opt.marked_columns.empty() ? 0 : kMarkStrip);
  const int bottom = bottom_margin(opt.x_label);
  double cw = opt.cell_size, ch = opt.cell_size;
  if (opt.cell_size == 0) {
    const int avail_w = opt.width - L.left - L.side_w, avail_h = opt.height - L.top - bottom;
    LM_CHECK(avail_w >= 20, "heatmap: width " << opt.width << " leaves " << avail_w
                                              << " pixels for the cells after labels and the colour bar; "
                                                 "make it wider");
    LM_CHECK(avail_h >= 20, "heatmap: height " << opt.height << " leaves " << avail_h
                                               << " pixels for the cells after title and labels; make it taller");
    cw = static_cast<double>(avail_w) / cols, ch = static_cast<double>(avail_h) / rows;
    if (opt.square_cells) cw = ch = std::min(cw, ch);
    if (cw >= 1) cw = std::floor(cw);  // whole pixels per cell keep the edges crisp
    if (ch >= 1) ch = std::floor(ch);
  }
  L.cw = cw, L.ch = ch;
  L.grid_w = std::max(1, static_cast<int>(std::lround(cols * cw)));
  L.grid_h = std::max(1, static_cast<int>(std::lround(rows * ch)));

  L.bar_h = std::max(L.grid_h, 120);
  const int legend_rows = static_cast<int>(L.shown.size() + (L.shown.size() < sc.categories.size() ? 1 : 0));
  L.side_h = opt.categorical ? 8 + kLegendRow * legend_rows : L.bar_h;
  L.width = std::max({L.left + L.grid_w + L.side_w, text_width(opt.title, kTitleScale) + 2 * kPad, 200});
  L.height = L.top + std::max(L.grid_h, L.side_h) + bottom;
  return L;
}

// Cells, sampled at pixel centres.
void draw_cells(Canvas& canvas, const Layout& L, int rows, int cols, const std::vector<double>& values, const Scale& sc,
                const HeatmapOptions& opt) {
  for (int py = 0; py < L.grid_h; ++py) {
    const int r = std::min(rows - 1, static_cast<int>((py + 0.5) / L.ch));
    for (int px = 0; px < L.grid_w; ++px) {
      const int c = std::min(cols - 1, static_cast<int>((px + 0.5) / L.cw));
      const double v = values[static_cast<size_t>(r) * cols + c];
      Rgb color = kNanColor;
      if (!std::isnan(v))
        color = opt.categorical ? palette_color(static_cast<int>(v)) : viridis((v - sc.lo) / (sc.hi - sc.lo));
      canvas.set(L.left + px, L.top + py, color);
    }
  }
}

// Marked columns (a tick above the grid and a thin line down the middle of the column), then the
// outlined row spans.
void draw_marks(Canvas& canvas, const Layout& L, const HeatmapOptions& opt) {
  const int left = L.left, top = L.top;
  const double cw = L.cw, ch = L.ch;
  for (int c : opt.marked_columns) {
    const int xa = left + static_cast<int>(std::lround(c * cw));
    const int xb = std::max(xa + 1, left + static_cast<int>(std::lround((c + 1) * cw)) - 1);
    canvas.fill_rect(xa, top - kMarkStrip + 2, xb, top - 4, opt.mark_color);
    const int xm = left + static_cast<int>(std::floor((c + 0.5) * cw));
    canvas.blend_rect(xm, top, xm, top + L.grid_h - 1, opt.mark_color, 0.75);
  }
  for (const CellSpan& s : opt.outlined) {
    const int x0 = left + static_cast<int>(std::lround(s.col_begin * cw));
    const int x1 = left + static_cast<int>(std::lround(s.col_end * cw)) - 1;
    const int y0 = top + static_cast<int>(std::lround(s.row * ch));
    const int y1 = top + static_cast<int>(std::lround((s.row + 1) * ch)) - 1;
    canvas.outline_rect(x0, y0, std::max(x0, x1), std::max(y0, y1), opt.outline_color, ch >= 8 && cw >= 8 ? 2 : 1);
  }
}

// Categorical mode: a swatch and a name per category shown, and "+N more" for the rest.
void draw_legend(Canvas& canvas, const Layout& L, const Scale& sc, const HeatmapOptions& opt, int side_x) {
  using namespace detail;
  const int top = L.top;
  const std::vector<int>& shown = L.shown;
  const int y1 = top + L.side_h - 1;
  canvas.outline_rect(side_x, top, L.width - 1 - kPad, y1, Rgb{200, 200, 200});
  for (size_t i = 0; i < shown.size(); ++i) {
    const int cy = top + 4 + kLegendRow * static_cast<int>(i) + kLegendRow / 2;
    canvas.fill_rect(side_x + 10, cy - kSwatch / 2, side_x + 10 + kSwatch - 1, cy + kSwatch / 2 - 1,
                     palette_color(shown[i]));
    canvas.text(side_x + 10 + kSwatch + 10, cy, category_name(opt, shown[i]), kTextColor, kLabelScale, HAlign::Left,
                VAlign::Middle);
  }
  if (shown.size() < sc.categories.size()) {
    const int cy = top + 4 + kLegendRow * static_cast<int>(shown.size()) + kLegendRow / 2;
    canvas.text(side_x + 10, cy, "+" + std::to_string(sc.categories.size() - shown.size()) + " more", kTextColor,
                kLabelScale, HAlign::Left, VAlign::Middle);
  }
}

// Colour bar: row y shows the value at its height; ticks and labels on its right, then the value label.
void draw_colour_bar(Canvas& canvas, const Layout& L, const Scale& sc, const HeatmapOptions& opt, int side_x) {
  using namespace detail;
  const int top = L.top, bar_h = L.bar_h;
  const double lo = sc.lo, hi = sc.hi;
  const Ticks& bar_ticks = L.bar_ticks;
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

}  // namespace

HeatmapFrame heatmap(const std::string& path, int rows, int cols, const std::vector<double>& values,
                     const HeatmapOptions& opt) {
  using namespace detail;
  check_arguments(rows, cols, values, opt);
  const Scale sc = value_scale(cols, values, opt);
  const Layout L = layout_heatmap(rows, cols, sc, opt);
  HeatmapFrame hf;
  hf.rows = rows, hf.cols = cols;
  hf.v_min = sc.lo, hf.v_max = sc.hi;
  hf.left = L.left, hf.top = L.top, hf.cell_w = L.cw, hf.cell_h = L.ch;

  Canvas canvas(L.width, L.height);
  draw_cells(canvas, L, rows, cols, values, sc, opt);
  draw_marks(canvas, L, opt);

  // Frame, index ticks, labels, title.
  Frame box;
  box.left = L.left, box.top = L.top, box.right = L.left + L.grid_w - 1, box.bottom = L.top + L.grid_h - 1;
  canvas.outline_rect(box.left - 1, box.top - 1, box.right + 1, box.bottom + 1, kAxisColor);
  std::vector<double> px, py;
  for (double v : L.col_ticks.values) px.push_back(L.left + (v + 0.5) * L.cw);
  for (double v : L.row_ticks.values) py.push_back(L.top + (v + 0.5) * L.ch);
  draw_x_tick_labels(canvas, px, L.col_ticks.labels, box.bottom + 1);
  draw_y_tick_labels(canvas, py, L.row_ticks.labels, box.left - 1);
  draw_axis_titles(canvas, box, AxesText{opt.title, opt.x_label, opt.y_label});

  const int side_x = box.right + 1 + kSideGap;
  if (opt.categorical)
    draw_legend(canvas, L, sc, opt, side_x);
  else
    draw_colour_bar(canvas, L, sc, opt, side_x);
  canvas.write_png(path);
  return hf;
}

}  // namespace lm::plot
