// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-onnx-conformance: runs the ONNX project's own node conformance cases (the folders that
// `python3 -m onnx.backend.test.cmd_tools generate-data` writes: model.onnx and test_data_set_*/
// with input_<i>.pb and output_<i>.pb) through kten::onnx::load() and Model::run(), and compares
// the outputs with ONNX's reference ones at ONNX's own backend-test tolerances (rtol 1e-3, atol
// 1e-7, NaN matching NaN, shapes and dtypes exact). It exists so that what kten's importer gets
// right, gets wrong and refuses is measured against ONNX's definition of each op rather than
// against kten's own reading of it (tests/test_onnx.cpp), and so that the onnx.conformance CTest
// catches any change of that (tests/fixtures/onnx/node/expected.txt).
//
// Each case runs in a child process of its own (fork, then Kokkos is started in the child), so a
// crash or a hang is a result naming the case and the step it died in, not the end of the run.
//
//   kten-onnx-conformance [--device cpu|gpu] [--expect FILE] [--write-expect FILE]
//                         [--timeout SECONDS] [--one CASE_DIR] CASES_DIR...
//
// A CASES_DIR is a case folder (it holds model.onnx) or a folder of them. --one runs a single case
// in this process (for a debugger). The device defaults to KTEN_TEST_DEVICE (set by KTEN_TEST_RUN,
// as for the Catch2 suites), else cpu.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <onnx/onnx_pb.h>

#include <kten/kten.hpp>
#include <kten/onnx.hpp>

#include "test_run.hpp"

namespace fs = std::filesystem;

namespace {

constexpr double rtol = 1e-3;  // onnx/backend/test/runner: assert_similar_outputs' defaults
constexpr double atol = 1e-7;

// ---------------------------------------------------------------------------------------------
// A TensorProto read as numpy_helper.to_array does, for the element types kten holds.

struct HostTensor {
  std::string name;
  int onnx_type = 0;
  kten::Shape shape;
  std::vector<double> floats;       // float32 and float64 values
  std::vector<std::int64_t> ints;   // int64
  std::vector<bool> bools;          // bool
  kten::DType dtype() const {
    switch (onnx_type) {
      case ::onnx::TensorProto::FLOAT: return kten::float32;
      case ::onnx::TensorProto::DOUBLE: return kten::float64;
      case ::onnx::TensorProto::INT64: return kten::int64;
      default: return kten::boolean;
    }
  }
};

std::string type_name(int onnx_type) {
  if (::onnx::TensorProto_DataType_IsValid(onnx_type))
    return ::onnx::TensorProto_DataType_Name(static_cast<::onnx::TensorProto_DataType>(onnx_type));
  return "type " + std::to_string(onnx_type);
}

// Why a case is refused by this runner (not by kten): an element type kten has no dtype for, a
// sequence or optional value, external data.
struct Unsupported {
  std::string why;
};

template <class T>
T read_le(const std::string& raw, std::size_t i) {
  T v;
  std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));  // little-endian hosts only, as ONNX's raw_data
  return v;
}

