#!/usr/bin/python3
"""The PyTorch peer of bench/train_step: the same networks, batch sizes and optimizer step,
timed the same way (median of the timed steps after warm-up). Prints one JSON line per model,
then, with a third argument `profile` or `bf16`, one per model and kernel family: the self CPU
time per step that torch.profiler gives the aten ops of two more steps, grouped as bench/train_step
groups its own (FAMILIES below; the optimizer is every op under Optimizer.step, a cast every op
under aten::_to_copy). `bf16` runs forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16), the weights and the optimizer in float (PyTorch's CPU mixed precision). Each model's line has its peak resident
memory (peak_mb: VmHWM, reset before the model); bench/train_step runs this script once per model,
so that no other model's memory is resident beside it."""
import contextlib
import gc
import json
import re
import statistics
import sys
import time

import torch
import torch.nn as nn
import torchvision_free_models as zoo  # beside this file


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))


def make_step(model, shape, batch, classes, per_pixel, bf16=False):
    torch.manual_seed(0)
    x = torch.randn(batch, *shape)
    y = torch.randint(0, classes, (batch, *shape[1:]) if per_pixel else (batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return step


def reset_peak_memory():
    """The kernel's high-water mark of this process's resident set, reset (Linux)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_memory_mb():
    """VmHWM in MiB: the peak resident set since reset_peak_memory (0 without /proc)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def time_steps(step, warmup, steps):
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


# aten op name -> the kernel family bench/train_step counts it under (first match wins).
FAMILIES = [
    (r"convolution_backward|conv.*backward", "conv_backward"),
    (r"conv|mkldnn_convolution", "conv_forward"),
    (r"batch_norm.*backward", "batch_norm_backward"),
    (r"batch_norm", "batch_norm_forward"),
    (r"pool.*backward", "pool_backward"),
    (r"pool", "pool_forward"),
    (r"addmm|::mm$|::bmm$|matmul|linear", "gemm"),
    (r"nll_loss|cross_entropy|mse_loss", "loss"),
    (r"log_softmax", "loss"),  # cross-entropy's half; ptrain's cross-entropy kernel fuses both
    (r"softmax", "softmax"),
    (r"upsample|interpolate", "upsample"),
    (r"::sum$|::mean$", "reduce"),
    (r"::empty|::zeros|::zero_|::fill_|::resize_|::as_strided|::view|::reshape|::t$|::transpose"
     r"|::expand|::permute|::select|::slice|::set_|::to$|::_to_copy|::contiguous|::flatten|detach|_reshape_alias"
     r"|::ones_like|::resolve_", "autograd_and_allocation"),
    (r"^autograd::|Backward0|AccumulateGrad", "autograd_and_allocation"),
    (r"relu|clamp|threshold|::add|::mul|::div|::sub|dropout|bernoulli|::copy_|::clone|::where", "elementwise"),
]


def family_of(event):
    parent, cast = event, False
    while parent is not None:
        if parent.name.startswith("Optimizer.step") or parent.name.startswith("Optimizer.zero_grad"):
            return "optimizer"
        # autocast's copies (aten::to -> _to_copy -> copy_, the work in copy_): ptrain's family "cast".
        cast = cast or parent.name == "aten::_to_copy"
        parent = parent.cpu_parent
    if cast:
        return "cast"
    for pattern, family in FAMILIES:
        if re.search(pattern, event.name):
            return family
    return "other_kernels"


def profile_families(step, steps=2):
    from torch.profiler import ProfilerActivity, profile
    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        wall_us = (time.perf_counter() - start) * 1e6
    families = {}
    for event in prof.events():
        family = family_of(event)
        families[family] = families.get(family, 0.0) + event.self_cpu_time_total
    # What no aten op recorded (Python, the profiler's own cost) counts as bookkeeping.
    families["autograd_and_allocation"] = families.get("autograd_and_allocation", 0.0) + max(
        0.0, wall_us - sum(families.values()))
    return {family: us / steps / 1e3 for family, us in families.items()}


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    which = sys.argv[2].split(",") if len(sys.argv) > 2 else ["small_cnn", "resnet18_cifar"]
    torch.set_num_threads(threads)
    # name: (network, input shape, batch, warm-up steps, timed steps, classes, per-pixel targets)
    configs = {
        "small_cnn": (small_cnn, (1, 28, 28), 128, 3, 20, 10, False),
        "resnet18_cifar": (lambda: zoo.resnet18_cifar(10), (3, 32, 32), 64, 2, 8, 10, False),
        "resnet50_cifar": (lambda: zoo.resnet50_cifar(10), (3, 32, 32), 64, 1, 4, 10, False),
        "vgg16_128": (lambda: zoo.vgg16(3), (3, 128, 128), 16, 1, 4, 3, False),
        "unet_128": (lambda: zoo.UNet(3, 2), (3, 128, 128), 16, 1, 4, 2, True),
    }
    mode = sys.argv[3] if len(sys.argv) > 3 else ""
    profiling, bf16 = mode in ("profile", "bf16"), mode == "bf16"
    for name in which:
        make, shape, batch, warmup, steps, classes, per_pixel = configs[name]
        gc.collect()
        reset_peak_memory()
        step = make_step(make().train(), shape, batch, classes, per_pixel, bf16)
        median = time_steps(step, warmup, steps)
        print(json.dumps({"model": name, "batch": batch, "precision": "bf16" if bf16 else "fp32", "median_s": median,
                          "images_per_sec": batch / median, "peak_mb": peak_memory_mb(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "mkldnn": torch.backends.mkldnn.is_available()}), flush=True)
        if profiling:
            for family, ms in sorted(profile_families(step).items()):
                print(json.dumps({"model": name, "family": family, "ms_per_step": ms}), flush=True)


if __name__ == "__main__":
    main()
