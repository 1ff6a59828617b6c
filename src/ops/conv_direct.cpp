// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cpu()'s direct convolution (conv.cpp chooses it): the forward at stride 1 along w and grad_input
// at stride 1, with enough channels and long enough rows, as a sum over taps of GEMM micro-tiles
// that read E in place. Compute-bound like the GEMM (ConvDirectHostKernel says why).
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "conv_paths.hpp"
#include "core/checked.hpp"
#include "dispatch/dispatch.hpp"
#include "fast_div.hpp"

namespace kten::detail {
namespace {

/// \brief cpu(), the forward at stride 1 along w and grad_input at stride 1: a direct convolution
/// on E, read in place. One output row of C (m channels by one pixel row) is the sum over taps t
/// of A_t (m x c: the weight of tap t) times c rows of E that lie a channel apart, from the tap's
/// offset: the GEMM's micro-kernel with B's rows in place (ldb = E's channel stride), its
/// accumulators held in registers across all the taps (micro_tile's parts). The im2col
/// path re-packs each input element kvol times and feeds it to m fmas, which with few channels
/// (m = 16: 16 fmas per packed element) makes the packing the bound; here each E element is
/// loaded from L1 by the micro-kernel itself, and the kernel is compute-bound like the GEMM. The
/// zeros of the padding are multiplied as the im2col path multiplies them, so a non-finite weight
/// reaches the padded border as NaN there too. One thread per output row; the taps in the weight's
/// order, then the channels (the im2col path sums channels first: results differ by rounding).
template <class T, class Member>
struct ConvDirectHostKernel {
  static constexpr int MR = HostGemmBlocking<T>::rows, NR = HostGemmBlocking<T>::cols, lanes = HostGemmBlocking<T>::lanes;
  const T* a;  // per (group, tap): A_t, m x c, rows contiguous
  const T* e;
  T* c;
  const T* bias;  // per channel of C, or null
  std::int64_t m, ch;
  ConvGeometry g;
  bool flip;  // grad_input: C's pixels are the input's, and tap t reads E at (k - 1 - t) dil, stride 1
  ConvExtension x;

