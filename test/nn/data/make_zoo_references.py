"""Writes <model>_names.txt (torchvision 0.14's named_parameters: `name d0,d1,...`) and prints the
reference logits that test/nn/{vgg,squeezenet,inception}_test.cpp embed.

Run at development time with torch 1.13 + torchvision 0.14 (the tests do not run Python):
    python make_zoo_references.py            # in test/nn/data
Parameters and inputs are filled as test/common/torchvision_models.hpp's fill_deterministic and
deterministic_input do, so both sides compute the same network on the same image.
"""
import math

import torch
import torchvision.models as models


def fill_deterministic(net):
    with torch.no_grad():
        for k, (name, p) in enumerate(net.named_parameters()):
            j = torch.arange(p.numel(), dtype=torch.float64)
            s = torch.sin(0.37 * j + 1.3 * k)
            if p.dim() >= 2:
                v = s * (2.0 / math.sqrt(p.numel() // p.shape[0]))
            elif name.endswith("weight"):
                v = 1.0 + 0.1 * s
            else:
                v = 0.1 * s
            p.copy_(v.reshape(p.shape).to(p.dtype))


def deterministic_input(shape):
    n = math.prod(shape)
    return torch.sin(0.011 * torch.arange(n, dtype=torch.float64)).reshape(shape).float()


NAMES = {
    "vgg16": lambda: models.vgg16(),
    "vgg16_bn": lambda: models.vgg16_bn(),
    "squeezenet1_0": lambda: models.squeezenet1_0(),
    "squeezenet1_1": lambda: models.squeezenet1_1(),
    "inception_v3": lambda: models.inception_v3(aux_logits=True, init_weights=False),
    "inception_v3_no_aux": lambda: models.inception_v3(aux_logits=False, init_weights=False),
    "resnet18": lambda: models.resnet18(),
}

# The first 10 logits of the 1000 (the tests check names and outputs on one instance).
OUTPUTS = {
    "vgg16_bn, 1x3x32x32": (lambda: models.vgg16_bn(), (1, 3, 32, 32)),
    "squeezenet1_0, 1x3x67x67": (lambda: models.squeezenet1_0(), (1, 3, 67, 67)),
    "squeezenet1_1, 1x3x67x67": (lambda: models.squeezenet1_1(), (1, 3, 67, 67)),
    "inception_v3 without aux logits, 1x3x299x299": (
        lambda: models.inception_v3(aux_logits=False, init_weights=False), (1, 3, 299, 299)),
}

if __name__ == "__main__":
    for name, build in NAMES.items():
        net = build()
        with open(f"{name}_names.txt", "w") as out:
            for n, p in net.named_parameters():
                out.write(n + " " + ",".join(str(d) for d in p.shape) + "\n")
        print(name, sum(p.numel() for p in net.parameters()), "parameters")
    for what, (build, shape) in OUTPUTS.items():
        net = build().eval()
        fill_deterministic(net)
        with torch.no_grad():
            y = net(deterministic_input(shape))
        print(what, "logits:", ", ".join(f"{v:.7g}" for v in y.flatten()[:10].tolist()))
