// canvas.cpp: the pixel work behind canvas.h: coverage-based anti-aliased lines, stb_easy_font
// quads rasterised as blocks, and PNG I/O. This is the one file that compiles the stb image
// reader and writer (STB_IMAGE_IMPLEMENTATION, STB_IMAGE_WRITE_IMPLEMENTATION); stb_easy_font
// is all static functions and needs no such define. stb's writer only encodes here, into memory
// (STBI_WRITE_NO_STDIO): its own file writer checks neither its writes nor the close, so the file
// is written by write_file_atomic (tensor/files.h), which does.
#include "plot/canvas.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tensor/check.h"
#include "tensor/files.h"

// stb is C written for many compilers; its warnings are not ours to fix.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb/stb_image_write.h>
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include <stb/stb_easy_font.h>
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace lm::plot {

namespace {

// One filled rectangle of a glyph, in font units: [x0, x1) x [y0, y1), y down from the top of
// the capital letters.
struct GlyphRect {
  int x0, y0, x1, y1;
};

// stb_easy_font emits quads (4 vertices of 16 bytes: x, y, z as floats, then RGBA). Its segments
// are axis-aligned with integer corners, so vertex 0 and vertex 2 give the whole rectangle.
std::vector<GlyphRect> glyph_rects(const std::string& s) {
  std::vector<GlyphRect> out;
  if (s.empty()) return out;
  std::vector<char> text(s.begin(), s.end());
  text.push_back('\0');
  std::vector<char> buf(300 * s.size() + 1024);  // stb's estimate is ~270 bytes per character
  const int quads = stb_easy_font_print(0, 0, text.data(), nullptr, buf.data(), static_cast<int>(buf.size()));
  out.reserve(static_cast<size_t>(quads));
  for (int q = 0; q < quads; ++q) {
    float v0[2], v2[2];
    std::memcpy(v0, buf.data() + (q * 4 + 0) * 16, sizeof v0);
    std::memcpy(v2, buf.data() + (q * 4 + 2) * 16, sizeof v2);
    out.push_back({static_cast<int>(std::lround(v0[0])), static_cast<int>(std::lround(v0[1])),
                   static_cast<int>(std::lround(v2[0])), static_cast<int>(std::lround(v2[1]))});
  }
  return out;
}

double clampd(double v, double lo, double hi) { return std::min(std::max(v, lo), hi); }

// Distance from (px, py) to the segment (x0, y0)-(x1, y1); len2 = squared length, > 0.
double segment_distance(double px, double py, double x0, double y0, double dx, double dy, double len2) {
  const double t = clampd(((px - x0) * dx + (py - y0) * dy) / len2, 0.0, 1.0);
  const double ex = px - (x0 + t * dx), ey = py - (y0 + t * dy);
  return std::sqrt(ex * ex + ey * ey);
}

}  // namespace

int text_width(const std::string& text, int scale) {
  int w = 0;
  for (const GlyphRect& g : glyph_rects(text)) w = std::max(w, g.x1);
  return w * scale;
}

int text_height(int scale) { return 7 * scale; }

Canvas::Canvas(int width, int height, Rgb background) : w_(width), h_(height) {
  LM_CHECK(width >= 1 && height >= 1 && width <= 16384 && height <= 16384,
           "Canvas: width and height must be in [1, 16384], got " << width << " x " << height);
  px_.resize(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < px_.size(); i += 3) {
    px_[i] = background.r;
    px_[i + 1] = background.g;
    px_[i + 2] = background.b;
  }
  clear_clip();
}

Rgb Canvas::at(int x, int y) const {
  LM_CHECK(x >= 0 && x < w_ && y >= 0 && y < h_,
           "Canvas::at: pixel (" << x << ", " << y << ") is outside the " << w_ << " x " << h_ << " image");
  const size_t i = (static_cast<size_t>(y) * w_ + x) * 3;
  return {px_[i], px_[i + 1], px_[i + 2]};
}

void Canvas::set_clip(int x0, int y0, int x1, int y1) {
  cx0_ = std::max(0, std::min(x0, x1));
  cx1_ = std::min(w_ - 1, std::max(x0, x1));
  cy0_ = std::max(0, std::min(y0, y1));
  cy1_ = std::min(h_ - 1, std::max(y0, y1));
}

void Canvas::clear_clip() { set_clip(0, 0, w_ - 1, h_ - 1); }

void Canvas::set(int x, int y, Rgb c) { blend(x, y, c, 1.0); }

void Canvas::blend(int x, int y, Rgb c, double alpha) {
  if (x < cx0_ || x > cx1_ || y < cy0_ || y > cy1_ || !(alpha > 0)) return;
  uint8_t* p = &px_[(static_cast<size_t>(y) * w_ + x) * 3];
  if (alpha >= 1) {
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
    return;
  }
  auto mix = [alpha](uint8_t under, uint8_t over) {
    return static_cast<uint8_t>(std::lround(under + alpha * (over - under)));
  };
  p[0] = mix(p[0], c.r), p[1] = mix(p[1], c.g), p[2] = mix(p[2], c.b);
}

void Canvas::fill_rect(int x0, int y0, int x1, int y1, Rgb c) { blend_rect(x0, y0, x1, y1, c, 1.0); }

void Canvas::blend_rect(int x0, int y0, int x1, int y1, Rgb c, double alpha) {
  const int xa = std::max(std::min(x0, x1), cx0_), xb = std::min(std::max(x0, x1), cx1_);
  const int ya = std::max(std::min(y0, y1), cy0_), yb = std::min(std::max(y0, y1), cy1_);
  for (int y = ya; y <= yb; ++y)
    for (int x = xa; x <= xb; ++x) blend(x, y, c, alpha);
}

void Canvas::outline_rect(int x0, int y0, int x1, int y1, Rgb c, int thickness) {
  LM_CHECK(thickness >= 1, "outline_rect: thickness must be >= 1, got " << thickness);
  const int xa = std::min(x0, x1), xb = std::max(x0, x1), ya = std::min(y0, y1), yb = std::max(y0, y1);
  const int t = thickness - 1;
  fill_rect(xa, ya, xb, std::min(ya + t, yb), c);  // top
  fill_rect(xa, std::max(yb - t, ya), xb, yb, c);  // bottom
  fill_rect(xa, ya, std::min(xa + t, xb), yb, c);  // left
  fill_rect(std::max(xb - t, xa), ya, xb, yb, c);  // right
}

void Canvas::line(double x0, double y0, double x1, double y1, Rgb c, double thickness) {
  LM_CHECK(thickness > 0, "Canvas::line: thickness must be > 0, got " << thickness);
  if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(x1) || !std::isfinite(y1)) return;
  const double dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
  const double r = thickness / 2;
  if (len2 == 0) return dot(x0, y0, r, c);
  const double reach = r + 1;  // beyond this no pixel centre gets coverage
  auto coverage_at = [&](int px, int py) {
    const double d = segment_distance(px, py, x0, y0, dx, dy, len2);
    blend(px, py, c, clampd(r + 0.5 - d, 0.0, 1.0));
  };
  // Walk the longer axis; for each step, visit only the short run of pixels across the line.
  // Ranges are clamped to the clip rectangle in double first, so huge coordinates are safe.
  const bool shallow = std::fabs(dx) >= std::fabs(dy);
  const double a0 = shallow ? x0 : y0, a1 = shallow ? x1 : y1;  // along the long axis
  const double b0 = shallow ? y0 : x0, slope = shallow ? dy / dx : dx / dy;
  const double lo_a = shallow ? cx0_ : cy0_, hi_a = shallow ? cx1_ : cy1_;
  const double lo_b = shallow ? cy0_ : cx0_, hi_b = shallow ? cy1_ : cx1_;
  const int ia0 = static_cast<int>(std::floor(clampd(std::min(a0, a1) - reach, lo_a, hi_a + 1)));
  const int ia1 = static_cast<int>(std::ceil(clampd(std::max(a0, a1) + reach, lo_a - 1, hi_a)));
  for (int a = ia0; a <= ia1; ++a) {
    // The segment's cross-axis positions over [a - reach, a + reach], widened by reach.
    const double s0 = clampd(a - reach, std::min(a0, a1), std::max(a0, a1));
    const double s1 = clampd(a + reach, std::min(a0, a1), std::max(a0, a1));
    const double e0 = b0 + (s0 - a0) * slope, e1 = b0 + (s1 - a0) * slope;
    const int ib0 = static_cast<int>(std::floor(clampd(std::min(e0, e1) - reach, lo_b, hi_b + 1)));
    const int ib1 = static_cast<int>(std::ceil(clampd(std::max(e0, e1) + reach, lo_b - 1, hi_b)));
    for (int b = ib0; b <= ib1; ++b) shallow ? coverage_at(a, b) : coverage_at(b, a);
  }
}

