"""The minGPT and ResNet of examples/mingpt.py and examples/resnet.py written
in plain JAX, the peer that benchmarks/train_step.py --jax times: the same
layers, loss and optimizer, started from the torch model's weights, and the
whole training step (forward, backward, optimizer update) one jax.jit program.

Parameters and buffers live in flat dicts keyed by the torch state_dict's
names, so taking the torch weights is a copy per tensor and a layer the two
models disagree on is a KeyError naming it. Constants that the torch modules
take by default (LayerNorm and BatchNorm eps, BatchNorm momentum) are torch's.

Needs `pip install -r benchmarks/requirements-jax.txt`. A Trainer runs on
the device it is given: jaxlib's own CPU backend (JAX's default here, with
jaxlib's XLA), or the PJRT plugin that torch_tpu loads, registered with JAX
as the backend PLUGIN_BACKEND (its own client of the same .so, so the same
XLA compiles JAX's step and torch_tpu's programs).
"""
import functools
import math

import jax
import jax.extend.backend
import jax.numpy as jnp
import numpy as np
import torch
from jax._src import xla_bridge

from torch_tpu._plugin import find_plugin

PLUGIN_BACKEND = "torch_tpu_plugin"
# jaxlib's backend listed first stays the default; JAX opens the plugin with
# its own PJRT client, beside torch_tpu's, in the one loaded copy of the .so.
jax.config.update("jax_platforms", f"cpu,{PLUGIN_BACKEND}")
xla_bridge.register_plugin(PLUGIN_BACKEND, library_path=find_plugin())


def jaxlib_device():
    return jax.devices("cpu")[0]


def plugin_device():
    return jax.devices(PLUGIN_BACKEND)[0]


def backend_of(array):
    """The name of the JAX backend whose client holds `array`: both report
    platform "cpu", so only the client tells them apart."""
    (device,) = array.devices()
    return next(name for name, client in jax.extend.backend.backends().items() if client is device.client)

NORM_EPS = 1e-5  # torch's LayerNorm and BatchNorm2d default
BATCH_NORM_MOMENTUM = 0.1  # torch's BatchNorm2d default


def linear(p, name, x):
    bias = p.get(name + ".bias")
    y = x @ p[name + ".weight"].T
    return y if bias is None else y + bias


def layer_norm(p, name, x):
    mean = x.mean(-1, keepdims=True)
    var = jnp.square(x - mean).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + NORM_EPS) * p[name + ".weight"] + p[name + ".bias"]


def dropout(x, rate, key):
    """torch's training-mode dropout: zeroes with probability `rate` and
    scales what it keeps by 1 / (1 - rate)."""
    if rate == 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def cross_entropy(logits, labels):
    """F.cross_entropy: the mean over rows of -log softmax at the label."""
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(log_probs, labels[:, None], axis=-1).mean()


def gpt_loss(p, buffers, batch, key, cfg):
    """mingpt.loss_fn(GPT(cfg), batch) in training mode; GPT has no persistent
    buffers, so `buffers` comes back as it came."""
    idx, targets = batch
    B, T = idx.shape
    C, H = cfg.n_embd, cfg.n_head
    keys = iter(jax.random.split(key, 1 + 3 * cfg.n_layer))  # one per nn.Dropout call
    causal = jnp.tril(jnp.ones((T, T), dtype=bool))
    x = dropout(p["wte.weight"][idx] + p["wpe.weight"][:T], cfg.dropout, next(keys))
    for i in range(cfg.n_layer):
        block = f"blocks.{i}."
        qkv = linear(p, block + "attn.qkv", layer_norm(p, block + "ln1", x))
        q, k, v = (t.reshape(B, T, H, C // H).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, axis=2))
        att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(C // H)
        att = dropout(jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1), cfg.dropout, next(keys))
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + dropout(linear(p, block + "attn.proj", y), cfg.dropout, next(keys))
        h = jax.nn.gelu(linear(p, block + "mlp.0", layer_norm(p, block + "ln2", x)), approximate=False)
        x = x + dropout(linear(p, block + "mlp.2", h), cfg.dropout, next(keys))
    logits = linear(p, "head", layer_norm(p, "ln_f", x))
    return cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T)), buffers


