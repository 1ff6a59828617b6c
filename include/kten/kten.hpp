// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file kten.hpp
/// \brief Umbrella header: devices, tensors, operations, layers and training. Needs no Kokkos
/// header (Kokkos interop is <kten/kokkos.hpp>), so it compiles with any C++17 compiler.

#include <kten/checkpoint.hpp>
#include <kten/config.hpp>
#include <kten/data.hpp>
#include <kten/device.hpp>
#include <kten/dtype.hpp>
#include <kten/errors.hpp>
#include <kten/info.hpp>
#include <kten/io.hpp>
#include <kten/nn/layers.hpp>
#include <kten/nn/loss.hpp>
#include <kten/nn/module.hpp>
#include <kten/nn/rnn.hpp>
#include <kten/nn/attention.hpp>
#include <kten/nn/utils.hpp>
#include <kten/onnx.hpp>
#include <kten/ops.hpp>
#include <kten/optim.hpp>
#include <kten/random.hpp>
#include <kten/runtime.hpp>
#include <kten/tensor.hpp>
#include <kten/trainer.hpp>
