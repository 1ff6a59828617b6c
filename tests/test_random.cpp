// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Counter-based random numbers: the Philox reference, seeds, ranges, moments, device independence.
#include <algorithm>
#include <cmath>

#include <catch2/catch_template_test_macros.hpp>

#include "support.hpp"

using namespace kten;

TEST_CASE("philox4x32 matches the Random123 known-answer vectors", "[random]") {
  std::uint32_t out[4];
  const std::uint32_t zero_ctr[4] = {0, 0, 0, 0}, zero_key[2] = {0, 0};
  philox4x32(zero_ctr, zero_key, out);
  CHECK(out[0] == 0x6627e8d5u);
  CHECK(out[1] == 0xe169c58du);
  CHECK(out[2] == 0xbc57ac4cu);
  CHECK(out[3] == 0x9b00dbd8u);
  const std::uint32_t pi_ctr[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
  const std::uint32_t pi_key[2] = {0xa4093822u, 0x299f31d0u};
  philox4x32(pi_ctr, pi_key, out);
  CHECK(out[0] == 0xd16cfe09u);
  CHECK(out[1] == 0x94fdccebu);
  CHECK(out[2] == 0x5001e420u);
  CHECK(out[3] == 0x24126ea1u);
}

TEMPLATE_TEST_CASE("rand is uniform from 0 (included) to 1 (excluded), reproducible from the seed", "[random]", float, double) {
  const Device d = test::device();
  const DType t = dtype_of<TestType>();
  const std::int64_t n = 100000;
  auto a = rand({n}, d, 42, t);
  CHECK(a.device() == d);
  const auto h = a.template to_vector<TestType>();
  CHECK(rand({n}, d, 42, t).template to_vector<TestType>() == h);
  CHECK(rand({n}, d, 43, t).template to_vector<TestType>() != h);
  CHECK(*std::min_element(h.begin(), h.end()) >= 0);
  CHECK(*std::max_element(h.begin(), h.end()) < 1);
  double mean = 0, var = 0;
  for (TestType v : h) mean += v;
  mean /= n;
  for (TestType v : h) var += (v - mean) * (v - mean);
  var /= n;
  CHECK(std::fabs(mean - 0.5) < 0.01);
  CHECK(std::fabs(var - 1.0 / 12) < 0.005);
  // Element i depends on (seed, i) only: a prefix of a longer tensor is the shorter tensor.
  auto prefix = rand({10}, d, 42, t).template to_vector<TestType>();
  CHECK(std::equal(prefix.begin(), prefix.end(), h.begin()));
  // And it is exactly the Philox stream: element 3 of seed 42 from the public generator.
  std::uint32_t w[4];
  const std::uint32_t ctr[4] = {3, 0, 0, 0}, key[2] = {42, 0};
  philox4x32(ctr, key, w);
  if constexpr (sizeof(TestType) == 4) CHECK(h[3] == static_cast<float>(w[0] >> 8) * 0x1.0p-24f);
}

TEMPLATE_TEST_CASE("randn, normal and uniform have the requested moments", "[random]", float, double) {
  const Device d = test::device();
  const DType t = dtype_of<TestType>();
  const std::int64_t n = 200000;
  auto moments = [&](const Tensor& x) {
    const auto h = test::host_doubles<TestType>(x);
    double m = 0, v = 0;
    for (double e : h) m += e;
    m /= n;
    for (double e : h) v += (e - m) * (e - m);
    return std::pair<double, double>{m, std::sqrt(v / n)};
  };
  auto [m0, s0] = moments(randn({n}, d, 5, t));
  CHECK(std::fabs(m0) < 0.01);
  CHECK(std::fabs(s0 - 1) < 0.01);
  auto [m1, s1] = moments(normal({n}, 3.0, 0.5, d, 6, t));
  CHECK(std::fabs(m1 - 3) < 0.01);
  CHECK(std::fabs(s1 - 0.5) < 0.01);
  auto u = uniform({n}, -2.0, 4.0, d, 7, t);
  auto [m2, s2] = moments(u);
  CHECK(std::fabs(m2 - 1) < 0.05);
  CHECK(-max(-u).template item<TestType>() >= -2.0);
  CHECK(randn({n}, d, 5, t).template to_vector<TestType>() == randn({n}, d, 5, t).template to_vector<TestType>());
}

TEST_CASE("one seed gives bit-identical numbers on every device", "[random][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device d = test::device(), other = test::other_device();
  CHECK(rand({4097}, d, 2024).to_vector<float>() == rand({4097}, other, 2024).to_vector<float>());
  CHECK(rand({4097}, d, 2024, float64).to_vector<double>() ==
        rand({4097}, other, 2024, float64).to_vector<double>());
  CHECK(randn({4097}, d, 2024).to_vector<float>() == randn({4097}, other, 2024).to_vector<float>());
  auto a = randn({4097}, d, 2024, float64).to_vector<double>();
  auto b = randn({4097}, other, 2024, float64).to_vector<double>();
  test::require_allclose(a, std::vector<double>(b.begin(), b.end()), 1e-15, 1e-15);
}
