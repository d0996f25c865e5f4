"""Parity helpers: run the same function on PyTorch's CPU backend and on tpu
and compare results with stated tolerances."""
import torch

# Tolerances per dtype: (rtol, atol). Low-precision floats get looser bounds
# because XLA may fuse or reorder arithmetic differently from ATen's CPU kernels.
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float16: (1e-3, 1e-3),
    torch.complex128: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
}


def to_tpu(value):
    """Moves tensors (also inside lists/tuples) to tpu, keeping views' layout."""
    if isinstance(value, torch.Tensor):
        return value.to("tpu")
    if isinstance(value, (list, tuple)):
        return type(value)(to_tpu(v) for v in value)
    return value


def assert_close(actual, expected, rtol=None, atol=None, exact_dtype=True):
    """Compares a tpu result (tensor or nested tuple/list) against the CPU one."""
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, rtol, atol, exact_dtype)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected or (actual != actual and expected != expected)
        return
    assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual)}"
    assert actual.device.type == "tpu", f"result is on {actual.device}, not tpu"
    if exact_dtype:
        assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    r, a = TOLERANCES.get(expected.dtype, (0, 0))
    torch.testing.assert_close(
        actual.cpu(), expected, rtol=r if rtol is None else rtol, atol=a if atol is None else atol,
        equal_nan=True, check_dtype=exact_dtype,
    )


def check(fn, *args, rtol=None, atol=None, exact_dtype=True, **kwargs):
    """Runs fn(*args) on CPU and fn(*to_tpu(args)) on tpu and compares; also
    checks that tensors the function mutated in place match."""
    cpu_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    tpu_args = [to_tpu(a) for a in args]
    expected = fn(*cpu_args, **kwargs)
    actual = fn(*tpu_args, **kwargs)
    assert_close(actual, expected, rtol, atol, exact_dtype)
    for c, t in zip(cpu_args, tpu_args):
        if isinstance(c, torch.Tensor):
            assert_close(t, c, rtol, atol, exact_dtype)
    return actual


def programs_run(fn, *args):
    """How many device programs fn(*args) (tpu arguments) runs, awaited."""
    import torch_tpu.metrics

    torch.tpu.synchronize()
    before = torch_tpu.metrics.counters()["execute"]
    result = fn(*args)
    torch.tpu.synchronize()
    del result
    return torch_tpu.metrics.counters()["execute"] - before