def conv2d(p, name, x, stride, padding):
    return jax.lax.conv_general_dilated(x, p[name + ".weight"], (stride, stride),
                                        [(padding, padding)] * 2,
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))


def batch_norm(p, buffers, name, x, updated):
    """Training-mode BatchNorm2d: normalizes with the batch's statistics and
    writes the module's new buffers into `updated` (running variance from
    the unbiased batch variance, as torch keeps it)."""
    mean = x.mean((0, 2, 3))
    var = jnp.square(x - mean[:, None, None]).mean((0, 2, 3))
    n = x.size // x.shape[1]
    m = BATCH_NORM_MOMENTUM
    updated[name + ".running_mean"] = (1 - m) * buffers[name + ".running_mean"] + m * mean
    updated[name + ".running_var"] = (1 - m) * buffers[name + ".running_var"] + m * var * n / (n - 1)
    updated[name + ".num_batches_tracked"] = buffers[name + ".num_batches_tracked"] + 1
    scale = p[name + ".weight"] * jax.lax.rsqrt(var + NORM_EPS)
    return (x - mean[:, None, None]) * scale[:, None, None] + p[name + ".bias"][:, None, None]


def max_pool(x, size, stride, padding):
    pad = (padding, padding)
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, size, size), (1, 1, stride, stride),
                                 ((0, 0), (0, 0), pad, pad))


def resnet_blocks(cfg):
    """(stride, has a projection shortcut) of each BasicBlock, in the order
    resnet.ResNet builds them."""
    blocks, cin = [], cfg.widths[0]
    for i, (cout, n) in enumerate(zip(cfg.widths, cfg.blocks)):
        for j in range(n):
            stride = 2 if i > 0 and j == 0 else 1
            blocks.append((stride, stride != 1 or cin != cout))
            cin = cout
    return blocks


def resnet_loss(p, buffers, batch, key, cfg):
    """resnet.loss_fn(ResNet(cfg), batch) in training mode, and the BatchNorm
    buffers it leaves."""
    images, labels = batch
    updated = {}
    x = jax.nn.relu(batch_norm(p, buffers, "stem.1", conv2d(p, "stem.0", images, 1, 1), updated))
    x = max_pool(x, 3, 2, 1)
    for k, (stride, has_shortcut) in enumerate(resnet_blocks(cfg)):
        block = f"stages.{k}."
        y = conv2d(p, block + "conv1", x, stride, 1)
        y = jax.nn.relu(batch_norm(p, buffers, block + "bn1", y, updated))
        y = batch_norm(p, buffers, block + "bn2", conv2d(p, block + "conv2", y, 1, 1), updated)
        if has_shortcut:
            x = batch_norm(p, buffers, block + "shortcut.1", conv2d(p, block + "shortcut.0", x, stride, 0),
                           updated)
        x = jax.nn.relu(y + x)
    logits = linear(p, "fc", x.mean((2, 3)))
    return cross_entropy(logits, labels), {**buffers, **updated}


LOSSES = {"mingpt": gpt_loss, "resnet": resnet_loss}


class AdamW:
    """torch.optim.AdamW's update (without amsgrad): decoupled weight decay,
    bias-corrected moments. `groups` maps each parameter's name to its torch
    param group."""

    def __init__(self, groups):
        self.groups = groups

    def init(self, params):
        def zeros():  # one array per moment: the step donates each
            return {name: jnp.zeros_like(p) for name, p in params.items()}

        return {"step": jnp.zeros((), jnp.float32), "exp_avg": zeros(), "exp_avg_sq": zeros()}

    def update(self, params, grads, state):
        step = state["step"] + 1
        new_params, exp_avg, exp_avg_sq = {}, {}, {}
        for name, p in params.items():
            group, g = self.groups[name], grads[name]
            beta1, beta2 = group["betas"]
            p = p * (1 - group["lr"] * group["weight_decay"])
            exp_avg[name] = beta1 * state["exp_avg"][name] + (1 - beta1) * g
            exp_avg_sq[name] = beta2 * state["exp_avg_sq"][name] + (1 - beta2) * g * g
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            denom = jnp.sqrt(exp_avg_sq[name]) / jnp.sqrt(bias_correction2) + group["eps"]
            new_params[name] = p - group["lr"] / bias_correction1 * exp_avg[name] / denom
        return new_params, {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}


