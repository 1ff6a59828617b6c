# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# kten's front door. `make tour` runs the main job, `make test` the test suite; both set up a
# fresh Debian 12 machine first (scripts/setup), then configure, build and run with CMake presets.
PRESET ?= cpu
PREFIX ?= $(CURDIR)/install/$(PRESET)
BUILD   = build/$(PRESET)
CONFIGURE_ARGS ?=

.PHONY: all setup configure build test tour info cuda hip perf perf-mpi docs install clean

all: build

setup:
	@scripts/setup $(if $(filter cuda,$(PRESET)),--cuda) $(if $(filter hip,$(PRESET)),--hip) $(if $(filter clang% tsan,$(PRESET)),--clang)

# A build configured without PyTorch (the torch-missing note, tests/torch/CMakeLists.txt) is
# configured again once `scripts/setup --torch` has installed it.
configure: setup
	@test -f $(BUILD)/build.ninja || cmake --preset $(PRESET) $(CONFIGURE_ARGS)
	@if [ -s $(BUILD)/torch-missing ] && [ -f "$$(cat $(BUILD)/torch-missing)" ]; then \
	  echo "PyTorch is installed now: configuring $(BUILD) again for the torch label"; cmake --preset $(PRESET) $(CONFIGURE_ARGS); fi

build: configure
	cmake --build --preset $(PRESET)

# After CTest's own summary, make test names every label (or part of one) that this build left
# out and why (skipped-labels, written at configure: the torch label without PyTorch, say).
test: build
	@echo "ctest --preset $(PRESET) -j $(shell nproc)"; status=0; ctest --preset $(PRESET) -j $(shell nproc) || status=$$?; \
	if [ -s $(BUILD)/skipped-labels ]; then \
	  echo "make test: these test labels were SKIPPED by the $(PRESET) build:"; sed 's/^/  /' $(BUILD)/skipped-labels; \
	fi; exit $$status

tour: build
	$(BUILD)/examples/kten-tour $(ARGS)

info: build
	$(BUILD)/examples/kten-info

# Set up CUDA 11.8 and build everything for CUDA (compile and link only on a machine without a GPU).
cuda:
	$(MAKE) build PRESET=cuda

# Set up Debian's ROCm 5.2 (hipcc) and build everything for AMD MI200 GPUs (gfx90a): compile and
# link only on a machine without one.
hip:
	$(MAKE) build PRESET=hip

# The perf suite on the default device; results (JSON, CSV, PNG plots) under build/<preset>/perf.
# Where OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set it warns: OpenBLAS then runs the kernel they
# name. For a perf run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE make perf
perf: build
	OMP_PROC_BIND=$${OMP_PROC_BIND:-spread} OMP_PLACES=$${OMP_PLACES:-threads} $(BUILD)/perf/kten-perf --out $(BUILD)/perf $(ARGS)

# kten::dist's all_reduce against raw MPI_Allreduce, and training on 1 vs 2 ranks (MPI_RANKS=2);
# results under build/<preset>/perf-mpi. Open MPI needs the two variables to run as root.
MPI_RANKS ?= 2
perf-mpi: build
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_PROC_BIND=$${OMP_PROC_BIND:-false} \
	  mpiexec -n $(MPI_RANKS) $(BUILD)/perf/kten-perf-mpi --out $(BUILD)/perf-mpi $(ARGS)

