"""Test session setup: each test run compiles for itself (no persistent
compile cache), so results never depend on files left by an earlier run.
tests/test_cache.py exercises the disk cache in child processes."""
import os

os.environ.setdefault("TORCH_TPU_CACHE_DIR", "")
