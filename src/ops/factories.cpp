// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Creating tensors: uninitialised, filled, ranges, and from host values.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>

#include <kten/ops.hpp>
#include <kten/tensor.hpp>

#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "ops/elementwise.hpp"
#include "core/storage.hpp"
#include "transfer.hpp"

namespace kten {
namespace detail {

template <class T>
struct ArangeKernel {
  T* out;
  double start, step;
  std::int64_t int_start, int_step;  // an int64 range's, converted on the host (checked to fit)
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    if constexpr (std::is_same_v<T, std::int64_t>)  // integer arithmetic: exact past 2^53 too
      out[i] = int_start + int_step * i;
    else
      out[i] = static_cast<T>(start + step * static_cast<double>(i));
  }
};

}  // namespace detail

Tensor empty(Shape shape, const Device& device, DType dtype) {
  require_available(device);
  const auto bytes = detail::checked_nbytes(detail::checked_numel(shape, "empty()"), dtype, device, "empty()");
  return Tensor(detail::allocate(device, bytes, "tensor"), std::move(shape), dtype);
}

namespace {
template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& shape, const Device& device) {
  const auto n = detail::checked_numel(shape, "tensor()");
  if (static_cast<std::int64_t>(values.size()) != n)
    detail::fail<ShapeError>("tensor()", values.size(), " values do not fill shape ", shape, " (", n, " elements)");
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> packs bits: one bool per byte first
    const std::unique_ptr<bool[]> bytes(new bool[values.size()]);
    std::copy(values.begin(), values.end(), bytes.get());
    return detail::from_host(bytes.get(), shape, DType::boolean, device);
  } else {
    return detail::from_host(values.data(), shape, dtype_of<T>(), device);
  }
}

template <class T>
Tensor from_values(const std::vector<T>& values, const Device& device) {
  return from_values(values, {static_cast<std::int64_t>(values.size())}, device);
}

template <class T>
Tensor from_rows(std::initializer_list<std::initializer_list<T>> rows, const Device& device) {
  const std::size_t cols = rows.size() ? rows.begin()->size() : 0;
  std::vector<T> values;
  values.reserve(rows.size() * cols);
  std::size_t r = 0;
  for (const auto& row : rows) {
    if (row.size() != cols)
      detail::fail<ShapeError>("tensor()", "ragged rows: row 0 has ", cols, " values, row ", r, " has ", row.size());
    values.insert(values.end(), row.begin(), row.end());
    ++r;
  }
  return from_values(values, {static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(cols)},
                     device);
}
}  // namespace

Tensor tensor(const std::vector<float>& v, const Shape& s, const Device& d) { return from_values(v, s, d); }
Tensor tensor(const std::vector<double>& v, const Shape& s, const Device& d) { return from_values(v, s, d); }
Tensor tensor(const std::vector<std::int64_t>& v, const Shape& s, const Device& d) { return from_values(v, s, d); }
Tensor tensor(const std::vector<bool>& v, const Shape& s, const Device& d) { return from_values(v, s, d); }
Tensor tensor(const std::vector<float>& v, const Device& d) { return from_values(v, d); }
Tensor tensor(const std::vector<double>& v, const Device& d) { return from_values(v, d); }
Tensor tensor(const std::vector<std::int64_t>& v, const Device& d) { return from_values(v, d); }
Tensor tensor(const std::vector<bool>& v, const Device& d) { return from_values(v, d); }
Tensor detail::tensor_from_rows(std::initializer_list<std::initializer_list<float>> rows, const Device& d) {
  return from_rows(rows, d);
}
Tensor detail::tensor_from_rows(std::initializer_list<std::initializer_list<double>> rows, const Device& d) {
  return from_rows(rows, d);
}

Tensor zeros(const Shape& shape, const Device& device, DType dtype) { return full(shape, 0.0, device, dtype); }
Tensor ones(const Shape& shape, const Device& device, DType dtype) { return full(shape, 1.0, device, dtype); }
Tensor zeros_like(const Tensor& t) {
  detail::check_defined(t, "zeros_like()");
  return zeros(t.shape(), t.device(), t.dtype());
}
Tensor ones_like(const Tensor& t) {
  detail::check_defined(t, "ones_like()");
  return ones(t.shape(), t.device(), t.dtype());
}

Tensor full(const Shape& shape, double value, const Device& device, DType dtype) {
  detail::check_scalar_fits("full()", value, dtype);
  Tensor out = empty(shape, device, dtype);
  detail::fill(out, value);
  return out;
}

Tensor arange(std::int64_t stop, const Device& device, DType dtype) {
  return arange(0.0, static_cast<double>(stop), 1.0, device, dtype);
}

namespace {
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// NumPy's length: ceil((stop - start) / step), 0 when negative, and 1 when the quotient underflowed
// to +0 although start != stop (a step past the span, an infinite one included: arange(0, 10, inf)
// is [0]). A length that is NaN or outside int64 is an error, as in NumPy, never a cast.
std::int64_t arange_length(double start, double stop, double step) {
  const auto call = [&] { return "arange(" + number(start) + ", " + number(stop) + ", " + number(step) + ")"; };
  if (std::isnan(start) || std::isnan(stop) || std::isnan(step))
    detail::fail<ShapeError>(call(), "start, stop and step must not be NaN");
  if (step == 0.0) detail::fail<ShapeError>(call(), "step must not be 0");
  const double delta = stop - start, span = delta / step;
  if (span == 0.0 && delta != 0.0) return std::signbit(span) ? 0 : 1;
  const double length = std::ceil(span);
  if (!(length >= -0x1p63 && length < 0x1p63))
    detail::fail<ShapeError>(call(), "the length ceil((stop - start) / step) = ", number(length),
                             " is not a number that fits in 64 bits");
  return length > 0 ? static_cast<std::int64_t>(length) : 0;
}
}  // namespace

Tensor arange(double start, double stop, double step, const Device& device, DType dtype) {
  if (dtype == DType::boolean)
    detail::fail<DTypeError>("arange()", "makes numbers (float32, float64 or int64), not boolean; compare the "
                             "range instead, e.g. kten::lt(kten::arange(n), k)");
  const std::int64_t n = arange_length(start, stop, step);
  const double stride = n > 1 ? step : 0.0;  // one element is start itself (the step may be infinite)
  if (dtype == DType::int64 && n > 0) {  // integers from start to the last value, which an int64 must hold
    if (std::trunc(start) != start || std::trunc(stride) != stride)
      detail::fail<DTypeError>("arange()", "an int64 range needs an integer start and step, got start ", number(start),
                               " and step ", number(step), "; make a float range and convert it with .astype(kten::int64)");
    detail::check_scalar_fits("arange()", start, dtype);
    detail::check_scalar_fits("arange()", start + stride * static_cast<double>(n - 1), dtype);
  }
  const bool integers = dtype == DType::int64 && n > 0;  // start and stride were checked to fit above
  const std::int64_t int_start = integers ? static_cast<std::int64_t>(start) : 0;
  const std::int64_t int_stride = integers ? static_cast<std::int64_t>(stride) : 0;
  Tensor out = empty({n}, device, dtype);
  detail::launch_each_index<detail::Accepts::any>("kten::arange", n, [&](auto* o) {
    return detail::ArangeKernel<std::remove_pointer_t<decltype(o)>>{o, start, stride, int_start, int_stride};
  }, out);
  return out;
}

}  // namespace kten
