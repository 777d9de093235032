"""Writes resnet18_accuracy_reference.safetensors for test/nn/conv_accuracy_test.cpp (the test does
not run Python): a torchvision ResNet-18 in eval mode, its parameters and batch-norm statistics
drawn as test/common/torchvision_models.hpp's fill_seeded draws them (He-uniform weights, running
means and variances off the activations' own, so that each ReLU passes outputs with a mean of their
own, as in a trained network), the input [2, 3, 64, 64] of deterministic_input, and the gradient
seed on the logits of logits_seed.

For the logits, the input's gradient and every parameter's gradient it stores, at SAMPLES evenly
spaced flat indices (the whole tensor where it is smaller):
  <name>.index                 I64, the flat indices
  <name>.reference             F64, PyTorch's float64 values there
  <name>.largest               F64 [1], the largest |value| of the whole float64 tensor
  <name>.torch_float32_error   F64 [1], max |float32 - float64| over the indices / largest, the
                               error PyTorch's own float32 run makes (oneDNN's direct convolution)
Run with pip's torch, torchvision and safetensors (bench/torch_venv.sh makes a venv with torch), from
this directory:
    "$(sh ../../../bench/torch_venv.sh)" make_conv_accuracy_reference.py
"""
import math

import numpy as np
import torch
import torchvision.models as models
from safetensors.torch import save_file

SAMPLES = 2048
INPUT_SHAPE = (2, 3, 64, 64)


def uniform(stream, n):
    """n uniforms in [0, 1): splitmix64 of stream * 2^32 + j, its top 53 bits."""
    z = np.uint64(stream) * np.uint64(1 << 32) + np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = z * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return torch.from_numpy((z >> np.uint64(11)).astype(np.float64) * 2.0**-53)


def fill_seeded(net):
    """Parameter k (named order): rank >= 2 weights (2u - 1) sqrt(6 / fan_in), other weights
    1 + 0.2 (2u - 1), biases 0.1 (2u - 1), u = uniform(k); the k-th running mean 0.3 (2u - 1) with
    u = uniform(1000 + k), the k-th running variance 0.5 + u with u = uniform(2000 + k)."""
    with torch.no_grad():
        for k, (name, p) in enumerate(net.named_parameters()):
            s = 2 * uniform(k, p.numel()) - 1
            if p.dim() >= 2:
                v = s * math.sqrt(6.0 / (p.numel() // p.shape[0]))
            elif name.endswith("weight"):
                v = 1.0 + 0.2 * s
            else:
                v = 0.1 * s
            p.copy_(v.reshape(p.shape).to(p.dtype))
        means = [b for n, b in net.named_buffers() if n.endswith("running_mean")]
        variances = [b for n, b in net.named_buffers() if n.endswith("running_var")]
        for k, (mean, var) in enumerate(zip(means, variances)):
            mean.copy_(0.3 * (2 * uniform(1000 + k, mean.numel()) - 1))
            var.copy_(0.5 + uniform(2000 + k, var.numel()))


def deterministic_input(shape):
    n = math.prod(shape)
    return torch.sin(0.011 * torch.arange(n, dtype=torch.float64)).reshape(shape).float()


def logits_seed(shape):
    """The gradient of the loss with respect to the logits: sin(0.13 i) / N."""
    n = math.prod(shape)
    return torch.sin(0.13 * torch.arange(n, dtype=torch.float64)).reshape(shape) / shape[0]


def run(dtype):
    net = models.resnet18()
    fill_seeded(net)
    net = net.to(dtype).eval()
    x = deterministic_input(INPUT_SHAPE).to(dtype).requires_grad_(True)
    logits = net(x)
    logits.backward(logits_seed(logits.shape).to(dtype))
    out = {"logits": logits.detach(), "input.grad": x.grad}
    for name, p in net.named_parameters():
        out[name + ".grad"] = p.grad
    return {k: v.detach().double().flatten() for k, v in out.items()}


def main():
    torch.set_num_threads(2)
    exact, single = run(torch.float64), run(torch.float32)
    tensors, worst = {}, 0.0
    for name, ref in exact.items():
        n = ref.numel()
        index = torch.arange(n) if n <= SAMPLES else (torch.arange(SAMPLES) * n) // SAMPLES
        largest = ref.abs().max().item()
        error = (single[name][index] - ref[index]).abs().max().item() / largest
        worst = max(worst, error)
        tensors[name + ".index"] = index.to(torch.int64)
        tensors[name + ".reference"] = ref[index]
        tensors[name + ".largest"] = torch.tensor([largest], dtype=torch.float64)
        tensors[name + ".torch_float32_error"] = torch.tensor([error], dtype=torch.float64)
        print(f"{name:32s} largest {largest:.3e}  torch float32 error {error:.2e}")
    save_file(tensors, "resnet18_accuracy_reference.safetensors")
    print(f"torch {torch.__version__}: largest float32 error {worst:.2e} over {len(exact)} tensors")


if __name__ == "__main__":
    main()
