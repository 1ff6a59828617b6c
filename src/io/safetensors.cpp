// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The safetensors format (Hugging Face's safetensors library, which PyTorch users save state dicts
// with):
//
//   u64 N (little-endian)   N bytes of JSON: {"__metadata__": {string: string}, (optional)
//                                             name: {"dtype": "F32", "shape": [2, 3],
//                                                    "data_offsets": [begin, end]}, ...}
//                           padded with spaces to a multiple of 8
//   the data: each tensor's row-major little-endian elements at [begin, end) from here
//
// The library writes the widest dtypes first, then by name, and reads the tensors in any order of
// the header, as long as their data tile the buffer exactly. kten writes the dict's order and reads
// any. The header is parsed by a strict JSON reader for this shape of document only (no recursion
// past it), with every number and offset overflow-checked.
#include <kten/io.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/checked.hpp"
#include "core/checks.hpp"
#include "dispatch/dispatch.hpp"
#include "core/fail.hpp"
#include "io/files.hpp"
#include "io/safetensors.hpp"

namespace kten::io {
namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the library's limit
constexpr const char* kMetadataKey = "__metadata__";

const char* file_dtype(DType dtype) {
  switch (dtype) {
    case DType::float32: return "F32";
    case DType::float64: return "F64";
    case DType::int64: return "I64";
    default: return "BOOL";
  }
}

// The length of the UTF-8 sequence at p (of `left` bytes at most), or 0 when there is none: RFC
// 3629, without overlong forms, surrogates or code points past U+10FFFF.
std::size_t utf8_length(const unsigned char* p, std::size_t left) {
  std::size_t n;
  std::uint32_t code, least;
  if (p[0] < 0x80) return 1;
  if ((p[0] & 0xE0) == 0xC0) n = 2, code = p[0] & 0x1F, least = 0x80;
  else if ((p[0] & 0xF0) == 0xE0) n = 3, code = p[0] & 0x0F, least = 0x800;
  else if ((p[0] & 0xF8) == 0xF0) n = 4, code = p[0] & 0x07, least = 0x10000;
  else return 0;
  if (n > left) return 0;
  for (std::size_t i = 1; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    code = code << 6 | (p[i] & 0x3F);
  }
  if (code < least || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return n;
}

bool is_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (std::size_t i = 0, n; i < s.size(); i += n)
    if ((n = utf8_length(p + i, s.size() - i)) == 0) return false;
  return true;
}

void append_utf8(std::string& out, std::uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
    return;
  }
  const int n = code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
  out += static_cast<char>((0xF00 >> n) | (code >> (6 * (n - 1))));  // 110xxxxx, 1110xxxx, 11110xxx
  for (int i = n - 2; i >= 0; --i) out += static_cast<char>(0x80 | ((code >> (6 * i)) & 0x3F));
}

// A JSON string as serde_json writes it: quotes, backslashes and control characters escaped.
void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    if (c == '"' || c == '\\') out += {'\\', c};
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\b') out += "\\b";
    else if (c == '\f') out += "\\f";
    else if (static_cast<unsigned char>(c) < 0x20) out += "\\u00" + std::string{"0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]};
    else out += c;
  }
  out += '"';
}

struct Entry {
  std::string name;
  DType dtype = DType::float32;
  Shape shape;
  std::uint64_t begin = 0, end = 0;  // in the data, which starts after the header
};

struct Header {
  std::map<std::string, std::string> metadata;
  std::vector<Entry> entries;  // in the order of the header
};

// A strict JSON reader (RFC 8259) for the header's document only: objects of known depth, strings
// (escapes decoded, UTF-8 checked), arrays of non-negative integers.
class HeaderReader {
 public:
  HeaderReader(const std::string& text, const std::string& op) : text_(text), op_(op) {}

  Header read() {
    Header header;
    std::unordered_set<std::string> names;
    bool has_metadata = false;
    object("the header", [&](const std::string& key) {
      if (key == kMetadataKey) {
        if (has_metadata) invalid("\"", kMetadataKey, "\" is given twice");
        has_metadata = true;
        object("\"__metadata__\"", [&](const std::string& name) {
          if (!header.metadata.emplace(name, string("a metadata value")).second)
            invalid("the metadata key '", name, "' is given twice");
        });
        return;
      }
      if (!names.insert(key).second) invalid("the tensor '", key, "' is given twice");
      header.entries.push_back(entry(key));
    });
    skip_space();
    if (pos_ != text_.size()) invalid("unexpected characters after the header's object");
    return header;
  }

