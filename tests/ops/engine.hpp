// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The harness engine: draws each case's inputs, runs kten on the device under test and the
// reference on the same values, compares values and gradients. Written once over the reference
// `Ref`, which gives its tensor type and a handful of operations on it:
//
//   Ref::Tensor, Ref::Args                     the reference's tensors and a row's inputs
//   Ref::name                                   in messages ("PyTorch", "cpu() float64")
//   Ref::from(values, shape, dtype)             a host tensor of those values (float32 or float64)
//   Ref::leaf(t)                                t as a leaf that requires grad
//   Ref::call(row, args)                        the row's reference side
//   Ref::values(t), Ref::shape(t), Ref::dtype(t), Ref::cast(t, dtype) (floating results only)
//   Ref::backward(out, w)                       sum(out * w).backward()
//   Ref::grad(t), Ref::abs(t), Ref::expand_leaf(t, shape), Ref::sum_to(g, shape), Ref::zeros_like(t)
//   Ref::reference_dtype(row, dtype)            the dtype the reference computes a case in
#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <numeric>
#include <ostream>
#include <sstream>

#include "harness.hpp"

namespace kten::harness {
namespace engine {

std::int64_t uniform_int(Rng& rng, std::int64_t lo, std::int64_t hi);
bool coin(Rng& rng, double p);
std::int64_t numel_of(const Shape& s);

/// Values drawn from `domain`.
std::vector<double> draw(Rng& rng, Domain domain, std::int64_t n);
/// NaN, +inf and -inf (NaN only without `infinities`) in about a fifth of the elements (at least one).
void plant_specials(Rng& rng, std::vector<double>& v, bool infinities);

enum class Layout { contiguous, transposed, narrowed, expanded };

/// One input: a base tensor and the view of it the op sees.
struct Input {
  Shape shape;       // what the op sees
  Shape base_shape;  // what is allocated
  std::vector<double> base_values;
  Layout layout = Layout::contiguous;
  int a = 0, b = 0;  // transposed axes; narrowed or expanded axis (a)
};

std::string describe(const Input& in);
/// Picks a strided layout the shape allows (expanded only where ties are harmless).
void choose_view(Rng& rng, Input& in, bool allow_expand);

/// The same view on either library's tensor type.
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

kten::Tensor kten_from(const std::vector<double>& v, const Shape& shape, const Device& device, DType dtype);
/// Every element as a double (float32, int64 and boolean results converted).
std::vector<double> values_of(const kten::Tensor& t);
std::string index_str(std::int64_t flat, const Shape& shape);

struct Diff {
  bool ok = true;
  double max_abs = 0, max_rel = 0, got = 0, want = 0;
  std::int64_t worst = -1;
  std::string message;
};

/// NaN equals NaN; infinities must match exactly; finite values within
/// atol + rtol |want| + scale_rtol |scale|, where scale is the size of the terms of a sum.
Diff compare(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>* scale,
             Tolerance tol, double scale_rtol = 0);

std::uint64_t splitmix(std::uint64_t x);
std::uint64_t fnv1a(const std::string& s);

inline const char* const pass_names[] = {"random", "strided", "large", "empty", "special", "fd"};
enum Pass { random_pass, strided_pass, large_pass, empty_pass, special_pass, fd_pass };

/// One case of one row: everything it needs to report itself.
template <class Ref>
class Case {
  using RT = typename Ref::Tensor;
  using RArgs = typename Ref::Args;

 public:
  Case(const Row& row, const Config& config, DType dtype, Pass pass, int index, Summary& summary, std::ostream& out)
      : row_(row), config_(config), dtype_(dtype), pass_(pass), index_(index), summary_(summary), out_(out) {
    const std::uint64_t which = (static_cast<std::uint64_t>(dtype) << 40) ^ (static_cast<std::uint64_t>(pass) << 32) ^
                                static_cast<std::uint64_t>(index);
    seed_ = splitmix(splitmix(splitmix(config.seed) ^ fnv1a(row.name)) ^ which);
    ref_dtype_ = Ref::reference_dtype(row, dtype);
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
      const bool plants = row_.special_inputs.empty() ||
                          std::find(row_.special_inputs.begin(), row_.special_inputs.end(), static_cast<int>(i)) != row_.special_inputs.end();
      if (pass_ == special_pass && plants) plant_specials(rng, in.base_values, row_.infinities);
      inputs_.push_back(std::move(in));
    }
    ++summary_.cases;
    const bool with_grad = row_.differentiable && (pass_ != special_pass || row_.special_grad);

