# The two commands of the README: `make run` and `make test`. Both set up the same way.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup sysdeps tracefs run test test-rust test-python lint bench clean

setup: $(STAMP) sysdeps tracefs

# System programs the tests start for real: Chromium renders the HTML report, nginx and wrk are
# the server's peers. Installed from Debian's packages when missing (CI runs as root).
SYSDEPS := chromium:chromium nginx:nginx-light wrk:wrk
sysdeps:
	@missing=""; for pair in $(SYSDEPS); do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || [ -x /usr/sbin/$${pair%%:*} ] || missing="$$missing $${pair#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# The os world's migration trace (`trace_migrations`) reads the kernel's tracefs, which not every
# machine mounts at boot: mounted here when the kernel has it and we are root. Without it, runs
# that ask for the trace are refused with the reason (docs/os.md), so setup goes on.
tracefs:
	@if [ ! -d /sys/kernel/tracing/events ] && grep -qw tracefs /proc/filesystems; then \
	  if [ "$$(id -u)" = 0 ] && mount -t tracefs nodev /sys/kernel/tracing; then \
	    echo "mounted tracefs at /sys/kernel/tracing"; \
	  else echo "tracefs is not mounted and could not be: trace_migrations will be refused"; fi; \
	fi

# Reinstall when the Rust sources or the package description change. The extension is built
# under the test-opt profile (Cargo.toml), as `cargo test` is: the two builds share every
# compiled dependency (24 s instead of 45 s from scratch), and the simulator runs as fast as
# under release (bench/RESULTS.md). Benchmarks build their own venv under release.
$(STAMP): pyproject.toml Cargo.toml $(shell find crates python -name '*.rs' -o -name '*.py' -o -name Cargo.toml 2>/dev/null)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	MATURIN_PEP517_ARGS="--profile test-opt" $(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

run: setup
	$(BIN)/schedlab quickstart

test: setup test-rust test-python

test-rust:
	cargo test --workspace --profile test-opt --quiet

# Simulator tests two at a time; then the tests that measure the machine, alone (conftest.REAL),
# under the noise gate (tests/noise_gate.py: one that failed while the hypervisor stole the
# machine, or beside a run the machine stalled under, runs again, up to twice, and the log
# says so). Each phase lists its slowest tests, so
# every CI log says where the time went (issue 12), and the reason of every skip (a prediction
# not judged on a shared machine says why).
test-python: setup
	$(BIN)/pytest -q -rfEs -n auto -m "not real" --durations=15
	$(BIN)/python tests/noise_gate.py -q -rfEs --durations=15

lint: setup
	cargo fmt --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(BIN)/ruff check python tests bench

bench: setup
	$(MAKE) -C bench

clean:
	rm -rf $(VENV) target
