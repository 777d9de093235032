"""Writes the PyTorch side of test/train/grad_cam_test.cpp (the test does not run Python):
  grad_cam_weights.safetensors    the state_dict of a small CNN (below) with seeded weights and
                                  batch-norm statistics
  grad_cam_reference.safetensors  its input [2, 3, 16, 12] and Grad-CAM maps [2, 16, 12] computed
                                  with plain autograd hooks: "cam.<layer>.<column>" for the
                                  output column (class) <column>
Grad-CAM as pytorch-grad-cam computes it: the gradient of the class's logit (summed over the
batch) with respect to the layer's output, its spatial mean as channel weights, the ReLU of the
weighted sum, bilinear upsampling (align_corners=False) to the input's size, and each image's map
scaled to [0, 1]. Run from this directory with torch (Debian's python3-torch 1.13, /usr/bin/python3; no
safetensors package is needed, the files are written by hand):
    python3 make_grad_cam_reference.py
"""
import json
import struct
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


def small_cnn():
    return nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(3, 6, 3, padding=1)),
        ("relu1", nn.ReLU()),
        ("block", nn.Sequential(nn.Conv2d(6, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())),
        ("pool", nn.MaxPool2d(2)),
        ("conv2", nn.Conv2d(8, 10, 3, padding=1)),
        ("relu2", nn.ReLU()),
        ("avgpool", nn.AdaptiveAvgPool2d(1)),
        ("flatten", nn.Flatten(1)),
        ("fc", nn.Linear(10, 7)),
    ]))


def grad_cam(model, x, layer, column):
    captured = {}

    def hook(module, inputs, output):
        captured["activation"] = output
        output.register_hook(lambda g: captured.__setitem__("grad", g))

    handle = dict(model.named_modules())[layer].register_forward_hook(hook)
    output = model(x)
    handle.remove()
    output[:, column].sum().backward()
    activation, grad = captured["activation"].double(), captured["grad"].double()
    weights = grad.mean(dim=(2, 3), keepdim=True)
    cam = F.relu((weights * activation).sum(dim=1, keepdim=True))
    cam = F.interpolate(cam, size=x.shape[2:], mode="bilinear", align_corners=False)[:, 0]
    low = cam.amin(dim=(1, 2), keepdim=True)
    high = cam.amax(dim=(1, 2), keepdim=True)
    return ((cam - low) / (high - low)).float()


def save_safetensors(tensors, path):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().float().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    torch.manual_seed(18)
    model = small_cnn()
    with torch.no_grad():
        bn = model.block[1]
        bn.running_mean.uniform_(-0.2, 0.2)
        bn.running_var.uniform_(0.5, 1.5)
        bn.weight.uniform_(0.8, 1.2)
        bn.bias.uniform_(-0.1, 0.1)
    model.eval()
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    save_safetensors(state, "grad_cam_weights.safetensors")

    x = torch.rand(2, 3, 16, 12)
    reference = {"input": x}
    # One head of 7 classes; and heads of widths 3 and 4 (classes 2 and 1: columns 2 and 4).
    for layer, column in [("relu2", 3), ("block", 5), ("block.0", 0), ("conv2", 2), ("conv2", 4)]:
        model.zero_grad()
        cam = grad_cam(model, x, layer, column)
        print(layer, column, "map range per image", [(float(c.min()), float(c.max())) for c in cam])
        reference[f"cam.{layer}.{column}"] = cam
    save_safetensors(reference, "grad_cam_reference.safetensors")


if __name__ == "__main__":
    main()
