// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The op-by-op harness (ggml's test-backend-ops is the model): every row of the op table (one per
// registered op and form, src/ops/registry.hpp) and of the layer table runs on the device under
// test, in float32 and float64, on random, strided, large, empty and NaN/inf inputs, against a
// reference, and its gradients against the reference's and against central finite differences in
// float64. Two references, one engine (engine.hpp): kten itself on cpu() in float64 (kten-op-tests,
// every build, GPU builds included) and PyTorch (kten-torch-harness, where libtorch is found; a
// row's TORCH lambda is compiled only there, KTEN_HARNESS_TORCH).
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <random>
#include <string>
#include <vector>

#ifdef KTEN_HARNESS_TORCH
#include <ATen/ATen.h>
#endif

#include <kten/kten.hpp>

#include "ops/registry.hpp"

namespace kten::harness {

using KtenArgs = std::vector<kten::Tensor>;
using KtenFn = std::function<kten::Tensor(const KtenArgs&)>;
#ifdef KTEN_HARNESS_TORCH
using TorchArgs = std::vector<at::Tensor>;
using TorchFn = std::function<at::Tensor(const TorchArgs&)>;
#else
/// Without libtorch a row's PyTorch side is not compiled (TORCH(expr) is nullptr).
struct TorchFn {
  TorchFn(std::nullptr_t) {}
};
#endif
using Rng = std::mt19937_64;

// A row's two sides, x being the vector of inputs; TORCH(expr) is compiled only with libtorch.
#define KTEN(expr) [](const ::kten::harness::KtenArgs& x) -> ::kten::Tensor { return (expr); }
#ifdef KTEN_HARNESS_TORCH
#define TORCH(expr) [](const ::kten::harness::TorchArgs& x) -> ::at::Tensor { return (expr); }
#else
#define TORCH(expr) nullptr
#endif

/// Where an input's values come from. The finite-difference check stays away from kinks by domain:
/// a step of 1e-6 never crosses 0 from `nonzero` or `positive` values, nor a neighbour in `distinct`.
enum class Domain {
  normal,    // standard normal
  positive,  // |N(0,1)| + 0.1 (log, sqrt)
  nonzero,   // +-(|N(0,1)| + 0.1) (abs, relu, divisors)
  distinct,  // all different, at least 0.05 apart (max without ties)
  zeros,     // normal with about half the elements +0 or -0 (conventions at kinks; no FD)
  ties,      // integers -1..2 (max with ties; no FD)
};

/// What a shape generator is asked for.
struct ShapeOptions {
  bool empty = false;  // some extent 0 (the output is empty)
  bool small = false;  // at most 12 elements per input (finite differences)
  bool large = false;  // 6,000 to 20,000 elements (products: 16 to 80 per side), past the kernels'
                       // serial grains, so that the parallel and tiled paths run
};

/// The input shapes of one case: `arity` shapes from `make`.
struct ShapeGen {
  int arity;
  std::function<std::vector<Shape>(Rng&, const ShapeOptions&)> make;
  // The inputs broadcast elementwise to the output (broadcast() of 2 or more): the gradient of a
  // stretched input is a sum over the stretched axes, compared relative to the size of its terms.
  bool elementwise = false;
};

/// `arity` shapes that broadcast together (rank 0..4, extents 1..4, some stretched from 1, some
/// with fewer axes; see ShapeOptions for large ones); arity 1: one shape of rank >= min_rank.
ShapeGen broadcast(int arity, int min_rank = 0);
/// `arity` equal shapes of rank >= min_rank.
ShapeGen same_shape(int arity, int min_rank = 0);
/// (m, k) and (k, n).
ShapeGen matmul_shapes();
/// (b, 1, m, k) and (c, k, n) or (k, n): batches of matrices whose batch axes broadcast.
ShapeGen batched_matmul_shapes();
/// (m, k) and (k).
ShapeGen matvec_shapes();
/// `arity` shapes equal except along `dim`.
ShapeGen cat_shapes(int arity, int dim);
// Pooling and resampling (issue 31 item 2).
/// (N, C, spatial...) with `spatial` (1 to 3) axes of at least `min_extent` each (N = 0 when
/// empty); with `unbatched`, sometimes (C, spatial...).
ShapeGen grid_shapes(int spatial, std::int64_t min_extent, bool unbatched = false);
// --- issue 31 (normalisation) ---
/// (N, C, spatial...) of rank min_rank..max_rank, C a multiple of `groups`, then two (C)
/// per-channel tensors (weight, bias). Every channel holds more than one value, and each sample's
/// channel more than one when min_rank >= 3 (the normalisations refuse a single value); an empty
/// case has N = 0.
ShapeGen channels_first(int min_rank, int max_rank, std::int64_t groups = 1);
/// The first of a generator's shapes alone (channels_first's x without weight and bias).
ShapeGen input_only(ShapeGen shapes);

/// |kten - torch| <= atol + rtol * |torch|, elementwise (see Row::term_scale for sums).
struct Tolerance {
  double rtol;
  double atol;
};

/// One operation checked against PyTorch.
struct Row {
  Row(std::string name, ShapeGen shapes, KtenFn kten, TorchFn torch)
      : name(std::move(name)), shapes(std::move(shapes)), kten(std::move(kten)), torch(std::move(torch)) {}

