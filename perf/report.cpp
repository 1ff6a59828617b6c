// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kten-perf's report: summary.json, results.csv, the plots (gnuplot), the printed ratio table, the
// machine's description, and the warning when OpenBLAS runs a kernel below the machine's ISA.
#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <kten/kten.hpp>

#include "baselines/host_baseline.hpp"
#include "baselines/libtorch.hpp"
#include "baselines/vendor_baseline.hpp"
#include "perf_harness.hpp"
#include "git_hash.hpp"  // generated at build time

namespace kten::perf {

// --- summary, CSV, plots ----------------------------------------------------------------------------

namespace {

/// \brief An environment variable's value, or "unset".
std::string env_or_unset(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "unset";
}

/// \brief The 1-minute load average when the run started (other work on the machine skews it).
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string first;
  in >> first;
  return first.empty() ? "unknown" : first;
}
const std::string load_at_start = load_average();

/// \brief How wide a vector ISA an OpenBLAS x86-64 kernel (openblas_get_corename()) or kten's
/// HostIsa name stands for: 3 AVX-512, 2 AVX2, 1 AVX, 0 older or unknown.
int isa_rank(std::string name) {
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto has = [&](std::initializer_list<const char*> parts) {
    for (const char* part : parts)
      if (name.find(part) != std::string::npos) return true;
    return false;
  };
  if (has({"skylakex", "cooperlake", "sapphirerapids", "zen4", "avx-512", "avx512"})) return 3;
  if (has({"haswell", "zen", "skylake", "avx2"})) return 2;
  if (has({"sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"})) return 1;
  return 0;
}

/// \brief The warning `make perf` prints when OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE are set ("" when
/// neither is): they pick OpenBLAS' kernel and blocking instead of its own detection, which on some
/// machines of this project choose a kernel below the CPU's ISA, and the GEMM ratios then measure
/// kten against that kernel.
bool openblas_below_isa() { return isa_rank(openblas_get_corename()) < isa_rank(kten::cpu_vector_isa()); }

}  // namespace

std::string openblas_warning() {
  const std::string coretype = env_or_unset("OPENBLAS_CORETYPE"), l2 = env_or_unset("OPENBLAS_L2_SIZE");
  const std::string core = openblas_get_corename();
  const bool below = openblas_below_isa();
  if (coretype == "unset" && l2 == "unset") {
    if (!below) return "";
    // OpenBLAS' own detection chose it (Prescott, SSE3, on this project's AVX-512 Xeon).
    return "warning: OpenBLAS picked its '" + core + "' kernel by itself, below this machine's " +
           kten::cpu_vector_isa() + ": the ratios against OpenBLAS, and against libtorch, whose GEMMs call it, "
           "are withheld (null in summary.json, under baseline_below_isa). To measure them, name this machine's "
           "kernel: OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) make perf\n";
  }
  std::ostringstream os;
  os << "warning: OPENBLAS_CORETYPE=" << coretype << " OPENBLAS_L2_SIZE=" << l2 << " are set: OpenBLAS runs its '"
     << core << "' kernel" << (below ? ", below this machine's " + kten::cpu_vector_isa() : "")
     << ", so the matmul rows compare kten with that kernel"
     << (below ? " and are withheld with the libtorch rows (null in summary.json, under baseline_below_isa)" : "")
     << ". For a perf run, unset both: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE make perf\n";
  return os.str();
}

std::string machine_json() {
  std::ostringstream os;
  os << "{\"cpu\":\"" << kten::cpu_model() << "\",\"host_threads\":" << kten::host_threads()
     << ",\"vector_isa\":\"" << kten::cpu_vector_isa() << "\",\"gemm_micro_kernel\":\"" << kten::gemm_micro_kernel()
     << "\",\"host_serial_grain\":" << kten::host_serial_grain() << ",\"omp_proc_bind\":\""
     << env_or_unset("OMP_PROC_BIND") << "\",\"omp_places\":\"" << env_or_unset("OMP_PLACES")
     << "\",\"load_average_at_start\":\"" << load_at_start << "\",\"openblas_core\":\"" << openblas_get_corename()
     << "\",\"openblas_below_isa\":" << (openblas_below_isa() ? "true" : "false")
     << ",\"openblas_config\":\"" << openblas_get_config() << "\",\"openblas_coretype\":\""
     << env_or_unset("OPENBLAS_CORETYPE") << "\",\"openblas_l2_size\":\"" << env_or_unset("OPENBLAS_L2_SIZE")
     << "\",\"eigen\":\"" << kten::perf::eigen_version()
#ifdef KTEN_PERF_LIBTORCH
     << "\",\"libtorch\":\"" << kten::perf::libtorch::version() << "\",\"libtorch_blas\":\""
     << kten::perf::libtorch::blas()
#endif
     << "\",\"gpus\":[";
  bool first = true;
  for (const auto& g : kten::gpu_properties()) {
    os << (first ? "" : ",") << "\"" << g.name << "\"";
    first = false;
  }
  os << "],\"device\":\"" << config.device << "\",\"kokkos\":\"" << kten::kokkos_version() << "\",\"backends\":[";
  first = true;
  for (const auto& b : kten::enabled_backends()) {
    os << (first ? "" : ",") << "\"" << b << "\"";
    first = false;
  }
  os << "],\"kten\":\"" << kten::version() << "\",\"git\":\"" << KTEN_GIT_HASH << "\",\"quick\":"
     << (config.quick ? "true" : "false") << "}";
  return os.str();
}

