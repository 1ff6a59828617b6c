// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file random.hpp
/// \brief Seeded random tensors from a counter-based (Philox-4x32-10) generator.
///
/// Element i of a tensor depends only on (seed, i), never on the device or the thread layout, so
/// one seed gives bit-identical rand() on every device. randn() goes through log and cos
/// (Box-Muller, evaluated in double and rounded): float32 results match across devices unless a
/// device's log/cos differ from the host's right at a rounding boundary; float64 results may
/// differ in the last bit. Random tensors are float32 or float64 (another dtype throws DTypeError:
/// convert with astype()).

#include <cstdint>

#include <kten/tensor.hpp>

namespace kten {

/// \brief Uniform numbers in [0, 1) on `device`.
Tensor rand(const Shape& shape, const Device& device = cpu(), std::uint64_t seed = 0,
            DType dtype = DType::float32);
/// \brief Standard normal numbers on `device`.
Tensor randn(const Shape& shape, const Device& device = cpu(), std::uint64_t seed = 0,
             DType dtype = DType::float32);
/// \brief Normal numbers with the given mean and standard deviation on `device`.
Tensor normal(const Shape& shape, double mean, double stddev, const Device& device = cpu(),
              std::uint64_t seed = 0, DType dtype = DType::float32);
/// \brief Uniform numbers in [low, high) on `device`.
Tensor uniform(const Shape& shape, double low, double high, const Device& device = cpu(),
               std::uint64_t seed = 0, DType dtype = DType::float32);

/// \brief One Philox-4x32-10 block (Random123's reference generator). Element i of rand() uses
/// counter {low32(i), high32(i), 0, 0} and key {low32(seed), high32(seed)}; randn() uses stream 1
/// in counter[2]. Exposed so users and tests can reproduce kten's streams on the host.
void philox4x32(const std::uint32_t counter[4], const std::uint32_t key[2], std::uint32_t out[4]);

}  // namespace kten

namespace kten::nn {

/// \brief The seed the next layer created without one will use, and the one
/// scaled_dot_product_attention's dropout draws without one (a process-wide counter).
std::uint64_t next_seed();
/// \brief Restarts the counter behind next_seed(), like torch.manual_seed for initialisation.
void manual_seed(std::uint64_t seed);

}  // namespace kten::nn
