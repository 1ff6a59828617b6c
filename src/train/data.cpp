// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Datasets: synthetic regression data (batches made on the host), the application's tensors and a
// replay buffer (batches gathered on their device); shards of any dataset's batches for ranks.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include <kten/data.hpp>
#include <kten/kokkos.hpp>
#include <kten/ops.hpp>
#include <kten/random.hpp>

#include "core/checked.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "core/fail.hpp"
#include "ops/indexing.hpp"
#include "core/storage.hpp"
#include "ops/transfer.hpp"

namespace kten::data {

namespace {

// One row (leading index) of a batch.
struct Row {
  const Batch* batch;
  std::int64_t index;
};

// Rows [first, first + count) in an epoch's order: shuffled by the dataset's seed and the epoch
// for training, in order for validation.
std::vector<std::int64_t> epoch_order(std::int64_t first, std::int64_t count, bool train, std::uint64_t seed,
                                      std::uint64_t epoch) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(count));
  std::iota(order.begin(), order.end(), first);
  if (train) std::shuffle(order.begin(), order.end(), std::mt19937_64(seed * 1000003 + epoch));
  return order;
}

// The rows `rows` of one part (X or y) of host batches, copied into a new cpu() tensor.
Tensor gather_rows(const std::vector<Row>& rows, Tensor Batch::*part) {
  const Tensor& first = rows.front().batch->*part;
  Shape shape = first.shape();
  const std::size_t row_bytes = first.nbytes() / static_cast<std::size_t>(shape[0]);
  shape[0] = static_cast<std::int64_t>(rows.size());
  std::vector<char> bytes(rows.size() * row_bytes);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Tensor& source = rows[i].batch->*part;
    std::memcpy(bytes.data() + i * row_bytes,
                detail::data_ptr<const char>(source) + rows[i].index * row_bytes, row_bytes);
  }
  return detail::from_host(bytes.data(), shape, first.dtype(), cpu());
}

}  // namespace

std::vector<Batch> Dataset::shard_batches(bool train, std::int64_t batch_size, std::uint64_t epoch,
                                          const Shard& shard) const {
  if (shard.count < 1 || shard.rank < 0 || shard.rank >= shard.count)
    detail::fail("shard_batches()", "rank ", shard.rank, " of ", shard.count,
                 " is not a shard; needs count >= 1 and 0 <= rank < count");
  if (shard.count == 1) return batches(train, batch_size, epoch);
  if (batch_size < 1) detail::fail<ShapeError>("shard_batches()", "batch_size must be >= 1");
  const std::int64_t count = shard.count;
  if (batch_size > std::numeric_limits<std::int64_t>::max() / count)
    detail::fail<ShapeError>("shard_batches()", "batch_size ", batch_size, " times ", count,
                             " ranks does not fit in 64 bits");
  // The epoch's batches of all ranks together; global row i goes to rank i % count (the global
  // batch size is a multiple of count, so this is the stride over the whole epoch's order).
  std::vector<Batch> global = batches(train, batch_size * count, epoch);
  std::int64_t total = 0;
  for (auto& b : global) {
    if (b.X.ndim() < 1 || b.y.ndim() < 1 || b.X.shape()[0] != b.y.shape()[0])
      detail::fail<ShapeError>("shard_batches()", "a batch's X (", b.X.shape(), ") and y (", b.y.shape(),
                               ") must have one row per example");
    b = {b.X.to(cpu()).contiguous(), b.y.to(cpu()).contiguous()};  // gather_rows reads rows as bytes
    total += b.X.shape()[0];
  }
  // The epoch's p-th example, for padding (PyTorch repeats the order from its start).
  const std::int64_t global_rows = batch_size * count;
  auto epoch_row = [&](std::int64_t p) {
    p %= total;
    return Row{&global[static_cast<std::size_t>(p / global_rows)], p % global_rows};
  };
  std::vector<Batch> out;
  for (const Batch& b : global) {
    const std::int64_t rows = b.X.shape()[0], left = rows % count;  // left > 0 only for the last
    std::int64_t end = rows;
    if (left != 0 && shard.remainder == Remainder::drop) end = rows - left;
    if (left != 0 && shard.remainder == Remainder::pad) end = rows - left + count;
    std::vector<Row> mine;
    for (std::int64_t i = shard.rank; i < end; i += count)
      mine.push_back(i < rows ? Row{&b, i} : epoch_row(i - rows));
    if (!mine.empty()) out.push_back({gather_rows(mine, &Batch::X), gather_rows(mine, &Batch::y)});
  }
  return out;
}

