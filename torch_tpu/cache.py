"""The persistent compile cache: compiled programs kept on disk, so a second
process running the same model compiles nothing.

TORCH_TPU_CACHE_DIR picks the directory (default: torch_tpu under the user's
cache directory; an empty value turns the cache off) and
TORCH_TPU_CACHE_MAX_BYTES its bound (default 2 GiB; least recently used files
go first). At import, a thread loads the programs of the last session (the
files used within five minutes of the newest use) so the first step finds
them loaded; TORCH_TPU_CACHE_PREFETCH=0 turns that off."""
import atexit
import os

from . import _C

DEFAULT_MAX_BYTES = 2 << 30


def default_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch_tpu")


def _configure():
    directory = os.environ.get("TORCH_TPU_CACHE_DIR", default_dir())
    max_bytes = int(os.environ.get("TORCH_TPU_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES))
    _C._cache_configure(directory, max_bytes)
    if os.environ.get("TORCH_TPU_CACHE_PREFETCH", "1") != "0":
        # The last session's programs load while the process imports and
        # builds its model; joined at exit, before the plugin unloads.
        _C._cache_prefetch()
        atexit.register(_C._cache_prefetch_stop)


def stats():
    """A dict: dir ("" when off), entries, bytes, max_bytes, and this
    process's disk hits and writes."""
    s = dict(_C._cache_stats())
    counters = _C._counters()
    s["hits"] = counters["disk_cache_hit"]
    s["writes"] = counters["disk_cache_write"]
    return s


def clear():
    """Removes every cached program file (programs in memory stay)."""
    _C._cache_clear()