namespace {

/// \brief How far above 1 a ratio to a memory limit may lie by noise; beyond it the baseline did not
/// reach the machine's limit, and the ratio is reported as that, not as a result.
constexpr double kLimitSlack = 1.05;

bool suspect(const Row& r) { return r.against_limit && r.value > kLimitSlack; }

/// \brief A ratio against OpenBLAS while it runs a kernel below the ISA kten was built for: against
/// that kernel, not the machine, so no result (reported apart).
bool weak_baseline(const Row& r) { return r.against_blas && openblas_below_isa(); }

/// \brief A ratio not reported as a result: its baseline is wrong (suspect) or weak.
bool withheld(const Row& r) { return suspect(r) || weak_baseline(r); }

/// \brief What the device under test is, for the plots' titles: the GPU's name, or the CPU and its ISA.
std::string device_name() {
  if (config.device.is_gpu() && !kten::gpus_are_emulated())
    for (const auto& g : kten::gpu_properties())
      if (g.used_by_kten) return g.name;
  return kten::cpu_model() + ", " + kten::cpu_vector_isa();
}

}  // namespace

void write_outputs(const std::vector<Row>& rows, const std::vector<std::int64_t>& sizes,
                   const std::string& exercises_json) {
  namespace fs = std::filesystem;
  const fs::path out(config.out);
  {
    std::ofstream js(out / "summary.json");
    js << "{\n  \"machine\": " << machine_json() << ",\n  \"load_average_at_end\": \"" << load_average()
       << "\",\n  \"ratios\": {";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      js << (i ? "," : "") << "\n    \"" << rows[i].key << "\": ";
      if (rows[i].value > 0 && !withheld(rows[i])) js << rows[i].value;
      else js << "null";
    }
    js << "\n  },\n  \"baseline_below_limit\": {";  // ratios not reported: the baseline missed the machine's limit
    bool first = true;
    for (const auto& r : rows)
      if (suspect(r)) {
        js << (first ? "" : ",") << "\n    \"" << r.key << "\": " << r.value;
        first = false;
      }
    js << "\n  },\n  \"baseline_below_isa\": {";  // ratios against an OpenBLAS kernel below the machine's ISA
    first = true;
    for (const auto& r : rows)
      if (weak_baseline(r) && r.value > 0) {
        js << (first ? "" : ",") << "\n    \"" << r.key << "\": " << r.value;
        first = false;
      }
    js << "\n  },\n  \"targets\": {";
    for (std::size_t i = 0; i < rows.size(); ++i)
      js << (i ? "," : "") << "\n    \"" << rows[i].key << "\": \"" << rows[i].target << "\"";
    js << "\n  },\n  \"exercises\": " << exercises_json << "\n}\n";
  }
  {
    std::ofstream csv(out / "results.csv");
    csv << "benchmark,seconds_per_iteration,work_per_iteration,rate_per_second\n";
    for (const auto& [name, m] : results)
      csv << name << ',' << m.seconds << ',' << m.items << ',' << (m.seconds > 0 ? m.items / m.seconds : 0) << '\n';
  }
  {
    std::ofstream dat(out / "gemm.dat");
    dat << "# n kten_f32 vendor_f32 kten_f64 vendor_f64 eigen_f32 (GFLOP/s)\n";
    for (auto n : sizes) {
      const std::string s = "/" + std::to_string(n);
      dat << n << ' ' << rate("gemm/kten/float32" + s) / 1e9 << ' ' << rate("gemm/vendor/float32" + s) / 1e9 << ' '
          << rate("gemm/kten/float64" + s) / 1e9 << ' ' << rate("gemm/vendor/float64" + s) / 1e9 << ' '
          << rate("gemm/eigen/float32" + s) / 1e9 << '\n';
    }
    std::ofstream bw(out / "bandwidth.dat");
    int i = 0;
    for (const char* k : {"triad", "copy", "read", "deep_copy", "fma", "a*b+c", "exp", "sum", "norm", "max", "eigen_fma", "eigen_exp"})
      bw << i++ << " \"" << k << "\" " << rate(std::string("bandwidth/") + k) / 1e9 << '\n';
    const std::string vendor = config.device.is_cpu() ? "OpenBLAS" : kten::perf::gpu_blas_name();
    std::ofstream gp(out / "plots.gp");
    gp << "set terminal pngcairo size 900,560 noenhanced\nset grid\nset key outside right\n"
       << "set output 'gemm.png'\n"
       << "set title 'matmul on " << config.device << " (" << device_name() << ")'\n"
       << "set xlabel 'n (n x n times n x n)'\nset ylabel 'GFLOP/s'\nset logscale x 2\n"
       << "plot 'gemm.dat' using 1:2 with linespoints title 'kten float32', "
       << "'' using 1:3 with linespoints title '" << vendor << " sgemm', "
       << "'' using 1:4 with linespoints title 'kten float64', '' using 1:5 with linespoints title '" << vendor
       << " dgemm'" << (config.device.is_cpu() ? ", '' using 1:6 with linespoints title 'Eigen float32'" : "") << "\n"
       << "unset logscale x\nset output 'bandwidth.png'\n"
       << "set title 'memory-bound operations on " << config.device << ", " << (config.quick ? "2^20" : "2^26")
       << " float32'\nset ylabel 'GB/s (useful bytes)'\nset xlabel ''\nset style fill solid 0.6\nset boxwidth 0.6\n"
       << "set yrange [0:*]\nplot 'bandwidth.dat' using 1:3:xtic(2) with boxes notitle\n";
  }
  const auto vs_libtorch = [](const Row& r) {
    return r.key.find("_vs_libtorch") != std::string::npos && r.value > 0 && !withheld(r);
  };
  if (std::any_of(rows.begin(), rows.end(), vs_libtorch)) {  // beside the GEMM plot: kten against libtorch
    std::ofstream dat(out / "libtorch.dat");
    int i = 0;
    for (const auto& r : rows)
      if (vs_libtorch(r)) dat << i++ << " \"" << r.key.substr(0, r.key.find("_vs_libtorch")) << "\" " << r.value << '\n';
    std::ofstream gp(out / "plots.gp", std::ios::app);
    gp << "set output 'libtorch.png'\nset title 'libtorch time / kten time on "
       << config.device << " (" << kten::cpu_model() << ", " << kten::host_threads()
       << " threads; above 1: kten is faster)'\nset ylabel 'ratio'\nset xtics rotate by -40\n"
       << "set logscale y 2\nset yrange [*:*]\nplot 'libtorch.dat' using 1:3:xtic(2) with boxes notitle, "
       << "1 with lines lw 2 notitle\n";
  }
  // plots.gp names its files relative to the output folder, so that it draws them again wherever
  // the folder is copied (a GPU node's results are plotted afterwards, where gnuplot is).
  const std::string cmd = "cd '" + out.string() + "' && " + std::string(KTEN_GNUPLOT) + " plots.gp";
  if (std::system(cmd.c_str()) != 0) std::cout << "gnuplot failed: " << cmd << '\n';
}

