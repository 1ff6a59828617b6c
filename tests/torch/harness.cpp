// The harness engine: draws each case's inputs, runs kten and PyTorch on them, compares.
#include "harness.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <numeric>
#include <ostream>
#include <sstream>

namespace kten::torch_harness {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::int64_t uniform_int(Rng& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}
bool coin(Rng& rng, double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

std::int64_t numel_of(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

// --- shapes ------------------------------------------------------------------------------------

// Rank min_rank..4 (..3 when small), extents 1..4 (1..3 when small, at most 12 elements); with
// `empty`, one extent 0. Large: rank >= 1 and 6,000 to 20,000 elements.
Shape random_shape(Rng& rng, const ShapeOptions& o, int min_rank) {
  if (o.large) {
    const int rank = static_cast<int>(uniform_int(rng, std::max(min_rank, 1), 4));
    const double side = std::pow(static_cast<double>(uniform_int(rng, 6000, 20000)), 1.0 / rank);
    Shape s(static_cast<std::size_t>(rank));
    for (auto& e : s) e = std::max<std::int64_t>(1, std::llround(side * std::uniform_real_distribution<double>(0.6, 1.4)(rng)));
    return s;
  }
  const int max_rank = std::max(min_rank, o.small ? 3 : 4);
  int rank = static_cast<int>(uniform_int(rng, min_rank, max_rank));
  if (o.empty && rank == 0) rank = 1;
  Shape s(static_cast<std::size_t>(rank));
  for (auto& e : s) e = uniform_int(rng, 1, o.small ? 3 : 4);
  while (o.small && numel_of(s) > 12) *std::max_element(s.begin(), s.end()) -= 1;
  if (o.empty) s[static_cast<std::size_t>(uniform_int(rng, 0, rank - 1))] = 0;
  return s;
}

}  // namespace

ShapeGen broadcast(int arity, int min_rank) {
  return {arity, [arity, min_rank](Rng& rng, const ShapeOptions& o) {
            const Shape full = random_shape(rng, o, min_rank);
            std::vector<Shape> shapes;
            for (int i = 0; i < arity; ++i) {
              if (arity == 1) {
                shapes.push_back(full);
                continue;
              }
              // Trailing axes of the full shape, each kept or stretched from 1.
              const auto rank = static_cast<std::size_t>(uniform_int(rng, 0, static_cast<std::int64_t>(full.size())));
              Shape s(full.end() - static_cast<std::ptrdiff_t>(rank), full.end());
              for (auto& e : s)
                if (coin(rng, 0.3)) e = 1;
              shapes.push_back(s);
            }
            if (o.empty && arity > 1) shapes[0] = full;  // so the result is empty
            return shapes;
          },
          arity > 1};
}

ShapeGen same_shape(int arity, int min_rank) {
  return {arity, [arity, min_rank](Rng& rng, const ShapeOptions& o) {
            return std::vector<Shape>(static_cast<std::size_t>(arity), random_shape(rng, o, min_rank));
          }};
}

ShapeGen matmul_shapes() {
  return {2, [](Rng& rng, const ShapeOptions& o) {
            std::int64_t e[3];
            for (auto& x : e) x = o.large ? uniform_int(rng, 16, 80) : uniform_int(rng, 1, o.small ? 3 : 5);
            if (o.empty) e[uniform_int(rng, 0, 2)] = 0;
            return std::vector<Shape>{{e[0], e[1]}, {e[1], e[2]}};
          }};
}

ShapeGen batched_matmul_shapes() {
  return {2, [](Rng& rng, const ShapeOptions& o) {
            std::int64_t e[3];
            for (auto& x : e) x = o.large ? uniform_int(rng, 8, 24) : uniform_int(rng, 1, o.small ? 2 : 4);
            if (o.empty) e[uniform_int(rng, 0, 2)] = 0;
            // Batch axes that broadcast: (B, 1) against (C) or (B, C), B and C small.
            const std::int64_t b = uniform_int(rng, 1, 3), c = uniform_int(rng, 1, 3);
            Shape a{b, 1, e[0], e[1]}, w{c, e[1], e[2]};
            if (uniform_int(rng, 0, 1) == 0) w = {e[1], e[2]};  // one matrix for every batch
            return std::vector<Shape>{a, w};
          }};
}

ShapeGen matvec_shapes() {
  return {2, [](Rng& rng, const ShapeOptions& o) {
            std::int64_t e[2];
            for (auto& x : e) x = o.large ? uniform_int(rng, 64, 300) : uniform_int(rng, 1, o.small ? 3 : 5);
            if (o.empty) e[uniform_int(rng, 0, 1)] = 0;
            return std::vector<Shape>{{e[0], e[1]}, {e[1]}};
          }};
}

ShapeGen cat_shapes(int arity, int dim) {
  return {arity, [arity, dim](Rng& rng, const ShapeOptions& o) {
            ShapeOptions base_options = o;
            base_options.empty = false;
            Shape base = random_shape(rng, base_options, 1);
            const auto d = static_cast<std::size_t>(dim < 0 ? dim + static_cast<int>(base.size()) : dim);
            std::vector<Shape> shapes;
            for (int i = 0; i < arity; ++i) {
              Shape s = base;
              s[d] = uniform_int(rng, 1, o.small ? 2 : 3);
              shapes.push_back(s);
            }
            if (o.empty) {
              if (coin(rng, 0.5) || base.size() == 1) {
                shapes[static_cast<std::size_t>(uniform_int(rng, 0, arity - 1))][d] = 0;  // one empty part
              } else {
                const auto other = (d + 1) % base.size();
                for (auto& s : shapes) s[other] = 0;  // an empty result
              }
            }
            return shapes;
          }};
}

namespace {

// --- values ------------------------------------------------------------------------------------

std::vector<double> draw(Rng& rng, Domain domain, std::int64_t n) {
  std::normal_distribution<double> normal;
  std::vector<double> v(static_cast<std::size_t>(n));
  switch (domain) {
    case Domain::normal:
      for (auto& x : v) x = normal(rng);
      break;
    case Domain::positive:
      for (auto& x : v) x = std::fabs(normal(rng)) + 0.1;
      break;
    case Domain::nonzero:
      for (auto& x : v) x = std::copysign(std::fabs(normal(rng)) + 0.1, normal(rng));
      break;
    case Domain::distinct: {
      // A shuffled ladder 0.25 apart with jitter below 0.1: neighbours at least 0.05 apart.
      std::vector<std::int64_t> rungs(v.size());
      std::iota(rungs.begin(), rungs.end(), std::int64_t{0});
      std::shuffle(rungs.begin(), rungs.end(), rng);
      std::uniform_real_distribution<double> jitter(0, 0.1);
      for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = 0.25 * static_cast<double>(rungs[i]) - 0.125 * static_cast<double>(n) + jitter(rng);
      break;
    }
    case Domain::zeros:
      for (auto& x : v) x = coin(rng, 0.5) ? (coin(rng, 0.3) ? -0.0 : 0.0) : normal(rng);
      break;
    case Domain::ties:
      for (auto& x : v) x = static_cast<double>(uniform_int(rng, -1, 2));
      break;
  }
  return v;
}

// NaN, +inf and -inf (NaN only without `infinities`) in about a fifth of the elements (at least one).
void plant_specials(Rng& rng, std::vector<double>& v, bool infinities) {
  if (v.empty()) return;
  const double specials[3] = {kNaN, kInf, -kInf};
  const std::int64_t last = infinities ? 2 : 0;
  bool planted = false;
  for (auto& x : v)
    if (coin(rng, 0.2)) {
      x = specials[uniform_int(rng, 0, last)];
      planted = true;
    }
  if (!planted) v[static_cast<std::size_t>(uniform_int(rng, 0, static_cast<std::int64_t>(v.size()) - 1))] = specials[uniform_int(rng, 0, last)];
}

// --- inputs: a base tensor and the view of it the op sees ------------------------------------

enum class Layout { contiguous, transposed, narrowed, expanded };

struct Input {
  Shape shape;       // what the op sees
  Shape base_shape;  // what is allocated
  std::vector<double> base_values;
  Layout layout = Layout::contiguous;
  int a = 0, b = 0;  // transposed axes; narrowed or expanded axis (a)
};

std::string describe(const Input& in) {
  std::ostringstream s;
  switch (in.layout) {
    case Layout::contiguous: s << "contiguous"; break;
    case Layout::transposed: s << "transpose(" << in.a << "," << in.b << ") of " << shape_str(in.base_shape); break;
    case Layout::narrowed: s << "narrow(" << in.a << ",1," << in.shape[static_cast<std::size_t>(in.a)] << ") of " << shape_str(in.base_shape); break;
    case Layout::expanded: s << "expand of " << shape_str(in.base_shape); break;
  }
  return s.str();
}

// Picks a strided layout the shape allows (expanded only where ties are harmless).
void choose_view(Rng& rng, Input& in, bool allow_expand) {
  const int rank = static_cast<int>(in.shape.size());
  std::vector<Layout> options;
  if (rank >= 2) options.push_back(Layout::transposed);
  if (rank >= 1) options.push_back(Layout::narrowed);
  std::vector<int> stretchable;
  for (int d = 0; d < rank; ++d)
    if (in.shape[static_cast<std::size_t>(d)] > 1) stretchable.push_back(d);
  if (allow_expand && !stretchable.empty()) options.push_back(Layout::expanded);
  in.base_shape = in.shape;
  if (options.empty()) return;
  in.layout = options[static_cast<std::size_t>(uniform_int(rng, 0, static_cast<std::int64_t>(options.size()) - 1))];
  switch (in.layout) {
    case Layout::contiguous: break;
    case Layout::transposed:
      in.a = static_cast<int>(uniform_int(rng, 0, rank - 2));
      in.b = static_cast<int>(uniform_int(rng, in.a + 1, rank - 1));
      std::swap(in.base_shape[static_cast<std::size_t>(in.a)], in.base_shape[static_cast<std::size_t>(in.b)]);
      break;
    case Layout::narrowed:
      in.a = static_cast<int>(uniform_int(rng, 0, rank - 1));
      in.base_shape[static_cast<std::size_t>(in.a)] += 2;
      break;
    case Layout::expanded:
      in.a = stretchable[static_cast<std::size_t>(uniform_int(rng, 0, static_cast<std::int64_t>(stretchable.size()) - 1))];
      in.base_shape[static_cast<std::size_t>(in.a)] = 1;
      break;
  }
}

// The same view on either library's tensor type.
template <class T>
T apply_view(const T& base, const Input& in) {
  switch (in.layout) {
    case Layout::contiguous: return base;
    case Layout::transposed: return base.transpose(in.a, in.b);
    case Layout::narrowed: return base.narrow(in.a, 1, in.shape[static_cast<std::size_t>(in.a)]);
    case Layout::expanded: return base.expand(in.shape);
  }
  return base;
}

at::ScalarType torch_dtype(DType d) { return d == DType::float32 ? at::kFloat : at::kDouble; }

kten::Tensor kten_from(const std::vector<double>& v, const Shape& shape, const Device& device, DType dtype) {
  if (dtype == DType::float64) return kten::tensor(v, shape, device);
  return kten::tensor(std::vector<float>(v.begin(), v.end()), shape, device);
}

at::Tensor torch_from(const std::vector<double>& v, const Shape& shape, DType dtype) {
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(at::kDouble));
  std::copy(v.begin(), v.end(), t.data_ptr<double>());
  return t.to(torch_dtype(dtype));
}

std::vector<double> values_of(const kten::Tensor& t) {
  if (t.dtype() == DType::float64) return t.to_vector<double>();
  const auto f = t.to_vector<float>();
  return {f.begin(), f.end()};
}

std::vector<double> values_of(const at::Tensor& t) {
  const at::Tensor d = t.detach().to(at::kDouble).contiguous();
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

Shape shape_of(const at::Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end()); }

std::string index_str(std::int64_t flat, const Shape& shape) {
  std::vector<std::int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  std::ostringstream s;
  s << "(";
  for (std::size_t d = 0; d < idx.size(); ++d) s << (d ? "," : "") << idx[d];
  s << ")";
  return s.str();
}

// --- comparison -------------------------------------------------------------------------------

struct Diff {
  bool ok = true;
  double max_abs = 0, max_rel = 0, got = 0, want = 0;
  std::int64_t worst = -1;
  std::string message;
};

// NaN equals NaN; infinities must match exactly; finite values within
// atol + rtol |want| + scale_rtol |scale|, where scale is the size of the terms of a sum. The worst
// element is the one furthest past its bound (a NaN or inf mismatch first).
Diff compare(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>* scale,
             Tolerance tol, double scale_rtol = 0) {
  Diff d;
  double worst_ratio = -1;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    double ratio;
    if (std::isnan(g) || std::isnan(w)) {
      ratio = std::isnan(g) && std::isnan(w) ? 0 : kInf;
    } else if (std::isinf(g) || std::isinf(w)) {
      ratio = g == w ? 0 : kInf;
    } else {
      const double err = std::fabs(g - w);
      ratio = err / (tol.atol + tol.rtol * std::fabs(w) + (scale ? scale_rtol * std::fabs((*scale)[i]) : 0.0));
      d.max_abs = std::max(d.max_abs, err);
      if (w != 0) d.max_rel = std::max(d.max_rel, err / std::fabs(w));
    }
    if (ratio > 1) d.ok = false;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      d.worst = static_cast<std::int64_t>(i);
      d.got = g;
      d.want = w;
    }
  }
  return d;
}

