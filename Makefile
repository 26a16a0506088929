# The README's two commands:
#   make demo   build, then run the accel tool on the bundled sample data
#   make test   build and test the CUDA-enabled, CPU-only and sanitizer builds
# and, for the fuzz harnesses of tests/fuzz (clang, libFuzzer, ASan + UBSan):
#   make fuzz   run each harness FUZZ_SECONDS (default 60); fails if one finds a crash
# All three install missing Debian packages first when run as root.
PYTHON ?= python3
JOBS ?= $(shell nproc)
ACCEL := build/tools/accel/accel
FUZZ_SECONDS ?= 60
NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)

.PHONY: all demo test gpu-check fuzz deps-demo deps-test deps-fuzz build clean

all: build

deps-demo:
	@scripts/ensure-deps.sh demo $(PYTHON)

deps-test:
	@scripts/ensure-deps.sh test $(PYTHON)

deps-fuzz:
	@scripts/ensure-deps.sh fuzz $(PYTHON)

build: deps-demo
	@[ -f build/build.ninja ] || meson setup build -Dpython=$(PYTHON) $(if $(NVCC),-Dcuda=enabled,) \
	  $(if $(CUDA_ARCH),-Dcuda-arch=$(CUDA_ARCH),)
	meson compile -C build -j $(JOBS)

demo: build
	$(ACCEL) info
	$(ACCEL) hash --kinds ahash,dhash,phash,whash,colorhash samples/photos
	$(ACCEL) dupes samples/photos --kinds dhash,ahash --threshold 5
	$(ACCEL) gray --out build/demo samples/astronaut.ppm
	$(ACCEL) ct segment samples/ct/food_aniso_64x96x80.npy --threshold -300 --spacing 2,0.5,0.5 \
	  --out-labels build/demo/food.labels.npy --network build/demo/food.network.json
	$(ACCEL) shadow --dsm samples/svf/city_dsm.npy --cdsm samples/svf/city_cdsm.npy --pixel-size 1 \
	  --azimuth 247.5 --altitude 12 --out build/demo/svf
	$(ACCEL) svf --dsm samples/svf/city_dsm.npy --cdsm samples/svf/city_cdsm.npy --pixel-size 1 \
	  --out build/demo/svf
	$(ACCEL) register --fixed samples/reg/fixed.tif --moving samples/reg/moving_rgb.tif \
	  --out-transform build/demo/reg.T.txt --out-field build/demo/reg.field.npy \
	  --out-warped build/demo/reg.moving_on_fixed.tif

test: deps-test
	@PYTHON=$(PYTHON) JOBS=$(JOBS) CUDA_ARCH=$(CUDA_ARCH) scripts/test-all.sh

# On a machine with an NVIDIA GPU: build for it, run the GPU suite plain and under
# compute-sanitizer and the benchmarks' GPU rows; report in bench/results/ (FULL=1: full sizes)
gpu-check:
	@scripts/gpu-check.sh $(if $(FULL),--full,)

fuzz: deps-fuzz
	@FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) tests/fuzz/run.sh

clean:
	rm -rf build build-cpu build-asan build-gpu build-fuzz build-wheel build*.log