void Canvas::dot(double x, double y, double radius, Rgb c) {
  if (!std::isfinite(x) || !std::isfinite(y) || !(radius > 0)) return;
  const int xa = static_cast<int>(std::floor(clampd(x - radius - 1, cx0_, cx1_ + 1)));
  const int xb = static_cast<int>(std::ceil(clampd(x + radius + 1, cx0_ - 1, cx1_)));
  const int ya = static_cast<int>(std::floor(clampd(y - radius - 1, cy0_, cy1_ + 1)));
  const int yb = static_cast<int>(std::ceil(clampd(y + radius + 1, cy0_ - 1, cy1_)));
  for (int py = ya; py <= yb; ++py)
    for (int px = xa; px <= xb; ++px) {
      const double d = std::hypot(px - x, py - y);
      blend(px, py, c, clampd(radius + 0.5 - d, 0.0, 1.0));
    }
}

void Canvas::text(int x, int y, const std::string& s, Rgb c, int scale, HAlign h, VAlign v) {
  LM_CHECK(scale >= 1, "Canvas::text: scale must be >= 1, got " << scale);
  if (h == HAlign::Center) x -= text_width(s, scale) / 2;
  if (h == HAlign::Right) x -= text_width(s, scale);
  if (v == VAlign::Middle) y -= text_height(scale) / 2;
  if (v == VAlign::Bottom) y -= text_height(scale);
  for (const GlyphRect& g : glyph_rects(s))
    fill_rect(x + g.x0 * scale, y + g.y0 * scale, x + g.x1 * scale - 1, y + g.y1 * scale - 1, c);
}