  void operator()(const Member& team) const {
    const std::int64_t* cext = flip ? g.in : g.out;
    const std::int64_t* k = g.k;
    const std::int64_t rows = cext[0] * cext[1], pix = rows * cext[2], width = cext[2];
    const std::int64_t slab = team.league_rank() / rows, row = team.league_rank() % rows;
    const std::int64_t grp = slab % g.groups, pd = row / cext[1], ph = row % cext[1];
    const std::int64_t sd = flip ? 1 : g.stride[0], sh = flip ? 1 : g.stride[1];
    const std::int64_t cs = x.ext[0] * x.ext[1] * x.ext[2], kvol = g.kvol();
    const T* eb = e + slab * ch * cs + (pd * sd * x.ext[1] + ph * sh) * x.ext[2];
    const T* ag = a + grp * kvol * m * ch;
    T* cr = c + slab * m * pix + row * width;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < width; ++j) cr[i * pix + j] = bias ? bias[grp * m + i] : T(0);
    // Column tiles as even as they go in whole vectors, at most NR wide (64 floats: 32 + 32, not
    // 48 + 16); strips of channels as even as they go, at most MR.
    const std::int64_t vectors = (width + lanes - 1) / lanes, per_tile = NR / lanes;
    const std::int64_t tiles = (vectors + per_tile - 1) / per_tile, tile_w = (vectors + tiles - 1) / tiles * lanes;
    const std::int64_t strips = (m + MR - 1) / MR, base = m / strips, taller = m % strips;
    // Where each tap reads in E, from the row's start; the taps in the weight's order.
    std::int64_t* taps = static_cast<std::int64_t*>(team.team_scratch(1).get_shmem(sizeof(std::int64_t) * kvol));
    for (std::int64_t kd = 0, t = 0; kd < k[0]; ++kd)
      for (std::int64_t kh = 0; kh < k[1]; ++kh)
        for (std::int64_t kw = 0; kw < k[2]; ++kw, ++t)
          taps[t] = (((flip ? k[0] - 1 - kd : kd) * g.dil[0]) * x.ext[1] + (flip ? k[1] - 1 - kh : kh) * g.dil[1]) * x.ext[2] +
                    (flip ? k[2] - 1 - kw : kw) * g.dil[2];
    for (std::int64_t j0 = 0; j0 < width; j0 += tile_w) {
      const int w = static_cast<int>(std::min(tile_w, width - j0));
      for (std::int64_t s = 0, i = 0; s < strips; i += base + (s < taller), ++s)
        conv_tile<T>(ag + i * ch, ch, eb + j0, cs, static_cast<int>(ch), cr + i * pix + j0, pix, static_cast<int>(base + (s < taller)),
                     w, static_cast<int>(kvol), m * ch, taps);
    }
  }
};

/// \brief Whether cpu()'s direct convolution takes a product: stride 1 along w (grad_input: every
/// axis), a row of C's pixels that fills at least three quarters of the `lanes`-wide vectors it
/// spans, and at least 8 channels summed per tap (the micro-kernel's run of k steps before it
/// moves to the next tap's rows).
bool direct_applies(ConvProduct product, const ConvGeometry& g, std::int64_t lanes) {
  const bool forward = product == ConvProduct::forward;
  const std::int64_t width = forward ? g.out[2] : g.in[2], summed = forward ? g.cin_g : g.cout_g;
  const std::int64_t vectors = (width + lanes - 1) / lanes;
  const bool strides = forward ? g.stride[2] == 1 : g.stride[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1;
  return product != ConvProduct::grad_weight && strides && width >= lanes && 4 * width >= 3 * vectors * lanes && summed >= 8;
}


}  // namespace

bool direct_on(ConvProduct product, const ConvGeometry& g, const Tensor& src) {
  return src.device().is_cpu() &&
         direct_applies(product, g, HostIsa::vector_bytes / static_cast<std::int64_t>(dtype_size(src.dtype())));
}

/// \brief cpu()'s direct convolution (ConvDirectHostKernel): the forward (`a` the weight as
/// (groups, kvol, C_out/g, C_in/g)) or grad_input (`a` as (groups, kvol, C_in/g, C_out/g)) on E, a
/// zero-extended copy of `src` (any strided view): its size plus the padding.
Tensor conv_direct(const char* op, ConvProduct product, const ConvGeometry& g, int dims, const Tensor& a, const Tensor& src,
                   const Tensor* bias, const Shape& c_shape) {
  const bool forward = product == ConvProduct::forward;
  const std::int64_t* pixels = forward ? g.out : g.in;  // C's
  // grad_input at stride 1 (direct_applies): step 1. An edge tile reads fewer than a vector's
  // lanes past a row: the tail.
  const ConvExtension x = extension_of(product, g, HostIsa::vector_bytes / 4);
  const std::int64_t m = forward ? g.cout_g : g.cin_g, ch = forward ? g.cin_g : g.cout_g;
  Tensor c = empty(c_shape, src.device(), src.dtype());
  if (c.numel() == 0) return c;  // no batch, or no channels of C (m = 0: no strips to cut)
  const Tensor e = conv_extension(op, src, dims, g.batch, g.groups * ch, x);
  const Tensor bias_c = bias ? bias->contiguous() : c;
  launch_views(op, [&](const auto& backend, auto* pa, auto* pe, auto* pc, auto* pbias) {
    using T = std::remove_pointer_t<decltype(pc)>;
    using Backend = std::decay_t<decltype(backend)>;
    if constexpr (!Backend::is_host) {
      fail<Error>(op, "the direct convolution runs on cpu() only");
    } else {
      const std::int64_t league = g.batch * g.groups * pixels[0] * pixels[1];
      if (league > INT32_MAX) fail<ShapeError>(op, "the convolution has more rows than one launch can hold");
      const double work = static_cast<double>(c.numel()) * ch * g.kvol() / host_gemm_macs_per_element;
      const std::string label = std::string(op) + " [direct]";  // profilers (and a test) see which path ran
      with_grain(backend, work < 1e18 ? static_cast<std::int64_t>(work) : INT64_MAX, [&](const auto& on) {
        using Kernel = ConvDirectHostKernel<T, TeamMember<std::decay_t<decltype(on)>>>;
        run(label.c_str(), on, fixed_team_policy(on, static_cast<int>(league), 1, TeamScratch{1, sizeof(std::int64_t) * g.kvol()}),
            Kernel{pa, pe, pc, bias ? pbias : nullptr, m, ch, g, !forward, x});
      });
    }
  }, a, e, c, bias_c);
  return c;
}

}  // namespace kten::detail