HostTensor read_tensor(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + file.string());
  ::onnx::TensorProto p;
  if (!p.ParseFromIstream(&in)) throw Unsupported{file.filename().string() + " is not a TensorProto (a sequence, map or optional value)"};
  HostTensor t;
  t.name = p.name();
  t.onnx_type = p.data_type();
  for (const auto d : p.dims()) t.shape.push_back(d);
  if (p.data_location() == ::onnx::TensorProto::EXTERNAL) throw Unsupported{"external data in " + file.filename().string()};
  std::size_t n = 1;
  for (const auto d : t.shape) n *= static_cast<std::size_t>(d);
  const std::string& raw = p.raw_data();
  const bool has_raw = p.has_raw_data();
  auto check = [&](std::size_t got) {
    if (got != n)
      throw std::runtime_error(file.string() + ": " + std::to_string(got) + " values for " + std::to_string(n) + " elements");
  };
  switch (p.data_type()) {
    case ::onnx::TensorProto::FLOAT:
      if (has_raw) {
        check(raw.size() / 4);
        for (std::size_t i = 0; i < n; ++i) t.floats.push_back(read_le<float>(raw, i));
      } else {
        check(static_cast<std::size_t>(p.float_data_size()));
        t.floats.assign(p.float_data().begin(), p.float_data().end());
      }
      break;
    case ::onnx::TensorProto::DOUBLE:
      if (has_raw) {
        check(raw.size() / 8);
        for (std::size_t i = 0; i < n; ++i) t.floats.push_back(read_le<double>(raw, i));
      } else {
        check(static_cast<std::size_t>(p.double_data_size()));
        t.floats.assign(p.double_data().begin(), p.double_data().end());
      }
      break;
    case ::onnx::TensorProto::INT64:
      if (has_raw) {
        check(raw.size() / 8);
        for (std::size_t i = 0; i < n; ++i) t.ints.push_back(read_le<std::int64_t>(raw, i));
      } else {
        check(static_cast<std::size_t>(p.int64_data_size()));
        t.ints.assign(p.int64_data().begin(), p.int64_data().end());
      }
      break;
    case ::onnx::TensorProto::BOOL:
      if (has_raw) {
        check(raw.size());
        for (std::size_t i = 0; i < n; ++i) t.bools.push_back(raw[i] != 0);
      } else {
        check(static_cast<std::size_t>(p.int32_data_size()));
        for (const auto v : p.int32_data()) t.bools.push_back(v != 0);
      }
      break;
    default:
      throw Unsupported{"element type " + type_name(p.data_type()) + " (" + file.filename().string() + ")"};
  }
  return t;
}

kten::Tensor to_kten(const HostTensor& h, const kten::Device& d) {
  switch (h.onnx_type) {
    case ::onnx::TensorProto::FLOAT: return kten::tensor(std::vector<float>(h.floats.begin(), h.floats.end()), h.shape, d);
    case ::onnx::TensorProto::DOUBLE: return kten::tensor(h.floats, h.shape, d);
    case ::onnx::TensorProto::INT64: return kten::tensor(h.ints, h.shape, d);
    default: return kten::tensor(h.bools, h.shape, d);
  }
}

std::string shape_text(const kten::Shape& s) {
  std::ostringstream os;
  os << '(';
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << (s.size() == 1 ? ",)" : ")");
  return os.str();
}

std::string index_text(std::size_t flat, const kten::Shape& s) {
  std::vector<std::int64_t> idx(s.size());
  for (std::size_t a = s.size(); a-- > 0;) {
    const auto e = static_cast<std::size_t>(s[a]);
    idx[a] = static_cast<std::int64_t>(flat % e);
    flat /= e;
  }
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < idx.size(); ++i) os << (i ? ", " : "") << idx[i];
  os << ']';
  return os.str();
}

const char* dtype_text(kten::DType t) {
  switch (t) {
    case kten::DType::float32: return "float32";
    case kten::DType::float64: return "float64";
    case kten::DType::int64: return "int64";
    default: return "bool";
  }
}

