// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
/// \file checkpoint.hpp
/// \brief Checkpoints: a model's parameters, its optimiser's state (buffers, step counts,
/// learning rate, schedule position) and the training step in one atomic, checksummed file.

#include <cstdint>
#include <string>

#include <kten/device.hpp>
#include <kten/nn/module.hpp>
#include <kten/optim.hpp>

namespace kten {

/// \brief Writes `model`'s parameters (state_dict(): PyTorch's names and layouts), `optimizer`'s
/// state() and `step` to `path`: a safetensors file (tensors "model.<name>" and
/// "optimizer.<parameter>.<buffer>", the rest as metadata) with a checksum, written atomically as
/// Module::save() (a crash leaves the old file or the new one). One counted device-to-host copy
/// per tensor. Throws kten::Error for a negative step, a lazy layer that has no shape yet, an
/// optimiser scalar that this C++ library cannot read back as the same number, or a path that
/// cannot be written. Dropout's mask counter is not saved (PyTorch's RNG state is not in
/// its state dicts either): a model with Dropout continues with other masks.
void save_checkpoint(const std::string& path, nn::Module& model, const optim::Optimizer& optimizer,
                     std::int64_t step);

/// \brief Restores a save_checkpoint() file into `model` (which moves to `device`, as Module::load)
/// and `optimizer` (an optimiser of the kind that wrote it), and returns the step it was saved at.
/// Everything is checked before anything changes: a missing, truncated or corrupted file (the
/// checksum), one of another format, or one whose names, shapes, dtypes or optimiser kind do not
/// fit `model` and `optimizer` throws kten::FormatError and leaves both exactly as they were.
/// The model's tensors must have its parameters' dtypes (no conversion). Continuing from here
/// computes the same bits as the run that wrote the file. Once everything is checked, only an
/// allocation can still fail (OutOfMemory), and that may leave the model moved or loaded without
/// the optimiser's state.
std::int64_t load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& optimizer,
                             const Device& device);

}  // namespace kten
