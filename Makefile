# webtune's two entry points. Each one does all setup on a fresh Debian 12 machine:
#   make demo   installs dependencies, builds, and runs a real tuning on the local GL device
#   make test   installs dependencies, builds, and runs the whole test suite
# and two checks that CI runs after `make test` (docs/fuzzing.md):
#   make sanitize-test  builds $(ASAN_BUILD) with clang, ASan + UBSan, and runs the fast tests
#   make fuzz-smoke     builds the libFuzzer harnesses there and runs each $(FUZZ_SECONDS) s
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ASAN_BUILD ?= build-asan
FUZZ_SECONDS ?= 60
# One build serves both checks: every library carries the sanitizers and libFuzzer's coverage.
# No LLVM (the wasm emitter) and no benchmarks; -O1 with line tables keeps it quick on 2 cores.
ASAN_CMAKE_FLAGS ?= -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DWEBTUNE_SANITIZE=ON -DWEBTUNE_FUZZ=ON -DWEBTUNE_WITH_LLVM=OFF -DWEBTUNE_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only"
# Stacks for UBSan's reports (ASan prints its own; its leak checker is on by default).
SANITIZER_ENV = UBSAN_OPTIONS=print_stacktrace=1

.PHONY: demo test deps configure build clean format asan-configure sanitize-test fuzz-smoke

deps:
	scripts/install-deps

configure: deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	scripts/demo $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

asan-configure: deps
	cmake -S . -B $(ASAN_BUILD) -G Ninja $(ASAN_CMAKE_FLAGS)

sanitize-test: asan-configure
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target fast_tests
	cd $(ASAN_BUILD) && $(SANITIZER_ENV) ctest -L fast --output-on-failure -j $(JOBS)

fuzz-smoke: asan-configure
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target fuzzers
	$(SANITIZER_ENV) fuzz/run-long --seconds $(FUZZ_SECONDS) --parallel $(JOBS) \
	  --build $(ASAN_BUILD) --out $(ASAN_BUILD)/fuzz-smoke

format:
	git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
