// Printing, MXNet style: the values (NumPy-like, large tensors elided) and a trailer
// "<Tensor 2x3 float32 @gpu(0)>". Printing reads the tensor on the host, so it synchronises.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include <kten/tensor.hpp>

namespace kten {
namespace {

constexpr std::int64_t kElideAbove = 1000;  // NumPy's threshold
constexpr std::int64_t kEdgeItems = 3;

struct Printer {
  const std::vector<double>& values;
  const Shape& shape;
  bool elide;
  bool integral;
  bool scientific;
  int digits;    // significant digits in scientific notation
  int decimals;  // fractional digits in fixed notation, shared by all elements so columns align
  std::size_t width = 0;

  std::string format(double v) const {
    char buf[64];
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (integral) std::snprintf(buf, sizeof buf, "%.0f.", v);
    else if (scientific) std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
    else std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
  }

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
        os << pad(format(values[offset + i]));
        if (i + 1 < n) os << ' ';
      } else {
        print(os, dim + 1, offset + i * inner, inner, indent + 1);
        if (i + 1 < n) os << std::string(shape.size() - dim - 1, '\n') << std::string(indent + 1, ' ');
      }
    }
    os << ']';
  }
};

template <class T>
std::vector<double> host_values(const Tensor& t) {
  auto v = t.to_vector<T>();
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "<Tensor undefined>";
  const std::vector<double> values =
      t.dtype() == DType::float32 ? host_values<float>(t) : host_values<double>(t);
  const Shape& shape = t.shape();
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
  const int significant = t.dtype() == DType::float32 ? 7 : 15;
  const int whole_digits = largest >= 1 ? static_cast<int>(std::floor(std::log10(largest))) + 1 : 0;
  const int max_decimals = std::clamp(significant - whole_digits, 1, 8);
  int decimals = 0;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", max_decimals, v);
    std::string text = buf;
    const auto last = text.find_last_not_of('0');
    decimals = std::max(decimals, static_cast<int>(last - text.find('.')));
  }
  Printer p{values, shape, t.numel() > kElideAbove, integral, scientific, significant, std::max(decimals, 1)};
  for (double v : values) p.width = std::max(p.width, p.format(v).size());
  if (shape.empty()) os << p.format(values[0]);
  else if (t.numel() == 0) os << std::string(shape.size(), '[') << std::string(shape.size(), ']');
  else p.print(os, 0, 0, t.numel(), 0);
  return os << "\n<Tensor " << shape_str(shape) << ' ' << dtype_name(t.dtype()) << " @" << t.device() << '>';
}

}  // namespace kten