const char* pass_names[] = {"random", "strided", "large", "empty", "special", "fd"};
enum Pass { random_pass, strided_pass, large_pass, empty_pass, special_pass, fd_pass };

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// One case of one row: everything it needs to report itself.
class Case {
 public:
  Case(const Row& row, const Config& config, DType dtype, Pass pass, int index, Summary& summary, std::ostream& out)
      : row_(row), config_(config), dtype_(dtype), pass_(pass), index_(index), summary_(summary), out_(out) {
    const std::uint64_t which = (static_cast<std::uint64_t>(dtype) << 40) ^ (static_cast<std::uint64_t>(pass) << 32) ^
                                static_cast<std::uint64_t>(index);
    seed_ = splitmix(splitmix(splitmix(config.seed) ^ fnv1a(row.name)) ^ which);
    torch_type_ = row.torch64 ? at::kDouble : torch_dtype(dtype);
  }

  void run() {
    Rng rng(seed_);
    ShapeOptions options;
    options.empty = pass_ == empty_pass;
    options.small = pass_ == fd_pass;
    options.large = pass_ == large_pass;
    const std::vector<Shape> shapes = row_.shapes.make(rng, options);
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      Input in;
      in.shape = shapes[i];
      const Domain domain = domain_of(i);
      const bool strided = pass_ == strided_pass || ((pass_ == special_pass || pass_ == large_pass) && index_ % 2 == 1);
      if (strided) choose_view(rng, in, domain != Domain::distinct);
      else in.base_shape = in.shape;
      in.base_values = draw(rng, domain, numel_of(in.base_shape));
      if (pass_ == special_pass) plant_specials(rng, in.base_values, row_.infinities);
      inputs_.push_back(std::move(in));
    }
    ++summary_.cases;
    const bool with_grad = row_.differentiable && (pass_ != special_pass || row_.special_grad);