    // Leaves: the views themselves, so each op sees exactly the strided tensor.
    KtenArgs kx;
    RArgs rx;
    for (const Input& in : inputs_) {
      kten::Tensor k = apply_view(kten_from(in.base_values, in.base_shape, config_.device, dtype_), in);
      RT r = apply_view(Ref::from(in.base_values, in.base_shape, ref_dtype_), in);
      if (with_grad) {
        k.requires_grad_();
        r = Ref::leaf(r);
      }
      kx.push_back(k);
      rx.push_back(r);
    }

    kten::Tensor kout;
    RT rout;
    std::string kerror, rerror;
    try {
      kout = row_.kten(kx);
    } catch (const std::exception& e) {
      kerror = e.what();
    }
    try {
      rout = Ref::call(row_, rx);
    } catch (const std::exception& e) {
      rerror = e.what();
      rerror = rerror.substr(0, rerror.find('\n'));
    }
    if (!kerror.empty() || !rerror.empty()) {
      if (!kerror.empty() && !rerror.empty()) {
        ++summary_.refused;  // both refuse these inputs: they agree
        if (config_.verbose)
          out_ << "     refused by both: " << row_.name << ", pass " << pass_names[pass_] << " case " << index_ << ": kten: "
               << kerror << " | " << config_.reference << ": " << rerror << "\n";
        return;
      }
      fail("forward", kerror.empty() ? config_.reference + " threw but kten did not: " + rerror
                                     : "kten threw but " + config_.reference + " did not: " + kerror);
      return;
    }

    ++summary_.value_checks;
    if (!check("forward", kout, rounded(rout, kout), term_scale_forward(rx), largest_input())) return;
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
    const RT rw = Ref::from(w, Ref::shape(rout), Ref::dtype(rout));
    std::vector<RT> scales;
    try {
      Ref::backward(rout, rw);
      scales = row_.term_scale ? term_scale_gradients(rx, w) : broadcast_gradient_scales(rx, rout, rw);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      fail("backward", config_.reference + "'s backward threw: " + what.substr(0, what.find('\n')));
      return;
    }
    for (std::size_t i = 0; i < kx.size(); ++i) {
      const std::string name = "grad[" + std::to_string(i) + "]";
      ++summary_.gradient_checks;
      const RT rgrad = Ref::grad(rx[i]);
      if (!kgrads[i].defined() || !rgrad.defined()) {
        fail(name, kgrads[i].defined() ? config_.reference + " computed no gradient for this input"
                                       : "kten computed no gradient for this input");
        continue;
      }
      // A stretched input's gradient sums out.numel() / x.numel() terms; a row's sums, any input's size.
      const std::int64_t terms = row_.term_scale ? largest_input() : kout.numel() / std::max<std::int64_t>(1, kx[i].numel());
      check(name, kgrads[i], rounded(rgrad, kgrads[i]), scales.empty() ? RT() : scales[i], terms);
    }
    if (pass_ != fd_pass) return;
    try {
      finite_differences(kgrads, w);
    } catch (const std::exception& e) {
      fail("fd", std::string("kten threw during finite differences: ") + e.what());
    }
  }

 private:
  // The reference's result as it is, where it computed in the case's dtype: its dtype is checked.
  // Where it computed in float64, its floating result rounded to the dtype of kten's (`got`): a
  // float64 reference says nothing about the dtype of a float32 case's result (astype's).
  RT rounded(const RT& t, const kten::Tensor& got) const {
    if (ref_dtype_ == dtype_ || !is_floating(Ref::dtype(t))) return t;
    return Ref::cast(t, is_floating(got.dtype()) ? got.dtype() : dtype_);
  }

  Domain domain_of(std::size_t i) const { return row_.domains.size() == 1 ? row_.domains[0] : row_.domains.at(i); }
  Tolerance tolerance() const { return dtype_ == DType::float32 ? row_.f32 : row_.f64; }
  std::int64_t largest_input() const {
    std::int64_t n = 0;
    for (const Input& in : inputs_) n = std::max(n, numel_of(in.shape));
    return n;
  }

  // For sums and products: the op on |inputs|, whose values bound the terms' size.
  RT term_scale_forward(const RArgs& rx) const {
    if (!row_.term_scale) return {};
    RArgs abs;
    for (const RT& t : rx) abs.push_back(Ref::abs(t));
    return Ref::detach(Ref::call(row_, abs));
  }
  // ... and the gradients of sum(op(|inputs|) * |w|).
  std::vector<RT> term_scale_gradients(const RArgs& rx, const std::vector<double>& w) const {
    if (!row_.term_scale) return {};
    RArgs abs;
    for (const RT& t : rx) abs.push_back(Ref::leaf(Ref::abs(t)));
    const RT out = Ref::call(row_, abs);
    std::vector<double> abs_w(w.size());
    std::transform(w.begin(), w.end(), abs_w.begin(), [](double v) { return std::fabs(v); });
    Ref::backward(out, Ref::from(abs_w, Ref::shape(out), Ref::dtype(out)));
    std::vector<RT> grads;
    for (const RT& t : abs) grads.push_back(Ref::grad(t).defined() ? Ref::grad(t) : Ref::zeros_like(t));
    return grads;
  }