void Canvas::text_up(int cx, int cy, const std::string& s, Rgb c, int scale) {
  LM_CHECK(scale >= 1, "Canvas::text_up: scale must be >= 1, got " << scale);
  // Turning counter-clockwise sends the font's "down" to screen right and its "along" to screen
  // up: screen (X, Y) = (ox + gy, oy - gx), with the origin placed to centre the text.
  const int ox = cx - text_height(scale) / 2, oy = cy + text_width(s, scale) / 2;
  for (const GlyphRect& g : glyph_rects(s))
    fill_rect(ox + g.y0 * scale, oy - g.x1 * scale + 1, ox + g.y1 * scale - 1, oy - g.x0 * scale, c);
}

void Canvas::write_png(const std::string& path) const {
  LM_CHECK(!path.empty(), "write_png: the path is empty");
  std::string png;
  const auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
  };
  LM_CHECK(stbi_write_png_to_func(append, &png, w_, h_, 3, px_.data(), w_ * 3) && !png.empty(),
           "write_png: could not encode the " << w_ << " x " << h_ << " image for " << path << " (out of memory?)");
  write_file_atomic(path, png, "write_png");
}

Rgb Image::at(int x, int y) const {
  LM_CHECK(x >= 0 && x < width && y >= 0 && y < height,
           "Image::at: pixel (" << x << ", " << y << ") is outside the " << width << " x " << height << " image");
  const size_t i = (static_cast<size_t>(y) * width + x) * 3;
  return {rgb[i], rgb[i + 1], rgb[i + 2]};
}

Image read_png(const std::string& path) {
  int w = 0, h = 0, channels = 0;
  unsigned char* data = stbi_load(path.c_str(), &w, &h, &channels, 3);
  LM_CHECK(data != nullptr, "read_png: cannot read '" << path << "': " << stbi_failure_reason());
  Image img;
  img.width = w;
  img.height = h;
  img.rgb.assign(data, data + static_cast<size_t>(w) * h * 3);
  stbi_image_free(data);
  return img;
}

}  // namespace lm::plot
