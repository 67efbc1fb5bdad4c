# weft — convenience wrapper around CMake. The two commands that matter:
#   make report   build weft and every peer, run the benchmarks side by side and
#                 write bench/report/README.md (+ plots); FULL=1 for the full set
#   make test     build normal, ASan+UBSan and TSan trees; run every test in
#                 each at 1 vcore and at all vcores, the stress tier 5 more times
# Also: make build | make install [PREFIX=/usr/local] | make cross | make clean
#       make conformance (the Open POSIX Test Suite, glibc against weft)
# Installs missing Debian packages through scripts/deps.sh first.

PREFIX   ?= /usr/local
JOBS     ?= $(shell nproc)
CTEST_J  ?= 2
STRESS_REPEAT ?= 5
SAN_CC   ?= clang-19
GEN      := -G Ninja

.PHONY: conformance install-check all build test test-normal test-asan test-tsan cross report install clean deps-core deps-test deps-bench fuzz

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

# make install works: pkg-config and find_package(weft) both build examples/hello.c;
# the installed weft-cc and weft-yield.pc build, link and run instrumented code
# (skipped when the tree has no yield plugin, i.e. no LLVM 19); and the whole
# tree builds with CMake's default generator (Unix Makefiles), not only Ninja.
install-check: test-normal
	scripts/check-install.sh build-test
	plugin/check-install.sh build-test --link
	scripts/check-default-generator.sh $(JOBS)

# aarch64: cross-compile the library and a smoke test, run it under qemu-user.
cross: deps-test
	scripts/cross-aarch64.sh

# bench/run.py builds the tree with the benchmarks and the Go and Rust peers, runs
# every section, writes bench/results/<host>-<time>.json and renders bench/report/.
# It fails if a run failed (a missing peer is reported, not a failure). Debian's
# python3 is used because python3-matplotlib is installed for it.
PYTHON ?= /usr/bin/python3
report: deps-bench build
	$(PYTHON) bench/run.py $(if $(filter-out 0,$(FULL)),--full)

install: build
	cmake --install build --prefix $(PREFIX)

# The Open POSIX Test Suite's pthread_* and sem_* tests on glibc and on
# libweft-pthread, side by side (tests/conformance/opts.sh; fetches Debian's
# posixtestsuite source package on first use; about 10 minutes).
conformance: build
	@scripts/deps.sh conformance
	tests/conformance/opts.sh --lib build/src --work build-opts

# libFuzzer on examples/httpd's request parser (clang-19, ASan+UBSan), for
# FUZZ_TIME seconds (default 60). The corpus grows in build-fuzz/fuzz-corpus,
# seeded from examples/httpd/fuzz_seeds; crash inputs land in build-fuzz/.
fuzz: deps-test
	cmake -S . -B build-fuzz $(GEN) -DCMAKE_C_COMPILER=clang-19 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target httpd_fuzz_parse
	mkdir -p build-fuzz/fuzz-corpus
	build-fuzz/examples/httpd/fuzz_parse -max_total_time=$(or $(FUZZ_TIME),60) -timeout=10 \
	  -max_len=20000 -dict=examples/httpd/fuzz_parse.dict -print_final_stats=1 -artifact_prefix=build-fuzz/ \
	  build-fuzz/fuzz-corpus examples/httpd/fuzz_seeds

clean:
	rm -rf build build-test build-asan build-tsan build-aarch64 build-opts
