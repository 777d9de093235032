"""Writes, into the folder it is given, what test/nn/torch_conversion_test.cpp reads: torchvision's
ResNet-18 and VGG-16 with seeded weights, saved by torch.save as <model>.pth and turned by
tools/torch_to_safetensors.py into <model>.safetensors, and <model>_reference.safetensors holding
the input (F32, a small image of deterministic_input's values) and PyTorch's float64 logits of
the model in eval mode on it.

A VGG-16 state dict is 528 MB, so these are written at test time into the build folder (the ctest
fixture nn/make_torchvision_conversions) rather than committed. Needs pip's torch, torchvision and
safetensors (PTRAIN_TORCH_PYTHON; bench/torch_venv.sh makes a venv with torch):
    python make_torchvision_conversions.py OUTPUT_FOLDER
"""
import math
import os
import subprocess
import sys

import torch
import torchvision.models as models
from safetensors.torch import save_file

CONVERTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools",
                         "torch_to_safetensors.py")

# Small images keep the float64 reference quick; VGG-16's adaptive pool spreads its 1x1 map to 7x7.
MODELS = {
    "resnet18": (models.resnet18, (2, 3, 64, 64)),
    "vgg16": (models.vgg16, (1, 3, 32, 32)),
}


def deterministic_input(shape):
    n = math.prod(shape)
    return torch.sin(0.011 * torch.arange(n, dtype=torch.float64)).reshape(shape).float()


def seeded(build, seed):
    """torchvision's own initialisation under a fixed seed, and batch norm's affine parameters and
    running statistics drawn away from 1 and 0 so that the file's buffers matter to the logits."""
    torch.manual_seed(seed)
    net = build()
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.uniform_(0.8, 1.2)
                module.bias.uniform_(-0.1, 0.1)
                module.running_mean.uniform_(-0.3, 0.3)
                module.running_var.uniform_(0.5, 1.5)
                module.num_batches_tracked.fill_(7)
    return net.eval()


def up_to_date(outputs):
    """Writing VGG-16 takes minutes: files newer than this script and the converter are kept."""
    newest_source = max(os.path.getmtime(f) for f in (__file__, CONVERTER))
    return all(os.path.exists(f) and os.path.getmtime(f) > newest_source for f in outputs)


def main(out):
    os.makedirs(out, exist_ok=True)
    for seed, (name, (build, shape)) in enumerate(MODELS.items()):
        outputs = [os.path.join(out, f"{name}{suffix}.safetensors") for suffix in ("", "_reference")]
        if up_to_date(outputs):
            print(f"{name}: {', '.join(outputs)} up to date")
            continue
        net = seeded(build, seed)
        pth = os.path.join(out, f"{name}.pth")
        torch.save(net.state_dict(), pth)
        subprocess.run([sys.executable, CONVERTER, pth, outputs[0]], check=True)
        x = deterministic_input(shape)
        with torch.no_grad():
            logits = net.double()(x.double())
        save_file({"input": x, "logits": logits.contiguous()}, outputs[1])
        os.remove(pth)  # the converted file is what the tests read
        print(f"{name}: {sum(p.numel() for p in net.parameters())} parameters, logits {tuple(logits.shape)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_torchvision_conversions.py OUTPUT_FOLDER")
    main(sys.argv[1])
