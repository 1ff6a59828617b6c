// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// What the ONNX forms of the registry's entries share (onnx_forms.hpp): a call's inputs and
// attributes read with ONNX's conventions, the load-time refusals, the generic forms.
#include "ops/onnx_forms.hpp"

#include <unordered_map>

#include <kten/ops.hpp>

#include "core/fail.hpp"
#include "core/storage.hpp"
#include "ops/registry.hpp"
#include "transfer.hpp"

namespace kten::ops {

using kten::detail::fail;

// --- a call's inputs and attributes ---

std::string OnnxCall::where() const { return "node '" + node.name + "' (" + node.op_type + ")"; }

const Tensor& OnnxCall::at(std::size_t i) const {
  if (!has(i)) fail<FormatError>("onnx", where(), ": input ", i, " is required but absent");
  return in[i];
}

// Values known on the host are read there without waiting for any device; a device value (data-
// dependent shapes, which PyTorch's exporter rarely writes) is read back, a counted synchronisation.
std::int64_t OnnxCall::one_int(std::size_t i, const char* what) const {
  const std::vector<std::int64_t> v = ints(i);
  if (v.size() != 1) fail<ShapeError>("onnx", where(), ": ", what, " must be one value, not ", v.size());
  return v[0];
}

std::vector<std::int64_t> OnnxCall::ints(std::size_t i) const {
  const Tensor& t = on_host(i) ? host[i] : at(i);
  if (is_floating(t.dtype()))
    fail<FormatError>("onnx", where(), ": input ", i, " must hold integers, not ", t.dtype());
  if (!t.device().is_cpu()) return t.astype(int64).to_vector<std::int64_t>();
  std::vector<std::int64_t> v(static_cast<std::size_t>(t.numel()));
  kten::detail::read_cpu_values(t.astype(int64), v.data(), int64, v.size());
  return v;
}

double OnnxCall::real(std::size_t i) const {
  const Tensor& t = on_host(i) ? host[i] : at(i);
  if (t.numel() != 1)
    fail<ShapeError>("onnx", where(), ": input ", i, " must hold one value, not ", t.shape());
  return reals(i)[0];
}

std::vector<double> OnnxCall::reals(std::size_t i) const {
  const Tensor& t = on_host(i) ? host[i] : at(i);
  if (!t.device().is_cpu()) return t.astype(float64).to_vector<double>();
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  kten::detail::read_cpu_values(t.astype(float64), v.data(), float64, v.size());
  return v;
}

const OnnxAttribute* OnnxCall::attr(const std::string& name) const {
  const auto it = node.attributes.find(name);
  return it == node.attributes.end() ? nullptr : &it->second;
}

namespace {
const OnnxAttribute* of_kind(const OnnxCall& c, const std::string& name, OnnxAttribute::Kind kind,
                             const char* what) {
  const OnnxAttribute* a = c.attr(name);
  if (a && a->kind != kind) fail<FormatError>("onnx", c.where(), ": attribute '", name, "' must be ", what);
  return a;
}
}  // namespace

std::int64_t OnnxCall::attr_int(const std::string& name, std::int64_t fallback) const {
  const OnnxAttribute* a = of_kind(*this, name, OnnxAttribute::integer, "an integer");
  return a ? a->i : fallback;
}

double OnnxCall::attr_real(const std::string& name, double fallback) const {
  const OnnxAttribute* a = of_kind(*this, name, OnnxAttribute::real, "a float");
  return a ? a->f : fallback;
}

std::vector<std::int64_t> OnnxCall::attr_ints(const std::string& name,
                                              std::vector<std::int64_t> fallback) const {
  const OnnxAttribute* a = of_kind(*this, name, OnnxAttribute::integers, "a list of integers");
  return a ? a->ints : fallback;
}

std::string OnnxCall::attr_text(const std::string& name, const std::string& fallback) const {
  const OnnxAttribute* a = of_kind(*this, name, OnnxAttribute::text, "a string");
  return a ? a->s : fallback;
}

// --- helpers ---

int onnx_axis(const OnnxCall& c, std::int64_t axis, int rank) {
  if (axis < -rank || axis >= rank)
    fail<ShapeError>("onnx", c.where(), ": axis ", axis, " is outside a rank-", rank, " tensor");
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

void refuse_repeated_axes(const OnnxCall& c, const std::vector<int>& sorted) {
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end())
    fail<ShapeError>("onnx", c.where(), ": axis ", *twice, " is named more than once");
}

// Found in a table built once: find_op searches the registry, a cost a batch-1 forward pass would
// see at every node.
Tensor registered(std::string_view name, const std::vector<Tensor>& inputs, const OpAttrs& attrs) {
  static const std::unordered_map<std::string_view, const OpDef*> by_name = [] {
    std::unordered_map<std::string_view, const OpDef*> table;
    for (const OpDef& def : registry()) table.emplace(def.name, &def);
    return table;
  }();
  const auto it = by_name.find(name);
  return (it == by_name.end() ? find_op(name) : *it->second).forward(inputs, attrs);
}

Tensor onnx_numeric(const std::vector<Tensor>& inputs,
                    const std::function<Tensor(const std::vector<Tensor>&)>& f) {
  if (inputs[0].dtype() != int64) return f(inputs);
  std::vector<Tensor> wide;
  for (const Tensor& t : inputs) wide.push_back(t.astype(float64));
  return f(wide).astype(int64);
}

std::string node_text(const OnnxNode& n, const std::string& name, const std::string& fallback) {
  const auto it = n.attributes.find(name);
  return it == n.attributes.end() ? fallback : it->second.s;
}

std::int64_t node_int(const OnnxNode& n, const std::string& name, std::int64_t fallback) {
  const auto it = n.attributes.find(name);
  return it == n.attributes.end() ? fallback : it->second.i;
}

void check_flag(const OnnxNode& n, const char* name, std::int64_t fallback) {
  const std::int64_t v = node_int(n, name, fallback);
  if (v != 0 && v != 1) onnx_invalid(n, std::string(name) + " " + std::to_string(v) + " (0 or 1)");
}

void onnx_refuse(const OnnxNode& n, const std::string& what) {
  fail<FormatError>("onnx", "node '", n.name, "' (", n.op_type, "): ", what, " is not supported");
}

void onnx_invalid(const OnnxNode& n, const std::string& what) {
  fail<FormatError>("onnx", "node '", n.name, "' (", n.op_type, "): ", what);
}

// --- writing ---

OnnxAttr attr_i(std::string name, std::int64_t v) {
  return {OnnxAttr::integer, std::move(name), v, 0, "", {}};
}
OnnxAttr attr_is(std::string name, std::vector<std::int64_t> v) {
  return {OnnxAttr::integers, std::move(name), 0, 0, "", std::move(v)};
}
OnnxAttr attr_f(std::string name, double v) { return {OnnxAttr::real, std::move(name), 0, v, "", {}}; }
OnnxAttr attr_s(std::string name, std::string v) {
  return {OnnxAttr::text, std::move(name), 0, 0, std::move(v), {}};
}

std::string OnnxWriter::ints(const std::vector<std::int64_t>& v) { return constant(tensor(v, cpu())); }
std::string OnnxWriter::scalar(double v, DType dtype) { return constant(full({}, v, cpu(), dtype)); }

std::vector<std::int64_t> OnnxEmit::ints(std::size_t first, std::size_t n) const {
  if (first + n > op.attrs.ints.size()) throw std::out_of_range("attributes");
  return std::vector<std::int64_t>(op.attrs.ints.begin() + static_cast<std::ptrdiff_t>(first),
                                   op.attrs.ints.begin() + static_cast<std::ptrdiff_t>(first + n));
}

void OnnxEmit::refuse(const std::string& why) const { fail("", why); }

OnnxExport onnx_node_of(const char* traced, const char* type) {
  return {traced, [type](OnnxEmit& e) { return e.node(type, e.in); }};
}

OnnxExport onnx_with_scalar(const char* traced, const char* type, bool left) {
  return {traced, [type, left](OnnxEmit& e) {
            const std::string s = e.scalar(e.r(0));
            return left ? e.node(type, {s, e.in[0]}) : e.node(type, {e.in[0], s});
          }};
}

// --- element types ---

bool onnx_element_dtype(int code, DType& dtype) {
  switch (code) {
    case 1:
      dtype = DType::float32;
      return true;
    case 11:
      dtype = DType::float64;
      return true;
    case 7:
      dtype = DType::int64;
      return true;
    case 9:
      dtype = DType::boolean;
      return true;
    default:
      return false;
  }
}

int onnx_element_code(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return 1;
    case DType::float64:
      return 11;
    case DType::int64:
      return 7;
    case DType::boolean:
      return 9;
  }
  return 0;
}

