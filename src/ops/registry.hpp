// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The op registry: every public tensor operation, declared once by its op family (in the family's
// own file, beside its forward and gradient) with what generic code needs to call it and test it,
// and its ONNX forms (onnx_forms.hpp). The op-by-op harness (tests/ops), the coverage check against
// the public headers and the ONNX importer and exporter are driven from it; the autograd tape
// knows an op only through the backward its forward records.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <kten/device.hpp>
#include <kten/dtype.hpp>
#include <kten/tensor.hpp>

#include "ops/onnx_forms.hpp"
#include "autograd/op_attrs.hpp"

namespace kten::ops {

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
  /// \brief The ONNX operators onnx::load() maps onto it (onnx_forms.hpp).
  std::vector<OnnxImport> onnx_import = {};
  /// \brief What onnx::save() writes where its forward recorded itself on the tape.
  std::vector<OnnxExport> onnx_export = {};
};

/// \brief `attrs.ints[i]` as an axis; a kten::Error when it is missing or out of int's range.
int axis_of(const OpAttrs& attrs, std::size_t i = 0);
/// \brief Every one of `attrs.ints` as an axis (int).
std::vector<int> axes_of(const OpAttrs& attrs);

/// \brief Gives the row `name` of a family's `rows` its ONNX forms (a kten::Error when there is no
/// such row): each family declares them below its rows.
void set_onnx(std::vector<OpDef>& rows, std::string_view name, std::vector<OnnxImport> imports,
              std::vector<OnnxExport> exports = {});

/// \brief Every registered op, family by family.
const std::vector<OpDef>& registry();
/// \brief The op of that name; kten::Error naming it when there is none.
const OpDef& find_op(std::string_view name);

// Each op family's declarations (in the family's file).
std::vector<OpDef> elementwise_ops();
std::vector<OpDef> unary_math_ops();
std::vector<OpDef> activation_ops();
std::vector<OpDef> binary_math_ops();
std::vector<OpDef> rounding_ops();  // floor, ceil, trunc, round, sign, fmod, remainder
std::vector<OpDef> scan_select_ops();  // cumsum, topk
std::vector<OpDef> compare_ops();
std::vector<OpDef> reduce_ops();
std::vector<OpDef> extremum_ops();
std::vector<OpDef> softmax_ops();
std::vector<OpDef> attention_ops();  // scaled_dot_product_attention, ONNX's Attention
std::vector<OpDef> indexing_ops();
std::vector<OpDef> linalg_ops();
std::vector<OpDef> view_ops();
// Convolutions and padding (issue 31)
std::vector<OpDef> conv_ops();
std::vector<OpDef> pad_ops();  // pad.cpp
// Pooling and resampling (issue 31 item 2).
std::vector<OpDef> pool_ops();
std::vector<OpDef> resample_ops();
std::vector<OpDef> norm_ops();  // issue 31: batch, group and instance norm (src/ops/norm.cpp)
// Graph ops (scatter.cpp): index_add, scatter_add, scatter_reduce, embedding.
std::vector<OpDef> scatter_ops();

}  // namespace kten::ops
