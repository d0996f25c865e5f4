"""benchmarks/train_step.py --jax without JAX installed stops with the pip
command that installs it, whether or not this machine has JAX: the import of
jax is made to fail here. (The JAX models themselves are checked against the
CPU models by the benchmark, before it times them; CI does not install JAX.)"""
import importlib.util
import pathlib
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def load_train_step(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("train_step", BENCHMARKS / "train_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_jax_side_without_jax_names_the_install_command(monkeypatch):
    train_step = load_train_step(monkeypatch)
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax raises ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "jax_models", raising=False)
    with pytest.raises(SystemExit, match=r"--jax needs JAX: pip install -r benchmarks/requirements-jax.txt"):
        train_step.import_jax_models()
