# Builds torch_tpu._C: the PyTorch glue (torch_tpu/csrc) linked with the C
# runtime that `make` builds into build/libtpu_runtime.a.
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
glue = sorted(os.path.join("torch_tpu", "csrc", f) for f in os.listdir(os.path.join(here, "torch_tpu", "csrc"))
              if f.endswith(".cpp"))

setup(
    name="torch_tpu",
    version="0.1.0",
    packages=["torch_tpu"],
    ext_modules=[
        CppExtension(
            "torch_tpu._C",
            glue,
            include_dirs=[os.path.join(here, "csrc")],
            extra_objects=[os.path.join(here, "build", "libtpu_runtime.a")],
            extra_compile_args=["-O2", "-std=c++17"],
            libraries=["dl", "pthread"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    entry_points={"torch.backends": ["tpu = torch_tpu:_autoload"],
                  "torch_dynamo_backends": ["tpu = torch_tpu.backend:tpu_backend"]},
)
