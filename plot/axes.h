// axes.h: internal to plot/: the look (text sizes, colours, spacing) and the axes code that the
// line chart, the histogram and the heat map share: margins from label sizes, grid, frame, ticks,
// labels and title. Not part of the public API (that is plot.h); callers never include this.
#pragma once

#include <string>

#include "plot/canvas.h"
#include "plot/plot.h"

namespace lm::plot::detail {

// One look for every chart.
inline constexpr int kTitleScale = 3;
inline constexpr int kLabelScale = 2;  // axis labels, legend entries
inline constexpr int kTickScale = 2;   // tick labels
inline constexpr int kPad = 16;        // image border to the nearest text
inline constexpr int kTickLen = 5;
inline constexpr int kTickGap = 6;    // tick mark to its label
inline constexpr int kLabelGap = 14;  // tick labels to the axis label
inline constexpr Rgb kTextColor{30, 30, 30};
inline constexpr Rgb kTickTextColor{70, 70, 70};
inline constexpr Rgb kAxisColor{90, 90, 90};
inline constexpr Rgb kGridColor{232, 232, 232};

struct AxesText {
  std::string title, x_label, y_label;
};

// The ticks of `all` that lie in [lo, hi], with the axis range set to exactly [lo, hi] (for a
// range the caller fixed, or histogram edges that must not move).
Ticks ticks_within(const Ticks& all, double lo, double hi);

// Minimum image size any chart accepts; `who` names the caller in the error.
void check_image_size(int width, int height, const char* who);

// Space above the plot area taken by the title (and the padding above it).
int title_block_height(const std::string& title);
// Space left of the plot area for the y label and the y tick labels.
int left_margin(const std::string& y_label, const Ticks& y_ticks);
// Space below the plot area for the x tick labels and the x label.
int bottom_margin(const std::string& x_label);

// Place the plot area in a width x height image, leaving `right_reserve` pixels right of it
// (e.g. for a legend), and throw naming width/height when what is left is too small.
Frame layout_axes(int width, int height, const AxesText& text, const Ticks& x_ticks, const Ticks& y_ticks,
                  int right_reserve, const char* who);

// Light grid lines at the ticks, inside the plot area (drawn before the data).
void draw_grid(Canvas& canvas, const Frame& frame, const Ticks& x_ticks, const Ticks& y_ticks);
// The frame one pixel outside the plot area, tick marks, tick labels (a label that would overlap
// its neighbour is skipped), axis labels and the title (drawn after the data).
void draw_axes(Canvas& canvas, const Frame& frame, const Ticks& x_ticks, const Ticks& y_ticks, const AxesText& text);
// The x label under the tick labels, the y label turned up at the left border, and the title;
// only the pixel box of `frame` is used.
void draw_axis_titles(Canvas& canvas, const Frame& frame, const AxesText& text);
// x tick labels under a horizontal axis at pixel row `axis_y`, ticks at pixel positions px[i].
void draw_x_tick_labels(Canvas& canvas, const std::vector<double>& px, const std::vector<std::string>& labels,
                        int axis_y);
// y tick labels right-aligned at pixel column `right_x`, ticks at pixel rows py[i].
void draw_y_tick_labels(Canvas& canvas, const std::vector<double>& py, const std::vector<std::string>& labels,
                        int right_x);
void draw_title(Canvas& canvas, const std::string& title);

}  // namespace lm::plot::detail
