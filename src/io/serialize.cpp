// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Module::save and Module::load: a device-independent, versioned, little-endian file.
//
//   "KTENPRM\n"  u32 version (2)  u32 count
//   count x { u32 name length, name, u8 dtype (0 float32, 1 float64, 2 int64, 3 boolean), u8 ndim,
//             u64 extents[ndim], u64 byte count, little-endian element bytes (a boolean: one byte, 0 or 1) }
//   u64 FNV-1a checksum of every byte before it
//
// The entries are state_dict()'s, in its order: parameters and buffers (registered buffers came
// within version 2 and changed no field; a model without buffers writes the file it wrote
// before, and an older kten refuses a file with buffers as it refuses any other model's: the
// count or a name differs).
//
// Codes 2 and 3 came later within version 1: every file an older kten wrote still loads, and an
// older kten refuses a file holding int64 or boolean parameters (an unknown dtype code).
// Version 2 changed no field but a layout: Linear's weight became (out, in), as PyTorch's, where
// version 1 held (in, out). Each parameter says which versions held it transposed
// (Parameter::transposed_in_format_up_to), and load() transposes those back, so version-1 files
// load and compute as before.
#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <utility>

#include <kten/nn/module.hpp>
#include <kten/ops.hpp>

#include "core/checked.hpp"
#include "core/fail.hpp"
#include "files.hpp"
#include "core/storage.hpp"
#include "ops/transfer.hpp"