SyntheticRegression::SyntheticRegression(std::vector<float> w, float b, float noise, std::int64_t num_train,
                                         std::int64_t num_val, std::uint64_t seed)
    : w_(std::move(w)), b_(b), num_train_(num_train), num_val_(num_val), seed_(seed) {
  if (w_.empty()) detail::fail<ShapeError>("SyntheticRegression", "w must have at least one weight");
  if (num_train < 1 || num_val < 0)
    detail::fail<ShapeError>("SyntheticRegression", "needs num_train >= 1 and num_val >= 0");
  const auto total = detail::checked_add(num_train, num_val);
  if (!total)
    detail::fail<ShapeError>("SyntheticRegression", "num_train + num_val (", num_train, " + ", num_val,
                             ") does not fit in 64 bits");
  const std::int64_t n = *total, features = static_cast<std::int64_t>(w_.size());
  X_ = randn({n, features}, cpu(), seed);
  const Tensor w_column = tensor(w_, {features, 1});
  y_ = matmul(X_, w_column) + static_cast<double>(b) + randn({n, 1}, cpu(), seed + 1) * static_cast<double>(noise);
}

std::vector<Batch> SyntheticRegression::batches(bool train, std::int64_t batch_size, std::uint64_t epoch) const {
  if (batch_size < 1) detail::fail<ShapeError>("batches()", "batch_size must be >= 1");
  const std::int64_t count = train ? num_train_ : num_val_;
  const std::vector<std::int64_t> order = epoch_order(train ? 0 : num_train_, count, train, seed_, epoch);
  const std::int64_t features = X_.shape()[1];
  const auto X = X_.view<const float**>();
  const auto y = y_.view<const float**>();
  std::vector<Batch> out;
  for (std::int64_t start = 0; start < count; start += batch_size) {
    const std::int64_t rows = std::min(batch_size, count - start);
    // Gathered straight into the batch's cpu() tensors: no staging vector, no second copy.
    Batch batch{empty({rows, features}), empty({rows, 1})};
    const auto xb = batch.X.view<float**>();
    const auto yb = batch.y.view<float**>();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = order[start + r];
      for (std::int64_t f = 0; f < features; ++f) xb(r, f) = X(i, f);
      yb(r, 0) = y(i, 0);
    }
    out.push_back(std::move(batch));
  }
  return out;
}

TensorDataset::TensorDataset(Tensor X, Tensor y, std::int64_t num_val, std::uint64_t seed)
    : X_(std::move(X)), y_(std::move(y)), num_val_(num_val), seed_(seed) {
  constexpr const char* op = "TensorDataset";
  detail::check_defined(X_, op);
  detail::check_defined(y_, op);
  detail::check_same_device(op, X_.device(), y_.device());
  if (X_.ndim() < 1 || y_.ndim() < 1 || X_.shape()[0] != y_.shape()[0] || X_.shape()[0] < 1)
    detail::fail<ShapeError>(op, "X (", X_.shape(), ") and y (", y_.shape(),
                             ") need one row per example, and at least one example");
  if (num_val < 0 || num_val >= X_.shape()[0])
    detail::fail<ShapeError>(op, "num_val ", num_val, " must be >= 0 and leave training rows out of ",
                             X_.shape()[0]);
  num_train_ = X_.shape()[0] - num_val;
}

std::vector<Batch> TensorDataset::batches(bool train, std::int64_t batch_size, std::uint64_t epoch) const {
  if (batch_size < 1) detail::fail<ShapeError>("batches()", "batch_size must be >= 1");
  const std::int64_t count = train ? num_train_ : num_val_;
  if (count == 0) return {};
  // The epoch's row order on the device in one transfer; every batch gathers through a slice of it.
  const Tensor order = tensor(epoch_order(train ? 0 : num_train_, count, train, seed_, epoch), X_.device());
  std::vector<Batch> out;
  for (std::int64_t start = 0; start < count; start += batch_size) {
    const Tensor rows = order.narrow(0, start, std::min(batch_size, count - start));
    out.push_back({detail::select_rows_in_range(X_, rows), detail::select_rows_in_range(y_, rows)});
  }
  return out;
}

