// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Checkpoints: a safetensors file (so Python can open one: safetensors.safe_open) holding
//
//   tensors   "model.<name>"                  the model's state_dict()
//             "optimizer.<parameter>.<buffer>" the optimiser's OptimizerState::tensors
//   metadata  "format": "kten checkpoint", "version": "1", "step": the training step,
//             "optimizer": its kind, "optimizer.<scalar>": each OptimizerState scalar (the
//             shortest decimal that reads back as the same double), "checksum": checkpoint_checksum()
//
// Loading checks everything (the file, then the optimiser state against a stand-in of the model as
// the file will leave it, then the model) before it changes anything.
#include <kten/checkpoint.hpp>
#include <kten/io.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "core/fail.hpp"
#include "io/checkpoint.hpp"
#include "io/files.hpp"
#include "io/safetensors.hpp"
#include "core/storage.hpp"

namespace kten {
namespace {

constexpr const char* kFormat = "kten checkpoint";
constexpr const char* kVersion = "1";
constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimizerPrefix = "optimizer.";

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

std::string shortest_decimal(double v) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, v);
  return std::string(text, result.ptr);
}

// A number from the metadata, all of its text: FormatError otherwise.
template <class T>
T parse_number(const std::string& op, const std::string& key, const std::string& text) {
  T value{};
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (result.ec != std::errc() || result.ptr != text.data() + text.size())
    detail::fail<FormatError>(op, "the metadata entry '", key, "' is \"", text, "\", not a number (the file is corrupted)");
  return value;
}

// The model's parameters as a checkpoint will leave them, for checking the optimiser state before
// the model changes: the model's parameter names and dtypes with the file's shapes (stride-0 views
// of one zero: no memory). Where the file has no tensor that fits a parameter, the parameter's own
// value stands in: load_state_dict() refuses that file, naming the parameter.
struct ParametersAfterLoad {
  std::vector<nn::Parameter> slots;
  std::vector<nn::NamedParameter> named;  // into slots

  ParametersAfterLoad(nn::Module& model, const nn::StateDict& file) {
    std::map<std::string, const Tensor*> in_file;
    for (const auto& [name, t] : file) in_file[name] = &t;
    const auto own = model.named_parameters();
    slots.reserve(own.size());
    for (const auto& [name, p] : own) {
      const auto found = in_file.find(name);
      // A checkpoint continues bit for bit: no conversion (load_state_dict would convert).
      if (found != in_file.end() && found->second->dtype() != p->dtype)
        detail::fail<FormatError>("", "the model's '", name, "' is ", found->second->dtype(), " in the file but ", p->dtype,
                                  " in the model");
      nn::Parameter slot;
      slot.dtype = p->dtype;
      const bool fits = found != in_file.end() && p->fits(found->second->shape());
      slot.value = fits ? zeros({}, cpu(), p->dtype).expand(found->second->shape()) : p->value;
      slots.push_back(std::move(slot));
    }
    for (std::size_t i = 0; i < own.size(); ++i) named.push_back({own[i].name, &slots[i]});
  }
};

}  // namespace

namespace detail {

std::string checkpoint_checksum(const nn::StateDict& tensors, const std::map<std::string, std::string>& metadata) {
  Fnv1a h;
  const char nul = '\0';
  for (const auto& [key, value] : metadata) {
    if (key == kCheckpointChecksumKey) continue;
    h.add(key.data(), key.size());
    h.add(&nul, 1);
    h.add(value.data(), value.size());
    h.add(&nul, 1);
  }
  std::vector<char> staging;  // one tensor's elements, little-endian (a copy on a big-endian host only)
  for (const auto& [name, t] : tensors) {
    h.add(name.data(), name.size());
    h.add(&nul, 1);
    const std::string dtype = dtype_name(t.dtype());
    h.add(dtype.c_str(), dtype.size() + 1);
    const unsigned char rank = static_cast<unsigned char>(t.ndim());
    h.add(&rank, 1);
    for (const std::int64_t extent : t.shape()) {
      unsigned char e[8];
      for (int i = 0; i < 8; ++i) e[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(extent) >> (8 * i));
      h.add(e, 8);
    }
    const Tensor host = t.to(cpu()).contiguous();
    const char* bytes = data_ptr<const char>(host);
    if (host_is_little_endian()) {
      h.add(bytes, host.nbytes());
    } else {
      staging.assign(bytes, bytes + host.nbytes());
      swap_little_endian(staging.data(), static_cast<std::size_t>(host.numel()), dtype_size(host.dtype()));
      h.add(staging.data(), staging.size());
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h.value));
  return hex;
}

}  // namespace detail

