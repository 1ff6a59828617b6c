// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the one way kten builds an error message (kokkos-fft's KOKKOSFFT_THROW_IF and ArborX's
// ARBORX_ASSERT are the pattern): fail<ShapeError>(op, "shapes ", a.shape(), " and ", b.shape(), ...)
// throws ShapeError("kten: <op>: shapes 2x3 and 4 ..."). The parts are formatted only when
// it throws, so a check costs a comparison. Every message says what was wrong and what to do.

#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

#include <kten/device.hpp>
#include <kten/dtype.hpp>
#include <kten/errors.hpp>
#include <kten/tensor.hpp>

namespace kten::detail {

/// \brief Writes one part of a message: shapes as [2, 3], devices as cpu(0), dtypes by name,
/// anything else as an ostream prints it.
template <class Part>
void write_part(std::ostringstream& out, const Part& part) {
  if constexpr (std::is_same_v<Part, Shape>) out << shape_str(part);
  else if constexpr (std::is_same_v<Part, Device>) out << part.str();
  else if constexpr (std::is_same_v<Part, DType>) out << dtype_name(part);
  else out << part;
}

/// \brief The message "kten: <op>: <parts...>" (just "kten: <parts...>" when op is empty). A kernel
/// label's "kten::" is dropped ("kten::add" reads "add"); other names (a layer's,
/// "load('model.kten')") stay as they are.
template <class... Parts>
std::string error_message(std::string_view op, const Parts&... parts) {
  std::ostringstream out;
  out << "kten: ";
  if (op.substr(0, 6) == "kten::") op.remove_prefix(6);
  if (!op.empty()) out << op << ": ";
  (write_part(out, parts), ...);
  return out.str();
}

/// \brief Throws E (a kten::Error) with error_message(op, parts...).
template <class E = Error, class... Parts>
[[noreturn]] void fail(std::string_view op, const Parts&... parts) {
  static_assert(std::is_base_of_v<Error, E>, "kten throws kten::Error and its subclasses only");
  throw E(error_message(op, parts...));
}

/// \brief Throws E with the message of `inner` (a kten::Error from a step of `op`) said from `op`:
/// "kten: <op>: <inner's message after its "kten: ">".
template <class E = Error>
[[noreturn]] void fail_within(std::string_view op, const Error& inner) {
  std::string_view what = inner.what();
  if (what.substr(0, 6) == "kten: ") what.remove_prefix(6);
  fail<E>(op, what);
}

}  // namespace kten::detail