void print_summary(const std::vector<Row>& rows) {
  std::cout << "\nhost: " << kten::cpu_model() << ", " << kten::host_threads() << " threads, " << kten::cpu_vector_isa()
            << "; matmul " << kten::gemm_micro_kernel() << "; OMP_PROC_BIND=" << env_or_unset("OMP_PROC_BIND")
            << " OMP_PLACES=" << env_or_unset("OMP_PLACES") << "; load average " << load_at_start << " at start, "
            << load_average() << " at end\n";
  std::size_t key_width = 34;  // the longest row name and two spaces
  for (const auto& r : rows) key_width = std::max(key_width, r.key.size() + 2);
  const int key_column = static_cast<int>(key_width);
  std::cout << "\n" << std::left << std::setw(key_column) << "ratio" << std::setw(10) << "measured" << std::setw(24)
            << "target" << "what\n";
  for (const auto& r : rows) {
    std::ostringstream v;
    if (suspect(r)) v << "baseline?";
    else if (weak_baseline(r) && r.value > 0) v << "weak BLAS";
    else if (r.value > 0) v << std::fixed << std::setprecision(2) << r.value;
    else v << "n/a";
    std::cout << std::setw(key_column) << r.key << std::setw(10) << v.str() << std::setw(24) << r.target << r.what << '\n';
  }
  for (const auto& r : rows)
    if (suspect(r))
      std::cout << "baseline? " << r.key << ": " << std::fixed << std::setprecision(2) << r.value << " > " << kLimitSlack
                << " of the memory limit measured in this run, so that baseline did not reach the machine's limit"
                << " (noise, another load, a cold run): not a result. Run again on a quiet machine.\n";
  if (!openblas_warning().empty()) std::cout << '\n' << openblas_warning();
  std::cout << "\nmachine: " << machine_json() << "\nwritten to " << config.out
            << ": perf.json summary.json results.csv workloads.json gemm.png bandwidth.png"
#ifdef KTEN_PERF_LIBTORCH
            << " libtorch.png"
#endif
            << "\n";
}

}  // namespace kten::perf