namespace kten::nn {
namespace {

constexpr char kMagic[8] = {'K', 'T', 'E', 'N', 'P', 'R', 'M', '\n'};
constexpr std::uint32_t kVersion = 2;
// The file's dtype codes, by code: written and read through this table only.
constexpr DType kDTypeCodes[] = {DType::float32, DType::float64, DType::int64, DType::boolean};
constexpr std::uint64_t kDTypeCount = sizeof kDTypeCodes / sizeof kDTypeCodes[0];

std::uint64_t dtype_code(DType dtype) {
  return static_cast<std::uint64_t>(std::find(kDTypeCodes, kDTypeCodes + kDTypeCount, dtype) - kDTypeCodes);
}

// Throws FormatError, its message kten: load('<path>'): <parts...>: the file cannot be loaded.
template <class... Parts>
[[noreturn]] void bad_file(const std::string& path, const Parts&... parts) {
  detail::fail<FormatError>("load('" + path + "')", parts...);
}

struct Writer {
  std::vector<unsigned char> bytes;
  void u(std::uint64_t v, int width) {
    for (int i = 0; i < width; ++i) bytes.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
  // Elements of `width` bytes, written little-endian whatever the host's order.
  void elements(const void* data, std::size_t n, std::size_t width) {
    const auto* p = static_cast<const unsigned char*>(data);
    const std::size_t start = bytes.size();
    bytes.insert(bytes.end(), p, p + n * width);
    detail::swap_little_endian(bytes.data() + start, n, width);
  }
};

struct Reader {
  const std::vector<unsigned char>& bytes;
  std::size_t end;  // the checksum's offset
  std::size_t pos = 0;
  const std::string& path;
  void need(std::uint64_t n, const char* what) const {
    if (n > end - pos)  // not pos + n > end, which a huge n wraps
      bad_file(path, "the file is truncated (or corrupted): it ends at byte ", end, " while reading ", what);
  }
  std::uint64_t u(int width, const char* what) {
    need(width, what);
    std::uint64_t v = 0;
    for (int i = 0; i < width; ++i) v |= static_cast<std::uint64_t>(bytes[pos + i]) << (8 * i);
    pos += width;
    return v;
  }
};

struct Staged {
  std::string name;
  DType dtype;
  Shape shape;
  std::vector<unsigned char> data;  // host-order element bytes
};

std::vector<unsigned char> read_file(const std::string& path) {
  const detail::InputFile file(path, "load('" + path + "')");
  std::vector<unsigned char> bytes(static_cast<std::size_t>(file.size()));
  file.read(0, bytes.data(), bytes.size());
  return bytes;
}

// A 2-D parameter stored transposed by an older format, in today's layout.
void transpose(Staged& s) {
  const auto rows = static_cast<std::size_t>(s.shape[0]), cols = static_cast<std::size_t>(s.shape[1]);
  const std::size_t width = dtype_size(s.dtype);
  std::vector<unsigned char> out(s.data.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      std::memcpy(&out[(c * rows + r) * width], &s.data[(r * cols + c) * width], width);
  s.data = std::move(out);
  std::swap(s.shape[0], s.shape[1]);
}

// Every parameter in the file, checked against the format (not yet against a model); `version`
// receives the file's format version.
std::vector<Staged> parse(const std::vector<unsigned char>& bytes, const std::string& path, std::uint32_t& version) {
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    bad_file(path, "not a kten parameter file (no KTENPRM header)");
  if (bytes.size() < 8 + 4 + 4 + 8)
    bad_file(path, "the file is truncated (", bytes.size(), " bytes)");
  Reader r{bytes, bytes.size() - 8, 8, path};
  version = static_cast<std::uint32_t>(r.u(4, "the version"));
  if (version < 1 || version > kVersion)
    bad_file(path, "file format version ", version, ", this kten reads versions 1 to ", kVersion);
  const auto count = r.u(4, "the parameter count");
  std::vector<Staged> staged;
  for (std::uint64_t i = 0; i < count; ++i) {
    Staged s;
    const auto name_length = r.u(4, "a parameter name");
    r.need(name_length, "a parameter name");
    s.name.assign(bytes.begin() + r.pos, bytes.begin() + r.pos + name_length);
    r.pos += name_length;
    const auto code = r.u(1, "a dtype");
    if (code >= kDTypeCount)
      bad_file(path, "parameter '", s.name, "' has unknown dtype code ", code,
               " (the file is corrupted, or written by a newer kten)");
    s.dtype = kDTypeCodes[code];
    const auto ndim = r.u(1, "a rank");
    // The byte count the shape needs, checked: a product that wraps could match a small claim.
    std::optional<std::uint64_t> expect = dtype_size(s.dtype);
    for (std::uint64_t d = 0; d < ndim; ++d) {
      const auto e = r.u(8, "a shape");
      if (e > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        bad_file(path, "parameter '", s.name, "' has extent ", e, ", past the largest int64 (the file is corrupted)");
      s.shape.push_back(static_cast<std::int64_t>(e));
      if (expect) expect = detail::checked_mul(*expect, e);
    }
    if (!expect)
      bad_file(path, "parameter '", s.name, "' has shape ", s.shape,
               ", which has more bytes than fit in 64 bits (the file is corrupted)");
    const auto nbytes = r.u(8, "a byte count");
    if (nbytes != *expect)
      bad_file(path, "parameter '", s.name, "' claims ", nbytes, " bytes for shape ", s.shape,
               " (the file is corrupted)");
    r.need(nbytes, "parameter data");
    s.data.assign(bytes.begin() + r.pos, bytes.begin() + r.pos + nbytes);
    if (s.dtype == DType::boolean && std::any_of(s.data.begin(), s.data.end(), [](unsigned char b) { return b > 1; }))
      bad_file(path, "parameter '", s.name, "' is boolean but holds a byte other than 0 or 1 (the file is corrupted)");
    detail::swap_little_endian(s.data.data(), s.data.size() / dtype_size(s.dtype), dtype_size(s.dtype));
    r.pos += nbytes;
    staged.push_back(std::move(s));
  }
  if (r.pos != r.end)
    bad_file(path, r.end - r.pos, " unexpected bytes after the parameters (the file is corrupted)");
  Reader tail{bytes, bytes.size(), bytes.size() - 8, path};
  if (tail.u(8, "the checksum") != detail::Fnv1a::of(bytes.data(), bytes.size() - 8))
    bad_file(path, "checksum mismatch: the file is corrupted");
  return staged;
}

}  // namespace

void Module::save(const std::string& path) {
  Writer w;
  w.bytes.insert(w.bytes.end(), kMagic, kMagic + 8);
  w.u(kVersion, 4);
  std::vector<StateEntry> entries;
  collect_state(entries);
  w.u(entries.size(), 4);
  for (const auto& [name, slot, buffer] : entries) {
    if (slot && !slot->value.defined())
      detail::fail("save('" + path + "')", "parameter '", name,
                   "' has no shape yet (a lazy layer that has not seen an input); run a forward pass first");
    const Tensor& t = slot ? slot->value : *buffer;
    w.u(name.size(), 4);
    w.bytes.insert(w.bytes.end(), name.begin(), name.end());
    w.u(dtype_code(t.dtype()), 1);
    w.u(static_cast<std::uint64_t>(t.ndim()), 1);
    for (auto e : t.shape()) w.u(static_cast<std::uint64_t>(e), 8);
    w.u(t.nbytes(), 8);
    std::vector<unsigned char> host(t.nbytes());  // the elements' bytes, whatever their type
    detail::read_to_host(t, host.data(), t.dtype(), "save()");
    w.elements(host.data(), static_cast<std::size_t>(t.numel()), dtype_size(t.dtype()));
  }
  w.u(detail::Fnv1a::of(w.bytes.data(), w.bytes.size()), 8);

  detail::AtomicFile file(path, "save('" + path + "')");
  file.write(w.bytes.data(), w.bytes.size());
  file.commit();
}

void Module::load(const std::string& path, const Device& device) {
  require_available(device);
  std::vector<Staged> staged;
  std::uint32_t version = 0;
  try {
    staged = parse(read_file(path), path, version);
  } catch (const std::bad_alloc&) {
    // Every size was checked against the file's, so this is a large file on a host short of memory.
    detail::fail<OutOfMemory>("load('" + path + "')", "out of host memory (cpu(0)) while reading the file");
  }

  // The file is sound; does it fit this model?
  std::vector<StateEntry> entries;
  collect_state(entries);
  if (entries.size() != staged.size())
    bad_file(path, "the file has ", staged.size(), " tensors, the model has ", entries.size(),
             " (parameters and buffers)");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& [name, p, buffer] = entries[i];
    Staged& s = staged[i];
    if (p && version <= p->transposed_in_format_up_to && s.shape.size() == 2) transpose(s);
    const Shape want = !p ? buffer->shape() : p->value.defined() ? p->value.shape() : p->expected;
    const DType dtype = p ? p->dtype : buffer->dtype();
    if (s.name != name || s.dtype != dtype || (p ? !p->fits(s.shape) : s.shape != want))
      bad_file(path, p ? "parameter " : "buffer ", i, " is '", s.name, "' ", s.shape, " ", s.dtype, " in the file but '",
               name, "' ", want, " ", dtype, " in the model");
  }
  // Build every tensor before touching the model, so a failure (out of memory) changes nothing.
  std::vector<Tensor> values, grads;
  for (std::size_t i = 0; i < staged.size(); ++i) {
    const Staged& s = staged[i];
    values.push_back(detail::from_host(s.data.data(), s.shape, s.dtype, device));
    grads.push_back(entries[i].parameter ? zeros(s.shape, device, s.dtype) : Tensor());
  }
  // In place, so that the handles forward() holds see the loaded values; gradients start at zero.
  for (std::size_t i = 0; i < entries.size(); ++i) {
    Parameter* p = entries[i].parameter;
    if (!p) {
      entries[i].buffer->set_data(values[i]);
    } else {
      if (p->grad.defined()) p->grad.set_data(grads[i]);
      else p->grad = grads[i];
      if (p->value.defined()) p->value.set_data(values[i]);
      else p->value = values[i];  // a lazy parameter takes its shape from the file
      p->track();
    }
  }
  notify_loaded();
  to(device);
}

}  // namespace kten::nn
