// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Transfers (copyto, to, as_in_context), the never-mix rule, and the visible-cost counters.
#include <algorithm>
#include <iostream>
#include <sstream>

#include "support.hpp"

using namespace kten;

TEST_CASE("copyto always allocates, to and as_in_context return the tensor when already there", "[transfer]") {
  const Device d = test::device();
  auto X = arange(6, d).reshape({2, 3});
  auto Z = X.copyto(d);
  CHECK_FALSE(Z.shares_storage_with(X));
  CHECK(Z.device() == d);
  CHECK(Z.to_vector<float>() == X.to_vector<float>());
  auto W = X.to(d);
  CHECK(W.shares_storage_with(X));
  CHECK(X.as_in_context(d).shares_storage_with(X));
  CHECK(X.shares_storage_with(X.reshape({6})));
}

TEST_CASE("transfers both ways keep values and land on the named device", "[transfer][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device d = test::device(), other = test::other_device();
  for (DType t : {float32, float64}) {
    auto x = rand({3, 5}, d, 11, t);
    auto y = x.to(other);
    CHECK(y.device() == other);
    CHECK_FALSE(y.shares_storage_with(x));
    CHECK(y.dtype() == t);
    CHECK(y.shape() == x.shape());
    auto back = y.copyto(d);
    CHECK(back.device() == d);
    if (t == float32) CHECK(back.to_vector<float>() == x.to_vector<float>());
    else CHECK(back.to_vector<double>() == x.to_vector<double>());
  }
}

TEST_CASE("operations on tensors on different devices throw DeviceMismatch with the fix", "[transfer][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device d = test::device(), other = test::other_device();
  auto x = ones({3}, d);
  auto y = ones({3}, other);
  try {
    auto bad = x + y;
    FAIL("expected DeviceMismatch");
  } catch (const DeviceMismatch& e) {
    const std::string msg = e.what();
    CHECK(msg.find("add") != std::string::npos);
    CHECK(msg.find(d.str()) != std::string::npos);
    CHECK(msg.find(other.str()) != std::string::npos);
    CHECK(msg.find(".to(") != std::string::npos);
  }
  CHECK_THROWS_AS(x * y, DeviceMismatch);
  CHECK_THROWS_AS(matmul(ones({3, 3}, d), y), DeviceMismatch);
  CHECK_THROWS_AS(x - y, Error);
  CHECK_NOTHROW(x + y.to(d));
}

TEST_CASE("emulated GPUs are distinct devices", "[transfer][multidevice]") {
  KTEN_REQUIRE_GPUS(2);
  auto a = ones({2}, gpu(0));
  auto b = ones({2}, gpu(1));
  CHECK_THROWS_AS(a + b, DeviceMismatch);
  auto c = a.to(gpu(1));
  CHECK(c.device() == gpu(1));
  CHECK((c + b).to_vector<float>() == std::vector<float>{2, 2});
}

TEST_CASE("stats count transfers, bytes and host synchronisations", "[transfer][stats][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device g = test::device().is_gpu() ? test::device() : test::other_device();
  reset_stats();
  auto h = ones({256}, cpu());
  auto x = h.to(g);  // 1 KiB host -> device
  auto s = stats();
  CHECK(s.host_to_device == 1);
  CHECK(s.bytes_host_to_device == 1024);
  CHECK(s.host_syncs == 0);
  auto y = (x * 2.0 + 1.0).exp();  // computing on the device moves nothing
  auto total = sum(y);
  CHECK(stats().transfers() == 1);
  CHECK(stats().host_syncs == 0);
  total.item<float>();  // one read: a sync and a 4-byte transfer back
  s = stats();
  CHECK(s.host_syncs == 1);
  CHECK(s.device_to_host == 1);
  CHECK(s.bytes_device_to_host == 4);
  x.to(cpu());
  CHECK(stats().device_to_host == 2);
  CHECK(stats().bytes_transferred() == 1024 + 4 + 1024);
  x.copyto(g);  // a copy on one device is not a transfer
  CHECK(stats().transfers() == 3);
  reset_stats();
  CHECK(stats().transfers() == 0);
}

TEST_CASE("sync debug mode reports implicit synchronisations on a GPU", "[transfer][stats][multidevice]") {
  KTEN_REQUIRE_GPUS(1);
  const Device g = test::device().is_gpu() ? test::device() : test::other_device();
  auto x = ones({4}, g);
  const SyncDebug previous = set_sync_debug_mode(SyncDebug::Error);
  CHECK(sync_debug_mode() == SyncDebug::Error);
  try {
    sum(x).item<float>();
    FAIL("expected SyncError");
  } catch (const SyncError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("item()") != std::string::npos);
    CHECK(msg.find(g.str()) != std::string::npos);
  }
  CHECK_THROWS_AS(x.to_vector<float>(), SyncError);
  std::ostringstream os;
  CHECK_THROWS_AS(os << x, SyncError);
  CHECK_NOTHROW(ones({2}, cpu()).to_vector<float>());  // host tensors do not stall a GPU
  CHECK_NOTHROW(synchronize(g));                        // an explicit fence is not implicit

  set_sync_debug_mode(SyncDebug::Warn);
  std::ostringstream captured;
  std::streambuf* const stderr_buffer = std::cerr.rdbuf(captured.rdbuf());
  const float value = sum(x).item<float>();  // warns on stderr, then reads
  ones({2}, cpu()).to_vector<float>();       // a host tensor: no warning
  std::cerr.rdbuf(stderr_buffer);
  set_sync_debug_mode(previous);
  CHECK(value == 4.f);
  CHECK(captured.str() == "kten: warning: implicit host synchronisation: item() waits for " + g.str() + "\n");
}

TEST_CASE("pinned host tensors keep their values and transfer like any host tensor", "[transfer]") {
  auto h = arange(1000, cpu());
  auto p = h.pin_memory();
  CHECK(p.device() == cpu());
  CHECK(p.to_vector<float>() == h.to_vector<float>());
  CHECK(p.pin_memory().shares_storage_with(p));
  if (num_gpus() > 0) {  // real GPUs, or emulated ones (which copy from pinned memory like real ones)
    CHECK(p.is_pinned());
    CHECK_FALSE(p.shares_storage_with(h));
  } else {
    CHECK(p.shares_storage_with(h));  // nothing to pin for without a GPU
  }
  const Device d = test::device();
  CHECK(p.to(d).to_vector<float>() == h.to_vector<float>());
  if (d.is_gpu()) CHECK_THROWS_AS(ones({2}, d).pin_memory(), Error);
}
