// Synthetic regression data and seeded minibatches, made on the host; shards of them for ranks.
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

#include "dispatch.hpp"
#include "storage.hpp"
#include "checked.hpp"
#include "fail.hpp"

namespace kten::data {

namespace {

// One row (leading index) of a batch.
struct Row {
  const Batch* batch;
  std::int64_t index;
};

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
  const std::int64_t first = train ? 0 : num_train_, count = train ? num_train_ : num_val_;
  std::vector<std::int64_t> order(count);
  std::iota(order.begin(), order.end(), first);
  if (train) std::shuffle(order.begin(), order.end(), std::mt19937_64(seed_ * 1000003 + epoch));
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

}  // namespace kten::data