    // Leaves: the views themselves, so each op sees exactly the strided tensor.
    KtenArgs kx;
    TorchArgs tx;
    for (const Input& in : inputs_) {
      kten::Tensor k = apply_view(kten_from(in.base_values, in.base_shape, config_.device, dtype_), in);
      at::Tensor t = apply_view(torch_from(in.base_values, in.base_shape, dtype_).to(torch_type_), in);
      if (with_grad) {
        k.requires_grad_();
        t = t.detach().requires_grad_(true);
      }
      kx.push_back(k);
      tx.push_back(t);
    }

    kten::Tensor kout;
    at::Tensor tout;
    std::string kerror, terror;
    try {
      kout = row_.kten(kx);
    } catch (const std::exception& e) {
      kerror = e.what();
    }
    try {
      tout = row_.torch(tx);
    } catch (const std::exception& e) {
      terror = e.what();
      terror = terror.substr(0, terror.find('\n'));
    }
    if (!kerror.empty() || !terror.empty()) {
      if (!kerror.empty() && !terror.empty()) {
        ++summary_.refused;  // both refuse these inputs: they agree
        if (config_.verbose)
          out_ << "     refused by both: " << row_.name << ", pass " << pass_names[pass_] << " case " << index_ << ": kten: "
               << kerror << " | torch: " << terror << "\n";
        return;
      }
      fail("forward", kerror.empty() ? "PyTorch threw but kten did not: " + terror : "kten threw but PyTorch did not: " + kerror);
      return;
    }

