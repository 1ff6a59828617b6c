// Reductions. Whole-tensor reductions are bandwidth-bound; their result is written into device
// memory, so they return without fencing (a 0-d tensor on the device). NaN propagates: a sum or
// norm over a NaN is NaN by arithmetic, and max takes NaN over any number, so every device and
// every order of combining gives NaN (NumPy's and PyTorch's rule; which zero max returns among
// +0 and -0 may depend on the order).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <kten/ops.hpp>

#include "autograd.hpp"
#include "checks.hpp"
#include "elementwise.hpp"
#include "dispatch.hpp"
#include "reduce.hpp"

namespace kten {
namespace detail {

/// \brief max that propagates NaN: NaN wins over any number, whichever side it is on.
template <class T>
KOKKOS_INLINE_FUNCTION T nan_max(T acc, T v) {
  return (acc != acc || v <= acc) ? acc : v;
}

// Reductions: what to accumulate, how to finish and the kernel label: sum, mean (sum / n), max,
// norm (sqrt of the sum of squares), mean square (the sum of squares / n: MSE in one pass).
struct SumReduction {
  static constexpr const char* label = "kten::sum";
  static constexpr bool is_max = false, has_finish = false;
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T combine(T acc, T v) { return acc + v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t) { return acc; }
};
struct MeanReduction : SumReduction {
  static constexpr const char* label = "kten::mean";
  static constexpr bool has_finish = true;
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t n) { return acc / T(n); }
};
struct NormReduction : SumReduction {
  static constexpr const char* label = "kten::norm";
  static constexpr bool has_finish = true;
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v * v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t) { return math::sqrt(acc); }
};
struct MeanSquareReduction : MeanReduction {
  static constexpr const char* label = "kten::mean_square";
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v * v; }
};
struct MaxReduction {
  static constexpr const char* label = "kten::max";
  static constexpr bool is_max = true, has_finish = false;
  template <class T> static KOKKOS_INLINE_FUNCTION T prepare(T v) { return v; }
  template <class T> static KOKKOS_INLINE_FUNCTION T combine(T acc, T v) { return nan_max(acc, v); }
  template <class T> static KOKKOS_INLINE_FUNCTION T finish(T acc, std::int64_t) { return acc; }
};

/// \brief The identity of a reduction's combine: 0, or -inf for max (not -FLT_MAX: max over all -inf
/// is -inf on every device).
template <class Reduction, class T>
KOKKOS_INLINE_FUNCTION T identity() {
  return Reduction::is_max ? static_cast<T>(-INFINITY) : T(0);
}

/// \brief A Kokkos reducer over a reduction: join is Reduction::combine, init its identity.
template <class Reduction, class T, class Space>
struct ReductionReducer {
  using reducer = ReductionReducer;
  using value_type = T;
  using result_view_type = Kokkos::View<T, Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

  KOKKOS_INLINE_FUNCTION explicit ReductionReducer(T& value) : value_(&value), references_scalar_(true) {}
  KOKKOS_INLINE_FUNCTION explicit ReductionReducer(const result_view_type& value)
      : value_(value), references_scalar_(false) {}

  KOKKOS_INLINE_FUNCTION void join(T& dest, const T& src) const { dest = Reduction::combine(dest, src); }
  KTEN_VOLATILE_JOIN(T, dest = Reduction::combine(static_cast<T>(dest), static_cast<T>(src));)
  KOKKOS_INLINE_FUNCTION void init(T& v) const { v = identity<Reduction, T>(); }
  KOKKOS_INLINE_FUNCTION T& reference() const { return *value_.data(); }
  KOKKOS_INLINE_FUNCTION result_view_type view() const { return value_; }
  KOKKOS_INLINE_FUNCTION bool references_scalar() const { return references_scalar_; }

 private:
  result_view_type value_;
  bool references_scalar_;
};

