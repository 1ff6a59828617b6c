#pragma once
/// \file kten.hpp
/// \brief Umbrella header: everything kten offers.

#include <kten/device.hpp>
#include <kten/dtype.hpp>
#include <kten/errors.hpp>
#include <kten/info.hpp>
#include <kten/ops.hpp>
#include <kten/random.hpp>
#include <kten/runtime.hpp>
#include <kten/tensor.hpp>
