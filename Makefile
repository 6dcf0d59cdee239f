# tpc — the two commands: `make demo` and `make test`. Everything else is a step of those.
BUILD ?= build
JOBS ?= $(shell nproc)
# -g1: line tables and function names (backtraces, perf) without the variables' debug
# information, which was 40% of a clean build's compile time.
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
DEMO_MODEL ?= models/gpt2.onnx
DEMO_OUT ?= $(BUILD)/demo

.PHONY: all deps configure build test test-sanitize demo bench format clean

all: build

deps:
	@tools/install_deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The suite, then the same suite once more under ASan+UBSan (a second build tree).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-sanitize

SANITIZE_BUILD ?= build-asan
test-sanitize: deps
	@[ -f $(SANITIZE_BUILD)/build.ninja ] || cmake -S . -B $(SANITIZE_BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" -DTPC_SANITIZE=ON
	cmake --build $(SANITIZE_BUILD) -j $(JOBS)
	cd $(SANITIZE_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

demo: build
	@tools/demo.sh $(BUILD) $(DEMO_MODEL) $(DEMO_OUT)

bench: build
	@bench/run.sh $(BUILD)

# libFuzzer harnesses (fuzz/README.md): a separate clang build with ASan+UBSan, then each
# fuzzer for FUZZ_SECONDS; exits non-zero, naming the input, when one crashed.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz:
	@tools/install_deps.sh --fuzz
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DTPC_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h' '*.cu')

clean:
	rm -rf $(BUILD) $(SANITIZE_BUILD) $(FUZZ_BUILD)
