# latte: the two commands are `make speedtest` and `make test`.
# Needs a Rust toolchain, gcc/g++, make and python3; cargo fetches the crates.

CARGO    ?= cargo
CC       ?= gcc
CXX      ?= g++
PYTHON   ?= python3
REL      := target/release
LIB_SO   := $(REL)/liblatte.so
LIB_A    := $(REL)/liblatte.a
B        := build
# The Python package's virtual environment (make python-test, make speedtest).
PYVENV   := $(B)/python/venv
PYV      := $(PYVENV)/bin/python
VERSION  := $(shell sed -n 's/^version = "\([^"]*\)"/\1/p' Cargo.toml | head -n1)
MAJOR    := $(word 1,$(subst ., ,$(VERSION)))

# Libraries a Rust staticlib needs (cargo rustc -- --print native-static-libs).
STATIC_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
RPATH    := -Wl,-rpath,$(CURDIR)/$(REL)

CFLAGS_T   := -std=c99 -Wall -Wextra -Werror -pedantic -O2 -g -Iinclude -Itests/c -pthread
CXXFLAGS_T := -std=c++17 -O2 -g -Wall -Wextra -Werror -Iinclude -Icpp_compat -Itests/c -pthread
SAN        := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
TSAN       := -fsanitize=thread

