#!/bin/bash
# The GPU checks, on a machine with an NVIDIA GPU, PyTorch and JAX's CUDA PJRT
# plugin (jax-cuda*-pjrt) but maybe no network: builds torch_tpu against that
# machine's torch, then, within a time budget, in order of value:
#   1. a GPT-2-small training step through torch.compile(backend="tpu") on the
#      CUDA plugin (ms/step, MFU), beside PyTorch inductor and eager on CUDA;
#   2. attention's fused form against its math form at GPT-2's shape;
#   3. strict versus fused eager per op and per training step, and an AdamW
#      step written in place (donated buffers);
#   4. the mode, stream, compile and in-place tests on the CUDA plugin.
#
#   benchmarks/cuda_check.sh PJRT_HEADER_DIR LOG_DIR [SECONDS]
#
# PJRT_HEADER_DIR holds pjrt_c_api.h (the CPU plugin's wheel ships it: its
# xla_plugins/xla_cpu_pjrt/include). Each stage's output goes to LOG_DIR.
# GPT2_ARGS="--size tiny" ATTENTION_ARGS="--tokens 64" rehearse the script on a CPU.
set -u
header_dir=$(realpath "$1") logs=$2 budget=${3:-540}
mkdir -p "$logs"
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 TORCH_TPU_CACHE_DIR=$(mktemp -d)
start=$SECONDS

# stage NAME SECONDS COMMAND...: runs COMMAND with at most SECONDS (less if
# the budget has less left), teeing its output to LOG_DIR/NAME.log.
stage() {
  local name=$1 limit=$2; shift 2
  local left=$((budget - (SECONDS - start)))
  ((limit > left)) && limit=$left
  if ((limit < 20)); then echo "== $name: skipped, ${left}s of the budget left"; return 1; fi
  echo "== $name (at most ${limit}s, at $((SECONDS - start))s)"
  timeout "$limit" "$@" 2>&1 | tee "$logs/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc after $((SECONDS - start))s"
  return "$rc"
}

nvidia-smi -L
$PY -c "import torch, jax; print('torch', torch.__version__, 'jax', jax.__version__)"

touch "$logs/.stamp"
stage build 240 bash -c "make -j$(nproc) build/libtpu_runtime.a PY=$PY STAMP=$logs/.stamp PJRT_INCLUDE=$header_dir \
  && TORCH_DEVICE_BACKEND_AUTOLOAD=0 MAX_JOBS=$(nproc) $PY -m pip install -q --no-build-isolation --no-deps -e ." \
  || exit 1

# The CUDA plugin finds CUDA's libraries (the nvidia-* wheels) through its RPATH.
stage probe 60 $PY -c "import torch, torch_tpu; x = torch.arange(6., device='tpu'); \
print(torch.tpu.get_device_name(), (x * 2).sum().item())" || exit 1

stage gpt2-tpu-compiled 200 $PY benchmarks/gpt2_step.py ${GPT2_ARGS:-} --sides tpu-compiled --timeout 190
# Attention at GPT-2's shape: the fused form's bfloat16 products against the math form's float32.
stage attention 90 $PY benchmarks/attention.py ${ATTENTION_ARGS:---batch 16 --tokens 1024}
stage eager-overhead 60 $PY benchmarks/eager_overhead.py --repeats 5
stage optimizer-step 60 $PY benchmarks/optimizer_step.py --numel 134217728
stage train-step-small 150 $PY benchmarks/train_step.py --config small --steps 5 --repeats 3
# XLA's GEMMs through cuBLAS rather than its Triton fusions: which serves GPT-2 better.
XLA_FLAGS=--xla_gpu_enable_triton_gemm=false \
  stage gpt2-tpu-compiled-cublas 120 $PY benchmarks/gpt2_step.py ${GPT2_ARGS:-} --sides tpu-compiled --timeout 110
stage gpt2-tpu-fused 150 $PY benchmarks/gpt2_step.py ${GPT2_ARGS:-} --sides tpu-fused --steps 5 --timeout 140
stage gpt2-cuda 150 $PY benchmarks/gpt2_step.py ${GPT2_ARGS:-} --sides cuda-inductor cuda --timeout 140
stage pytest 200 $PY -m pytest -q -x -p no:cacheprovider tests/test_modes.py tests/test_streams.py tests/test_in_place.py \
  tests/test_compile.py
echo "== done after $((SECONDS - start))s"
