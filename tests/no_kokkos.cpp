// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Compiled with kten's include directories only: <kten/kten.hpp> must not need Kokkos.
#if __has_include(<Kokkos_Core.hpp>)
#error "this translation unit must not see Kokkos: the check would prove nothing"
#endif
#include <kten/kten.hpp>

kten::Tensor kten_without_kokkos() { return kten::ones({2, 2}) * 2.0; }