C_TESTS   := $(basename $(notdir $(wildcard tests/c/*.c)))
# Compilers run side by side when the test programs are built (one per CPU).
JOBS      := $(shell nproc 2>/dev/null || echo 2)
CXX_TESTS := $(basename $(notdir $(wildcard tests/cpp/*.cpp)))
SRCS      := $(shell find src cli/src -name '*.rs') Cargo.toml cli/Cargo.toml build.rs

.PHONY: check check-tools compare-test python python-test python-lint lint soak serve-test test-suites test-tools readme-test all lib header check-header test rust-test c-test cpp-test cli-test speedtest speedtest-test clean tools install uninstall install-test

all: lib

tools:
	@command -v $(CARGO) >/dev/null || { echo "make: cargo not found: install the Rust toolchain (rustup)"; exit 1; }
	@command -v $(CC) >/dev/null || { echo "make: $(CC) not found"; exit 1; }
	@command -v $(CXX) >/dev/null || { echo "make: $(CXX) not found"; exit 1; }
	@command -v $(PYTHON) >/dev/null || { echo "make: $(PYTHON) not found (used to validate JSON in tests)"; exit 1; }

# Release libraries (cdylib + staticlib) and the `latte` command.
lib: tools $(LIB_SO) $(REL)/liblatte.so.$(MAJOR)

# Programs linked against target/release/liblatte.so record its SONAME,
# liblatte.so.MAJOR: the link lets them run from the build tree.
$(REL)/liblatte.so.$(MAJOR): $(LIB_SO)
	ln -sf liblatte.so $@

# The libraries users build and install carry the io_uring flush
# (latte_flush_async; at run time it reports -ENOSYS or -EPERM where
# io_uring is refused). Every build into target/release names the same
# features, so that none overwrites the libraries with another set.
LIB_FEATURES := --features latte/uring
$(LIB_SO) $(LIB_A) $(REL)/latte &: $(SRCS) include/latte.h
	$(CARGO) build --release $(LIB_FEATURES)

# Regenerate the committed C header from the Rust sources. The generator
# (cbindgen) runs in the dev profile: optimising it takes longer than it
# ever runs.
header:
	$(CARGO) run -p latte-header -- write

# Fails when include/latte.h differs from what the sources generate, when
# latte_disable.h misses an entry point of latte.h, or when the release
# library exports other symbols or lacks the io_uring flush.
check-header: tools
	$(CARGO) run -p latte-header -- check
	$(CARGO) build --release $(LIB_FEATURES)
	@missing=0; for f in $$(grep -oE '^[a-z_0-9 *]*\blatte_[a-z_0-9]+\(' include/latte.h | grep -oE 'latte_[a-z_0-9]+\($$' | tr -d '('); do \
	  grep -q "#define $$f(" include/latte_disable.h || { echo "latte_disable.h lacks $$f"; missing=1; }; done; \
	  test $$missing = 0 && echo "header: latte.h is generated and latte_disable.h covers every entry point"
	@other=$$(nm -D --defined-only $(LIB_SO) | awk '{print $$3}' | grep -v '^latte_' || true); \
	  if [ -n "$$other" ]; then echo "liblatte.so exports symbols outside latte_*: $$other"; exit 1; fi; \
	  echo "exports: liblatte.so exports latte_* symbols only ($$(nm -D --defined-only $(LIB_SO) | grep -c ' T latte_') functions)"
	@$(PYTHON) -c 'import ctypes, sys; sys.exit(ctypes.CDLL(sys.argv[1]).latte_flush_supported() != 1)' $(LIB_SO) || \
	  { echo "$(LIB_SO) lacks the io_uring flush: built without $(LIB_FEATURES)"; exit 1; }; \
	  echo "flush: $(LIB_SO) has the io_uring flush"

# Gates: clippy with warnings as errors and every unsafe block documented
# (clippy::undocumented_unsafe_blocks, in the library, the command and the
# tests), rustfmt, rustdoc
# without warnings (public and private items), and the module map of
# docs/design.md against the code.
# Its own target directory (LINT_DIR), so that it runs beside check-header
# in make test: cargo locks a target directory for one build at a time.
LINT_DIR := target/lint
lint: tools
	@command -v cargo-clippy >/dev/null || rustup component add clippy
	@cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	$(CARGO) fmt --all --check
	$(CARGO) clippy --target-dir $(LINT_DIR) --workspace --all-targets -- -D warnings -D clippy::undocumented_unsafe_blocks
	$(CARGO) clippy --target-dir $(LINT_DIR) --workspace --all-targets --features latte/uring -- -D warnings -D clippy::undocumented_unsafe_blocks
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --target-dir $(LINT_DIR) --no-deps -p latte --document-private-items
	$(PYTHON) tests/module_graph.py
	$(PYTHON) tests/structure.py
	@$(MAKE) --no-print-directory python-lint

# The Python package's crate (python/, a workspace of its own: see
# python/Cargo.toml): rustfmt and clippy with the same gates.
python-lint: tools
	$(CARGO) fmt --manifest-path python/Cargo.toml --check
	$(CARGO) clippy --manifest-path python/Cargo.toml --all-targets -- -D warnings -D clippy::undocumented_unsafe_blocks

# ------------------------------------------------------------- check ----
# make check: the edit-compile-test loop, for any user. It needs no root and
# installs nothing (a missing tool stops it with how to get it; `make test`
# installs what it needs): rustfmt, clippy once (the workspace, every
# target), the library's unit tests, then the C tests core.c (the C ABI and
# the inline path in a private region) and shared.c (a shared region read
# by a second process, where the inline and the ABI path must write the
# same samples) against the ci-test build of the library, linked shared and
# with ASan+UBSan. Its regions are named after the test's pid in /dev/shm
# (mode 1777 on Linux). CONTRIBUTING.md has its measured duration.
CHK       := target/ci-test
CHK_SO    := $(CHK)/liblatte.so
CHK_B     := $(B)/check
CHECK_C   := core shared
CHK_RPATH := -Wl,-rpath,$(CURDIR)/$(CHK)

check-tools:
	@command -v $(CARGO) >/dev/null || { echo "make check: cargo not found: install the Rust toolchain (https://rustup.rs)"; exit 1; }
	@$(CARGO) fmt --version >/dev/null 2>&1 || { echo "make check: rustfmt not found: rustup component add rustfmt"; exit 1; }
	@$(CARGO) clippy --version >/dev/null 2>&1 || { echo "make check: clippy not found: rustup component add clippy"; exit 1; }
	@command -v $(CC) >/dev/null || { echo "make check: $(CC) not found: install gcc (apt-get install gcc)"; exit 1; }
	@command -v $(PYTHON) >/dev/null || { echo "make check: $(PYTHON) not found: install python3 (apt-get install python3)"; exit 1; }

check: check-tools
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings -D clippy::undocumented_unsafe_blocks
	$(CARGO) test --profile ci-test --lib
	$(PYTHON) tests/module_graph.py
	$(PYTHON) tests/structure.py
	@$(MAKE) --no-print-directory check-c

# The library's C ABI in the ci-test profile (no LTO: quick to build), with
# the features the unit tests build it with (`internals`: the engine's
# modules public for the tests; the C ABI is the same): `cargo test --lib`
# has built this very library, and a build with other features would
# overwrite its unhashed liblatte.so and liblatte.a, so that the next
# `make check` compiled the crate once more.
$(CHK_SO): $(SRCS) include/latte.h
	$(CARGO) build --profile ci-test -p latte --features internals

$(CHK)/liblatte.so.$(MAJOR): $(CHK_SO)
	ln -sf liblatte.so $@

$(CHK_B)/%.so: tests/c/%.c tests/c/*.h include/*.h $(CHK_SO) $(CHK)/liblatte.so.$(MAJOR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) $< -o $@ -L$(CHK) -llatte $(CHK_RPATH)

$(CHK_B)/%.asan: tests/c/%.c tests/c/*.h include/*.h $(CHK_SO) $(CHK)/liblatte.so.$(MAJOR)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) $(SAN) $< -o $@ -L$(CHK) -llatte $(CHK_RPATH)

.PHONY: check-c
check-c: $(foreach t,$(CHECK_C),$(CHK_B)/$(t).so $(CHK_B)/$(t).asan)
	@set -e; for t in $(CHECK_C); do for v in so asan; do \
	  echo "== C $$t ($$v)"; ASAN_OPTIONS=detect_leaks=0 ./$(CHK_B)/$$t.$$v; done; done

# Every suite, its output also kept in build/test.log, then one line with
# the counts summed over the suites (tests/summary.py).
test:
	@mkdir -p $(B)
	@{ $(MAKE) --no-print-directory test-suites 2>&1; echo $$? > $(B)/test.rc; } | tee $(B)/test.log
	@$(PYTHON) tests/summary.py $(B)/test.log $$(cat $(B)/test.rc)

# Suites that only compile and compare (no test of theirs runs while
# they build): they run side by side, two at a time, each one's output
# kept whole (-Otarget). Every other suite runs alone, in turn: their
# tests follow threads, count switches and race signals, and are judged
# on a machine that does nothing else of ours.
SIDE_BY_SIDE := check-header lint
SUITES := rust-test c-test cpp-test cli-test serve-test compare-test speedtest-test install-test readme-test python-test

# Stops at the first suite that fails; each says the seconds it took
# (tests/summary.py lists them at the end).
test-suites:
	@$(MAKE) --no-print-directory -j2 -Otarget $(addprefix suite-,$(SIDE_BY_SIDE))
	@for s in $(SUITES); do $(MAKE) --no-print-directory suite-$$s || exit $$?; done

suite-%:
	@t0=$$(date +%s); $(MAKE) --no-print-directory $* && \
	  echo "make test: suite $* took $$(( $$(date +%s) - t0 )) s"

# The `latte` command end to end, against a real instrumented C++ service.
$(B)/cli/service: tests/cli/service.cpp cpp_compat/Latte.hpp include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) $< -o $@ $(LIB_A) $(STATIC_LIBS)

# A program written for the original Latte, unchanged, for LATTE_REGION.
$(B)/cli/unchanged: tests/cli/unchanged.cpp cpp_compat/Latte.hpp include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) $< -o $@ $(LIB_A) $(STATIC_LIBS)

# In a mount namespace of its own with a tmpfs on /dev/shm: the tests make
# hostile objects there, never in the machine's /dev/shm. Then LATTE_REGION
# and restarts with an unchanged program (tests/cli/env_region.py).
cli-test: lib $(B)/cli/service $(B)/cli/unchanged
	@[ "$$(id -u)" = 0 ] || { echo "make: cli-test mounts a private /dev/shm in a mount namespace: run it as root"; exit 1; }
	unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=512m tmpfs /dev/shm || exit 1; rc=0; \
	  $(PYTHON) tests/cli/e2e.py $(REL)/latte $(B)/cli/service || rc=1; \
	  $(PYTHON) tests/cli/names.py $(REL)/latte || rc=1; \
	  $(PYTHON) tests/cli/truncated.py $(REL)/latte || rc=1; \
	  $(PYTHON) tests/cli/record_wait.py $(REL)/latte || rc=1; \
	  $(PYTHON) tests/cli/env_region.py $(REL)/latte $(B)/cli/unchanged || rc=1; exit $$rc'

# `latte record`, `diff` and `plot` end to end (tests/compare/run.py):
# synthetic recordings written by a Python writer of the format
# (tests/compare/latte_file.py), a producer writing known span counts for
# `record`, and the plot rendered to PNG by rsvg-convert (Debian's
# librsvg2-bin; plot's labels are measured with DejaVu Sans,
# fonts-dejavu-core), both installed when missing and make runs as root.
$(B)/compare/producer: tests/compare/producer.cpp cpp_compat/Latte.hpp include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) $< -o $@ $(LIB_A) $(STATIC_LIBS)

compare-test: lib $(B)/compare/producer
	@$(call need,rsvg-convert,librsvg2-bin)
	@$(call need_file,/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf,fonts-dejavu-core)
	$(PYTHON) tests/compare/run.py $(REL)/latte $(B)/compare/producer

# `latte serve` end to end: its HTTP edges (tests/serve/http_edges.py), 500
# regions exported at once (tests/serve/many_regions.py), a region that
# grows while serve and watch read it (tests/serve/growth.py), a thread
# recording flat out followed without loss (tests/serve/follow.py), then a real
# Prometheus server scraping it (tests/serve/prometheus_e2e.py; the
# Debian package prometheus, installed when missing and make runs as root;
# its service is never started). In a mount namespace with its own tmpfs on
# /dev/shm, as cli-test.
$(B)/serve/service: tests/serve/service.cpp cpp_compat/Latte.hpp include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) $< -o $@ $(LIB_A) $(STATIC_LIBS)

# 500 regions made by as many short-lived producers, for one exporter.
$(B)/serve/many_regions: tests/serve/many_regions.c include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) $< -o $@ $(LIB_A) $(STATIC_LIBS)

# A hostile writer that corrupts a slot of a region, for tests/serve/follow.py.
$(B)/serve/corrupt: tests/serve/corrupt.c include/latte.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) $< -o $@

serve-test: lib $(B)/serve/service $(B)/serve/many_regions $(B)/serve/corrupt
	@$(call need,prometheus,prometheus)
	@[ "$$(id -u)" = 0 ] || { echo "make: serve-test mounts a private /dev/shm in a mount namespace: run it as root"; exit 1; }
	unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=1g tmpfs /dev/shm || exit 1; rc=0; \
	  $(PYTHON) tests/serve/http_edges.py $(REL)/latte $(B)/serve/service $(CURDIR)/$(LIB_SO) || rc=1; \
	  $(PYTHON) tests/serve/many_regions.py $(REL)/latte $(B)/serve/many_regions || rc=1; \
	  $(PYTHON) tests/serve/prometheus_e2e.py $(REL)/latte $(B)/serve/service $(CURDIR)/$(LIB_SO) || rc=1; \
	  $(PYTHON) tests/serve/growth.py $(REL)/latte $(B)/serve/service $(CURDIR)/$(LIB_SO) || rc=1; \
  $(PYTHON) tests/serve/rename.py $(REL)/latte $(CURDIR)/$(LIB_SO) || rc=1; \
  $(PYTHON) tests/serve/max_ids.py $(REL)/latte $(CURDIR)/$(LIB_SO) || rc=1; \
	  $(PYTHON) tests/serve/follow.py $(REL)/latte $(B)/serve/service $(B)/serve/corrupt || rc=1; exit $$rc'

# Both builds: without and with the io_uring flush (the suites the feature
# changes: the unit tests and the flush tests). Profile ci-test: release
# optimisation without LTO (Cargo.toml).
rust-test: tools
	$(CARGO) test --profile ci-test
	$(CARGO) test --profile ci-test --features uring --lib --test flush --test flush_targets --test flush_seccomp --test flush_first --test flush_stall

# Every C test program, built four ways: against liblatte.so, against
# liblatte.a, with -DLATTE_DISABLE and no liblatte, and with ASan+UBSan
# (-ldl: tests that look up libc with dlsym, outside libc before glibc 2.34).
C_BINS := $(foreach t,$(C_TESTS),$(B)/c/$(t).so $(B)/c/$(t).static $(B)/c/$(t).disabled $(B)/c/$(t).asan) $(B)/dl/dlclose $(B)/seccomp/no_uffd
c-test: lib
	@$(MAKE) --no-print-directory -j$(JOBS) -Otarget $(C_BINS)
	@set -e; for t in $(C_TESTS); do for v in so static disabled asan; do \
	  echo "== C $$t ($$v)"; ASAN_OPTIONS=detect_leaks=0 ./$(B)/c/$$t.$$v; done; done
	@echo "== C dlclose (liblatte.so loaded with dlopen)"; ./$(B)/dl/dlclose $(CURDIR)/$(LIB_SO)
	@set -e; for t in core shared; do \
	  echo "== C $$t (so, userfaultfd refused: a late shared region is -EBUSY)"; ./$(B)/seccomp/no_uffd ./$(B)/c/$$t.so; done

# A launcher that refuses the userfaultfd system call (a seccomp filter),
# for the tests of a kernel that cannot pause writers (tests/c/can_move.h).
$(B)/seccomp/no_uffd: tests/seccomp/no_uffd.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) $< -o $@

# liblatte.so loaded and unloaded at run time (no link against it).
$(B)/dl/dlclose: tests/dl/dlclose.c $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) $< -o $@ -ldl

# The shared and the static build compile the same object; they differ
# in what it is linked with.
$(B)/c/obj/%.o: tests/c/%.c tests/c/*.h include/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) -c $< -o $@

$(B)/c/%.so: $(B)/c/obj/%.o $(LIB_SO)
	$(CC) $(CFLAGS_T) $< -o $@ -L$(REL) -llatte $(RPATH) -ldl

$(B)/c/%.static: $(B)/c/obj/%.o $(LIB_A)
	$(CC) $(CFLAGS_T) $< -o $@ $(LIB_A) $(STATIC_LIBS)

$(B)/c/%.disabled: tests/c/%.c tests/c/*.h include/*.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) -DLATTE_DISABLE $< -o $@ -ldl

$(B)/c/%.asan: tests/c/%.c tests/c/*.h include/*.h $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) $(SAN) $< -o $@ -L$(REL) -llatte $(RPATH) -ldl

# The test programs' objects are kept (make would delete them as
# intermediate files): a relink needs no compile.
.SECONDARY: $(foreach t,$(C_TESTS),$(B)/c/obj/$(t).o) $(foreach t,$(CXX_TESTS),$(B)/cpp/obj/$(t).o)

# Every C++ test program (with the second translation unit), built five
# ways: .so, .a, LATTE_DISABLE without liblatte, ASan+UBSan, TSan.
CXX_TU := tests/cpp/api_other_tu.cpp
# The TSan builds fail on any report (TSan's exit status 66); the
# deliberate-race program shows that TSan does report in this setup.
CPP_BINS := $(foreach t,$(filter-out api_other_tu,$(CXX_TESTS)),$(B)/cpp/$(t).so $(B)/cpp/$(t).static $(B)/cpp/$(t).disabled $(B)/cpp/$(t).asan $(B)/cpp/$(t).tsan) $(B)/tsan/race $(B)/seccomp/no_uffd $(B)/cpp/threads.fullstatic
cpp-test: lib
	@$(MAKE) --no-print-directory -j$(JOBS) -Otarget $(CPP_BINS)
	@set -e; for t in $(filter-out api_other_tu,$(CXX_TESTS)); do for v in so static disabled asan tsan; do \
	  echo "== C++ $$t ($$v)"; ASAN_OPTIONS=detect_leaks=0 ./$(B)/cpp/$$t.$$v $(B); done; done
	@echo "== C++ threads (fully static: -static, no dynamic loader)"; ./$(B)/cpp/threads.fullstatic $(B)
	@echo "== C++ api (so, userfaultfd refused: a late shared region is -EBUSY)"; ./$(B)/seccomp/no_uffd ./$(B)/cpp/api.so $(B)
	@sh tests/tsan/check_race.sh ./$(B)/tsan/race $(B)/tsan/race.log
	@CC=$(CC) CXX=$(CXX) sh tests/inline/check_inlined.sh $(B) $(LIB_A) $(STATIC_LIBS)

$(B)/tsan/race: tests/tsan/race.cpp cpp_compat/Latte.hpp include/*.h $(LIB_SO)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) $(TSAN) $< -o $@ -L$(REL) -llatte $(RPATH)

# The second translation unit, compiled once for each kind of build.
CXX_DEPS := tests/c/*.h cpp_compat/Latte.hpp include/*.h tests/cpp/golden/* tests/cpp/golden_check.py
$(B)/cpp/tu.plain.o: $(CXX_TU) $(CXX_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) -c $< -o $@

$(B)/cpp/tu.disabled.o: $(CXX_TU) $(CXX_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) -DLATTE_DISABLE -c $< -o $@

$(B)/cpp/tu.asan.o: $(CXX_TU) $(CXX_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) $(SAN) -c $< -o $@

$(B)/cpp/tu.tsan.o: $(CXX_TU) $(CXX_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) $(TSAN) -c $< -o $@

# The shared, the static and the fully static build compile the same
# object; they differ in what it is linked with.
$(B)/cpp/obj/%.o: tests/cpp/%.cpp $(CXX_DEPS)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) -c $< -o $@

$(B)/cpp/%.so: $(B)/cpp/obj/%.o $(B)/cpp/tu.plain.o $(LIB_SO)
	$(CXX) $(CXXFLAGS_T) $< $(B)/cpp/tu.plain.o -o $@ -L$(REL) -llatte $(RPATH)

$(B)/cpp/%.static: $(B)/cpp/obj/%.o $(B)/cpp/tu.plain.o $(LIB_A)
	$(CXX) $(CXXFLAGS_T) $< $(B)/cpp/tu.plain.o -o $@ $(LIB_A) $(STATIC_LIBS)

# A fully static program (glibc too): latte's thread retirement there has
# no dynamic loader to ask (src/recorder/exit.rs). The linker's warnings
# about glibc calls that need shared objects at run time are expected.
$(B)/cpp/threads.fullstatic: $(B)/cpp/obj/threads.o $(B)/cpp/tu.plain.o $(LIB_A)
	$(CXX) $(CXXFLAGS_T) -static $< $(B)/cpp/tu.plain.o -o $@ $(LIB_A) -lutil -lrt -lpthread -lm -ldl 2>&1 | grep -v -e "statically linked applications requires at runtime" -e ": in function" >&2 || true
	@test -x $@

$(B)/cpp/%.disabled: tests/cpp/%.cpp $(CXX_DEPS) $(B)/cpp/tu.disabled.o
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) -DLATTE_DISABLE $< $(B)/cpp/tu.disabled.o -o $@

$(B)/cpp/%.asan: tests/cpp/%.cpp $(CXX_DEPS) $(B)/cpp/tu.asan.o $(LIB_SO)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) $(SAN) $< $(B)/cpp/tu.asan.o -o $@ -L$(REL) -llatte $(RPATH)

$(B)/cpp/%.tsan: tests/cpp/%.cpp $(CXX_DEPS) $(B)/cpp/tu.tsan.o $(LIB_SO)
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS_T) $(TSAN) $< $(B)/cpp/tu.tsan.o -o $@ -L$(REL) -llatte $(RPATH)

# make speedtest: speedtest/run.py runs speedtest/hot.cpp built against our
# header (and, with ORIGINAL=/path/to/Latte.hpp, a second time against that
# header, alternately), then Start+Stop in a plain loop (speedtest/plain.py,
# the same two ways), then, for information, many IDs in shared regions of
# two ring sizes (speedtest/capacity.cpp), then the latte-only
# extraction and flush goals of
# speedtest/speedtest.cpp and the Python package's read of a flushed image
# into numpy (speedtest/python_read.py, in build/python/venv); it prints
# every goal row with PASS or FAIL and
# exits 0 (all pass), 1 (a goal failed) or 3 (machine too busy to judge);
# make reports a non-zero one as "Error 1" / "Error 3" (and exits 2).
SPEED_FLAGS := -O3 -march=native -std=c++17 -Wall -Wextra -Icpp_compat -Iinclude -pthread
ORIGINAL ?=
SPEED_RUN := $(PYTHON) speedtest/run.py

# The one build make speedtest makes is `make lib`'s: the release
# libraries with the io_uring flush (the flush rows need it) and the `latte`
# command (speedtest/compare.py runs it), one cargo build in target/release.
# Every row measures the code `make lib` ships and `make install` installs.

# hot.cpp at every code placement (speedtest/hot.cpp: "Code placement"):
# $(B)/speed/hot.ours.K and, with ORIGINAL=, $(B)/hot.original.K.
PLACEMENTS := 0 1 2 3 4 5 6 7
HOT_OURS := $(foreach k,$(PLACEMENTS),$(B)/speed/hot.ours.$(k))
HOT_ORIGINAL := $(foreach k,$(PLACEMENTS),$(B)/hot.original.$(k))

$(B)/speed/hot.ours.%: speedtest/hot.cpp cpp_compat/Latte.hpp include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CXX) $(SPEED_FLAGS) -DLATTE_BENCH_PLACEMENT=$* $< -o $@ $(LIB_A) $(STATIC_LIBS)

# The original engine's build: its header alone (header-only), by path.
.PHONY: FORCE
$(B)/hot.original.%: speedtest/hot.cpp FORCE
	@test -f "$(ORIGINAL)" || { echo "make: ORIGINAL=$(ORIGINAL) is not a file"; exit 1; }
	@mkdir -p $(@D)
	$(CXX) -O3 -march=native -std=c++17 -pthread -DLATTE_BENCH_PLACEMENT=$* -DLATTE_BENCH_HEADER='"$(abspath $(ORIGINAL))"' $< -o $@

# plain.cpp (Start+Stop in a plain loop), ours and, with ORIGINAL=, the
# original's; speedtest/plain.py runs them as one of run.py's extras.
$(B)/speed/plain: speedtest/plain.cpp cpp_compat/Latte.hpp include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CXX) $(SPEED_FLAGS) $< -o $@ $(LIB_A) $(STATIC_LIBS)

$(B)/plain.original: speedtest/plain.cpp FORCE
	@test -f "$(ORIGINAL)" || { echo "make: ORIGINAL=$(ORIGINAL) is not a file"; exit 1; }
	@mkdir -p $(@D)
	$(CXX) -O3 -march=native -std=c++17 -pthread -DLATTE_BENCH_HEADER='"$(abspath $(ORIGINAL))"' $< -o $@

# growth.cpp (a ring's memory on the measuring thread: an ID's first use,
# its ring's growths), ours and, with ORIGINAL=, the original's;
# speedtest/growth.py runs them as one of run.py's extras.
$(B)/speed/growth: speedtest/growth.cpp cpp_compat/Latte.hpp include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CXX) $(SPEED_FLAGS) $< -o $@ $(LIB_A) $(STATIC_LIBS)

$(B)/growth.original: speedtest/growth.cpp FORCE
	@test -f "$(ORIGINAL)" || { echo "make: ORIGINAL=$(ORIGINAL) is not a file"; exit 1; }
	@mkdir -p $(@D)
	$(CXX) -O3 -march=native -std=c++17 -pthread -DLATTE_BENCH_HEADER='"$(abspath $(ORIGINAL))"' $< -o $@

# sweep.cpp (the ID sweep, a row per process), ours and, with ORIGINAL=,
# the original's; speedtest/sweep.py runs them as one of run.py's extras.
$(B)/speed/sweep: speedtest/sweep.cpp cpp_compat/Latte.hpp include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CXX) $(SPEED_FLAGS) $< -o $@ $(LIB_A) $(STATIC_LIBS)

$(B)/sweep.original: speedtest/sweep.cpp FORCE
	@test -f "$(ORIGINAL)" || { echo "make: ORIGINAL=$(ORIGINAL) is not a file"; exit 1; }
	@mkdir -p $(@D)
	$(CXX) -O3 -march=native -std=c++17 -pthread -DLATTE_BENCH_HEADER='"$(abspath $(ORIGINAL))"' $< -o $@

# capacity.cpp: Fast Start+Stop over 8 to 200 IDs in shared regions whose
# rings hold 65,536 and 1,024 samples, printed for information (run.py
# --info: not judged).
$(B)/speed/capacity: speedtest/capacity.cpp cpp_compat/Latte.hpp include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CXX) $(SPEED_FLAGS) $< -o $@ $(LIB_A) $(STATIC_LIBS)

# speedtest.cpp, run twice: the extraction goals, then the flush goals.
$(B)/speed/speedtest: speedtest/speedtest.cpp cpp_compat/Latte.hpp include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CXX) $(SPEED_FLAGS) $< -o $@ $(LIB_A) $(STATIC_LIBS)

# python/tests/producer.c and tests/compare/producer.cpp against the same
# library, for the Python row and speedtest/compare.py.
$(B)/speed/producer: python/tests/producer.c include/*.h $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) $< -o $@ $(LIB_A) $(STATIC_LIBS)

# Then, whatever run.py's verdict, `latte record` following a thread that
# records flat out and `latte diff` of two 10 M-sample recordings
# (speedtest/compare.py: figures with their goals; exit 1 when one fails,
# else 3 when one was too noisy to judge). The recipe exits 1 when either
# failed, else 3 when either could not judge a row, else 0.
speedtest: tools $(HOT_OURS) $(B)/speed/plain $(B)/speed/sweep $(B)/speed/growth $(B)/speed/capacity $(B)/speed/speedtest $(B)/speed/producer $(B)/compare/producer $(PYVENV)/.installed $(if $(ORIGINAL),$(HOT_ORIGINAL) $(B)/plain.original $(B)/sweep.original $(B)/growth.original)
	rc=0; $(SPEED_RUN) --ours $(B)/speed/hot.ours $(if $(ORIGINAL),--original $(B)/hot.original --original-path "$(ORIGINAL)") \
	  --extra "$(PYTHON) speedtest/plain.py --ours $(B)/speed/plain $(if $(ORIGINAL),--original $(B)/plain.original)" \
	  --extra "$(PYTHON) speedtest/sweep.py --ours $(B)/speed/sweep $(if $(ORIGINAL),--original $(B)/sweep.original)" \
	  --extra "$(PYTHON) speedtest/growth.py --ours $(B)/speed/growth $(if $(ORIGINAL),--original $(B)/growth.original)" \
	  --info "./$(B)/speed/capacity 65536" --info "./$(B)/speed/capacity 1024" \
	  --extra "./$(B)/speed/speedtest --shared /latte-speedtest-$$$$" --extra "./$(B)/speed/speedtest --flush-only" \
	  --extra "$(PYV) speedtest/python_read.py $(B)/speed/producer" \
	  || rc=$$?; \
	  $(PYTHON) speedtest/compare.py $(REL)/latte $(B)/compare/producer || { c=$$?; [ "$$rc" = 1 ] || rc=$$c; }; \
	  exit $${rc:-0}

# The ORIGINAL= mechanism end to end, against a stand-in engine written for
# this test (tests/speedtest/standin/Latte.hpp), in a quick run: every row is
# printed with ours/original and a verdict, and the driver exits 0, 1 or 3.
# Judges nothing about speed.
$(B)/hot.standin.%: speedtest/hot.cpp tests/speedtest/standin/Latte.hpp
	@mkdir -p $(@D)
	$(CXX) -O2 -std=c++17 -pthread -DLATTE_BENCH_PLACEMENT=$* -DLATTE_BENCH_HEADER='"$(CURDIR)/tests/speedtest/standin/Latte.hpp"' $< -o $@

$(B)/plain.standin: speedtest/plain.cpp tests/speedtest/standin/Latte.hpp
	@mkdir -p $(@D)
	$(CXX) -O2 -std=c++17 -pthread -DLATTE_BENCH_HEADER='"$(CURDIR)/tests/speedtest/standin/Latte.hpp"' $< -o $@

$(B)/sweep.standin: speedtest/sweep.cpp tests/speedtest/standin/Latte.hpp
	@mkdir -p $(@D)
	$(CXX) -O2 -std=c++17 -pthread -DLATTE_BENCH_HEADER='"$(CURDIR)/tests/speedtest/standin/Latte.hpp"' $< -o $@

# The design models (no latte code, run by hand; docs/figures.md cites
# them): built here, with warnings as errors, so that they keep building.
MODELS := $(B)/speed/floor $(B)/speed/designs $(B)/speed/drain
$(MODELS): $(B)/speed/%: speedtest/%.cpp speedtest/model.h
	@mkdir -p $(@D)
	$(CXX) -O2 -std=c++17 -pthread -Wall -Wextra -Werror $< -o $@

# Ours is make speedtest's own build of each program.
speedtest-test: lib $(B)/speed/hot.ours.0 $(B)/speed/hot.ours.1 $(B)/hot.standin.0 $(B)/hot.standin.1 $(B)/speed/plain $(B)/plain.standin $(B)/speed/sweep $(B)/sweep.standin $(MODELS)
	$(PYTHON) tests/speedtest/check_mechanism.py $(B)/speed/hot.ours $(B)/hot.standin $(B)/speed/plain $(B)/plain.standin $(B)/speed/sweep $(B)/sweep.standin

# ------------------------------------------------------------- python ----
# The Python package `latte` (python/: pyo3 and rust-numpy over the
# library's reader, built by maturin). Its tests, its speedtest row and the
# docs example run in a virtual environment under build/python/venv, with
# the packages below from PyPI. `make python` builds a wheel into
# build/python/wheels.
PY_PKGS   := maturin numpy pytest pandas matplotlib
PY_SRCS   := $(shell find python/src python/latte -name '*.rs' -o -name '*.py') python/Cargo.toml python/Cargo.lock python/pyproject.toml

# The venv (Debian's python3 needs the python3-venv package for it).
$(PYVENV)/.ready:
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: $(PYTHON) cannot make a virtual environment: installing the python3-venv package"; \
	    if [ ! -e $(B)/.apt-updated ]; then apt-get update -qq && mkdir -p $(B) && touch $(B)/.apt-updated; fi && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; \
	  else echo "make: $(PYTHON) cannot make a virtual environment: install the python3-venv package"; exit 1; fi; }
	rm -rf $(PYVENV)
	$(PYTHON) -m venv $(PYVENV)
	$(PYV) -m pip install -q --disable-pip-version-check $(PY_PKGS)
	touch $@

# `pip install ./python` into the venv (its own maturin as the build
# backend, found on PATH, so nothing else is fetched).
$(PYVENV)/.installed: $(PYVENV)/.ready $(PY_SRCS) $(SRCS)
	PATH=$(CURDIR)/$(PYVENV)/bin:$$PATH $(PYV) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall ./python
	touch $@

python: $(PYVENV)/.ready
	$(PYVENV)/bin/maturin build --release -m python/Cargo.toml -o $(B)/python/wheels

$(B)/python/producer: python/tests/producer.c include/*.h $(LIB_SO)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_T) $< -o $@ -L$(REL) -llatte $(RPATH)

# The pytest suite (python/tests) in a mount namespace with a tmpfs of its
# own on /dev/shm, as cli-test: its hostile objects never reach the
# machine's; the temporary files of a test that passed are removed.
# Ends with "python: N passed, M failed".
python-test: lib $(B)/python/producer $(PYVENV)/.installed
	@[ "$$(id -u)" = 0 ] || { echo "make: python-test mounts a private /dev/shm in a mount namespace: run it as root"; exit 1; }
	unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=1g tmpfs /dev/shm && \
	  LATTE_PRIVATE_SHM=1 LATTE_BIN=$(CURDIR)/$(REL)/latte LATTE_PRODUCER=$(CURDIR)/$(B)/python/producer \
	  exec $(PYV) -m pytest -q -p no:cacheprovider -o tmp_path_retention_policy=failed --color=no python/tests'

# ------------------------------------------------------------ install ----
# make install PREFIX=/usr/local DESTDIR= (LIBDIR, INCLUDEDIR, BINDIR, MANDIR,
# DOCDIR can be set one by one). The shared library is liblatte.so.VERSION with the
# SONAME liblatte.so.MAJOR (build.rs) and the links .so.MAJOR and .so.
DESCRIPTION := $(shell sed -n 's/^description = "\([^"]*\)"/\1/p' Cargo.toml | head -n1)
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
DOCDIR     ?= $(PREFIX)/share/doc/latte
# The documentation, under DOCDIR with the source tree's paths (so that its
# links hold): what the man page's SEE ALSO names.
DOCS       := README.md CONTRIBUTING.md CHANGELOG.md LICENSE $(wildcard docs/*.md) docs/compare.png \
              docs/python_percentiles.py docs/grafana/latte-dashboard.json
HEADERS    := include/latte.h include/latte_inline.h include/latte_disable.h cpp_compat/Latte.hpp
CMAKEDIR    = $(LIBDIR)/cmake/latte
SUBST       = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
                  -e 's|@VERSION@|$(VERSION)|g' -e 's|@MAJOR@|$(MAJOR)|g' -e 's|@DESCRIPTION@|$(DESCRIPTION)|g'
INSTALLED   = $(LIBDIR)/liblatte.so.$(VERSION) $(LIBDIR)/liblatte.so.$(MAJOR) $(LIBDIR)/liblatte.so \
              $(LIBDIR)/liblatte.a $(addprefix $(INCLUDEDIR)/,$(notdir $(HEADERS))) $(BINDIR)/latte \
              $(MANDIR)/man1/latte.1 $(LIBDIR)/pkgconfig/latte.pc \
              $(CMAKEDIR)/latte-config.cmake $(CMAKEDIR)/latte-config-version.cmake \
              $(addprefix $(DOCDIR)/,$(DOCS))

# Installed libraries carry no debug info (the release profile strips the
# shared library and the command; the static library is stripped here).
install: lib
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/liblatte.so.$(VERSION)
	ln -sf liblatte.so.$(VERSION) $(DESTDIR)$(LIBDIR)/liblatte.so.$(MAJOR)
	ln -sf liblatte.so.$(MAJOR) $(DESTDIR)$(LIBDIR)/liblatte.so
	install -m 644 $(LIB_A) $(DESTDIR)$(LIBDIR)/liblatte.a
	strip --strip-debug $(DESTDIR)$(LIBDIR)/liblatte.a
	install -m 644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/
	install -m 755 $(REL)/latte $(DESTDIR)$(BINDIR)/latte
	$(SUBST) packaging/latte.1 > $(DESTDIR)$(MANDIR)/man1/latte.1
	install -d $(DESTDIR)$(DOCDIR)/docs/grafana
	for f in $(DOCS); do install -m 644 $$f $(DESTDIR)$(DOCDIR)/$$f; done
	$(SUBST) packaging/latte.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/latte.pc
	$(SUBST) packaging/latte-config.cmake.in > $(DESTDIR)$(CMAKEDIR)/latte-config.cmake
	$(SUBST) packaging/latte-config-version.cmake.in > $(DESTDIR)$(CMAKEDIR)/latte-config-version.cmake

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(DOCDIR)/docs/grafana $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR) 2>/dev/null

# System tools the tests need: installed with apt-get when make runs as root,
# otherwise make stops and names the package. $(call need,COMMAND,PACKAGE)
need = command -v $(1) >/dev/null 2>&1 || { \
  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
    echo "make: $(1) not found: installing the $(2) package"; \
    if [ ! -e $(B)/.apt-updated ]; then apt-get update -qq && mkdir -p $(B) && touch $(B)/.apt-updated; fi && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(2) >/dev/null && command -v $(1) >/dev/null; \
  else echo "make: $(1) not found: install the $(2) package (apt-get install $(2))"; exit 1; fi; }

# $(call need_file,PATH,PACKAGE): as need, for a file a package installs.
need_file = test -e $(1) || { \
  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
    echo "make: $(1) not found: installing the $(2) package"; \
    if [ ! -e $(B)/.apt-updated ]; then apt-get update -qq && mkdir -p $(B) && touch $(B)/.apt-updated; fi && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(2) >/dev/null && test -e $(1); \
  else echo "make: $(1) not found: install the $(2) package (apt-get install $(2))"; exit 1; fi; }

test-tools:
	@$(call need,cmake,cmake)
	@$(call need,pkg-config,pkg-config)
	@$(call need,man,man-db)
	@$(call need,readelf,binutils)

# Installs the working tree into a temporary prefix and builds against it.
install-test: lib test-tools
	@MAKE="$(MAKE)" CC="$(CC)" sh tests/install/run.sh

# The README's programs and command lines, run against a temporary install.
readme-test: lib test-tools
	@mkdir -p $(B)
	@MAKE="$(MAKE)" $(PYTHON) tests/readme/run.py

# Long runs outside `make test`: the torture test (producers at full speed,
# a reader process, read + lost == written) for two minutes, and slot reuse.
soak: tools
	LATTE_TORTURE_SECS=120 $(CARGO) test --profile ci-test --test torture --test slot_reuse

clean:
	$(CARGO) clean
	rm -rf $(B)