// "" when kten's output matches the reference, else what differs (the largest error and where).
std::string compare(const kten::Tensor& got, const HostTensor& want, const std::string& what) {
  if (got.dtype() != want.dtype())
    return what + ": dtype " + dtype_text(got.dtype()) + ", want " + dtype_text(want.dtype());
  if (got.shape() != want.shape) return what + ": shape " + shape_text(got.shape()) + ", want " + shape_text(want.shape);
  std::ostringstream os;
  os.precision(9);
  if (got.dtype() == kten::float32 || got.dtype() == kten::float64) {
    std::vector<double> g;
    if (got.dtype() == kten::float32) {
      const auto v = got.to_vector<float>();
      g.assign(v.begin(), v.end());
    } else {
      g = got.to_vector<double>();
    }
    std::size_t bad = 0, worst = 0;
    double worst_excess = -1, worst_diff = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double a = g[i], b = want.floats[i];
      if (std::isnan(a) && std::isnan(b)) continue;
      if (a == b) continue;  // infinities of one sign
      const double diff = std::abs(a - b), allowed = atol + rtol * std::abs(b);
      if (std::isnan(diff) || diff > allowed) {
        const double excess = std::isnan(diff) || std::isinf(diff) ? INFINITY : diff - allowed;
        if (bad == 0 || excess > worst_excess) worst_excess = excess, worst = i, worst_diff = diff;
        ++bad;
      }
    }
    if (bad == 0) return "";
    os << what << ": " << bad << " of " << g.size() << " elements off; largest at " << index_text(worst, want.shape)
       << ": got " << g[worst] << ", want " << want.floats[worst] << " (|error| " << worst_diff << ", allowed "
       << atol + rtol * std::abs(want.floats[worst]) << ")";
    return os.str();
  }
  if (got.dtype() == kten::int64) {
    const auto g = got.to_vector<std::int64_t>();
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
      if (g[i] != want.ints[i] && bad++ == 0) first = i;
    if (bad == 0) return "";
    os << what << ": " << bad << " of " << g.size() << " elements differ; first at " << index_text(first, want.shape)
       << ": got " << g[first] << ", want " << want.ints[first];
    return os.str();
  }
  const auto g = got.to_vector<bool>();
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g[i] != want.bools[i] && bad++ == 0) first = i;
  if (bad == 0) return "";
  os << what << ": " << bad << " of " << g.size() << " elements differ; first at " << index_text(first, want.shape)
     << ": got " << (g[first] ? "true" : "false") << ", want " << (want.bools[first] ? "true" : "false");
  return os.str();
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// A kten::Error's first line without what every one repeats: "kten: onnx::load('<path>'): " and
// "kten: onnx::Model, ".
std::string brief(const std::string& what) {
  std::string s = first_line(what);
  for (const std::string prefix : {"kten: onnx::load('", "kten: onnx::Model, ", "kten: "}) {
    if (s.rfind(prefix, 0) != 0) continue;
    if (prefix.back() == '\'') {
      const auto end = s.find("'): ");
      if (end != std::string::npos) s = s.substr(end + 4);
    } else {
      s = s.substr(prefix.size());
    }
    break;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// One case.

struct Outcome {
  std::string kind;    // right, wrong, refused, crashed
  std::string detail;  // the refusal's first line, the largest error, the signal and step
};

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  // input_10.pb after input_9.pb (the runner's glob is sorted as text, but cases have at most a
  // handful; sort by the number as the file names mean)
  auto number = [&](const fs::path& p) {
    const std::string s = p.filename().string().substr(prefix.size());
    return std::atol(s.c_str());
  };
  std::sort(out.begin(), out.end(), [&](const fs::path& a, const fs::path& b) {
    const long na = number(a), nb = number(b);
    return na != nb ? na < nb : a < b;
  });
  return out;
}

// The order of `files` by `names`: files named after them (TensorProto.name) in that order when
// every file is, else as given.
std::vector<HostTensor> order_by_name(std::vector<HostTensor> ts, const std::vector<std::string>& names) {
  if (ts.size() != names.size()) return ts;
  std::vector<HostTensor> out;
  for (const auto& n : names) {
    auto it = std::find_if(ts.begin(), ts.end(), [&](const HostTensor& t) { return t.name == n; });
    if (it == ts.end()) return ts;
    out.push_back(*it);
  }
  return out;
}

using StepFn = void (*)(const std::string&);

Outcome run_case(const fs::path& dir, const kten::Device& device, StepFn step) {
  try {
    step("loading model.onnx");
    kten::onnx::Model model = kten::onnx::load((dir / "model.onnx").string(), device);
    const auto in_names = model.input_names(), out_names = model.output_names();
    const auto sets = sorted_files(dir, "test_data_set_");
    if (sets.empty()) return {"refused", "the case has no test_data_set_*"};
    for (const auto& set : sets) {
      const std::string sn = set.filename().string();
      step("reading " + sn);
      std::vector<HostTensor> ins, outs;
      for (const auto& f : sorted_files(set, "input_")) ins.push_back(read_tensor(f));
      for (const auto& f : sorted_files(set, "output_")) outs.push_back(read_tensor(f));
      ins = order_by_name(std::move(ins), in_names);
      outs = order_by_name(std::move(outs), out_names);
      if (ins.size() != in_names.size())
        return {"refused", "kten reads " + std::to_string(in_names.size()) + " graph inputs, " + sn + " gives " +
                               std::to_string(ins.size())};
      std::vector<kten::Tensor> inputs;
      for (const auto& h : ins) inputs.push_back(to_kten(h, device));
      step("running " + sn);
      std::vector<kten::Tensor> got;
      try {
        kten::NoGradGuard no_grad;
        got = model.run(inputs);
      } catch (const kten::Error& e) {
        return {"refused", "at run: " + brief(e.what())};
      }
      step("comparing the outputs of " + sn);
      if (got.size() != outs.size())
        return {"wrong", sn + ": " + std::to_string(got.size()) + " outputs, want " + std::to_string(outs.size())};
      for (std::size_t i = 0; i < got.size(); ++i) {
        const std::string what = sn + " output " + std::to_string(i) + " '" + (i < out_names.size() ? out_names[i] : "") + "'";
        std::string diff;
        try {
          diff = compare(got[i], outs[i], what);
        } catch (const kten::Error& e) {  // an index error reported at the synchronisation
          return {"refused", "at run: " + brief(e.what())};
        }
        if (!diff.empty()) return {"wrong", diff};
      }
    }
    return {"right", ""};
  } catch (const Unsupported& u) {
    return {"refused", u.why};
  } catch (const kten::Error& e) {
    return {"refused", brief(e.what())};
  } catch (const std::exception& e) {
    return {"crashed", std::string("a std::exception that is not a kten::Error: ") + first_line(e.what())};
  }
}

// ---------------------------------------------------------------------------------------------
// The model's op types (nested graphs included; other domains as domain.Op) and opset, read here
// with protobuf alone.

void collect_ops(const ::onnx::GraphProto& g, std::set<std::string>& ops) {
  for (const auto& n : g.node()) {
    ops.insert(n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type());
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_ops(a.g(), ops);
      for (const auto& sg : a.graphs()) collect_ops(sg, ops);
    }
  }
}

