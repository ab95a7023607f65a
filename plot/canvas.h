// canvas.h: an RGB image in memory with the few primitives the charts need: pixels, anti-aliased
// thick lines and dots, rectangles, stb_easy_font text at an integer scale (also turned 90 degrees
// for y-axis labels), and PNG out (temp file + rename) and back in (for tests and tools).
// It is not a graphics library: no polygons, no fonts beyond stb's one. Charts live in plot.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lm::plot {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};
inline bool operator==(Rgb a, Rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; }
inline bool operator!=(Rgb a, Rgb b) { return !(a == b); }

inline constexpr Rgb kWhite{255, 255, 255};
inline constexpr Rgb kBlack{0, 0, 0};

enum class HAlign { Left, Center, Right };
enum class VAlign { Top, Middle, Bottom };  // of the capital-letter height, descenders hang below

// Ink width of `text` in pixels at `scale` (the widest line if it holds '\n').
int text_width(const std::string& text, int scale);
// Height of a capital letter at `scale`: 7 * scale. Descenders (g, j, p, q, y) add 2 * scale.
int text_height(int scale);

// Coordinates: pixel (x, y) has its centre at (x, y); x grows right, y grows down. Every drawing
// call is clipped to the clip rectangle (the whole canvas unless set_clip says otherwise), so a
// chart may pass coordinates outside the image.
class Canvas {
 public:
  Canvas(int width, int height, Rgb background = kWhite);

  int width() const { return w_; }
  int height() const { return h_; }
  Rgb at(int x, int y) const;                               // throws lm::Error outside the image
  const std::vector<uint8_t>& data() const { return px_; }  // (height, width, 3) row-major

  // Restrict drawing to the inclusive rectangle [x0, x1] x [y0, y1] (clamped to the image).
  void set_clip(int x0, int y0, int x1, int y1);
  void clear_clip();

  void set(int x, int y, Rgb c);
  // c over the pixel with opacity alpha in [0, 1] (alpha 1 = set).
  void blend(int x, int y, Rgb c, double alpha);

  // Inclusive corners, given in any order.
  void fill_rect(int x0, int y0, int x1, int y1, Rgb c);
  void blend_rect(int x0, int y0, int x1, int y1, Rgb c, double alpha);
  // A frame `thickness` pixels wide drawn inside the rectangle.
  void outline_rect(int x0, int y0, int x1, int y1, Rgb c, int thickness = 1);

  // Anti-aliased segment with round caps: a pixel is covered by max(0, min(1, t/2 + 0.5 - d)),
  // d the distance from its centre to the segment. A thickness-1 line on integer y fills exactly
  // one row. Non-finite endpoints draw nothing.
  void line(double x0, double y0, double x1, double y1, Rgb c, double thickness = 1.0);
  // Anti-aliased filled disc.
  void dot(double x, double y, double radius, Rgb c);

  // stb_easy_font text, each font unit drawn as a scale x scale block; (x, y) is the anchor
  // chosen by h and v. '\n' starts a new line 12 * scale below.
  void text(int x, int y, const std::string& s, Rgb c, int scale = 1, HAlign h = HAlign::Left, VAlign v = VAlign::Top);
  // The same text turned 90 degrees counter-clockwise (reads bottom to top), centred on (cx, cy).
  void text_up(int cx, int cy, const std::string& s, Rgb c, int scale = 1);

  // PNG encoded by stb_image_write and written by write_file_atomic (tensor/files.h): to
  // path + ".tmp", every write checked, then renamed onto path, so a reader never sees half a
  // file and a failed write keeps the old one. Throws lm::Error naming the path, also when the
  // path is not a regular file (a FIFO, a device, a directory, a symbolic link).
  void write_png(const std::string& path) const;

 private:
  int w_, h_;
  int cx0_, cy0_, cx1_, cy1_;  // clip rectangle, inclusive
  std::vector<uint8_t> px_;
};

// A decoded PNG (always 3 channels); the test's and tools' way to look at what was written.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;    // (height, width, 3)
  Rgb at(int x, int y) const;  // throws lm::Error outside the image
};
Image read_png(const std::string& path);  // throws lm::Error naming the path

}  // namespace lm::plot
