// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The harness must be able to fail: rows with planted faults, each of which has to be reported by
// the checks that can see it (and only by those), next to an honest control row that must pass.
// Each row's honest side is written for both references: TORCH for PyTorch, .reference() for kten.
#include <limits>
#include <ostream>
#include <set>

#include "harness.hpp"

namespace kten::harness {
namespace {

struct Planted {
  Row row;
  std::set<std::string> must_fail;  // checks ("forward", "grad[0]", "fd[0]") that must report it
  std::set<std::string> must_pass;  // checks that must not
  std::set<std::string> passes;     // the passes looked at (all when empty)
  bool clean_elsewhere = false;     // no failure allowed in the other passes
};

std::vector<Planted> planted() {
  return {
      {Row("control: exp", broadcast(1), KTEN(kten::exp(x[0])), TORCH(at::exp(x[0]))),
       {},
       {"forward", "grad[0]", "fd[0]"},
       {},
       false},
      // A wrong value: 0.1% too large (and so is its gradient, consistently: finite differences agree).
      {Row("planted wrong value: exp(x) * 1.001", broadcast(1), KTEN(kten::exp(x[0]) * 1.001), TORCH(at::exp(x[0])))
           .reference(KTEN(kten::exp(x[0]))),
       {"forward"},
       {"fd[0]"},
       {},
       false},
      // The right value with a wrong gradient: exp(x) + (x/2 - x/2), differentiated as 1/2.
      {Row("planted wrong gradient: exp(x) with gradient 1/2", broadcast(1),
           KTEN(kten::exp(x[0]).detach() + (x[0] * 0.5 - (x[0] * 0.5).detach())), TORCH(at::exp(x[0])))
           .reference(KTEN(kten::exp(x[0]))),
       {"grad[0]", "fd[0]"},
       {"forward"},
       {"random", "strided", "fd"},  // at inf, x/2 - x/2 is NaN: the NaN/inf pass sees a wrong value too
       false},
      // A NaN where the other side has a number: only the NaN/inf pass can see it.
      {Row("planted NaN mismatch: NaN replaced by 0", broadcast(1), KTEN(kten::exp(x[0])),
           TORCH(at::nan_to_num(at::exp(x[0]), 0.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity())))
           .reference(KTEN(kten::where(kten::ne(x[0], x[0]), 0.0, kten::exp(x[0]))))
           .no_special_grad("the planted fault is in the values"),
       {"forward"},
       {},
       {"special"},
       true},
  };
}

}  // namespace

int run_self_test(const Config& config, std::ostream& out) {
  int wrong = 0;
  for (const Planted& p : planted()) {
    out << "--- " << p.row.name << "\n";
    const Summary s = run_rows({p.row}, config, out);
    std::set<std::string> reported;
    for (const Failure& f : s.failures) {
      const bool looked_at = p.passes.empty() || p.passes.count(f.pass) > 0;
      if (looked_at) reported.insert(f.check);
      if (!looked_at && p.clean_elsewhere) {
        out << "self-test: '" << p.row.name << "' was reported in pass " << f.pass << ", where it cannot be seen\n";
        ++wrong;
      }
    }
    for (const std::string& check : p.must_fail)
      if (!reported.count(check)) {
        out << "self-test: '" << p.row.name << "' was NOT reported by " << check << "\n";
        ++wrong;
      } else {
        out << "self-test: '" << p.row.name << "' reported by " << check << ", as it must be\n";
      }
    for (const std::string& check : p.must_pass)
      if (reported.count(check)) {
        out << "self-test: '" << p.row.name << "' was reported by " << check << ", which must pass\n";
        ++wrong;
      }
    if (p.must_fail.empty() && !s.failures.empty()) {
      out << "self-test: the control row failed\n";
      ++wrong;
    }
  }
  out << (wrong == 0 ? "self-test: every planted fault was reported, the control passed\n"
                     : "self-test: FAILED (" + std::to_string(wrong) + " expectations not met)\n");
  return wrong == 0 ? 0 : 1;
}

}  // namespace kten::harness