std::set<std::string> model_ops(const fs::path& dir) {
  std::set<std::string> ops;
  std::ifstream in(dir / "model.onnx", std::ios::binary);
  ::onnx::ModelProto m;
  if (in && m.ParseFromIstream(&in)) collect_ops(m.graph(), ops);
  return ops;
}

// ---------------------------------------------------------------------------------------------
// A case in a child process.

std::string signal_text(int sig) {
  const char* s = strsignal(sig);
  return "signal " + std::to_string(sig) + " (" + (s ? s : "?") + ")";
}

int step_fd = -1;
void pipe_step(const std::string& s) {
  const std::string line = "step\t" + s + "\n";
  [[maybe_unused]] auto n = write(step_fd, line.data(), line.size());
}

Outcome run_in_child(const fs::path& dir, const kten::Device& device, int timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return {"crashed", std::string("pipe: ") + std::strerror(errno)};
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) return {"crashed", std::string("fork: ") + std::strerror(errno)};
  if (pid == 0) {
    close(fds[0]);
    step_fd = fds[1];
    alarm(static_cast<unsigned>(timeout_s));
    Outcome o;
    {
      pipe_step("starting Kokkos");
      std::unique_ptr<kten::ScopeGuard> guard;
      try {
        guard = std::make_unique<kten::ScopeGuard>();
      } catch (const std::exception& e) {
        o = {"crashed", std::string("ScopeGuard: ") + first_line(e.what())};
      }
      if (guard) o = run_case(dir, device, pipe_step);
      pipe_step("finalising Kokkos");
    }
    std::string detail = o.detail;
    std::replace(detail.begin(), detail.end(), '\n', ' ');
    const std::string line = "result\t" + o.kind + "\t" + detail + "\n";
    [[maybe_unused]] auto n = write(fds[1], line.data(), line.size());
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string last_step = "starting", result;
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("step\t", 0) == 0) last_step = l.substr(5);
    if (l.rfind("result\t", 0) == 0) result = l.substr(7);
  }
  const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!result.empty() && clean) {
    const auto tab = result.find('\t');
    return {result.substr(0, tab), tab == std::string::npos ? "" : result.substr(tab + 1)};
  }
  std::string how;
  if (WIFSIGNALED(status)) {
    how = WTERMSIG(status) == SIGALRM ? "timed out after " + std::to_string(timeout_s) + " s" : signal_text(WTERMSIG(status));
  } else {
    how = "exit status " + std::to_string(WEXITSTATUS(status));
  }
  return {"crashed", how + " while " + last_step};
}