class SGD:
    """torch.optim.SGD's update with momentum and L2 weight decay (no
    dampening, not Nesterov). `groups` maps each parameter's name to its torch
    param group."""

    def __init__(self, groups):
        self.groups = groups

    def init(self, params):
        return {name: jnp.zeros_like(p) for name, p in params.items()}

    def update(self, params, grads, momentum_buffers):
        new_params, new_buffers = {}, {}
        for name, p in params.items():
            group = self.groups[name]
            g = grads[name] + group["weight_decay"] * p
            new_buffers[name] = group["momentum"] * momentum_buffers[name] + g
            new_params[name] = p - group["lr"] * new_buffers[name]
        return new_params, new_buffers


# The torch group settings each JAX optimizer leaves out, with the value it assumes.
UNWRITTEN = {AdamW: {"amsgrad": False, "maximize": False},
             SGD: {"nesterov": False, "dampening": 0, "maximize": False}}


def optimizer_like(torch_optimizer, names):
    """The JAX AdamW or SGD with torch_optimizer's hyperparameters, group by
    group; `names` maps id(parameter) to its state_dict name."""
    kind = {torch.optim.AdamW: AdamW, torch.optim.SGD: SGD}.get(type(torch_optimizer))
    if kind is None:
        raise TypeError(f"jax_models has no JAX version of {type(torch_optimizer).__name__}; "
                        "it has AdamW and SGD")
    groups = {}
    for group in torch_optimizer.param_groups:
        unwritten = {k: group[k] for k, v in UNWRITTEN[kind].items() if group.get(k, v) != v}
        if unwritten:
            raise ValueError(f"jax_models' {kind.__name__} does not implement {unwritten}")
        groups.update({names[id(p)]: group for p in group["params"]})
    return kind(groups)


class Trainer:
    """An example's model (`example_name` as in examples/) in JAX, started
    from torch_model's weights and trained with torch_optimizer's algorithm
    and hyperparameters, one jitted program per step on `device` (its state
    lives there, so jit compiles for it and moves each batch to it). Dropout
    draws from its own JAX key, so it matches torch's in rate, not in the
    units it drops."""

    def __init__(self, example_name, cfg, torch_model, torch_optimizer, device, seed=0):
        names = {id(t): name for name, t in torch_model.named_parameters()}
        self.optimizer = optimizer_like(torch_optimizer, names)
        # Copies: JAX may alias host memory it is given, and the step donates
        # its inputs, so it must never write into the torch model's tensors.
        buffers = {name: jnp.array(t.detach().numpy(), copy=True)
                   for name, t in torch_model.state_dict().items()}
        params = {name: buffers.pop(name) for name in names.values()}
        self.state = jax.device_put((params, buffers, self.optimizer.init(params), jax.random.key(seed)),
                                    device)
        loss_fn = functools.partial(LOSSES[example_name], cfg=cfg)
        self._step = jax.jit(functools.partial(self._train_step, loss_fn), donate_argnums=(0, 1, 2, 3))

    def _train_step(self, loss_fn, params, buffers, opt_state, key, batch):
        key, dropout_key = jax.random.split(key)
        (loss, buffers), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, buffers, batch,
                                                                           dropout_key)
        params, opt_state = self.optimizer.update(params, grads, opt_state)
        return params, buffers, opt_state, key, loss

    def train(self, batches):
        """One step per batch (tuples of CPU tensors, handed over as NumPy
        arrays) and the losses as floats: reading each one on the host ends
        its step, as examples/common.py's train does."""
        losses = []
        for batch in batches:
            *state, loss = self._step(*self.state, tuple(t.numpy() for t in batch))
            self.state = tuple(state)
            losses.append(float(loss))
        return losses

    def first_parameter(self):
        return next(iter(self.state[0].values()))

    def state_dict(self):
        """Parameters and buffers as NumPy arrays, by their torch names."""
        params, buffers = self.state[:2]
        return {name: np.asarray(a) for name, a in {**params, **buffers}.items()}