namespace {
// (rows, sample...): a ring's shape.
Shape with_rows(std::int64_t rows, const Shape& sample) {
  Shape shape{rows};
  shape.insert(shape.end(), sample.begin(), sample.end());
  return shape;
}

// What push() needs of X or y: the ring's device, dtype and per-sample shape.
void check_fits(const char* what, const Tensor& t, const Tensor& ring) {
  constexpr const char* op = "ReplayBuffer::push";
  detail::check_defined(t, op);
  detail::check_same_device(op, t.device(), ring.device());
  detail::check_dtype(op, what, t, ring.dtype(), "convert it with .astype(...) to the buffer's dtype");
  if (t.ndim() != ring.ndim() || !std::equal(t.shape().begin() + 1, t.shape().end(), ring.shape().begin() + 1))
    detail::fail<ShapeError>(op, what, " has shape ", t.shape(), "; the buffer holds samples of shape ",
                             Shape(ring.shape().begin() + 1, ring.shape().end()), ", pushed as (rows, sample...)");
}
}  // namespace

ReplayBuffer::ReplayBuffer(std::int64_t capacity, const Shape& x_shape, const Shape& y_shape, const Device& device,
                           DType dtype, std::uint64_t seed)
    : capacity_(capacity), seed_(seed) {
  if (capacity < 1) detail::fail<ShapeError>("ReplayBuffer", "capacity must be >= 1, got ", capacity);
  X_ = empty(with_rows(capacity, x_shape), device, dtype);
  y_ = empty(with_rows(capacity, y_shape), device, dtype);
}

void ReplayBuffer::push(const Tensor& X, const Tensor& y) {
  check_fits("X", X, X_);
  check_fits("y", y, y_);
  const std::int64_t n = X.shape()[0];
  if (y.shape()[0] != n)
    detail::fail<ShapeError>("ReplayBuffer::push", "X has ", n, " rows but y has ", y.shape()[0]);
  if (n == 0) return;
  // The samples' values, not their history; at most the last capacity rows survive.
  const std::int64_t kept = std::min(n, capacity_);
  const Tensor Xk = X.detach().narrow(0, n - kept, kept), yk = y.detach().narrow(0, n - kept, kept);
  // Up to two device-local copies: up to the ring's end, then from its start.
  const std::int64_t to_end = std::min(kept, capacity_ - next_);
  X_.narrow(0, next_, to_end).copy_from(Xk.narrow(0, 0, to_end));
  y_.narrow(0, next_, to_end).copy_from(yk.narrow(0, 0, to_end));
  if (kept > to_end) {
    X_.narrow(0, 0, kept - to_end).copy_from(Xk.narrow(0, to_end, kept - to_end));
    y_.narrow(0, 0, kept - to_end).copy_from(yk.narrow(0, to_end, kept - to_end));
  }
  next_ = (next_ + kept) % capacity_;
  size_ = std::min(size_ + kept, capacity_);
}

Batch ReplayBuffer::sample(std::int64_t batch_size) {
  constexpr const char* op = "ReplayBuffer::sample";
  if (batch_size < 1) detail::fail<ShapeError>(op, "batch_size must be >= 1, got ", batch_size);
  if (size_ == 0) detail::fail(op, "the buffer is empty; push() samples into it first");
  // Rows floor(u * size) for u uniform in [0, 1), drawn on the device (a new Philox key per call);
  // clamped, since u * size may round up to size in float64.
  const std::uint64_t key = seed_ + 0x9E3779B97F4A7C15ull * ++draws_;
  const double rows_held = static_cast<double>(size_);
  const Tensor rows = clamp(uniform({batch_size}, 0.0, rows_held, device(), key, DType::float64), 0.0, rows_held - 1.0)
                          .astype(DType::int64);
  const Tensor held_X = X_.narrow(0, 0, size_), held_y = y_.narrow(0, 0, size_);
  return {detail::select_rows_in_range(held_X, rows), detail::select_rows_in_range(held_y, rows)};
}

}  // namespace kten::data