void save_checkpoint(const std::string& path, nn::Module& model, const optim::Optimizer& optimizer, std::int64_t step) {
  const std::string op = "save_checkpoint('" + path + "')";
  if (step < 0) detail::fail(op, "the step must be >= 0, got ", step);
  // Every tensor on the host once (one counted copy each from a GPU), for the checksum and the file.
  nn::StateDict tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back(kModelPrefix + name, t.to(cpu()).contiguous());
  const optim::OptimizerState state = optimizer.state();
  for (const auto& [name, t] : state.tensors) tensors.emplace_back(kOptimizerPrefix + name, t.to(cpu()).contiguous());
  std::map<std::string, std::string> metadata = {
      {"format", kFormat}, {"version", kVersion}, {"step", std::to_string(step)}, {"optimizer", state.kind}};
  for (const auto& [name, value] : state.scalars) {
    const std::string text = shortest_decimal(value);
    // A C++ library whose from_chars cannot read its own to_chars back (subnormals in libstdc++
    // 11) would write a file that does not load: refuse it here instead.
    if (parse_number<double>(op, name, text) != value)
      detail::fail(op, "the optimiser's '", name, "' (", text, ") does not read back as the same number here");
    metadata[kOptimizerPrefix + name] = text;
  }
  metadata[detail::kCheckpointChecksumKey] = detail::checkpoint_checksum(tensors, metadata);
  io::save_safetensors(path, tensors, metadata);
}

std::int64_t load_checkpoint(const std::string& path, nn::Module& model, optim::Optimizer& optimizer, const Device& device) {
  const std::string op = "load_checkpoint('" + path + "')";
  require_available(device);
  detail::SafetensorsContents file = detail::read_safetensors(path, cpu(), op);
  auto& metadata = file.metadata;
  const auto entry = [&](const char* key) -> const std::string& {
    const auto found = metadata.find(key);
    if (found == metadata.end())
      detail::fail<FormatError>(op, "the file has no '", key, "' metadata entry: not a checkpoint of save_checkpoint()");
    return found->second;
  };
  if (entry("format") != kFormat)
    detail::fail<FormatError>(op, "the file's format is \"", entry("format"), "\", not \"", kFormat, "\"");
  if (entry(detail::kCheckpointChecksumKey) != detail::checkpoint_checksum(file.tensors, metadata))
    detail::fail<FormatError>(op, "checksum mismatch: the file is corrupted");
  if (entry("version") != kVersion)
    detail::fail<FormatError>(op, "checkpoint version \"", entry("version"), "\"; this kten reads version ", kVersion,
                              " (a newer kten wrote it?)");
  const auto step = parse_number<std::int64_t>(op, "step", entry("step"));
  if (step < 0) detail::fail<FormatError>(op, "the step is ", step, ", below 0 (the file is corrupted)");

  optim::OptimizerState state{entry("optimizer"), {}, {}};
  for (const auto& [key, value] : metadata) {
    if (key == "format" || key == "version" || key == "step" || key == "optimizer" || key == detail::kCheckpointChecksumKey)
      continue;
    if (!starts_with(key, kOptimizerPrefix))
      detail::fail<FormatError>(op, "the metadata entry '", key, "' is unknown to this kten");
    const auto v = parse_number<double>(op, key, value);
    if (!std::isfinite(v)) detail::fail<FormatError>(op, "the metadata entry '", key, "' is ", value, ", not finite");
    state.scalars.emplace_back(key.substr(std::string(kOptimizerPrefix).size()), v);
  }
  nn::StateDict model_dict;
  for (auto& [name, t] : file.tensors) {
    if (starts_with(name, kModelPrefix)) model_dict.emplace_back(name.substr(std::string(kModelPrefix).size()), t);
    else if (starts_with(name, kOptimizerPrefix)) state.tensors.emplace_back(name.substr(std::string(kOptimizerPrefix).size()), t);
    else detail::fail<FormatError>(op, "the tensor '", name, "' belongs neither to the model nor to the optimiser");
  }

  try {
    const ParametersAfterLoad after(model, model_dict);
    optimizer.check_state(state, after.named, model.name());
    model.load_state_dict(model_dict);  // all or nothing, as the optimiser's state was checked
  } catch (const FormatError& e) {
    detail::fail_within<FormatError>(op, e);
  }
  // Checked above; what is left can fail only for want of memory (OutOfMemory), which may leave
  // the model moved or loaded without the optimiser's state.
  model.to(device);
  optimizer.load_state(state, model);  // the copies to the parameters' device
  return step;
}

}  // namespace kten
