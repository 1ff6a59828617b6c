// Reductions. Whole-tensor reductions are bandwidth-bound parallel_reduce calls whose result is a
// View in device memory, so they return without fencing (a 0-d tensor on the device). Axis
// reductions give one output per work item and read the reduced axis with stride `inner`.
#include <string>
#include <vector>

#include <kten/ops.hpp>

#include "checks.hpp"
#include "dispatch.hpp"
#include "elementwise.hpp"

namespace kten {
namespace detail {
namespace {

// What to accumulate and how to finish: sum, mean (sum / n), max, norm (sqrt of the sum of squares).
struct SumKind {
  static constexpr bool is_max = false;
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t) { return acc; }
};
struct MeanKind {
  static constexpr bool is_max = false;
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t n) { return acc / T(n); }
};
struct NormKind {
  static constexpr bool is_max = false;
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v * v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t) { return math::sqrt(acc); }
};
struct MaxKind {
  static constexpr bool is_max = true;
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t) { return acc; }
};

template <class Kind, class T>
struct Finish {
  std::int64_t n;
  KOKKOS_INLINE_FUNCTION T operator()(T acc) const { return Kind::finish(acc, n); }
};

}  // namespace

// Bandwidth-bound, read once. On the host, each of a few parts per thread folds its range into
// `Lanes` independent partial results (four SIMD registers of them, so neither the add latency
// nor a serial chain limits the loop), and one small kernel combines the parts into the result.
// On a GPU, Kokkos' parallel_reduce (a tree in shared memory) writes the result directly.
// Either way the result stays on the device: nothing fences.
template <class Backend, class T, class Kind>
void reduce_all_kernel(const Backend& be, const T* x, T* result, std::int64_t n, Kind) {
  using Policy = Kokkos::RangePolicy<typename Backend::execution_space>;
  if constexpr (Backend::is_host) {
    constexpr int Lanes = 128 / sizeof(T);
    const std::int64_t parts = 4 * static_cast<std::int64_t>(compat::host_concurrency());
    const std::int64_t per_part = ((n + parts - 1) / parts + Lanes - 1) / Lanes * Lanes;
    std::vector<T> partial(static_cast<std::size_t>(parts));
    T* partials = partial.data();
    Kokkos::parallel_for("kten::reduce", Policy(be.space, 0, parts), KOKKOS_LAMBDA(std::int64_t part) {
      const std::int64_t begin = part * per_part < n ? part * per_part : n;
      const std::int64_t end = begin + per_part < n ? begin + per_part : n;
      T lane[Lanes];
      for (int l = 0; l < Lanes; ++l) lane[l] = Kind::is_max ? (begin < end ? x[begin] : T(0)) : T(0);
      std::int64_t i = begin;
      for (; i + Lanes <= end; i += Lanes) {
        KTEN_UNROLL
        for (int l = 0; l < Lanes; ++l) {
          const T v = Kind::prepare(x[i + l]);
          if constexpr (Kind::is_max) lane[l] = v > lane[l] ? v : lane[l];
          else lane[l] += v;
        }
      }
      for (; i < end; ++i) {
        const T v = Kind::prepare(x[i]);
        if constexpr (Kind::is_max) lane[0] = v > lane[0] ? v : lane[0];
        else lane[0] += v;
      }
      for (int l = 1; l < Lanes; ++l) {
        if constexpr (Kind::is_max) lane[0] = lane[l] > lane[0] ? lane[l] : lane[0];
        else lane[0] += lane[l];
      }
      partials[part] = begin < end ? lane[0] : (Kind::is_max ? x[0] : T(0));
    });
    Kokkos::parallel_for("kten::reduce_parts", Policy(be.space, 0, 1), KOKKOS_LAMBDA(std::int64_t) {
      T acc = partials[0];
      for (std::int64_t p = 1; p < parts; ++p) {
        if constexpr (Kind::is_max) acc = partials[p] > acc ? partials[p] : acc;
        else acc += partials[p];
      }
      result[0] = acc;
    });
    be.space.fence();  // `partial` lives on this stack frame (host kernels finish here anyway)
  } else {
    using Result = Kokkos::View<T, typename Backend::memory_space>;
    Result r = Kokkos::View<T, typename Backend::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(result);
    if constexpr (Kind::is_max) {
      Kokkos::parallel_reduce(
          "kten::max", Policy(be.space, 0, n), KOKKOS_LAMBDA(std::int64_t i, T & acc) { if (x[i] > acc) acc = x[i]; },
          Kokkos::Max<T, typename Backend::memory_space>(r));
    } else {
      Kokkos::parallel_reduce(
          "kten::sum", Policy(be.space, 0, n), KOKKOS_LAMBDA(std::int64_t i, T & acc) { acc += Kind::prepare(x[i]); },
          Kokkos::Sum<T, typename Backend::memory_space>(r));
    }
  }
}