    ++summary_.value_checks;
    if (!check("forward", kout, rounded(tout), term_scale_forward(tx), largest_input())) return;
    if (!with_grad) return;

    // Gradients of sum(out * w), w drawn from N(0, 1).
    const std::vector<double> w = draw(rng, Domain::normal, kout.numel());
    std::vector<kten::Tensor> kgrads;
    try {
      kten::Tensor kw = kten_from(w, kout.shape(), kout.device(), kout.dtype());
      kten::sum(kout * kw).backward();
      for (const kten::Tensor& k : kx) kgrads.push_back(k.grad());
    } catch (const std::exception& e) {
      fail("backward", std::string("kten's backward threw: ") + e.what());
      return;
    }
    const at::Tensor tw = torch_from(w, shape_of(tout), kout.dtype()).to(tout.scalar_type());
    std::vector<at::Tensor> scales;
    try {
      (tout * tw).sum().backward();
      scales = row_.term_scale ? term_scale_gradients(tx, w) : broadcast_gradient_scales(tx, tout, tw);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      fail("backward", "PyTorch's backward threw: " + what.substr(0, what.find('\n')));
      return;
    }
    for (std::size_t i = 0; i < kx.size(); ++i) {
      const std::string name = "grad[" + std::to_string(i) + "]";
      ++summary_.gradient_checks;
      if (!kgrads[i].defined() || !tx[i].grad().defined()) {
        fail(name, kgrads[i].defined() ? "PyTorch computed no gradient for this input" : "kten computed no gradient for this input");
        continue;
      }
      // A stretched input's gradient sums out.numel() / x.numel() terms; a row's sums, any input's size.
      const std::int64_t terms = row_.term_scale ? largest_input() : kout.numel() / std::max<std::int64_t>(1, kx[i].numel());
      check(name, kgrads[i], rounded(tx[i].grad()), scales.empty() ? at::Tensor() : scales[i], terms);
    }
    if (pass_ != fd_pass) return;
    try {
      finite_differences(kgrads, w);
    } catch (const std::exception& e) {
      fail("fd", std::string("kten threw during finite differences: ") + e.what());
    }
  }

 private:
  // PyTorch's result in this case's dtype (rounded from float64 when the row asks for torch64).
  at::Tensor rounded(const at::Tensor& t) const { return torch_type_ == torch_dtype(dtype_) ? t : t.to(torch_dtype(dtype_)); }

  Domain domain_of(std::size_t i) const { return row_.domains.size() == 1 ? row_.domains[0] : row_.domains.at(i); }
  Tolerance tolerance() const { return dtype_ == DType::float32 ? row_.f32 : row_.f64; }
  std::int64_t largest_input() const {
    std::int64_t n = 0;
    for (const Input& in : inputs_) n = std::max(n, numel_of(in.shape));
    return n;
  }
  static DType dtype_of_torch(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? DType::float32 : DType::float64; }

  // For sums and products: the op on |inputs|, whose values bound the terms' size.
  at::Tensor term_scale_forward(const TorchArgs& tx) const {
    if (!row_.term_scale) return {};
    TorchArgs abs;
    for (const at::Tensor& t : tx) abs.push_back(t.detach().abs());
    return row_.torch(abs).detach();
  }
  // ... and the gradients of sum(op(|inputs|) * |w|).
  std::vector<at::Tensor> term_scale_gradients(const TorchArgs& tx, const std::vector<double>& w) const {
    if (!row_.term_scale) return {};
    TorchArgs abs;
    for (const at::Tensor& t : tx) abs.push_back(t.detach().abs().requires_grad_(true));
    at::Tensor out = row_.torch(abs);
    (out * torch_from(w, shape_of(out), dtype_of_torch(out)).abs()).sum().backward();
    std::vector<at::Tensor> grads;
    for (const at::Tensor& t : abs) grads.push_back(t.grad().defined() ? t.grad() : at::zeros_like(t));
    return grads;
  }

  // For elementwise rows: the gradient of each input summed from |per-element gradients| over the
  // axes it was stretched along (computed on inputs expanded to the output's shape).
  std::vector<at::Tensor> broadcast_gradient_scales(const TorchArgs& tx, const at::Tensor& tout, const at::Tensor& tw) const {
    bool stretched = false;
    for (const at::Tensor& t : tx) stretched = stretched || t.sizes() != tout.sizes();
    if (!row_.shapes.elementwise || !stretched) return {};
    TorchArgs expanded;
    for (const at::Tensor& t : tx) expanded.push_back(t.detach().expand(tout.sizes()).contiguous().requires_grad_(true));
    (row_.torch(expanded) * tw).sum().backward();
    std::vector<at::Tensor> scales;
    for (std::size_t i = 0; i < tx.size(); ++i) {
      const at::Tensor g = expanded[i].grad();
      scales.push_back(g.defined() ? at::sum_to(g.abs(), tx[i].sizes()) : at::zeros_like(tx[i]));
    }
    return scales;
  }

  // `scale`: the size of the terms of each element, a sum of at most `terms` of them. A sum of n
  // terms added in any order is within (n + 1) u of their size (README, "Numerics across devices
  // and threads": an emulated GPU adds a long axis in one chain); rtol when that is larger.
  bool check(const std::string& name, const kten::Tensor& got, const at::Tensor& want, const at::Tensor& scale,
             std::int64_t terms = 1) {
    if (got.shape() != shape_of(want)) {
      fail(name, "shape " + shape_str(got.shape()) + " from kten, " + shape_str(shape_of(want)) + " from PyTorch");
      return false;
    }
    if (got.dtype() != dtype_of_torch(want)) {
      fail(name, std::string("dtype ") + dtype_name(got.dtype()) + " from kten, " + dtype_name(dtype_of_torch(want)) + " from PyTorch");
      return false;
    }
    const std::vector<double> scale_values = scale.defined() ? values_of(scale) : std::vector<double>();
    const double u = dtype_ == DType::float32 ? 0x1p-24 : 0x1p-53;
    const double terms_rtol = std::max(tolerance().rtol, static_cast<double>(terms + 1) * u);
    const Diff d = compare(values_of(got), values_of(want), scale.defined() ? &scale_values : nullptr, tolerance(), terms_rtol);
    if (!d.ok) fail(name, "values differ", &d, got.shape());
    return d.ok;
  }

  // kten's gradient of sum(op(x) * w) against (f(x + h e_j) - f(x - h e_j)) / 2h, h = 1e-6, in
  // float64 (gradcheck's tolerances: atol 1e-5, rtol 1e-3).
  void finite_differences(const std::vector<kten::Tensor>& kgrads, const std::vector<double>& w) {
    if (!row_.fd || dtype_ != DType::float64) return;
    constexpr double h = 1e-6;
    std::vector<std::vector<double>> x;
    for (const Input& in : inputs_) x.push_back(values_of(apply_view(kten_from(in.base_values, in.base_shape, config_.device, dtype_), in)));
    const auto loss = [&] {
      kten::NoGradGuard no_grad;
      KtenArgs args;
      for (std::size_t i = 0; i < x.size(); ++i) args.push_back(kten_from(x[i], inputs_[i].shape, config_.device, dtype_));
      const kten::Tensor out = row_.kten(args);
      const kten::Tensor loss = kten::sum(out * kten_from(w, out.shape(), out.device(), out.dtype()));
      return loss.dtype() == DType::float64 ? loss.item<double>() : static_cast<double>(loss.item<float>());
    };
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::vector<double> analytic = values_of(kgrads[i]);
      std::vector<double> numeric(x[i].size());
      for (std::size_t j = 0; j < x[i].size(); ++j) {
        const double x0 = x[i][j];
        x[i][j] = x0 + h;
        const double up = loss();
        x[i][j] = x0 - h;
        const double down = loss();
        x[i][j] = x0;
        numeric[j] = (up - down) / (2 * h);
        ++summary_.fd_points;
      }
      const Diff d = compare(analytic, numeric, nullptr, {1e-3, 1e-5});
      if (!d.ok) fail("fd[" + std::to_string(i) + "]", "kten's gradient differs from central differences", &d, inputs_[i].shape);
    }
  }

  void fail(const std::string& check, const std::string& message, const Diff* d = nullptr, const Shape& shape = {}) {
    Failure f;
    f.row = row_.name;
    f.check = check;
    f.pass = pass_names[pass_];
    f.dtype = dtype_name(dtype_);
    f.device = config_.device.str();
    f.seed = seed_;
    f.case_index = index_;
    f.message = message;
    std::ostringstream layout;
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      // The view's strides, as kten and PyTorch both have them.
      const at::Tensor probe = apply_view(at::empty(inputs_[i].base_shape), inputs_[i]);
      const Shape strides(probe.strides().begin(), probe.strides().end());
      layout << (i ? "; " : "") << "x" << i << " " << shape_str(inputs_[i].shape) << " strides " << shape_str(strides)
             << " " << describe(inputs_[i]);
    }
    f.layout = layout.str();
    if (d) {
      f.max_abs = d->max_abs;
      f.max_rel = d->max_rel;
      f.got = d->got;
      f.want = d->want;
      f.worst = index_str(d->worst, shape);
    }
    print(f);
    summary_.failures.push_back(std::move(f));
  }

  void print(const Failure& f) const {
    out_ << "FAIL " << f.row << ": " << f.check << " (" << f.message << ")\n"
         << "     " << f.dtype << (torch_type_ != torch_dtype(dtype_) ? " (PyTorch in float64, rounded)" : "") << " on " << f.device << ", pass " << f.pass << " case " << f.case_index << ", seed "
         << f.seed << " (base seed " << config_.seed << ")\n"
         << "     inputs: " << f.layout << "\n";
    if (!f.worst.empty())
      out_ << "     max abs error " << f.max_abs << ", max rel error " << f.max_rel << "; worst at " << f.worst << ": kten "
           << f.got << (f.check.rfind("fd", 0) == 0 ? ", finite differences " : ", torch ") << f.want << "\n";
  }

  const Row& row_;
  const Config& config_;
  DType dtype_;
  Pass pass_;
  int index_;
  Summary& summary_;
  std::ostream& out_;
  std::uint64_t seed_;
  at::ScalarType torch_type_;  // PyTorch's inputs' dtype
  std::vector<Input> inputs_;
};

}  // namespace