// ---------------------------------------------------------------------------------------------

bool is_case(const fs::path& p) { return fs::is_regular_file(p / "model.onnx"); }

bool opset_only(const std::string& detail) {
  return detail.find("kten imports opsets") != std::string::npos ||
         (detail.find("' is supported at opsets ") != std::string::npos && detail.find(", not ") != std::string::npos);
}

int usage() {
  std::cerr << "usage: kten-onnx-conformance [--device cpu|gpu] [--expect FILE] [--write-expect FILE] [--timeout SECONDS]\n"
               "                             [--one CASE_DIR] CASES_DIR...\n";
  return 2;
}

}  // namespace

int main(int argc, char* argv[]) {
  kten::test::configure_run();
  std::string device_name = std::getenv("KTEN_TEST_DEVICE") ? std::getenv("KTEN_TEST_DEVICE") : "cpu";
  std::string expect_file, write_file, one;
  int timeout_s = 120;
  std::vector<fs::path> roots;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--device") device_name = value();
      else if (a == "--expect") expect_file = value();
      else if (a == "--write-expect") write_file = value();
      else if (a == "--timeout") timeout_s = std::stoi(value());
      else if (a == "--one") one = value();
      else if (a == "-h" || a == "--help") return usage();
      else if (!a.empty() && a[0] == '-') return usage();
      else roots.emplace_back(a);
    } catch (const std::exception& e) {
      std::cerr << e.what() << '\n';
      return usage();
    }
  }
  if (device_name != "cpu" && device_name != "gpu") return usage();
  const kten::Device device = device_name == "cpu" ? kten::cpu() : kten::gpu(0);

  if (!one.empty()) {  // in this process: a crash is this process' own, for a debugger
    kten::ScopeGuard guard;
    const Outcome o = run_case(one, device, [](const std::string& s) { std::cerr << "step: " << s << '\n'; });
    std::cout << fs::path(one).filename().string() << ": " << o.kind << (o.detail.empty() ? "" : ": ") << o.detail << '\n';
    return o.kind == "right" || o.kind == "refused" ? 0 : 1;
  }
  if (roots.empty()) return usage();

  std::vector<fs::path> cases;
  for (const auto& r : roots) {
    if (is_case(r)) {
      cases.push_back(r);
    } else if (fs::is_directory(r)) {
      for (const auto& e : fs::directory_iterator(r))
        if (is_case(e.path())) cases.push_back(e.path());
    } else {
      std::cerr << "kten-onnx-conformance: " << r << " is neither a case folder nor a folder of cases\n";
      return 2;
    }
  }
  std::sort(cases.begin(), cases.end(), [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });

  std::map<std::string, std::string> expected;  // case -> right, wrong, refused
  if (!expect_file.empty()) {
    std::ifstream in(expect_file);
    if (!in) {
      std::cerr << "kten-onnx-conformance: cannot read " << expect_file << '\n';
      return 2;
    }
    for (std::string l; std::getline(in, l);) {
      l = l.substr(0, l.find('#'));
      std::istringstream ls(l);
      std::string name, kind;
      if (ls >> name >> kind) expected[name] = kind;
    }
  }

  const auto start = std::chrono::steady_clock::now();
  struct Count {
    int right = 0, wrong = 0, refused = 0, crashed = 0;
  };
  std::map<std::string, Count> per_op;
  Count total;
  int opset_refusals = 0, unexpected = 0, known_wrong = 0;
  std::vector<std::string> notes;
  std::vector<std::pair<std::string, Outcome>> results;
  std::cout << "kten-onnx-conformance: " << cases.size() << " cases on " << device << '\n';
  for (const auto& c : cases) {
    const std::string name = c.filename().string();
    const Outcome o = run_in_child(c, device, timeout_s);
    results.emplace_back(name, o);
    std::cout << name << ": " << o.kind << (o.detail.empty() ? "" : ": ") << o.detail << std::endl;
    auto bump = [&](Count& n) {
      if (o.kind == "right") ++n.right;
      else if (o.kind == "wrong") ++n.wrong;
      else if (o.kind == "refused") ++n.refused;
      else ++n.crashed;
    };
    bump(total);
    const auto ops = model_ops(c);
    for (const auto& op : ops) bump(per_op[op]);
    if (ops.empty()) bump(per_op["(no nodes)"]);
    if (o.kind == "refused" && opset_only(o.detail)) ++opset_refusals;
    if (!expect_file.empty()) {
      const auto it = expected.find(name);
      if (it == expected.end()) {
        notes.push_back("NEW: " + name + " is " + o.kind + ", and not in " + expect_file);
        ++unexpected;
      } else if (it->second != o.kind) {
        notes.push_back("CHANGED: " + name + " was " + it->second + ", now " + o.kind + (o.detail.empty() ? "" : ": ") + o.detail);
        ++unexpected;
      } else if (o.kind == "wrong") {
        notes.push_back("KNOWN WRONG: " + name + ": " + o.detail);
        ++known_wrong;
      } else if (o.kind == "crashed") {
        notes.push_back("CRASHED (as expected, still a failure): " + name + ": " + o.detail);
        ++unexpected;
      }
    } else if (o.kind == "wrong" || o.kind == "crashed") {
      ++unexpected;
    }
  }
  if (!expect_file.empty()) {
    std::set<std::string> ran;
    for (const auto& [n, o] : results) ran.insert(n);
    for (const auto& [n, k] : expected)
      if (!ran.count(n)) {
        notes.push_back("MISSING: " + n + " (" + k + " in " + expect_file + ") was not among the cases");
        ++unexpected;
      }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::cout << "\nper op type (a case counts once under each op type its model uses):\n";
  std::size_t width = 7;
  for (const auto& [op, n] : per_op) width = std::max(width, op.size());
  std::printf("  %-*s %6s %6s %8s %8s\n", static_cast<int>(width), "op", "right", "wrong", "refused", "crashed");
  for (const auto& [op, n] : per_op)
    std::printf("  %-*s %6d %6d %8d %8d\n", static_cast<int>(width), op.c_str(), n.right, n.wrong, n.refused, n.crashed);
  std::printf("\n%zu cases on %s in %.1f s: %d right, %d wrong, %d refused (%d of them only for the opset), %d crashed\n",
              cases.size(), device_name.c_str(), seconds, total.right, total.wrong, total.refused, opset_refusals, total.crashed);
  std::fflush(stdout);

  if (!write_file.empty()) {
    std::ofstream out(write_file);
    out << "# The outcome of each ONNX node conformance case under tests/fixtures/onnx/node/ with today's kten,\n"
           "# checked by the onnx.conformance CTests (kten-onnx-conformance --expect this file): a case whose\n"
           "# outcome changes fails them, so that an improvement updates this file deliberately:\n"
           "#   kten-onnx-conformance --write-expect tests/fixtures/onnx/node/expected.txt tests/fixtures/onnx/node\n"
           "# then review its diff. A 'wrong' line is a known wrong result (the comment says how): every run\n"
           "# reports it without failing; a new wrong result fails until it is fixed or recorded here.\n";
    for (const auto& [n, o] : results) {
      out << n << ' ' << o.kind;
      if (o.kind == "wrong" || o.kind == "crashed") out << "  # " << o.detail;
      out << '\n';
    }
    if (!out) {
      std::cerr << "kten-onnx-conformance: cannot write " << write_file << '\n';
      return 2;
    }
    std::cout << "wrote " << write_file << '\n';
  }
  for (const auto& n : notes) std::cout << n << '\n';
  if (!expect_file.empty())
    std::cout << (unexpected ? "FAILED: " : "passed: ") << unexpected << " case(s) differ from " << expect_file
              << " or crashed, " << known_wrong << " known wrong\n";
  else if (unexpected)
    std::cout << "FAILED: " << unexpected << " case(s) wrong or crashed\n";
  return unexpected ? 1 : 0;
}
