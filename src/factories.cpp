// Creating tensors: uninitialised, filled, ranges, and from host values.
#include <cmath>
#include <string>

#include <kten/ops.hpp>
#include <kten/tensor.hpp>

#include "checks.hpp"
#include "dispatch.hpp"
#include "elementwise.hpp"
#include "storage.hpp"

namespace kten {
namespace detail {

template <class T>
struct ArangeKernel {
  T* out;
  double start, step;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    out[i] = static_cast<T>(start + step * static_cast<double>(i));
  }
};

}  // namespace detail

Tensor empty(const Shape& shape, const Device& device, DType dtype) {
  const auto n = detail::checked_numel(shape, "empty()");
  return Tensor(detail::allocate(device, static_cast<std::size_t>(n) * dtype_size(dtype), "tensor"), shape,
                dtype);
}

namespace {
template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& shape, const Device& device) {
  const auto n = detail::checked_numel(shape, "tensor()");
  if (static_cast<std::int64_t>(values.size()) != n)
    throw ShapeError("kten: tensor(): " + std::to_string(values.size()) + " values do not fill shape " +
                     shape_str(shape) + " (" + std::to_string(n) + " elements)");
  return detail::from_host(values.data(), shape, dtype_of<T>(), device);
}

template <class T>
Tensor from_rows(std::initializer_list<std::initializer_list<T>> rows, const Device& device) {
  const std::size_t cols = rows.size() ? rows.begin()->size() : 0;
  std::vector<T> values;
  values.reserve(rows.size() * cols);
  std::size_t r = 0;
  for (const auto& row : rows) {
    if (row.size() != cols)
      throw ShapeError("kten: tensor(): ragged rows: row 0 has " + std::to_string(cols) + " values, row " +
                       std::to_string(r) + " has " + std::to_string(row.size()));
    values.insert(values.end(), row.begin(), row.end());
    ++r;
  }
  return from_values(values, {static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(cols)},
                     device);
}
}  // namespace

Tensor tensor(const std::vector<float>& v, const Shape& s, const Device& d) { return from_values(v, s, d); }
Tensor tensor(const std::vector<double>& v, const Shape& s, const Device& d) { return from_values(v, s, d); }
Tensor tensor(const std::vector<float>& v, const Device& d) {
  return from_values(v, {static_cast<std::int64_t>(v.size())}, d);
}
Tensor tensor(const std::vector<double>& v, const Device& d) {
  return from_values(v, {static_cast<std::int64_t>(v.size())}, d);
}
Tensor tensor(std::initializer_list<float> v, const Device& d) { return tensor(std::vector<float>(v), d); }
Tensor tensor(std::initializer_list<double> v, const Device& d) { return tensor(std::vector<double>(v), d); }
Tensor tensor(std::initializer_list<std::initializer_list<float>> rows, const Device& d) {
  return from_rows(rows, d);
}
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, const Device& d) {
  return from_rows(rows, d);
}

Tensor zeros(const Shape& shape, const Device& device, DType dtype) { return full(shape, 0.0, device, dtype); }
Tensor ones(const Shape& shape, const Device& device, DType dtype) { return full(shape, 1.0, device, dtype); }

Tensor full(const Shape& shape, double value, const Device& device, DType dtype) {
  Tensor out = empty(shape, device, dtype);
  detail::fill(out, value);
  return out;
}

Tensor arange(std::int64_t stop, const Device& device, DType dtype) {
  return arange(0.0, static_cast<double>(stop), 1.0, device, dtype);
}

Tensor arange(double start, double stop, double step, const Device& device, DType dtype) {
  if (step == 0.0) throw ShapeError("kten: arange(): step must not be 0");
  const double span = (stop - start) / step;
  const auto n = span > 0 ? static_cast<std::int64_t>(std::ceil(span)) : 0;
  Tensor out = empty({n}, device, dtype);
  detail::launch("kten::arange", [&](const auto& be, auto* o) {
    using T = std::remove_pointer_t<decltype(o)>;
    detail::for_each_index("kten::arange", be, n, detail::ArangeKernel<T>{o, start, step});
  }, out);
  return out;
}

}  // namespace kten