/// \brief Host: each part (of a fixed length) folds its range into `Lanes` independent partial
/// results (four SIMD registers of them, so neither the add latency nor a serial chain limits
/// the loop). With finish_count >= 0 each part writes its finished result, as a reduction over
/// that many elements: a small reduction is one kernel on the calling thread, and a part can be a
/// row of an axis reduction.
template <class T, class Reduction>
struct HostPartsKernel {
  static constexpr int Lanes = 128 / sizeof(T);
  const T* x;
  T* partials;
  std::int64_t n, per_part;
  std::int64_t finish_count;  // -1: the parts stay partial results, folded by FoldPartsKernel
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t part) const {
    const std::int64_t begin = part * per_part < n ? part * per_part : n;
    const std::int64_t end = begin + per_part < n ? begin + per_part : n;
    T lane[Lanes];
    for (int l = 0; l < Lanes; ++l) lane[l] = identity<Reduction, T>();
    std::int64_t i = begin;
    for (; i + Lanes <= end; i += Lanes) {
      KTEN_UNROLL
      for (int l = 0; l < Lanes; ++l) lane[l] = Reduction::combine(lane[l], Reduction::prepare(x[i + l]));
    }
    for (; i < end; ++i) lane[0] = Reduction::combine(lane[0], Reduction::prepare(x[i]));
    for (int l = 1; l < Lanes; ++l) lane[0] = Reduction::combine(lane[0], lane[l]);
    partials[part] = finish_count >= 0 ? Reduction::finish(lane[0], finish_count) : lane[0];
  }
};

template <class T, class Reduction>
struct FoldPartsKernel {
  const T* partials;
  T* result;
  std::int64_t parts, n;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t) const {
    T acc = identity<Reduction, T>();
    for (std::int64_t p = 0; p < parts; ++p) acc = Reduction::combine(acc, partials[p]);
    result[0] = Reduction::finish(acc, n);
  }
};

template <class Reduction, class T>
struct Finisher {
  std::int64_t n;
  KOKKOS_INLINE_FUNCTION T operator()(T acc) const { return Reduction::finish(acc, n); }
};

/// \brief GPU: Kokkos' tree reduction in shared memory, written straight into device memory.
template <class T, class Reduction>
struct DeviceReduceKernel {
  const T* x;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, T& acc) const { acc = Reduction::combine(acc, Reduction::prepare(x[i])); }
};

template <class Backend, class T, class Reduction>
void reduce_all_kernel(const Backend& backend, const char* label, const T* x, T* result, std::int64_t n, Reduction) {
  if constexpr (Backend::is_host) {
    // Parts of host_serial_grain elements whatever the thread count, so that the result (the
    // order of the additions) is the same on 1 thread or N; one part below the serial grain.
    constexpr int Lanes = HostPartsKernel<T, Reduction>::Lanes;
    static_assert(host_serial_grain % Lanes == 0, "a part is whole rows of lanes");
    const std::int64_t per_part = host_serial_grain;
    const std::int64_t parts = n <= per_part ? 1 : (n + per_part - 1) / per_part;
    if (parts == 1) return for_each_index(label, backend, 1, HostPartsKernel<T, Reduction>{x, result, n, per_part, n}, n);
    std::vector<T> partial(static_cast<std::size_t>(parts));
    for_each_index(label, backend, parts, HostPartsKernel<T, Reduction>{x, partial.data(), n, per_part, -1}, n);
    for_each_index(label, backend, 1, FoldPartsKernel<T, Reduction>{partial.data(), result, parts, n}, parts);
    backend.space.fence();  // `partial` lives on this stack frame (host kernels finish here anyway)
  } else {
    using Reducer = ReductionReducer<Reduction, T, typename Backend::memory_space>;
    reduce_each_index(label, backend, n, DeviceReduceKernel<T, Reduction>{x}, Reducer(typename Reducer::result_view_type(result)));
    if constexpr (Reduction::has_finish)
      for_each_index(label, backend, 1, UnaryKernel<T, Finisher<Reduction, T>>{result, result, {n}});
  }
}

// Axis reductions: out[o] folds the `len` elements x[(o / inner) * len * inner + o % inner + k * inner].
// One thread per output: adjacent outputs read adjacent addresses when inner > 1 (coalesced).
template <class T, class Reduction>
struct AxisKernel {
  const T* x;
  T* out;
  std::int64_t len, inner;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t o) const {
    const T* p = x + (o / inner) * len * inner + (o % inner);
    T acc = identity<Reduction, T>();
    for (std::int64_t k = 0; k < len; ++k) acc = Reduction::combine(acc, Reduction::prepare(p[k * inner]));
    out[o] = Reduction::finish(acc, len);
  }
};

