// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file errors.hpp
/// \brief The exceptions kten throws. Every one derives from kten::Error (a std::runtime_error).

#include <stdexcept>
#include <string>

namespace kten {

/// \brief Base of every kten exception; the message says what was wrong and what was expected.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// \brief A GPU that does not exist (or that this build cannot use) was asked to hold data or compute.
class DeviceUnavailable : public Error {
 public:
  using Error::Error;
};

/// \brief An operation was given tensors (or a module and an input) on different devices.
class DeviceMismatch : public Error {
 public:
  using Error::Error;
};

/// \brief Shapes that do not fit the operation (broadcasting, matmul, reshape, axis, ...).
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// \brief A dtype that does not fit the operation (mixed dtypes, arithmetic on int64 or boolean,
/// wrong item<T>, ...).
class DTypeError : public Error {
 public:
  using Error::Error;
};

/// \brief An index out of range in the values of an index tensor (index_select, gather).
class IndexError : public Error {
 public:
  using Error::Error;
};

/// \brief A device allocation failed; the message names the device and the bytes requested.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

/// \brief A parameter file is missing, truncated, corrupted or does not match the model.
class FormatError : public Error {
 public:
  using Error::Error;
};

/// \brief An implicit host synchronisation happened while set_sync_debug_mode(SyncDebug::Error) was on.
class SyncError : public Error {
 public:
  using Error::Error;
};

/// \brief A call was made from a thread that this build cannot serve (docs/semantics.md, "Thread model").
class ThreadError : public Error {
 public:
  using Error::Error;
};

}  // namespace kten
