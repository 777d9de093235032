#pragma once
// A curve drawn into an 8-bit RGB Image, enough to look at a learning-rate sweep without a plotting
// tool: white ground, the axes, a tick at each power of ten of a logarithmic x, the curve in blue,
// a second curve (the raw values) in light grey, and a red vertical line at a marked x. No text:
// the numbers are in the CSV written beside it. Writing the PNG needs ptrain::image (io/image.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <vector>

#include "ptrain/core/error.hpp"
#include "ptrain/io/pixels.hpp"

namespace ptrain::io {

struct LinePlot {
  std::vector<double> x;           // ascending
  std::vector<double> y;           // the curve
  std::vector<double> background;  // drawn first in grey, same x; may be empty
  std::optional<double> marker_x;  // a vertical line
  bool log_x = true;
  std::int64_t width = 640, height = 400;
};

namespace detail {
struct Rgb {
  std::uint8_t r, g, b;
};
inline void put_pixel(Image& image, std::int64_t x, std::int64_t y, Rgb c) {
  if (x < 0 || y < 0 || x >= image.width || y >= image.height) return;
  image.at(y, x, 0) = c.r;
  image.at(y, x, 1) = c.g;
  image.at(y, x, 2) = c.b;
}
inline void draw_line(Image& image, std::int64_t x0, std::int64_t y0, std::int64_t x1, std::int64_t y1, Rgb c) {
  const std::int64_t dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const std::int64_t sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  std::int64_t error = dx + dy;
  for (;;) {
    put_pixel(image, x0, y0, c);
    if (x0 == x1 && y0 == y1) return;
    const std::int64_t e2 = 2 * error;
    if (e2 >= dy) error += dy, x0 += sx;
    if (e2 <= dx) error += dx, y0 += sy;
  }
}
}  // namespace detail

// The y range is the curve's (the grey one is clipped to it), so a diverging raw loss does not
// flatten the part worth seeing.
inline Image render_line_plot(const LinePlot& plot) {
  check(plot.x.size() == plot.y.size() && (plot.background.empty() || plot.background.size() == plot.x.size()),
        "render_line_plot: ", plot.x.size(), " x values for ", plot.y.size(), " y values and ", plot.background.size(),
        " background values");
  check(plot.width >= 64 && plot.height >= 64, "render_line_plot: ", plot.width, " x ", plot.height,
        " pixels is too small");
  Image image(plot.height, plot.width, 3);
  std::fill(image.pixels.begin(), image.pixels.end(), std::uint8_t(255));
  const std::int64_t left = 40, right = plot.width - 16, top = 16, bottom = plot.height - 32;
  const detail::Rgb black{0, 0, 0}, blue{31, 119, 180}, grey{200, 200, 200}, red{214, 39, 40};
  detail::draw_line(image, left, bottom, right, bottom, black);
  detail::draw_line(image, left, top, left, bottom, black);
  if (plot.x.empty()) return image;

  const auto to_x = [&](double x) { return plot.log_x ? std::log10(x) : x; };
  double x_lo = to_x(plot.x.front()), x_hi = to_x(plot.x.back());
  double y_lo = std::numeric_limits<double>::infinity(), y_hi = -y_lo;
  for (double y : plot.y)
    if (std::isfinite(y)) y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
  if (!(x_hi > x_lo)) x_hi = x_lo + 1;
  if (!std::isfinite(y_lo)) y_lo = 0, y_hi = 1;
  if (!(y_hi > y_lo)) y_hi = y_lo + 1;
  const auto px = [&](double x) {
    return left + std::int64_t(std::lround((to_x(x) - x_lo) / (x_hi - x_lo) * double(right - left)));
  };
  const auto py = [&](double y) {
    const double clipped = std::clamp(y, y_lo, y_hi);
    return bottom - std::int64_t(std::lround((clipped - y_lo) / (y_hi - y_lo) * double(bottom - top)));
  };
  if (plot.log_x)
    for (double decade = std::ceil(x_lo); decade <= x_hi; ++decade) {
      const std::int64_t x = px(std::pow(10.0, decade));
      detail::draw_line(image, x, bottom, x, bottom + 6, black);
    }
  const auto draw_curve = [&](const std::vector<double>& ys, detail::Rgb color) {
    for (std::size_t i = 1; i < ys.size(); ++i)
      if (std::isfinite(ys[i - 1]) && std::isfinite(ys[i]))
        detail::draw_line(image, px(plot.x[i - 1]), py(ys[i - 1]), px(plot.x[i]), py(ys[i]), color);
  };
  draw_curve(plot.background, grey);
  draw_curve(plot.y, blue);
  if (plot.marker_x) {
    const std::int64_t x = px(*plot.marker_x);
    detail::draw_line(image, x, top, x, bottom, red);
  }
  return image;
}

}  // namespace ptrain::io
