"""Finds the PJRT plugin to load, in the order DESIGN.md gives.

Runs without importing torch (the C tests call it as a script)."""
import glob
import importlib.util
import os
import shutil


def _package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _libtpu():
    d = _package_dir("libtpu")
    if d:
        hits = glob.glob(os.path.join(d, "libtpu*.so"))
        if hits:
            return hits[0]
    return None


def _cuda():
    if not (os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi")):
        return None
    try:
        d = _package_dir("jax_plugins")
    except ModuleNotFoundError:
        return None
    if d:
        hits = sorted(glob.glob(os.path.join(d, "xla_cuda*", "xla_cuda_plugin.so")))
        if hits:
            return hits[-1]
    return None


CPU_PLUGIN_FILE = "xla_cpu_pjrt.so"


def _cpu():
    try:
        d = _package_dir("xla_plugins.xla_cpu_pjrt")
    except ModuleNotFoundError:
        d = None
    if d:
        path = os.path.join(d, CPU_PLUGIN_FILE)
        if os.path.exists(path):
            return path
    return None


def find_plugin():
    """Returns the plugin path, or raises RuntimeError saying what to install."""
    explicit = os.environ.get("TORCH_TPU_PJRT_PLUGIN")
    if explicit:
        if not os.path.exists(explicit):
            raise RuntimeError(
                f"TORCH_TPU_PJRT_PLUGIN={explicit!r} does not exist; point it at a PJRT plugin .so"
            )
        return explicit
    for finder in (_libtpu, _cuda, _cpu):
        path = finder()
        if path:
            return path
    raise RuntimeError(
        "torch_tpu found no PJRT plugin: install the CPU plugin with "
        "`pip install xla-cpu-pjrt==0.0.1`, or set TORCH_TPU_PJRT_PLUGIN=/path/plugin.so"
    )


# On the CPU plugin the device's threads share the host's cores with the
# thread issuing ops; a step waits on the issuer, so the plugin's threads
# yield (see csrc/pjrt/pjrt_threads.c). Measured on a 2-core VM: 10 gains as
# much as 19, 5 less.
DEFAULT_WORKER_NICE = 10


def worker_nice():
    """TORCH_TPU_CPU_WORKER_NICE: added to the nice value of the CPU plugin's
    threads (0 leaves them alone), or raises ValueError saying what is wanted."""
    text = os.environ.get("TORCH_TPU_CPU_WORKER_NICE", str(DEFAULT_WORKER_NICE))
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 19:
        raise ValueError(f"TORCH_TPU_CPU_WORKER_NICE={text!r}: expected an integer from 0 (leave the CPU "
                         f"plugin's threads alone) to 19; the default is {DEFAULT_WORKER_NICE}")
    return value


def keep_freed_memory(plugin_path):
    """TORCH_TPU_CPU_KEEP_FREED_MEMORY: 1 keeps freed host memory in the
    process when plugin_path is the CPU plugin (a file named CPU_PLUGIN_FILE;
    see csrc/pjrt/pjrt_host_memory.c), 0 (the default) leaves the C library's
    policy alone (the policy's single arena slows small programs by more
    than it saves on large ones); any other value raises ValueError saying what is
    wanted. Decided from the file, as the policy must precede the plugin's
    threads, before the plugin names its platform."""
    text = os.environ.get("TORCH_TPU_CPU_KEEP_FREED_MEMORY", "0")
    if text not in ("0", "1"):
        raise ValueError(f"TORCH_TPU_CPU_KEEP_FREED_MEMORY={text!r}: expected 1 (keep freed host memory "
                         "for the CPU plugin's next executions) or 0 (return it to the system, the default)")
    return text == "1" and os.path.basename(plugin_path) == CPU_PLUGIN_FILE


if __name__ == "__main__":
    print(find_plugin())
