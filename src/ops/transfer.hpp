// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: transfers between storages and host memory (src/ops/transfer.cpp), the one path every
// copy between devices takes.

#include <cstddef>

#include <kten/tensor.hpp>

#include "core/storage.hpp"

namespace kten::detail {

/// \brief Copies `bytes` between storages (any devices), counting transfers. Ordered after the
/// work that produced `src`; fenced when the host reads `dst` next.
void copy_bytes(const Storage& src, const Storage& dst, std::size_t bytes);
/// \brief copy_bytes from `src_offset` bytes into src to `dst_offset` bytes into dst.
void copy_bytes(const Storage& src, std::size_t src_offset, const Storage& dst, std::size_t dst_offset,
                std::size_t bytes);
/// \brief kten's own read of a cpu() tensor's values (a check of an operation's arguments): host
/// memory that cpu()'s kernels finished writing when they returned, so it counts no host wait (a
/// step that is sync-free on a GPU is on cpu() too). `expected` must be t's dtype and `count` the
/// number of elements `dst` holds: a tensor of any other size is an Error, never a longer copy.
void read_cpu_values(const Tensor& t, void* dst, DType expected, std::size_t count);

/// \brief A new tensor on `device` filled from host memory (row-major, `dtype` elements).
Tensor from_host(const void* values, const Shape& shape, DType dtype, const Device& device);

}  // namespace kten::detail