// Host, reducing an axis with inner > 1 (columns): each index folds a block of up to `Width`
// adjacent outputs, sweeping the reduced axis row by row, so the loads are contiguous and
// vectorise; one output per index would read with stride `inner`.
template <class T, class Reduction>
struct HostColumnsKernel {
  static constexpr std::int64_t Width = 64;
  const T* x;
  T* out;
  std::int64_t len, inner, blocks_per_outer;  // blocks of Width outputs per outer index
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t index) const {
    const std::int64_t o = index / blocks_per_outer, j0 = (index % blocks_per_outer) * Width;
    const std::int64_t width = inner - j0 < Width ? inner - j0 : Width;
    const T* p = x + o * len * inner + j0;
    T acc[Width];
    for (std::int64_t j = 0; j < Width; ++j) acc[j] = identity<Reduction, T>();
    for (std::int64_t k = 0; k < len; ++k)
      for (std::int64_t j = 0; j < width; ++j) acc[j] = Reduction::combine(acc[j], Reduction::prepare(p[k * inner + j]));
    for (std::int64_t j = 0; j < width; ++j) out[o * inner + j0 + j] = Reduction::finish(acc[j], len);
  }
};

// GPU, reducing the last (contiguous) axis: one team per output row, its threads reading
// consecutive elements (coalesced) and combining in shared memory; one thread per output there
// would read with stride `len`.
template <class T, class Reduction, class Member, class Space>
struct RowKernel {
  const T* x;
  T* out;
  std::int64_t len;
  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::int64_t row = team.league_rank();
    const T* p = x + row * len;
    T acc = identity<Reduction, T>();
    Kokkos::parallel_reduce(Kokkos::TeamThreadRange(team, len),
                            [&](std::int64_t k, T& a) { a = Reduction::combine(a, Reduction::prepare(p[k])); },
                            ReductionReducer<Reduction, T, Space>(acc));
    Kokkos::single(Kokkos::PerTeam(team), [&]() { out[row] = Reduction::finish(acc, len); });
  }
};

template <class Backend, class T, class Reduction>
void reduce_axis_kernel(const Backend& backend, const char* label, const T* x, T* out, std::int64_t outer,
                        std::int64_t len, std::int64_t inner, Reduction) {
  if constexpr (!Backend::is_host) {
    if (inner == 1 && outer <= INT32_MAX) {
      using Kernel = RowKernel<T, Reduction, TeamMember<Backend>, typename Backend::memory_space>;
      run(label, backend, team_policy(backend, static_cast<int>(outer)), Kernel{x, out, len});
      return;
    }
  } else {
    // Host, contiguous rows long enough to fill the lanes: each row folds like a whole-tensor
    // reduction (independent partial sums), not as one chain of dependent adds (8x slower).
    if (inner == 1 && len >= HostPartsKernel<T, Reduction>::Lanes) {
      for_each_index(label, backend, outer, HostPartsKernel<T, Reduction>{x, out, outer * len, len, len}, outer * len);
      return;
    }
    // Column blocks when there are enough of them for every thread; otherwise (a bias gradient,
    // sum(x, 0) of a narrow x) one output per index keeps the threads busy.
    using Columns = HostColumnsKernel<T, Reduction>;
    const std::int64_t blocks = (inner + Columns::Width - 1) / Columns::Width;
    const std::int64_t threads = outer * inner * len < host_serial_grain ? 1 : compat::host_concurrency();
    if (inner > 1 && outer * blocks >= threads) {
      for_each_index(label, backend, outer * blocks, Columns{x, out, len, inner, blocks}, outer * inner * len);
      return;
    }
  }
  for_each_index(label, backend, outer * inner, AxisKernel<T, Reduction>{x, out, len, inner}, outer * inner * len);
}

// Reductions read a strided view through one contiguous copy on its device (counted in
// stats().contiguous_copies): the kernels below assume contiguous rows.
template <class Reduction>
Tensor reduce_all(const Tensor& x_in) {
  constexpr const char* op = Reduction::label;
  check_defined(x_in, op);
  const Tensor x = x_in.contiguous();
  if (Reduction::is_max && x.numel() == 0)
    fail<ShapeError>(op, "the tensor is empty (shape ", x.shape(), "), so it has no largest element");
  Tensor out = empty({}, x.device(), x.dtype());
  launch(op, [&](const auto& backend, auto* in, auto* result) { reduce_all_kernel(backend, op, in, result, x.numel(), Reduction{}); },
         x, out);
  return out;
}