Summary run_rows(const std::vector<Row>& rows, const Config& config, std::ostream& out) {
  Summary summary;
  // Large cases come last, for all rows: on an emulated GPU with trapped memory every kernel
  // launch reprotects the arena up to its high-water mark, which large tensors raise for good.
  std::vector<double> ms(rows.size());
  std::vector<long> cases(rows.size()), failures(rows.size());
  for (bool large : {false, true})
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const Row& row = rows[r];
      const auto start = std::chrono::steady_clock::now();
      const std::size_t failures_before = summary.failures.size();
      const long cases_before = summary.cases;
      for (DType dtype : {DType::float32, DType::float64}) {
        const int counts[] = {config.random_cases, config.strided_cases, config.large_cases,
                              row.empty ? config.empty_cases : 0, config.special_cases,
                              dtype == DType::float64 && row.fd ? config.fd_cases : 0};
        for (int p = random_pass; p <= fd_pass; ++p)
          if ((p == large_pass) == large)
            for (int i = 0; i < counts[p]; ++i) {
              Case(row, config, dtype, static_cast<Pass>(p), i, summary, out).run();
              if (large) kten::empty_cache();  // the next case's blocks need not stay mapped
            }
      }
      ms[r] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      cases[r] += summary.cases - cases_before;
      failures[r] += static_cast<long>(summary.failures.size() - failures_before);
    }
  summary.rows = static_cast<int>(rows.size());
  if (config.verbose)
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const Row& row = rows[r];
      out << (failures[r] == 0 ? "ok   " : "FAIL ") << row.name << ": " << cases[r] << " cases, "
          << static_cast<long>(ms[r]) << " ms"
          << (row.special_grad ? "" : " (NaN/inf gradients not compared: " + row.special_grad_note + ")")
          << (row.infinities ? "" : " (NaN planted, no infinities: " + row.infinities_note + ")")
          << (row.torch64 ? " (PyTorch in float64 for float32: " + row.torch64_note + ")" : "") << "\n";
    }
  return summary;
}

}  // namespace kten::torch_harness
