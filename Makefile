# The two commands of the README: `make run` and `make test`. Both set up the same way.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-rust test-python lint bench clean

setup: $(STAMP)

# Reinstall when the Rust sources or the package description change.
$(STAMP): pyproject.toml Cargo.toml $(shell find crates python -name '*.rs' -o -name '*.py' -o -name Cargo.toml 2>/dev/null)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

run: setup
	$(BIN)/schedlab quickstart

test: setup test-rust test-python

test-rust:
	cargo test --workspace --release --quiet

test-python: setup
	$(BIN)/pytest -q

lint: setup
	cargo fmt --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(BIN)/ruff check python tests bench

bench: setup
	$(MAKE) -C bench

clean:
	rm -rf $(VENV) target