template <class Backend, class T, class Kind>
void reduce_axis_kernel(const Backend& be, const T* x, T* out, std::int64_t outer, std::int64_t len,
                        std::int64_t inner, Kind) {
  Kokkos::parallel_for(
      "kten::reduce_axis", Kokkos::RangePolicy<typename Backend::execution_space>(be.space, 0, outer * inner),
      KOKKOS_LAMBDA(std::int64_t o) {
        const T* p = x + (o / inner) * len * inner + (o % inner);
        T acc = Kind::is_max ? p[0] : T(0);
        for (std::int64_t k = 0; k < len; ++k) {
          const T v = Kind::prepare(p[k * inner]);
          if constexpr (Kind::is_max) {
            if (v > acc) acc = v;
          } else {
            acc += v;
          }
        }
        out[o] = Kind::finish(acc, len);
      });
}

template <class Kind>
Tensor reduce_all(const char* op, const Tensor& x) {
  check_defined(x, op);
  if (Kind::is_max && x.numel() == 0)
    throw ShapeError("kten: " + op_name(op) + ": the tensor is empty (shape " + shape_str(x.shape()) +
                     "), so it has no largest element");
  Tensor out = empty({}, x.device(), x.dtype());
  with_backend(x.device(), [&](auto be) {
    with_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      T* r = static_cast<T*>(out.data());
      reduce_all_kernel(be, static_cast<const T*>(x.data()), r, x.numel(), Kind{});
      if constexpr (!std::is_same_v<Kind, SumKind> && !std::is_same_v<Kind, MaxKind>)
        map_kernel(be, op, r, r, 1, Finish<Kind, T>{x.numel()});
    });
  });
  return out;
}

template <class Kind>
Tensor reduce_axis(const char* op, const Tensor& x, int axis) {
  check_defined(x, op);
  const int a = normalize_axis(op, x, axis);
  const Shape& s = x.shape();
  if (Kind::is_max && s[a] == 0)
    throw ShapeError("kten: " + op_name(op) + ": axis " + std::to_string(axis) + " of shape " +
                     shape_str(s) + " is empty, so it has no largest element");
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; ++d) outer *= s[d];
  for (int d = a + 1; d < x.ndim(); ++d) inner *= s[d];
  Shape out_shape = s;
  out_shape.erase(out_shape.begin() + a);
  Tensor out = empty(out_shape, x.device(), x.dtype());
  with_backend(x.device(), [&](auto be) {
    with_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      reduce_axis_kernel(be, static_cast<const T*>(x.data()), static_cast<T*>(out.data()), outer, s[a], inner,
                         Kind{});
    });
  });
  return out;
}

}  // namespace detail

Tensor sum(const Tensor& x) { return detail::reduce_all<detail::SumKind>("kten::sum", x); }
Tensor sum(const Tensor& x, int axis) { return detail::reduce_axis<detail::SumKind>("kten::sum", x, axis); }
Tensor mean(const Tensor& x) { return detail::reduce_all<detail::MeanKind>("kten::mean", x); }
Tensor mean(const Tensor& x, int axis) { return detail::reduce_axis<detail::MeanKind>("kten::mean", x, axis); }
Tensor max(const Tensor& x) { return detail::reduce_all<detail::MaxKind>("kten::max", x); }
Tensor max(const Tensor& x, int axis) { return detail::reduce_axis<detail::MaxKind>("kten::max", x, axis); }
Tensor norm(const Tensor& x) { return detail::reduce_all<detail::NormKind>("kten::norm", x); }
Tensor norm(const Tensor& x, int axis) { return detail::reduce_axis<detail::NormKind>("kten::norm", x, axis); }

}  // namespace kten