# libFuzzer on the parameter loader, the safetensors reader with load_state_dict, the
# checkpoint loader and the ONNX loader (KTEN_ENABLE_ONNX, on in the preset), for FUZZ_SECONDS
# each (60 by default; run longer by hand, e.g. `make fuzz FUZZ_SECONDS=3600`): built in the
# clang-debug preset's tree (clang, ASan + UBSan, the library with libFuzzer's coverage
# instrumentation), only the fuzzers and the seed writer; the corpora
# (build/clang-debug/fuzz/corpus/<target>) are seeded with files from save(), save_safetensors(),
# save_checkpoint() and onnx::save(), and with the committed corpora of tests/fuzz/corpus/<target>
# (scripts/fuzz-coverage says what a corpus reaches). Findings are written to
# build/clang-debug/fuzz/ (<target>-crash-*, <target>-leak-*) and make fails; each fuzzer's output
# is in build/clang-debug/fuzz/<target>.log (its last lines are printed).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = load safetensors checkpoint onnx
# onnx-gpu: the ONNX fuzzer again on an emulated GPU with trapped memory (its code paths and error
# exits), sharing the onnx corpus. The fuzzers set their own limits (tests/fuzz/fuzz_limits.cpp:
# a model asking for more than 1 GiB gets kten's OutOfMemory, not a finding; one thread each).
# Each fuzzer's findings that were fixed are kept in tests/fuzz/regressions/<target> (a CTest of
# this tree runs them).
FUZZ_RUNS = $(FUZZ_TARGETS) $(if $(filter onnx,$(FUZZ_TARGETS)),onnx-gpu)
FUZZ_DIR = build/clang-debug/fuzz
.PHONY: fuzz
fuzz:
	$(MAKE) configure PRESET=clang-debug
	@grep -q '^KTEN_BUILD_FUZZ:BOOL=ON' build/clang-debug/CMakeCache.txt || cmake --preset clang-debug  # a tree configured before the fuzzers moved there
	cmake --build --preset clang-debug --target kten-fuzz-seeds $(addprefix kten-fuzz-,$(FUZZ_TARGETS))
	build/clang-debug/tests/fuzz/kten-fuzz-seeds $(FUZZ_DIR)/corpus
	@# The committed corpora (tests/fuzz/corpus: the long runs' inputs, minimised) join the seeds.
	for t in $(FUZZ_TARGETS); do if [ -d tests/fuzz/corpus/$$t ]; then cp -n tests/fuzz/corpus/$$t/* $(FUZZ_DIR)/corpus/$$t/; fi; done
	@# One fuzzer per core at a time (each is single-threaded): the same seconds each, in less wall time.
	printf '%s\n' $(FUZZ_RUNS) | xargs -P $(shell nproc) -I{} sh -c \
	  'target={}; gpu=""; if [ $$target = onnx-gpu ]; then target=onnx; gpu="KTEN_FUZZ_GPU=1 KTEN_EMULATE_GPUS=1 KTEN_TRAP_HOST_ACCESS=1"; fi; \
	   env $$gpu build/clang-debug/tests/fuzz/kten-fuzz-$$target $(FUZZ_DIR)/corpus/$$target -max_total_time=$(FUZZ_SECONDS) \
	     -artifact_prefix=$(FUZZ_DIR)/{}- -print_final_stats=1 >$(FUZZ_DIR)/{}.log 2>&1; status=$$?; \
	   echo "=== kten-fuzz-{} (exit status $$status)"; tail -n 40 $(FUZZ_DIR)/{}.log; exit $$status'

# The API reference: Doxygen over the public headers' \brief comments (docs/Doxyfile), HTML in
# build/docs/html (open index.html); warnings are errors, so an undocumented public declaration or a
# broken \ref fails. First scripts/check-links: every relative link and #anchor of the README and
# the guides resolves inside the repository. No build needed: kten/config.hpp, which CMake
# generates, is written for the reference from cmake/config.hpp.in, with this version, the
# bundled Kokkos and a host-only build's values.
KTEN_VERSION := $(shell sed -n 's/^project.kten VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
KOKKOS_BUNDLED := $(shell sed -n 's/^kokkos_release="\([0-9.]*\)".*/\1/p' scripts/setup)
docs:
	@scripts/setup --docs
	@scripts/check-links
	@rm -rf build/docs && mkdir -p build/docs/include/kten
	@v=$(KTEN_VERSION); sed -e "s/@PROJECT_VERSION@/$$v/; s/@PROJECT_VERSION_MAJOR@/$$(echo $$v | cut -d. -f1)/" \
	  -e "s/@PROJECT_VERSION_MINOR@/$$(echo $$v | cut -d. -f2)/; s/@PROJECT_VERSION_PATCH@/$$(echo $$v | cut -d. -f3)/" \
	  -e 's/@KTEN_CONFIG_MPI@/1/; s/@Kokkos_VERSION@/$(KOKKOS_BUNDLED)/; s/@KTEN_CONFIG_GPU_BACKEND@/nullptr/' \
	  cmake/config.hpp.in >build/docs/include/kten/config.hpp
	KTEN_VERSION=$(KTEN_VERSION) doxygen docs/Doxyfile
	@echo "make docs: the API reference is in build/docs/html/index.html"

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf build install