template <class Reduction>
Tensor reduce_axis(const Tensor& x_in, int axis) {
  constexpr const char* op = Reduction::label;
  check_defined(x_in, op);
  const Tensor x = x_in.contiguous();
  const int a = normalize_axis(op, x, axis);
  const Shape& s = x.shape();
  if (Reduction::is_max && s[a] == 0)
    fail<ShapeError>(op, "axis ", axis, " of shape ", s, " is empty, so it has no largest element");
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; ++d) outer *= s[d];
  for (int d = a + 1; d < x.ndim(); ++d) inner *= s[d];
  Shape out_shape = s;
  out_shape.erase(out_shape.begin() + a);
  Tensor out = empty(out_shape, x.device(), x.dtype());
  launch(op, [&](const auto& backend, auto* in, auto* o) { reduce_axis_kernel(backend, op, in, o, outer, s[a], inner, Reduction{}); },
         x, out);
  return out;
}

Tensor mean_square(const Tensor& x) {
  Tensor out = reduce_all<MeanSquareReduction>(x);
  if (recording(x))
    record("kten::mean_square", out, {&x}, [x = saved(x)](const Tensor& g, const Needs&) {
      return Grads{x * (g * (2.0 / static_cast<double>(x.numel())))};
    });
  return out;
}

namespace {

/// \brief Where x holds its reduction's extreme value y: 1, else 0 (NaN matches NaN, as PyTorch).
struct ExtremeMask {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T x, T y) const {
    return x == y || (x != x && y != y) ? T(1) : T(0);
  }
};
/// \brief g / y, and 0 where y is 0: the norm's gradient scale (PyTorch masks the zero norm too).
struct DivOrZero {
  template <class T> KOKKOS_INLINE_FUNCTION T operator()(T g, T y) const { return y == T(0) ? T(0) : g / y; }
};

// g (the gradient of a reduction over `axis`, the axis removed; all axes when axis < 0) seen with
// x's shape: the reduced axis put back with stride 0.
Tensor spread(const Tensor& g, const Shape& shape, int axis) {
  return (axis < 0 ? g : g.unsqueeze(axis)).expand(shape);
}

constexpr int kAllAxes = std::numeric_limits<int>::min();

// A reduction over all elements (kAllAxes) or one axis, and its gradient.
template <class Reduction>
Tensor differentiable_reduction(const Tensor& x, int axis) {
  Tensor y = axis == kAllAxes ? reduce_all<Reduction>(x) : reduce_axis<Reduction>(x, axis);
  if (!recording(x)) return y;
  const int a = axis == kAllAxes ? -1 : normalize_axis(Reduction::label, x, axis);
  record(Reduction::label, y, {&x}, [x = saved(x), y = saved(y), a](const Tensor& g, const Needs&) {
    const Shape& shape = x.shape();
    if constexpr (std::is_same_v<Reduction, SumReduction>) {
      return Grads{spread(g, shape, a)};
    } else if constexpr (std::is_same_v<Reduction, MeanReduction>) {
      const double n = static_cast<double>(a < 0 ? x.numel() : shape[a]);
      return Grads{spread(g / n, shape, a)};
    } else if constexpr (std::is_same_v<Reduction, MaxReduction>) {
      // Ties share the gradient evenly (torch.amax).
      const Tensor mask = elementwise_binary("kten::max_grad", x, spread(y, shape, a), ExtremeMask{});
      const Tensor count = a < 0 ? sum(mask) : sum(mask, a);
      return Grads{mask * spread(g / count, shape, a)};
    } else {
      const Tensor scale = elementwise_binary("kten::norm_grad", g, y, DivOrZero{});
      return Grads{x * spread(scale, shape, a)};
    }
  });
  return y;
}

}  // namespace
}  // namespace detail

Tensor sum(const Tensor& x) { return detail::differentiable_reduction<detail::SumReduction>(x, detail::kAllAxes); }
Tensor sum(const Tensor& x, int axis) { return detail::differentiable_reduction<detail::SumReduction>(x, axis); }
Tensor mean(const Tensor& x) { return detail::differentiable_reduction<detail::MeanReduction>(x, detail::kAllAxes); }
Tensor mean(const Tensor& x, int axis) { return detail::differentiable_reduction<detail::MeanReduction>(x, axis); }
Tensor max(const Tensor& x) { return detail::differentiable_reduction<detail::MaxReduction>(x, detail::kAllAxes); }
Tensor max(const Tensor& x, int axis) { return detail::differentiable_reduction<detail::MaxReduction>(x, axis); }
Tensor norm(const Tensor& x) { return detail::differentiable_reduction<detail::NormReduction>(x, detail::kAllAxes); }
Tensor norm(const Tensor& x, int axis) { return detail::differentiable_reduction<detail::NormReduction>(x, axis); }

}  // namespace kten
