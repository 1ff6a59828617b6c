// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Not compiled: what the lints (cmake/KtenLint.cmake) must reject, as the tests
// lint.<rule>.catches-holes run them over this folder. For the dispatch lint, each marked line is
// a way kten's kernels once bypassed the checks and profiling of launch(): 8 reports.

// A team policy built through dispatch's alias, with the thread check called by hand (the tiled
// GEMM did this; the lint matched only the Kokkos policy names).
template <class Tile, class Backend, class T>
void launch_team_gemm(const Backend& be, const GemmShape& s, int tiles) {
  check_launch_thread<Backend, TeamPolicy<Backend>>(false);                           // 1
  using Policy = TeamPolicy<Backend>;                                                 // 2
  Policy policy(be.space, tiles, Tile::threads);
  run("kten::gemm", be, policy, TeamGemmKernel<T, Tile, typename Policy::member_type>{s});
}

// An element type picked and a typed pointer taken by hand, around launch() (dist's mean did this).
void divide(const Tensor& t, int by) {
  with_backend(t.device(), [&](auto backend) {
    with_dtype(t.dtype(), [&](auto zero) {                                            // 3
      using T = decltype(zero);
      for_each_index("kten::dist::mean", backend, t.numel(), DivideBy<T>{data_ptr<T>(t), T(by)});  // 4
    });
  });
}

// A copy picking its element type among every dtype by hand instead of launch_views<Accepts::any>.
void copy_any(const Tensor& t) {
  with_any_dtype(t.dtype(), [&](auto zero) { run_copy<decltype(zero)>(t); });              // 8
}

// The forms the lint always caught.
void direct(const Backend& be, std::int64_t n, const Tensor& t) {
  Kokkos::parallel_for("kten::direct", n, Kernel{});                                 // 5
  auto policy = Kokkos::RangePolicy<Kokkos::OpenMP>(0, n);                            // 6
  float* p = static_cast<float*>(storage->data());                       // 7
}

// Error messages built by hand instead of through detail::fail (the errors lint: 2 reports).
void hand_built(const Tensor& t) {
  if (t.ndim() != 2) throw ShapeError("kten: transpose: expects a 2-D tensor, got " + shape_str(t.shape()));
  if (!t.defined()) throw Error(std::string("kten: ") + "undefined");
}
