// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Printing, MXNet style: the values (NumPy-like, large tensors elided) and a trailer
// "<Tensor 2x3 float32 @gpu(0)>". Printing reads the tensor on the host, so it synchronises.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include <kten/tensor.hpp>

namespace kten {
namespace {

constexpr std::int64_t kElideAbove = 1000;  // NumPy's threshold
constexpr std::int64_t kEdgeItems = 3;

// The layout: each element's text (already formatted), right-aligned to the widest, in nested
// brackets; large tensors show their first and last kEdgeItems along each axis.
struct Printer {
  const std::vector<std::string>& text;
  const Shape& shape;
  bool elide;
  std::size_t width = 0;

  std::string pad(const std::string& s) const {
    return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
  }

  void print(std::ostream& os, int dim, std::int64_t offset, std::int64_t stride, int indent) const {
    const std::int64_t n = shape[dim];
    const std::int64_t inner = stride / std::max<std::int64_t>(n, 1);
    os << '[';
    for (std::int64_t i = 0; i < n; ++i) {
      if (elide && n > 2 * kEdgeItems && i == kEdgeItems) {
        os << (dim + 1 == static_cast<int>(shape.size()) ? "..." : "...\n" + std::string(indent + 1, ' '));
        if (dim + 1 == static_cast<int>(shape.size())) os << ' ';
        i = n - kEdgeItems;
      }
      if (dim + 1 == static_cast<int>(shape.size())) {
        os << pad(text[offset + i]);
        if (i + 1 < n) os << ' ';
      } else {
        print(os, dim + 1, offset + i * inner, inner, indent + 1);
        if (i + 1 < n) os << std::string(shape.size() - dim - 1, '\n') << std::string(indent + 1, ' ');
      }
    }
    os << ']';
  }
};

// Floating-point elements, NumPy style: integral values as "3.", else fixed or scientific notation.
template <class T>
std::vector<std::string> float_text(const Tensor& t) {
  const auto raw = t.to_vector<T>();
  const std::vector<double> values(raw.begin(), raw.end());
  bool integral = true;
  double largest = 0, smallest = HUGE_VAL;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    integral = integral && v == std::floor(v) && std::fabs(v) < 1e16;
    largest = std::max(largest, std::fabs(v));
    if (v != 0) smallest = std::min(smallest, std::fabs(v));
  }
  const bool scientific = !integral && (largest >= 1e8 || smallest < 1e-4);
  // Fixed notation: as many decimals as the most precise element needs, within the dtype's
  // significant digits (NumPy's "maxprec" mode), so no float32 noise digits are shown.
  const int significant = std::is_same_v<T, float> ? 7 : 15;
  const int whole_digits = largest >= 1 ? static_cast<int>(std::floor(std::log10(largest))) + 1 : 0;
  const int max_decimals = std::clamp(significant - whole_digits, 1, 8);
  int decimals = 0;
  char buf[64];
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    std::snprintf(buf, sizeof buf, "%.*f", max_decimals, v);
    std::string text = buf;
    const auto last = text.find_last_not_of('0');
    decimals = std::max(decimals, static_cast<int>(last - text.find('.')));
  }
  decimals = std::max(decimals, 1);
  std::vector<std::string> text;
  text.reserve(values.size());
  for (double v : values) {
    if (std::isnan(v)) text.emplace_back("nan");
    else if (std::isinf(v)) text.emplace_back(v > 0 ? "inf" : "-inf");
    else {
      if (integral) std::snprintf(buf, sizeof buf, "%.0f.", v);
      else if (scientific) std::snprintf(buf, sizeof buf, "%.*e", significant - 1, v);
      else std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
      text.emplace_back(buf);
    }
  }
  return text;
}

// int64 elements as integers, booleans as true / false.
std::vector<std::string> element_text(const Tensor& t) {
  switch (t.dtype()) {
    case DType::float32: return float_text<float>(t);
    case DType::float64: return float_text<double>(t);
    case DType::int64: {
      std::vector<std::string> text;
      for (std::int64_t v : t.to_vector<std::int64_t>()) text.push_back(std::to_string(v));
      return text;
    }
    default: {
      std::vector<std::string> text;
      for (bool v : t.to_vector<bool>()) text.emplace_back(v ? "true" : "false");
      return text;
    }
  }
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "<Tensor undefined>";
  const std::vector<std::string> text = element_text(t);
  const Shape& shape = t.shape();
  Printer p{text, shape, t.numel() > kElideAbove};
  for (const auto& s : text) p.width = std::max(p.width, s.size());
  if (shape.empty()) os << text[0];
  else if (t.numel() == 0) os << std::string(shape.size(), '[') << std::string(shape.size(), ']');
  else p.print(os, 0, 0, t.numel(), 0);
  return os << "\n<Tensor " << shape_str(shape) << ' ' << dtype_name(t.dtype()) << " @" << t.device() << '>';
}

}  // namespace kten