 private:
  template <class... Parts>
  [[noreturn]] void invalid(const Parts&... parts) const {
    detail::fail<FormatError>(op_, "the header is invalid at byte ", pos_, " of its ", text_.size(), ": ", parts...,
                              " (the file is corrupted, or not a safetensors file)");
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  // Skips white space, then takes `c` if it comes next.
  bool take(char c) {
    skip_space();
    if (pos_ == text_.size() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const char* where) {
    if (!take(c)) invalid("expected '", c, "' ", where);
  }

  // {"key": value, ...}, calling member(key) to read each value.
  template <class Member>
  void object(const char* what, const Member& member) {
    if (!take('{')) invalid(what, " must be a JSON object");
    if (take('}')) return;
    do {
      const std::string key = string("a key");
      expect(':', "after a key");
      member(key);
    } while (take(','));
    expect('}', "to close an object");
  }

  std::string string(const char* what) {
    if (!take('"')) invalid("expected ", what, " (a string)");
    std::string out;
    for (;;) {
      if (pos_ == text_.size()) invalid("a string is not closed");
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') break;
      if (c < 0x20) invalid("a control character (", static_cast<int>(c), ") inside a string; write it escaped");
      if (c == '\\') {
        out += escape();
        continue;
      }
      const std::size_t n = utf8_length(reinterpret_cast<const unsigned char*>(text_.data()) + pos_, text_.size() - pos_);
      if (n == 0) invalid("a string is not valid UTF-8");
      out.append(text_, pos_, n);
      pos_ += n;
    }
    ++pos_;
    return out;
  }

  // The escape at pos_ (a backslash), decoded to UTF-8.
  std::string escape() {
    if (++pos_ == text_.size()) invalid("a string ends in a backslash");
    const char c = text_[pos_++];
    switch (c) {
      case '"': case '\\': case '/': return std::string(1, c);
      case 'b': return "\b";
      case 'f': return "\f";
      case 'n': return "\n";
      case 'r': return "\r";
      case 't': return "\t";
      case 'u': break;
      default:
        --pos_;
        invalid("an unknown escape '\\", c, "'");
    }
    std::uint32_t code = hex4();
    if (code >= 0xDC00 && code <= 0xDFFF) invalid("a \\u escape of a lone low surrogate");
    if (code >= 0xD800 && code <= 0xDBFF) {  // UTF-16's high half: the low half must follow
      if (text_.compare(pos_, 2, "\\u") != 0) invalid("a \\u escape of a high surrogate without its low half");
      pos_ += 2;
      const std::uint32_t low = hex4();
      if (low < 0xDC00 || low > 0xDFFF) invalid("a \\u escape of a high surrogate without its low half");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    std::string out;
    append_utf8(out, code);
    return out;
  }

  std::uint32_t hex4() {
    std::uint32_t code = 0;
    for (int i = 0; i < 4; ++i, ++pos_) {
      const char c = pos_ < text_.size() ? text_[pos_] : '\0';
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (digit < 0) invalid("a \\u escape needs four hexadecimal digits");
      code = code << 4 | static_cast<std::uint32_t>(digit);
    }
    return code;
  }

  // A JSON number in `field` that is a non-negative integer below 2^64 (the format's extents and offsets).
  std::uint64_t integer(const char* field) {
    skip_space();
    const auto digit = [&] { return pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9'; };
    if (!digit()) invalid("expected a non-negative integer in '", field, "'");
    if (text_[pos_] == '0' && pos_ + 1 < text_.size() && text_[pos_ + 1] >= '0' && text_[pos_ + 1] <= '9')
      invalid("a number in '", field, "' has a leading zero");
    std::optional<std::uint64_t> value = 0;
    for (; digit(); ++pos_) {
      value = detail::checked_mul<std::uint64_t>(*value, 10);
      if (value) value = detail::checked_add<std::uint64_t>(*value, static_cast<std::uint64_t>(text_[pos_] - '0'));
      if (!value) invalid("a number in '", field, "' is past 2^64");
    }
    if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E'))
      invalid("a number in '", field, "' is not an integer");
    return *value;
  }

  std::vector<std::uint64_t> integers(const char* field) {
    std::vector<std::uint64_t> out;
    if (!take('[')) invalid("'", field, "' must be an array of non-negative integers");
    if (take(']')) return out;
    do out.push_back(integer(field));
    while (take(','));
    expect(']', "to close an array");
    return out;
  }

  Entry entry(const std::string& name) {
    Entry e;
    e.name = name;
    bool has_dtype = false, has_shape = false, has_offsets = false;
    const auto once = [&](bool& seen, const std::string& field) {
      if (seen) invalid("the tensor '", name, "' gives '", field, "' twice");
      seen = true;
    };
    object("a tensor's entry", [&](const std::string& field) {
      if (field == "dtype") {
        once(has_dtype, field);
        const std::string code = string("a dtype");
        const DType all[] = {DType::float32, DType::float64, DType::int64, DType::boolean};
        const auto* found = std::find_if(std::begin(all), std::end(all), [&](DType t) { return code == file_dtype(t); });
        if (found == std::end(all))
          detail::fail<FormatError>(op_, "the tensor '", name, "' has dtype '", code,
                                    "', which kten does not read: it reads F32, F64, I64 and BOOL (convert "
                                    "the tensor in PyTorch before saving, e.g. with .float())");
        e.dtype = *found;
      } else if (field == "shape") {
        once(has_shape, field);
        for (const std::uint64_t extent : integers("shape")) {
          if (extent > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            invalid("the tensor '", name, "' has extent ", extent, ", past the largest int64");
          e.shape.push_back(static_cast<std::int64_t>(extent));
        }
      } else if (field == "data_offsets") {
        once(has_offsets, field);
        const auto offsets = integers("data_offsets");
        if (offsets.size() != 2) invalid("the tensor '", name, "' has ", offsets.size(), " data_offsets, not 2 (begin, end)");
        e.begin = offsets[0];
        e.end = offsets[1];
      } else {
        invalid("the tensor '", name, "' has an unknown field '", field, "' (a tensor has dtype, shape and data_offsets)");
      }
    });
    if (!has_dtype || !has_shape || !has_offsets)
      invalid("the tensor '", name, "' lacks '", !has_dtype ? "dtype" : !has_shape ? "shape" : "data_offsets", "'");
    return e;
  }

  const std::string& text_;
  const std::string& op_;
  std::size_t pos_ = 0;
};

// The header and the entries in the order of their data, which must tile [0, data size) exactly.
struct Layout {
  Header header;
  std::vector<Entry> in_data_order;
  std::uint64_t data_start = 0;  // in the file
};

Layout read_layout(const detail::InputFile& file, const std::string& op) {
  if (file.size() < 8)
    detail::fail<FormatError>(op, "the file has ", file.size(),
                              " bytes, fewer than the 8 of a safetensors header length (not a safetensors file?)");
  unsigned char length[8];
  file.read(0, length, 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | length[i];
  if (n > kMaxHeaderBytes)
    detail::fail<FormatError>(op, "the header length is ", n, " bytes, over the format's limit of ", kMaxHeaderBytes,
                              " (100 MB): the file is corrupted, or not a safetensors file");
  if (n > file.size() - 8)
    detail::fail<FormatError>(op, "the header length is ", n, " bytes but only ", file.size() - 8,
                              " follow it: the file is truncated, or not a safetensors file");
  std::string text(static_cast<std::size_t>(n), '\0');
  file.read(8, text.data(), text.size());

  Layout layout{HeaderReader(text, op).read(), {}, 8 + n};
  const std::uint64_t data_size = file.size() - layout.data_start;
  for (const Entry& e : layout.header.entries) {
    std::optional<std::uint64_t> bytes = dtype_size(e.dtype);
    std::optional<std::int64_t> span = 1;  // the largest contiguous stride: extents of 0 taken as 1
    for (const auto extent : e.shape) {
      if (bytes) bytes = detail::checked_mul(*bytes, static_cast<std::uint64_t>(extent));
      if (span) span = detail::checked_mul(*span, extent == 0 ? std::int64_t(1) : extent);
    }
    if (!bytes || !span)
      detail::fail<FormatError>(op, "the tensor '", e.name, "' has shape ", e.shape, ", which has more ",
                                !bytes ? "bytes" : "elements (extents of 0 aside)",
                                " than fit in 64 bits (the file is corrupted)");
    if (e.end < e.begin || e.end - e.begin != *bytes)
      detail::fail<FormatError>(op, "the tensor '", e.name, "' is ", file_dtype(e.dtype), " of shape ", e.shape, " (",
                                *bytes, " bytes) but its data_offsets [", e.begin, ", ", e.end,
                                "] do not span that many (the file is corrupted)");
  }
  layout.in_data_order = layout.header.entries;
  std::stable_sort(layout.in_data_order.begin(), layout.in_data_order.end(),
                   [](const Entry& a, const Entry& b) { return std::pair(a.begin, a.end) < std::pair(b.begin, b.end); });
  std::uint64_t covered = 0;  // the data [0, covered) belongs to the tensors so far
  const Entry* previous = nullptr;
  for (const Entry& e : layout.in_data_order) {
    if (e.begin < covered)
      detail::fail<FormatError>(op, "the tensors '", previous->name, "' (data bytes ", previous->begin, " to ",
                                previous->end, ") and '", e.name, "' (", e.begin, " to ", e.end,
                                ") overlap (the file is corrupted)");
    if (e.begin > covered)
      detail::fail<FormatError>(op, "the data bytes ", covered, " to ", e.begin,
                                " belong to no tensor: a gap before '", e.name, "' (the file is corrupted)");
    covered = e.end;
    previous = &e;
  }
  if (covered > data_size)
    detail::fail<FormatError>(op, "the tensors' data ends at byte ", covered, " but the file holds ", data_size,
                              " bytes of data: the file is truncated");
  if (covered < data_size)
    detail::fail<FormatError>(op, data_size - covered,
                              " bytes after the last tensor's data belong to no tensor (the file is corrupted)");
  return layout;
}

}  // namespace

void save_safetensors(const std::string& path, const nn::StateDict& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string op = "save_safetensors('" + path + "')";
  // The header, compact, as the library writes it.
  std::string header = "{";
  const auto key = [&](const std::string& name) {
    if (header.size() > 1 && header.back() != '{') header += ',';
    append_json_string(header, name);
    header += ':';
  };
  if (!metadata.empty()) {
    key(kMetadataKey);
    header += '{';
    for (const auto& [name, value] : metadata) {
      if (!is_utf8(name) || !is_utf8(value))
        detail::fail(op, "the metadata entry '", name, "' is not UTF-8 text, which the JSON header needs");
      key(name);
      append_json_string(header, value);
    }
    header += '}';
  }
  std::unordered_set<std::string> names;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) detail::fail(op, "the tensor '", name, "' is undefined");
    if (name == kMetadataKey) detail::fail(op, "no tensor may be named \"", kMetadataKey, "\", the format's metadata key");
    if (!names.insert(name).second) detail::fail(op, "the name '", name, "' is given twice; a file's names are unique");
    if (!is_utf8(name)) detail::fail(op, "the name '", name, "' is not UTF-8 text, which the JSON header needs");
    const auto end = detail::checked_add<std::uint64_t>(offset, t.nbytes());
    if (!end) detail::fail(op, "the tensors hold more bytes than fit in 64 bits");
    key(name);
    header += "{\"dtype\":\"" + std::string(file_dtype(t.dtype())) + "\",\"shape\":[";
    for (int d = 0; d < t.ndim(); ++d) header += (d ? "," : "") + std::to_string(t.shape()[d]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(*end) + "]}";
    offset = *end;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as the library pads
  if (header.size() > kMaxHeaderBytes)
    detail::fail(op, "the header would have ", header.size(), " bytes, over the format's limit of ", kMaxHeaderBytes,
                 " (100 MB): save fewer tensors per file");

  detail::AtomicFile file(path, op);
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  file.write(length, 8);
  file.write(header.data(), header.size());
  std::vector<unsigned char> staging;  // one tensor's elements at a time (a view's gathered on its device)
  for (const auto& [name, t] : tensors) {
    staging.resize(t.nbytes());
    detail::read_to_host(t, staging.data(), t.dtype(), "save_safetensors()");
    detail::swap_little_endian(staging.data(), static_cast<std::size_t>(t.numel()), dtype_size(t.dtype()));
    file.write(staging.data(), staging.size());
  }
  file.commit();
}

}  // namespace kten::io

namespace kten::detail {

using io::Entry;
using io::Layout;
using io::read_layout;

SafetensorsContents read_safetensors(const std::string& path, const Device& device, const std::string& op) {
  require_available(device);
  const InputFile file(path, op);
  Layout layout;
  try {
    layout = read_layout(file, op);
  } catch (const std::bad_alloc&) {  // the header's sizes were checked against the file's: a host short of memory
    detail::fail<OutOfMemory>(op, "out of host memory (cpu(0)) while reading the header");
  }
  SafetensorsContents out{{}, std::move(layout.header.metadata)};
  for (const Entry& e : layout.in_data_order) {
    // Read straight into a host tensor, then one counted copy to `device` (none for cpu()).
    const Tensor host = empty(e.shape, cpu(), e.dtype);
    char* bytes = detail::data_ptr<char>(host);
    file.read(layout.data_start + e.begin, bytes, host.nbytes());
    detail::swap_little_endian(bytes, static_cast<std::size_t>(host.numel()), dtype_size(e.dtype));
    char* const end = bytes + host.nbytes();
    const char* bad = e.dtype == DType::boolean ? std::find_if(bytes, end, [](char b) { return b != 0 && b != 1; }) : end;
    if (bad != end)
      detail::fail<FormatError>(op, "the BOOL tensor '", e.name, "' holds the byte ",
                                static_cast<int>(static_cast<unsigned char>(*bad)), " at data byte ",
                                e.begin + static_cast<std::uint64_t>(bad - bytes), "; a boolean is 0 or 1 (the file is corrupted)");
    out.tensors.emplace_back(e.name, host.to(device));
  }
  return out;
}

}  // namespace kten::detail

namespace kten::io {

nn::StateDict load_safetensors(const std::string& path, const Device& device) {
  return detail::read_safetensors(path, device, "load_safetensors('" + path + "')").tensors;
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  const std::string op = "load_safetensors_metadata('" + path + "')";
  return read_layout(detail::InputFile(path, op), op).header.metadata;
}

}  // namespace kten::io