  std::string name;
  ShapeGen shapes;  // its arity is the row's
  KtenFn kten;
  TorchFn torch;
  std::string op;  // the registered op this row covers (registry.hpp); "" for composites and layers
  KtenFn kten_reference;  // what the kten reference (cpu() float64) runs, when not `kten` itself
  std::vector<Domain> domains{Domain::normal};  // one per input, or one for all
  bool differentiable = true;  // gradients compared with PyTorch's
  bool fd = true;              // kten's gradients against finite differences (float64)
  bool empty = true;           // takes empty tensors
  bool special_grad = true;    // gradients compared in the NaN/inf pass too
  std::string special_grad_note;
  bool infinities = true;      // the NaN/inf pass plants infinities too (else NaN only)
  std::string infinities_note;
  std::vector<int> special_inputs;  // the inputs the NaN/inf pass plants in (empty: every one)
  std::string special_inputs_note;
  // Tolerances relative to the op applied to |inputs| (and |w| for gradients) instead of to the
  // result: sums and products, whose rounding scales with their terms, not with a cancelled result,
  // and with their length: rtol, or (n + 1) u for n terms when that is larger (the bound any order
  // of additions meets; a long axis on an emulated GPU is one chain).
  bool term_scale = false;
  // PyTorch computes the float32 cases in float64 from the same inputs, rounded to float32 at the
  // end: the reference where PyTorch's own float32 result is less accurate than the tolerance.
  bool torch64 = false;
  std::string torch64_note;
  Tolerance f32{1e-5, 1e-6};
  Tolerance f64{1e-10, 1e-12};

