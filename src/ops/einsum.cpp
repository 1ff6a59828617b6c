// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// einsum (torch.einsum, ONNX's Einsum) as kten's own ops, so that its gradient is theirs: a
// repeated label in one operand is a diagonal (a product with an identity mask, summed), labels no
// later operand or the output reads are summed away first, and each pair of operands is one
// batched matmul over their shared labels (the GEMM's bound: the contraction is the GEMM's k).
// Operands are folded left to right; no search for the cheapest order.
#include <algorithm>
#include <string>
#include <vector>

#include <kten/ops.hpp>

#include "core/checks.hpp"
#include "core/fail.hpp"

namespace kten {
namespace {

constexpr const char* label = "kten::einsum";
constexpr int kEllipsis = 100;  // the labels of an ellipsis' axes: kEllipsis + position, right-aligned

using Labels = std::vector<int>;

struct Term {
  Tensor t;
  Labels labels;  // one per axis of t
};

bool has(const Labels& labels, int l) { return std::find(labels.begin(), labels.end(), l) != labels.end(); }

// One operand's or the output's subscripts: letters (ASCII order: A-Z, then a-z) and at most one
// "..." standing for `ellipsis_axes` axes (the widest operand's ellipsis: narrower ones align right).
Labels parse_term(const std::string& equation, const std::string& term, int rank, int ellipsis_axes) {
  Labels labels;
  bool ellipsis = false;
  for (std::size_t i = 0; i < term.size(); ++i) {
    const char ch = term[i];
    if (ch == '.') {
      if (ellipsis || term.compare(i, 3, "...") != 0)
        detail::fail<ShapeError>(label, "'", equation, "': a '.' outside one '...' in '", term, "'");
      ellipsis = true;
      i += 2;
      const int own = rank < 0 ? ellipsis_axes : rank - static_cast<int>(std::count_if(term.begin(), term.end(), [](char c) { return c != '.'; }));
      if (own < 0 || own > ellipsis_axes)
        detail::fail<ShapeError>(label, "'", equation, "': '", term, "' has more subscripts than its operand's ", rank, " axes");
      for (int k = ellipsis_axes - own; k < ellipsis_axes; ++k) labels.push_back(kEllipsis + k);
    } else if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z')) {
      labels.push_back(ch);
    } else {
      detail::fail<ShapeError>(label, "'", equation, "': '", std::string(1, ch), "' is no subscript (letters and '...')");
    }
  }
  if (rank >= 0 && static_cast<int>(labels.size()) != rank)
    detail::fail<ShapeError>(label, "'", equation, "': '", term, "' names ", labels.size(), " axes of an operand with ", rank);
  return labels;
}

// Sums away the axes whose label `keep` rejects.
template <class Keep>
Term sum_away(Term x, Keep keep) {
  std::vector<int> axes;
  Labels kept;
  for (std::size_t a = 0; a < x.labels.size(); ++a) {
    if (keep(x.labels[a])) kept.push_back(x.labels[a]);
    else axes.push_back(static_cast<int>(a));
  }
  if (axes.empty()) return x;
  return {sum(x.t, axes), kept};
}

// A label repeated in one operand: its diagonal (x times the identity over the two axes, summed
// over the second), until every label is once.
Term diagonals(Term x) {
  for (std::size_t p = 0; p < x.labels.size(); ++p)
    for (std::size_t q = p + 1; q < x.labels.size(); ++q) {
      if (x.labels[p] != x.labels[q]) continue;
      const std::int64_t n = x.t.size(static_cast<int>(p));
      if (x.t.size(static_cast<int>(q)) != n)
        detail::fail<ShapeError>(label, "a repeated subscript over axes of extents ", n, " and ", x.t.size(static_cast<int>(q)));
      Shape at(x.labels.size(), 1);
      at[p] = at[q] = n;
      const Tensor rows = arange(0, static_cast<double>(n), 1, x.t.device(), float64);
      const Tensor eye = eq(rows.reshape({n, 1}), rows.reshape({1, n})).astype(x.t.dtype()).reshape(at);
      x.t = sum(x.t * eye, std::vector<int>{static_cast<int>(q)});
      x.labels.erase(x.labels.begin() + static_cast<std::ptrdiff_t>(q));
      --q;
    }
  return x;
}

// x's axes in the order of the groups' labels, each group merged into one axis.
Tensor grouped(const Term& x, const std::vector<Labels>& groups) {
  std::vector<int> perm;
  Shape shape;
  for (const Labels& g : groups) {
    std::int64_t extent = 1;
    for (int l : g) {
      const auto a = static_cast<int>(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin());
      perm.push_back(a);
      extent *= x.t.size(a);
    }
    shape.push_back(extent);
  }
  return x.t.permute(perm).reshape(shape);
}

// a (x) b over their shared labels: the ones `needed` later stay as a batch, the others are the
// product's k.
Term contract(const Term& a, const Term& b, const Labels& needed) {
  Labels batch, k, left, right;
  for (int l : a.labels) {
    if (!has(b.labels, l)) left.push_back(l);
    else if (has(needed, l)) batch.push_back(l);
    else k.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a.labels, l)) right.push_back(l);
  const Tensor product = matmul(grouped(a, {batch, left, k}), grouped(b, {batch, k, right}));
  Term out{Tensor(), batch};
  out.labels.insert(out.labels.end(), left.begin(), left.end());
  out.labels.insert(out.labels.end(), right.begin(), right.end());
  Shape shape;
  for (int l : out.labels) {
    const Term& from = has(a.labels, l) ? a : b;
    shape.push_back(from.t.size(static_cast<int>(std::find(from.labels.begin(), from.labels.end(), l) - from.labels.begin())));
  }
  out.t = product.reshape(shape);
  return out;
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  std::string spec;  // the equation without spaces
  for (char ch : equation)
    if (ch != ' ') spec += ch;
  const std::size_t arrow = spec.find("->");
  const std::string lhs = spec.substr(0, arrow);
  std::vector<std::string> terms;
  for (std::size_t start = 0;;) {
    const std::size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != operands.size() || operands.empty())
    detail::fail<ShapeError>(label, "'", equation, "' has ", terms.size(), " operands; ", operands.size(), " were given");
  int ellipsis_axes = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    detail::check_defined(operands[i], label);
    if (terms[i].find("...") != std::string::npos)
      ellipsis_axes = std::max(ellipsis_axes, operands[i].ndim() - static_cast<int>(std::count_if(terms[i].begin(), terms[i].end(), [](char c) { return c != '.'; })));
  }
  std::vector<Term> xs;
  for (std::size_t i = 0; i < terms.size(); ++i)
    xs.push_back(diagonals({operands[i], parse_term(equation, terms[i], operands[i].ndim(), ellipsis_axes)}));
  // Each label's extent: equal wherever it appears, or 1 there (broadcast, as NumPy's einsum).
  std::vector<std::pair<int, std::int64_t>> extents;
  for (const Term& x : xs)
    for (std::size_t a = 0; a < x.labels.size(); ++a) {
      const std::int64_t n = x.t.size(static_cast<int>(a));
      auto it = std::find_if(extents.begin(), extents.end(), [&](const auto& e) { return e.first == x.labels[a]; });
      if (it == extents.end()) extents.emplace_back(x.labels[a], n);
      else if (it->second == 1) it->second = n;
      else if (n != 1 && n != it->second)
        detail::fail<ShapeError>(label, "'", equation, "': a subscript spans axes of extents ", it->second, " and ", n);
    }
  for (Term& x : xs) {
    Shape full;
    for (int l : x.labels)
      full.push_back(std::find_if(extents.begin(), extents.end(), [&](const auto& e) { return e.first == l; })->second);
    x.t = x.t.expand(full);
  }
  // The output: as written, or (NumPy's implicit form) the ellipsis then the letters used once, sorted.
  Labels out;
  if (arrow != std::string::npos) {
    out = parse_term(equation, spec.substr(arrow + 2), -1, ellipsis_axes);
    for (std::size_t i = 0; i < out.size(); ++i)
      if (!std::any_of(xs.begin(), xs.end(), [&](const Term& x) { return has(x.labels, out[i]); }) ||
          std::count(out.begin(), out.end(), out[i]) > 1)
        detail::fail<ShapeError>(label, "'", equation, "': an output subscript appears twice or in no operand");
  } else {
    for (int k = 0; k < ellipsis_axes; ++k) out.push_back(kEllipsis + k);
    Labels once;
    for (const std::string& t : terms)
      for (char ch : t)
        if (ch != '.' && std::count(lhs.begin(), lhs.end(), ch) == 1) once.push_back(ch);
    std::sort(once.begin(), once.end());
    out.insert(out.end(), once.begin(), once.end());
  }
  // Fold left to right, summing away first what no later operand and not the output reads.
  const auto needed_after = [&](std::size_t i) {
    Labels needed = out;
    for (std::size_t j = i + 1; j < xs.size(); ++j) needed.insert(needed.end(), xs[j].labels.begin(), xs[j].labels.end());
    return needed;
  };
  Term acc = sum_away(xs[0], [&](int l) { return has(needed_after(0), l); });
  for (std::size_t i = 1; i < xs.size(); ++i) {
    const Labels needed = needed_after(i);
    const Term next = sum_away(xs[i], [&](int l) { return has(needed, l) || has(acc.labels, l); });
    acc = sum_away(acc, [&](int l) { return has(needed, l) || has(next.labels, l); });
    acc = contract(acc, next, needed);
  }
  std::vector<int> perm;
  for (int l : out) perm.push_back(static_cast<int>(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin()));
  return acc.t.permute(perm);
}

}  // namespace kten
