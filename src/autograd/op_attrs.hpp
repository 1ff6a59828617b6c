// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The non-tensor arguments of an op's call, as the registry (registry.hpp) passes them to its
// forward and the autograd tape records them for save()'s trace.
#include <cstdint>
#include <string>
#include <vector>

#include <kten/device.hpp>
#include <kten/dtype.hpp>

namespace kten::ops {

/// \brief The non-tensor arguments of a call, in the public function's order: axes, dims, extents
/// and indices as `ints`; scalars, exponents and bounds as `reals`.
struct OpAttrs {
  std::vector<std::int64_t> ints;  ///< \brief axes, dims, a shape, start and length
  std::vector<double> reals;       ///< \brief scalars, exponents, bounds
  bool keepdim = false;            ///< \brief reductions: keep reduced axes as extent 1
  DType dtype = DType::float32;    ///< \brief astype's target
  Device device = cpu();           ///< \brief copyto's and to()'s target
  std::string text;                ///< \brief einsum's equation

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

}  // namespace kten::ops