// --- grids ---

// The window attributes of a convolution or pooling node, checked at load before any kernel
// divides by a stride or sizes an output with them: auto_pad NOTSET (explicit pads), VALID (none)
// or, where `same_allowed`, SAME_UPPER / SAME_LOWER (pads from the input's extents at run time,
// window_of), never beside explicit pads; kernel_shape, strides and dilations positive and of one
// length, pads non-negative and twice that length, all at most kMaxWindow. Their length against
// the input's rank is window_of's.
void check_window(const OnnxNode& n, bool same_allowed) {
  const std::string auto_pad = node_text(n, "auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (!same_allowed) onnx_refuse(n, "auto_pad " + auto_pad + " (give pads)");
    if (node_int(n, "ceil_mode", 0) != 0) onnx_refuse(n, "ceil_mode 1 with auto_pad " + auto_pad);
  } else if (auto_pad != "NOTSET" && auto_pad != "VALID") {
    onnx_invalid(n, "attribute 'auto_pad' is '" + auto_pad + "'; it must be NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  }
  if (auto_pad != "NOTSET" && n.attributes.count("pads"))
    onnx_invalid(n, "attributes 'auto_pad' (" + auto_pad + ") and 'pads' are both given; ONNX allows one");
  std::size_t spatial = 0;
  for (const char* name : {"kernel_shape", "strides", "dilations", "pads"}) {
    const auto it = n.attributes.find(name);
    if (it == n.attributes.end()) continue;
    const OnnxAttribute& a = it->second;
    const bool pads = std::string_view(name) == "pads";
    if (a.kind != OnnxAttribute::integers)
      onnx_invalid(n, std::string("attribute '") + name + "' must be a list of integers");
    for (std::int64_t v : a.ints)
      if ((pads ? v < 0 : v < 1) || v > kMaxWindow)
        onnx_invalid(n, std::string("attribute '") + name + "' holds " + std::to_string(v) +
                            (v > kMaxWindow ? "; a window's values must be at most 2^31 - 1"
                             : pads         ? "; pads must not be negative"
                                            : "; its values must be at least 1"));
    if (pads && a.ints.size() % 2 != 0)
      onnx_invalid(n,
                   "attribute 'pads' holds an odd number of values (" + std::to_string(a.ints.size()) + ")");
    const std::size_t axes = pads ? a.ints.size() / 2 : a.ints.size();
    if (spatial != 0 && axes != spatial)
      onnx_invalid(n, std::string("attribute '") + name + "' is for " + std::to_string(axes) +
                          " spatial axes, an earlier one for " + std::to_string(spatial));
    spatial = axes;
  }
}

Window window_of(const OnnxCall& c, const Tensor& x, const Shape& kernel) {
  const int spatial = x.ndim() - 2;
  Window w;
  w.kernel = c.attr_ints("kernel_shape", kernel);
  w.stride = c.attr_ints("strides", Shape(static_cast<std::size_t>(spatial), 1));
  w.dilation = c.attr_ints("dilations", Shape(static_cast<std::size_t>(spatial), 1));
  const Shape pads = c.attr_ints("pads", Shape(2 * static_cast<std::size_t>(spatial), 0));
  const auto n = static_cast<std::size_t>(spatial);
  if (w.kernel.size() != n || w.stride.size() != n || w.dilation.size() != n || pads.size() != 2 * n)
    fail<ShapeError>("onnx", c.where(), ": kernel_shape, strides, dilations and pads must hold ", spatial,
                     " values (pads ", 2 * spatial, ") for a rank-", spatial + 2, " input");
  if (std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p < 0; }))
    fail<FormatError>("onnx", c.where(), ": negative pads are not supported");
  w.begin.assign(pads.begin(), pads.begin() + spatial);
  w.end.assign(pads.begin() + spatial, pads.end());
  const std::string auto_pad = c.attr_text("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
    for (std::size_t i = 0; i < n; ++i) {
      // ceil(extent / stride) outputs: the pads that make them, the odd one at the end (UPPER) or
      // the beginning (LOWER). The attributes are at most 2^31 - 1, so no product overflows.
      const std::int64_t extent = x.size(static_cast<int>(i) + 2);
      const std::int64_t out = (extent + w.stride[i] - 1) / w.stride[i];
      const std::int64_t total =
          std::max<std::int64_t>(0, (out - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i] + 1 - extent);
      w.begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.end[i] = total - w.begin[i];
    }
  return w;
}

// The number of spatial axes of a channels-first input: 1 to 3, as kten's grid ops take.
int spatial_axes(const OnnxCall& c, const Tensor& x) {
  if (x.ndim() < 3 || x.ndim() > 5)
    fail<ShapeError>("onnx", c.where(), ": the input must be (N, C, ...) with 1 to 3 spatial axes, not ",
                     x.shape());
  return x.ndim() - 2;
}

// kten::pad's order, (before, after) pairs from the last axis backwards, for the last `axes` axes.
Shape torch_pads(const Shape& begin, const Shape& end) {
  Shape pads;
  for (std::size_t i = begin.size(); i-- > 0;) {
    pads.push_back(begin[i]);
    pads.push_back(end[i]);
  }
  return pads;
}

// ONNX's pads (every begin, then every end) from per-axis begins and ends.
std::vector<std::int64_t> onnx_pads(const std::vector<std::int64_t>& begin,
                                    const std::vector<std::int64_t>& end) {
  std::vector<std::int64_t> pads = begin;
  pads.insert(pads.end(), end.begin(), end.end());
  return pads;
}

// The spatial axes of a grid op's (N, C, ...) input; 1 to 3.
int spatial_of(const OnnxEmit& e, int spatial) {
  if (e.t(0).ndim() != spatial + 2)
    e.refuse("an unbatched input (shape " + shape_str(e.t(0).shape()) +
             ") has no ONNX form: give it a batch axis");
  return spatial;
}

// The precision LayerNormalization, GroupNormalization (21) and RMSNormalization compute in:
// float (1, the default) or double (11); kten computes in the input's own.
void check_stash_type(const OnnxNode& n) {
  const std::int64_t stash = node_int(n, "stash_type", 1);
  if (stash != 1 && stash != 11) onnx_refuse(n, "stash_type " + std::to_string(stash) + " (1, 11)");
}

}  // namespace kten::ops
