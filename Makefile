# weft — convenience wrapper around CMake. The two commands that matter:
#   make report   build weft and the peers, run the benchmarks, print the table
#   make test     build normal, ASan+UBSan and TSan trees; run every test in
#                 each at 1 vcore and at all vcores, the stress tier 5 more times
# Also: make build | make install [PREFIX=/usr/local] | make cross | make clean
# Installs missing Debian packages through scripts/deps.sh first.

PREFIX   ?= /usr/local
JOBS     ?= $(shell nproc)
CTEST_J  ?= 2
STRESS_REPEAT ?= 5
SAN_CC   ?= clang-19
GEN      := -G Ninja

.PHONY: install-check all build test test-normal test-asan test-tsan cross report install clean deps-core deps-test deps-bench

all: build

deps-core:  ; @scripts/deps.sh core
deps-test:  ; @scripts/deps.sh test
deps-bench: ; @scripts/deps.sh bench

build: deps-core
	cmake -S . -B build $(GEN) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build -j $(JOBS)

test: deps-test test-normal install-check test-asan test-tsan cross
	@echo "make test: all builds passed"

test-normal: deps-test
	cmake -S . -B build-test $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build-test -j $(JOBS)
	ctest --test-dir build-test --output-on-failure -j $(CTEST_J)
	ctest --test-dir build-test --output-on-failure -j $(CTEST_J) -L stress --repeat until-fail:$(STRESS_REPEAT)

test-asan: deps-test
	cmake -S . -B build-asan $(GEN) -DCMAKE_C_COMPILER=$(SAN_CC) -DWEFT_SANITIZE=address >/dev/null
	cmake --build build-asan -j $(JOBS)
	ctest --test-dir build-asan --output-on-failure -j $(CTEST_J)
	ctest --test-dir build-asan --output-on-failure -j $(CTEST_J) -L stress --repeat until-fail:$(STRESS_REPEAT)

test-tsan: deps-test
	cmake -S . -B build-tsan $(GEN) -DCMAKE_C_COMPILER=$(SAN_CC) -DWEFT_SANITIZE=thread >/dev/null
	cmake --build build-tsan -j $(JOBS)
	ctest --test-dir build-tsan --output-on-failure -j $(CTEST_J)
	ctest --test-dir build-tsan --output-on-failure -j $(CTEST_J) -L stress --repeat until-fail:$(STRESS_REPEAT)

# make install works: pkg-config and find_package(weft) both build examples/hello.c.
install-check: test-normal
	scripts/check-install.sh build-test

# aarch64: cross-compile the library and a smoke test, run it under qemu-user.
cross: deps-test
	scripts/cross-aarch64.sh

report: deps-bench build
	python3 bench/micro.py

install: build
	cmake --install build --prefix $(PREFIX)

clean:
	rm -rf build build-test build-asan build-tsan build-aarch64
