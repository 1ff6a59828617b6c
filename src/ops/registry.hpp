// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The op registry: every public tensor operation, declared once by its op family (in the family's
// own file, beside its forward and gradient) with what generic code needs to call it and test it.
// The op-by-op harness (tests/ops), the coverage check against the public headers, the ONNX
// importer's op table and the C API's exports are driven from it; the autograd tape knows an op
// only through the backward its forward records.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <kten/device.hpp>
#include <kten/dtype.hpp>
#include <kten/tensor.hpp>

namespace kten::ops {

/// \brief The non-tensor arguments of a call, in the public function's order: axes, dims, extents
/// and indices as `ints`; scalars, exponents and bounds as `reals`.
struct OpAttrs {
  std::vector<std::int64_t> ints;  ///< \brief axes, dims, a shape, start and length
  std::vector<double> reals;       ///< \brief scalars, exponents, bounds
  bool keepdim = false;            ///< \brief reductions: keep reduced axes as extent 1
  DType dtype = DType::float32;    ///< \brief astype's target
  Device device = cpu();           ///< \brief copyto's and to()'s target

  /// \brief `ints` given.
  static OpAttrs of_ints(std::vector<std::int64_t> v, bool keep = false) {
    OpAttrs a;
    a.ints = std::move(v);
    a.keepdim = keep;
    return a;
  }
  /// \brief `reals` given.
  static OpAttrs of_reals(std::vector<double> v) {
    OpAttrs a;
    a.reals = std::move(v);
    return a;
  }
};

/// \brief Where an input's values keep an op smooth and defined (the harness draws there and
/// finite differences stay there): real (anywhere), positive (log, sqrt), nonzero (a kink or a
/// pole at 0), distinct (ties change which element wins).
enum class Domain { real, positive, nonzero, distinct };

/// \brief The dtypes an op computes in: floating (float32, float64; others are a DTypeError) or
/// any (ops that move or compare elements).
enum class DTypes { floating, any };

/// \brief One operation.
struct OpDef {
  std::string name;  ///< \brief unique: "add", "add_scalar", "sum_axes", "Tensor::reshape"
  /// \brief The public declaration it is, normalised: the function (or `Tensor::method`) and its
  /// parameter types without const, references, std:: or names: "pow(Tensor,double)".
  std::string api;
  int arity;  ///< \brief tensor inputs (a list counts as -1)
  std::vector<Domain> domains;  ///< \brief one per tensor input, or one for all
  DTypes dtypes = DTypes::floating;
  bool differentiable = true;  ///< \brief its forward records a backward for float inputs
  /// \brief Runs it: the tensor inputs in order, then its other arguments from `attrs`.
  Tensor (*forward)(const std::vector<Tensor>& inputs, const OpAttrs& attrs);
};

/// \brief `attrs.ints[i]` as an axis; a kten::Error when it is missing or out of int's range.
int axis_of(const OpAttrs& attrs, std::size_t i = 0);
/// \brief Every one of `attrs.ints` as an axis (int).
std::vector<int> axes_of(const OpAttrs& attrs);

/// \brief Every registered op, family by family.
const std::vector<OpDef>& registry();
/// \brief The op of that name; kten::Error naming it when there is none.
const OpDef& find_op(std::string_view name);

// Each op family's declarations (in the family's file).
std::vector<OpDef> elementwise_ops();
std::vector<OpDef> unary_math_ops();
std::vector<OpDef> activation_ops();
std::vector<OpDef> binary_math_ops();
std::vector<OpDef> compare_ops();
std::vector<OpDef> reduce_ops();
std::vector<OpDef> extremum_ops();
std::vector<OpDef> softmax_ops();
std::vector<OpDef> indexing_ops();
std::vector<OpDef> linalg_ops();
std::vector<OpDef> view_ops();
// Convolutions and padding (issue 31)
std::vector<OpDef> conv_ops();
// Pooling and resampling (issue 31 item 2).
std::vector<OpDef> pool_ops();
std::vector<OpDef> resample_ops();
std::vector<OpDef> norm_ops();  // issue 31: batch, group and instance norm (src/ops/norm.cpp)
// Graph ops (scatter.cpp): index_add, scatter_add, scatter_reduce, embedding.
std::vector<OpDef> scatter_ops();

}  // namespace kten::ops
