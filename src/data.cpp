// Synthetic regression data and seeded minibatches, made on the host.
#include <algorithm>
#include <numeric>
#include <random>

#include <kten/data.hpp>
#include <kten/kokkos.hpp>
#include <kten/ops.hpp>
#include <kten/random.hpp>

#include "checked.hpp"

namespace kten::data {

SyntheticRegression::SyntheticRegression(std::vector<float> w, float b, float noise, std::int64_t num_train,
                                         std::int64_t num_val, std::uint64_t seed)
    : w_(std::move(w)), b_(b), num_train_(num_train), num_val_(num_val), seed_(seed) {
  if (w_.empty()) throw ShapeError("kten: SyntheticRegression: w must have at least one weight");
  if (num_train < 1 || num_val < 0)
    throw ShapeError("kten: SyntheticRegression: needs num_train >= 1 and num_val >= 0");
  const auto total = detail::checked_add(num_train, num_val);
  if (!total)
    throw ShapeError("kten: SyntheticRegression: num_train + num_val (" + std::to_string(num_train) + " + " +
                     std::to_string(num_val) + ") does not fit in 64 bits");
  const std::int64_t n = *total, features = static_cast<std::int64_t>(w_.size());
  X_ = randn({n, features}, cpu(), seed);
  const Tensor w_column = tensor(w_, {features, 1});
  y_ = matmul(X_, w_column) + static_cast<double>(b) + randn({n, 1}, cpu(), seed + 1) * static_cast<double>(noise);
}

std::vector<Batch> SyntheticRegression::batches(bool train, std::int64_t batch_size, std::uint64_t epoch) const {
  if (batch_size < 1) throw ShapeError("kten: batches(): batch_size must be >= 1");
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
    std::vector<float> xb(rows * features), yb(rows);
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t i = order[start + r];
      for (std::int64_t f = 0; f < features; ++f) xb[r * features + f] = X(i, f);
      yb[r] = y(i, 0);
    }
    out.push_back({tensor(xb, {rows, features}), tensor(yb, {rows, 1})});
  }
  return out;
}

}  // namespace kten::data
