# tpc — the two commands: `make demo` and `make test`. Everything else is a step of those.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
DEMO_MODEL ?= models/gpt2.onnx
DEMO_OUT ?= $(BUILD)/demo

.PHONY: all deps configure build test demo bench format clean

all: build

deps:
	@tools/install_deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@tools/demo.sh $(BUILD) $(DEMO_MODEL) $(DEMO_OUT)

bench: build
	@bench/run.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h' '*.cu')

clean:
	rm -rf $(BUILD)
