// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The harness's parts that do not depend on the reference: shapes, values, views, comparison.
#include "engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <numeric>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

namespace kten::harness {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
using engine::coin;
using engine::numel_of;
using engine::uniform_int;

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

// Pooling and resampling (issue 31 item 2).
ShapeGen grid_shapes(int spatial, std::int64_t min_extent, bool unbatched) {
  return {1, [spatial, min_extent, unbatched](Rng& rng, const ShapeOptions& o) {
            Shape s{o.small ? 1 : uniform_int(rng, 1, 2), o.small ? 1 : uniform_int(rng, 1, 3)};
            if (o.large) s = {2, uniform_int(rng, 2, 3)};
            // Large: 6,000 to 20,000 elements in all.
            const double side = std::pow(static_cast<double>(uniform_int(rng, 6000, 20000)) / static_cast<double>(s[0] * s[1]), 1.0 / spatial);
            for (int a = 0; a < spatial; ++a)
              s.push_back(o.large ? std::max<std::int64_t>(min_extent, std::llround(side * std::uniform_real_distribution<double>(0.8, 1.25)(rng)))
                                  : uniform_int(rng, min_extent, min_extent + (o.small ? 1 : spatial == 3 ? 2 : 3)));
            // Small: at most 12 elements (finite differences).
            while (o.small && numel_of(s) > 12) {
              auto largest = std::max_element(s.begin() + 2, s.end());
              if (*largest == min_extent) break;
              --*largest;
            }
            if (o.empty) s[0] = 0;
            else if (unbatched && coin(rng, 0.25)) s.erase(s.begin());
            return std::vector<Shape>{s};
          }};
}

// --- issue 31 (normalisation) ---
ShapeGen channels_first(int min_rank, int max_rank, std::int64_t groups) {
  return {3, [min_rank, max_rank, groups](Rng& rng, const ShapeOptions& o) {
            const int rank = static_cast<int>(uniform_int(rng, min_rank, max_rank));
            Shape x;
            if (o.small) {  // (2, C <= 2, 1.., 3): at most 12 elements
              x = {2, groups};
              for (int d = 2; d < rank; ++d) x.push_back(d == rank - 1 ? 3 : 1);
            } else if (o.large) {  // 6,000 to 20,000 elements, most along the last axis
              const std::int64_t c = groups * uniform_int(rng, 1, std::max<std::int64_t>(1, 8 / groups));
              const std::int64_t n = rank == 2 ? uniform_int(rng, 6000, 20000) / c : uniform_int(rng, 2, 3);
              std::int64_t rest = uniform_int(rng, 6000, 20000) / (n * c);
              x = {n, c};
              for (int d = 2; d < rank; ++d) {
                const std::int64_t e = d == rank - 1 ? std::max<std::int64_t>(rest, 2) : 4;
                x.push_back(e);
                rest /= e;
              }
            } else {
              x = {uniform_int(rng, rank == 2 ? 2 : 1, 3), groups * uniform_int(rng, 1, 3)};
              for (int d = 2; d < rank; ++d) x.push_back(uniform_int(rng, d == rank - 1 ? 2 : 1, 4));
            }
            if (o.empty) x[0] = 0;
            return std::vector<Shape>{x, {x[1]}, {x[1]}};
          }};
}

Row normalisation(Row row) {
  return std::move(row)
      .tol32(1e-4, 5e-4)
      .tol64(1e-10, 1e-8)
      .float64_reference("PyTorch's float32 normalisations are off by up to 6e-4 on constant groups")
      .no_infinities("PyTorch's fused x * scale + shift makes NaN of an infinity that (x - mean) * scale + shift keeps");
}

ShapeGen input_only(ShapeGen shapes) {
  return {1, [shapes](Rng& rng, const ShapeOptions& o) { return std::vector<Shape>{shapes.make(rng, o)[0]}; }};
}

namespace engine {

std::int64_t uniform_int(Rng& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}
bool coin(Rng& rng, double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

std::int64_t numel_of(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

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



kten::Tensor kten_from(const std::vector<double>& v, const Shape& shape, const Device& device, DType dtype) {
  if (dtype == DType::float64) return kten::tensor(v, shape, device);
  return kten::tensor(std::vector<float>(v.begin(), v.end()), shape, device);
}


std::vector<double> values_of(const kten::Tensor& t) {
  if (t.dtype() == DType::float64) return t.to_vector<double>();
  return t.astype(DType::float64).detach().to_vector<double>();  // float32, int64, boolean
}



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



// NaN equals NaN; infinities must match exactly; finite values within
// atol + rtol |want| + scale_rtol |scale|, where scale is the size of the terms of a sum. The worst
// element is the one furthest past its bound (a NaN or inf mismatch first).
Diff compare(const std::vector<double>& got, const std::vector<double>& want, const std::vector<double>* scale,
             Tolerance tol, double scale_rtol) {
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

}  // namespace engine
}  // namespace kten::harness

// --- the registry's rows and the coverage check ------------------------------------------------

namespace kten::harness {
namespace {

Domain harness_domain(ops::Domain d) {
  switch (d) {
    case ops::Domain::real: return Domain::normal;
    case ops::Domain::positive: return Domain::positive;
    case ops::Domain::nonzero: return Domain::nonzero;
    case ops::Domain::distinct: return Domain::distinct;
  }
  return Domain::normal;
}

// A declaration's parameter types as OpDef::api writes them: no const, references, std::, names
// or default values.
std::string normalised_parameters(const std::string& params) {
  std::string out;
  std::stringstream list(params);
  std::string param;
  while (std::getline(list, param, ',')) {
    param = param.substr(0, param.find('='));
    for (const std::string drop : {"const ", "std::", "&"}) {
      for (auto at = param.find(drop); at != std::string::npos; at = param.find(drop)) param.erase(at, drop.size());
    }
    std::stringstream words(param);
    std::vector<std::string> tokens;
    for (std::string w; words >> w;) tokens.push_back(w);
    if (tokens.empty()) continue;
    if (tokens.size() > 1) tokens.pop_back();  // the parameter's name
    std::string type;
    for (const std::string& t : tokens) type += t;
    out += (out.empty() ? "" : ",") + type;
  }
  return out;
}

}  // namespace

Row registered(const std::string& op, std::string label, ShapeGen shapes, ops::OpAttrs attrs, TorchFn torch) {
  const ops::OpDef& def = ops::find_op(op);
  if (def.arity != -1 && def.arity != shapes.arity)
    throw std::logic_error("the row of " + op + " gives " + std::to_string(shapes.arity) + " inputs; the op takes " +
                           std::to_string(def.arity));
  Row row(label.empty() ? op : std::move(label), std::move(shapes),
          [&def, attrs = std::move(attrs)](const KtenArgs& x) { return def.forward(x, attrs); }, std::move(torch));
  row.op = op;
  row.domains.clear();
  for (ops::Domain d : def.domains) row.domains.push_back(harness_domain(d));
  if (!def.differentiable) row.differentiable = row.fd = false;
  return row;
}

std::vector<std::string> public_ops(const std::string& headers) {
  // The class body of Tensor (its methods are "Tensor::name"), from "class Tensor {" to "\n};".
  const std::size_t class_begin = headers.find("class Tensor {");
  const std::size_t class_end = class_begin == std::string::npos ? class_begin : headers.find("\n};", class_begin);
  // Declarations only (";"): a definition in the header is an alias calling a declared op.
  const std::regex declaration(R"((^|[\s;{}])Tensor\s+(operator[^\s(]+|\w+)\s*\(([^)]*)\)\s*(const\s*)?;)");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(headers.begin(), headers.end(), declaration); it != std::sregex_iterator(); ++it) {
    const std::size_t at = static_cast<std::size_t>(it->position(2));
    const bool method = class_begin != std::string::npos && at > class_begin && at < class_end;
    const std::string params = normalised_parameters((*it)[3]);
    // Factories (a free function with no tensor argument) make tensors: they are not ops.
    if (!method && params.find("Tensor") == std::string::npos) continue;
    found.push_back((method ? "Tensor::" : "") + (*it)[2].str() + "(" + params + ")");
  }
  return found;
}

std::vector<std::string> missing_rows(const std::string& headers, const std::vector<ops::OpDef>& registered,
                                      const std::vector<Row>& rows) {
  // Tensor's accessors that return a tensor but compute nothing, and the factories that read only
  // a tensor's shape, dtype and device (no values, no gradient).
  const std::set<std::string> not_ops{"Tensor::grad()", "Tensor::pin_memory()", "zeros_like(Tensor)", "ones_like(Tensor)"};
  std::set<std::string> apis;
  for (const ops::OpDef& op : registered) apis.insert(op.api);
  std::vector<std::string> missing;
  for (const std::string& api : public_ops(headers)) {
    if (apis.count(api) || not_ops.count(api)) continue;
    if (api.rfind("Tensor::", 0) == 0) {  // x.exp() is exp(x): the free function's op covers it
      const std::size_t open = api.find('(');
      const std::string params = api.substr(open + 1, api.size() - open - 2);
      if (apis.count(api.substr(8, open - 8) + "(Tensor" + (params.empty() ? "" : "," + params) + ")")) continue;
    }
    missing.push_back("public op " + api + " is not in the op registry (src/ops/registry.hpp)");
  }
  std::set<std::string> covered;
  for (const Row& row : rows) covered.insert(row.op);
  for (const ops::OpDef& op : registered)
    if (!covered.count(op.name)) missing.push_back("registered op " + op.name + " (" + op.api + ") has no row in tests/ops/op_rows.cpp");
  return missing;
}

}  // namespace kten::harness
