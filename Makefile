# torch_tpu build. `make test` and `make demo` are the two commands a user needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD := build
STAMP := $(VENV)/.requirements-installed

CC ?= cc
PJRT_INCLUDE = $(shell $(PY) -c "import os, xla_plugins.xla_cpu_pjrt as m; print(os.path.dirname(m.__file__) + '/include')")
CFLAGS_COMMON = -std=c11 -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration \
                -D_GNU_SOURCE -fPIC -Icsrc -I$(PJRT_INCLUDE)
SANITIZE = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

RUNTIME_SRC := $(sort $(wildcard csrc/tpu/*.c csrc/pjrt/*.c csrc/hlo/*.c csrc/ops/*.c csrc/cache/*.c csrc/exec/*.c))
TEST_SRC := $(sort $(wildcard csrc/tests/test_*.c))
TEST_SUPPORT := csrc/tests/check.c

RUNTIME_OBJ := $(RUNTIME_SRC:%.c=$(BUILD)/release/%.o)
ASAN_OBJ := $(RUNTIME_SRC:%.c=$(BUILD)/asan/%.o)
TEST_BIN := $(TEST_SRC:csrc/tests/%.c=$(BUILD)/asan/%)

.PHONY: setup test demo ctest pytest pytest-strict pytest-fused-debug clean bench
.SECONDARY:  # keep the sanitizer objects between runs
.DEFAULT_GOAL := test

$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(BUILD)/release/%.o: %.c $(wildcard csrc/*/*.h csrc/*/*.inc) | $(STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_COMMON) -O2 -c $< -o $@

$(BUILD)/asan/%.o: %.c $(wildcard csrc/*/*.h csrc/*/*.inc) | $(STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC asan $<"
	@$(CC) $(CFLAGS_COMMON) -O1 -g $(SANITIZE) -c $< -o $@

$(BUILD)/libtpu_runtime.a: $(RUNTIME_OBJ)
	ar rcs $@ $^

$(BUILD)/asan/test_%: csrc/tests/test_%.c $(TEST_SUPPORT) $(ASAN_OBJ)
	$(CC) $(CFLAGS_COMMON) -O1 -g $(SANITIZE) $< $(TEST_SUPPORT) $(ASAN_OBJ) -ldl -lm -lpthread -o $@

$(BUILD)/extension.stamp: $(BUILD)/libtpu_runtime.a setup.py $(wildcard torch_tpu/csrc/*.cpp torch_tpu/csrc/*.h)
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 $(PY) -m pip install -q --no-build-isolation --no-deps -e .
	touch $@

setup: $(STAMP) $(BUILD)/extension.stamp

ctest: $(TEST_BIN) | $(STAMP)
	@set -e; for t in $(TEST_BIN); do \
	  TORCH_TPU_PJRT_PLUGIN=$$($(PY) torch_tpu/_plugin.py) ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=csrc/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 $$t; done

# The op and example parity suites also run in fused eager mode, and the
# examples in debug mode (debug runs strict's programs, awaiting each).
PARITY_TESTS := $(sort $(wildcard tests/test_elementwise.py tests/test_reduce.py tests/test_linalg.py tests/test_linalg_eigen.py \
                  tests/test_indexing.py tests/test_creation.py tests/test_sort.py tests/test_nn_*.py \
                  tests/test_optim.py tests/test_fused_optim.py tests/test_grad_scaler.py tests/test_autocast.py tests/test_data_dependent.py tests/test_moe.py \
                  tests/test_complex.py tests/test_fft.py tests/test_special*.py tests/test_float8.py \
                  tests/test_hf_models.py)) tests/test_examples.py

# The strict suite and the fused suite run side by side, as each process is
# mostly one thread; the short debug run follows the fused suite, the
# shorter lane (about 22 minutes against the strict suite's 24 on a 2-core
# VM). Each lane's output is printed whole when it ends.
pytest: setup
	@$(MAKE) --no-print-directory -j2 --output-sync=target pytest-strict pytest-fused-debug

pytest-strict: setup
	$(PY) -m pytest -q --durations=15 tests

pytest-fused-debug: setup
	TORCH_TPU_EAGER_MODE=fused $(PY) -m pytest -q --durations=15 $(PARITY_TESTS)
	TORCH_TPU_EAGER_MODE=debug $(PY) -m pytest -q tests/test_examples.py

test: setup ctest pytest

demo: setup  # a character GPT trained for 200 steps on tpu (about half a minute on 2 cores), then sampled
	$(PY) examples/mingpt.py --steps 200 --log-every 20 --report

bench: setup
	$(PY) benchmarks/eager_overhead.py

clean:
	rm -rf $(BUILD) torch_tpu/*.so *.egg-info
