#!/usr/bin/python3
"""The PyTorch peer of bench/train_step: the same networks, batch sizes and optimizer step,
timed the same way (median of the timed steps after warm-up). Prints one JSON line per model."""
import json
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


def time_steps(model, shape, batch, warmup, steps, classes=10, per_pixel=False):
    torch.manual_seed(0)
    x = torch.randn(batch, *shape)
    y = torch.randint(0, classes, (batch, *shape[1:]) if per_pixel else (batch,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


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
    for name in which:
        make, shape, batch, warmup, steps, classes, per_pixel = configs[name]
        median = time_steps(make().train(), shape, batch, warmup, steps, classes, per_pixel)
        print(json.dumps({"model": name, "batch": batch, "median_s": median,
                          "images_per_sec": batch / median, "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "mkldnn": torch.backends.mkldnn.is_available()}), flush=True)


if __name__ == "__main__":
    main()