  /// Counts as a row of the registered op `name` (a row whose kten side builds its own inputs).
  Row covers(std::string registered) && { op = std::move(registered); return std::move(*this); }
  /// The kten reference runs `f` instead of the row's kten side (the self-test's planted faults).
  Row reference(KtenFn f) && { kten_reference = std::move(f); return std::move(*this); }
  /// The domain of every input.
  Row on(Domain d) && { domains = {d}; return std::move(*this); }
  /// One domain per input.
  Row on(std::vector<Domain> d) && { domains = std::move(d); return std::move(*this); }
  /// No gradient (compares values only).
  Row no_grad() && { differentiable = false; fd = false; return std::move(*this); }
  /// No finite-difference check (kinks, ties, dtype changes).
  Row no_fd() && { fd = false; return std::move(*this); }
  /// No empty inputs (the op refuses them, as PyTorch does).
  Row no_empty() && { empty = false; return std::move(*this); }
  /// Gradients not compared in the NaN/inf pass (values still are), saying why.
  Row no_special_grad(std::string why) && {
    special_grad = false;
    special_grad_note = std::move(why);
    return std::move(*this);
  }
  /// The NaN/inf pass plants NaN only, saying why (where PyTorch's result at an infinity is an
  /// accident of its formula).
  Row no_infinities(std::string why) && {
    infinities = false;
    infinities_note = std::move(why);
    return std::move(*this);
  }
  /// The NaN/inf pass plants in these inputs only, saying why (where PyTorch adds a special value
  /// of another input to nothing: a convolution's weight meeting the zero padding).
  Row specials_in(std::vector<int> inputs, std::string why) && {
    special_inputs = std::move(inputs);
    special_inputs_note = std::move(why);
    return std::move(*this);
  }
  /// Tolerances relative to the size of the terms (see term_scale).
  Row sums() && { term_scale = true; return std::move(*this); }
  /// PyTorch computes in float64 (see torch64), saying why.
  Row float64_reference(std::string why) && {
    torch64 = true;
    torch64_note = std::move(why);
    return std::move(*this);
  }
  /// float32 tolerances (transcendental ops may need more than the default).
  Row tol32(double rtol, double atol) && { f32 = {rtol, atol}; return std::move(*this); }
  /// float64 tolerances.
  Row tol64(double rtol, double atol) && { f64 = {rtol, atol}; return std::move(*this); }
};

// --- issue 31 (normalisation) ---
/// A batch, group or instance norm row's options: float32 tolerances for gradients that hold
/// absolute errors of a few n u on sums of up to 20,000 terms, times 1 / sqrt(var + eps), which
/// reaches 316 on the constant sets of expanded inputs (g w - mean(g w) is then all rounding);
/// float64 ones (1e-10 relative, 1e-8 absolute) for the same sets, where PyTorch's own rounding of
/// the mean is amplified alike, n times (its weight gradient is 4e-9 where kten's exact 0 stands); PyTorch's float32 computed in float64 (its float32 is off by
/// up to 6e-4 there); and no infinities (PyTorch's fused x * scale + shift turns an infinite
/// input, weight or bias into NaN where kten's (x - mean) * scale + shift keeps the infinity).
Row normalisation(Row row);
// PyTorch 1.13's CPU batch_norm backward (instance_norm's too) is wrong for two layouts: an
// expanded (stride 0) weight (the input's gradient in channels >= 1 is garbage: 0, or denormals
// from stale memory), and an input whose strides make it channels-last with a gradient that is
// not (the bias' gradient is not even the sum of the output's). Its side of those rows takes
// contiguous copies of x and the weight; kten's still gets the strided ones.

/// A row of the registered op `op`: its registry forward with `attrs` on the inputs, the
/// registry's domains, a values-only row when the op is not differentiable; `label` names the
/// form ("pow(x, 2.5)"; the op's name when empty).
Row registered(const std::string& op, std::string label, ShapeGen shapes, ops::OpAttrs attrs, TorchFn torch);

/// The table of every kten operation (op_rows.cpp): at least one row per registered op.
std::vector<Row> op_table();
/// The table of kten's layers and losses (layer_rows.cpp).
std::vector<Row> layer_table();

/// What the coverage check found missing: public declarations (normalised as OpDef::api) of
/// `headers` (the text of ops.hpp and tensor.hpp) that no registered op is, and registered ops
/// that no row of `rows` covers. Empty when everything has its row.
std::vector<std::string> missing_rows(const std::string& headers, const std::vector<ops::OpDef>& registered,
                                      const std::vector<Row>& rows);
/// The public declarations of `headers` in OpDef::api's form: "pow(Tensor,double)",
/// "Tensor::reshape(Shape)".
std::vector<std::string> public_ops(const std::string& headers);

/// How many cases of each pass a row gets per dtype.
struct Config {
  kten::Device device = kten::cpu();
  std::string reference = "PyTorch";  // the reference's name in messages
  std::uint64_t seed = 0;
  int random_cases = 10;  // contiguous inputs
  int strided_cases = 6;  // every input a view: transposed, narrowed or expanded
  int large_cases = 4;    // large shapes (every second one strided)
  int empty_cases = 2;    // some extent 0
  int special_cases = 6;  // NaN, +inf, -inf planted (half of them in strided views)
  int fd_cases = 4;       // float64, small shapes
  bool verbose = false;   // a line per row
};

/// One reported difference.
struct Failure {
  std::string row, check, pass, dtype, device, layout, message;
  std::uint64_t seed = 0;
  int case_index = 0;
  double max_abs = 0, max_rel = 0, got = 0, want = 0;
  std::string worst;  // the worst element's index
};

/// What a run of rows did.
struct Summary {
  int rows = 0;
  long cases = 0;
  long value_checks = 0;     // forward comparisons
  long gradient_checks = 0;  // one per input with a gradient
  long fd_points = 0;        // elements checked by finite differences
  long refused = 0;          // cases both kten and PyTorch refused (an exception on both sides)
  std::vector<Failure> failures;
};

/// Runs every case of `rows` on config.device; failures are printed to `out` as they occur.
Summary run_rows(const std::vector<Row>& rows, const Config& config, std::ostream& out);

/// The planted faults (self_test.cpp): returns 0 when the harness reports each of them.
int run_self_test(const Config& config, std::ostream& out);

}  // namespace kten::harness