  // For elementwise rows: the gradient of each input summed from |per-element gradients| over the
  // axes it was stretched along (computed on inputs expanded to the output's shape).
  std::vector<RT> broadcast_gradient_scales(const RArgs& rx, const RT& rout, const RT& rw) const {
    bool stretched = false;
    for (const RT& t : rx) stretched = stretched || Ref::shape(t) != Ref::shape(rout);
    if (!row_.shapes.elementwise || !stretched) return {};
    RArgs expanded;
    for (const RT& t : rx) expanded.push_back(Ref::expand_leaf(t, Ref::shape(rout)));
    Ref::backward(Ref::call(row_, expanded), rw);
    std::vector<RT> scales;
    for (std::size_t i = 0; i < rx.size(); ++i) {
      const RT g = Ref::grad(expanded[i]);
      scales.push_back(g.defined() ? Ref::sum_to(Ref::abs(g), Ref::shape(rx[i])) : Ref::zeros_like(rx[i]));
    }
    return scales;
  }

  // `scale`: the size of the terms of each element, a sum of at most `terms` of them. A sum of n
  // terms added in any order is within (n + 1) u of their size (docs/numerics.md, "Numerics across
  // devices and threads": an emulated GPU adds a long axis in one chain); rtol when that is larger.
  bool check(const std::string& name, const kten::Tensor& got, const RT& want, const RT& scale, std::int64_t terms = 1) {
    if (got.shape() != Ref::shape(want)) {
      fail(name, "shape " + shape_str(got.shape()) + " from kten, " + shape_str(Ref::shape(want)) + " from " + config_.reference);
      return false;
    }
    if (got.dtype() != Ref::dtype(want)) {
      fail(name, std::string("dtype ") + dtype_name(got.dtype()) + " from kten, " + dtype_name(Ref::dtype(want)) + " from " +
                     config_.reference);
      return false;
    }
    const std::vector<double> scale_values = scale.defined() ? Ref::values(scale) : std::vector<double>();
    const double u = dtype_ == DType::float32 ? 0x1p-24 : 0x1p-53;
    const double terms_rtol = std::max(tolerance().rtol, static_cast<double>(terms + 1) * u);
    const Diff d = compare(values_of(got), Ref::values(want), scale.defined() ? &scale_values : nullptr, tolerance(), terms_rtol);
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
      return loss.item<double>();
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
      // The view's strides, as both libraries have them.
      const kten::Tensor probe = apply_view(kten::empty(inputs_[i].base_shape), inputs_[i]);
      layout << (i ? "; " : "") << "x" << i << " " << shape_str(inputs_[i].shape) << " strides " << shape_str(probe.strides())
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
         << "     " << f.dtype << (ref_dtype_ != dtype_ ? " (the reference in float64, rounded)" : "") << " on " << f.device
         << ", pass " << f.pass << " case " << f.case_index << ", seed " << f.seed << " (base seed " << config_.seed << ")\n"
         << "     inputs: " << f.layout << "\n";
    if (!f.worst.empty())
      out_ << "     max abs error " << f.max_abs << ", max rel error " << f.max_rel << "; worst at " << f.worst << ": kten "
           << f.got << (f.check.rfind("fd", 0) == 0 ? ", finite differences " : ", " + config_.reference + " ") << f.want << "\n";
  }

  const Row& row_;
  const Config& config_;
  DType dtype_;
  Pass pass_;
  int index_;
  Summary& summary_;
  std::ostream& out_;
  std::uint64_t seed_;
  DType ref_dtype_;  // the reference's inputs' dtype
  std::vector<Input> inputs_;
};

/// Every case of `rows` against the reference `Ref` (harness.hpp's run_rows).
template <class Ref>
Summary run_rows_with(const std::vector<Row>& rows, const Config& config, std::ostream& out) {
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
              Case<Ref>(row, config, dtype, static_cast<Pass>(p), i, summary, out).run();
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
          << (row.special_inputs.empty() ? "" : " (NaN/inf planted in some inputs only: " + row.special_inputs_note + ")")
          << (row.torch64 ? " (the reference in float64 for float32: " + row.torch64_note + ")" : "") << "\n";
    }
  return summary;
}

}  // namespace engine
}  // namespace kten::harness
