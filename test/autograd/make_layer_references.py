# Prints the PyTorch 1.13 reference values embedded in test/autograd/conv_transpose_test.cpp,
# upsample_test.cpp, loss_test.cpp (binary_cross_entropy_with_logits) and test/nn/unet_test.cpp
# (the tests do not run Python). Run with the interpreter that has torch:
# /usr/bin/python3 make_layer_references.py
import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.simplefilter("ignore")
torch.set_default_dtype(torch.float64)

def seq(shape, a, b, scale=1.0, cos=False):
    n = math.prod(shape)
    i = torch.arange(n, dtype=torch.float64)
    v = torch.cos(a*i+b) if cos else torch.sin(a*i+b)
    return (scale*v).reshape(shape)
def show(name, t):
    vals = ", ".join(repr(float(v)) for v in t.flatten())
    print(f"// {name} {list(t.shape)}\n{{{vals}}}")


# The UNet of test/nn/unet_test.cpp: milesial's Pytorch-UNet (transposed-convolution variant)
# with configurable levels, base width and batch norm.
class DoubleConv(nn.Module):
    def __init__(s, i, o, bn):
        super().__init__()
        layers = []
        for k in range(2):
            layers.append(nn.Conv2d(i if k == 0 else o, o, 3, padding=1, bias=not bn))
            if bn: layers.append(nn.BatchNorm2d(o))
            layers.append(nn.ReLU(inplace=True))
        s.double_conv = nn.Sequential(*layers)
    def forward(s, x): return s.double_conv(x)

class Down(nn.Module):
    def __init__(s, i, o, bn):
        super().__init__()
        s.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(i, o, bn))
    def forward(s, x): return s.maxpool_conv(x)

class Up(nn.Module):
    def __init__(s, i, o, bn):
        super().__init__()
        s.up = nn.ConvTranspose2d(i, i // 2, kernel_size=2, stride=2)
        s.conv = DoubleConv(i, o, bn)
    def forward(s, x1, x2):
        return s.conv(torch.cat([x2, s.up(x1)], dim=1))

class OutConv(nn.Module):
    def __init__(s, i, o):
        super().__init__(); s.conv = nn.Conv2d(i, o, 1)
    def forward(s, x): return s.conv(x)

class UNet(nn.Module):
    def __init__(s, in_channels=1, classes=2, levels=5, base=16, bn=True):
        super().__init__()
        w = [base * 2**l for l in range(levels)]
        s.levels = levels
        s.inc = DoubleConv(in_channels, w[0], bn)
        for l in range(1, levels): setattr(s, f"down{l}", Down(w[l-1], w[l], bn))
        for k in range(1, levels): setattr(s, f"up{k}", Up(w[levels-k], w[levels-k-1], bn))
        s.outc = OutConv(w[0], classes)
    def forward(s, x):
        skips = [s.inc(x)]
        for l in range(1, s.levels): skips.append(getattr(s, f"down{l}")(skips[-1]))
        x = skips.pop()
        for k in range(1, s.levels): x = getattr(s, f"up{k}")(x, skips.pop())
        return s.outc(x)


def main():
    print("=== conv_transpose")
    x = seq([1,2,3,3], 0.7, 0.3, 2.0); w = seq([2,3,3,3], 0.5, -0.2, 1.0, True); b = torch.tensor([0.1,-0.2,0.3])
    show("k3 s2 p1 op1 bias", F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1))
    x = seq([1,4,2,3], 0.7, 0.3, 2.0); w = seq([4,1,2,3], 0.5, -0.2, 1.0, True)
    show("groups2 s(1,2) p(1,0) op(0,1) d(2,1)", F.conv_transpose2d(x, w, None, stride=(1,2), padding=(1,0), output_padding=(0,1), dilation=(2,1), groups=2))
    x = seq([2,3,2,2], 0.7, 0.3, 2.0); w = seq([3,2,2,2], 0.5, -0.2, 1.0, True); b = torch.tensor([0.5,-0.25])
    show("unet 2x2 s2", F.conv_transpose2d(x, w, b, stride=2))
    # gradients of one case
    x = seq([1,2,3,3], 0.7, 0.3, 2.0).requires_grad_(); w = seq([2,3,3,3], 0.5, -0.2, 1.0, True).requires_grad_(); b = torch.tensor([0.1,-0.2,0.3], requires_grad=True)
    y = F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1)
    (y * seq(list(y.shape), 0.3, 0.1, 1.0, True)).sum().backward()
    show("gx", x.grad); show("gw", w.grad); show("gb", b.grad)

    print("=== upsample")
    x = seq([1,2,3,4], 0.9, 0.2, 1.5)
    show("nearest size 5x7", F.interpolate(x, size=(5,7), mode="nearest"))
    show("nearest scale 2", F.interpolate(x, scale_factor=2, mode="nearest"))
    show("nearest scale 1.5", F.interpolate(x, scale_factor=1.5, mode="nearest"))
    show("nearest size 2x3 down", F.interpolate(x, size=(2,3), mode="nearest"))
    show("bilinear size 5x7", F.interpolate(x, size=(5,7), mode="bilinear", align_corners=False))
    show("bilinear scale 2", F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False))
    show("bilinear scale 1.7", F.interpolate(x, scale_factor=1.7, mode="bilinear", align_corners=False))
    show("bilinear ac size 5x7", F.interpolate(x, size=(5,7), mode="bilinear", align_corners=True))
    show("bilinear ac scale 2", F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True))
    show("bilinear size 2x3 down", F.interpolate(x, size=(2,3), mode="bilinear", align_corners=False))
    xg = x.clone().requires_grad_()
    y = F.interpolate(xg, scale_factor=1.7, mode="bilinear", align_corners=False)
    (y * seq(list(y.shape), 0.3, 0.1, 1.0, True)).sum().backward()
    show("bilinear scale 1.7 grad", xg.grad)
    xg = x.clone().requires_grad_()
    y = F.interpolate(xg, size=(5,7), mode="nearest")
    (y * seq(list(y.shape), 0.3, 0.1, 1.0, True)).sum().backward()
    show("nearest 5x7 grad", xg.grad)

    print("=== bce")
    x = seq([3,4], 1.3, 0.4, 3.0); t = (seq([3,4], 0.8, 0.1) + 1) / 2
    print("plain", repr(float(F.binary_cross_entropy_with_logits(x, t))))
    pw = torch.tensor([0.5, 1.0, 2.0, 3.0])
    print("pw[4]", repr(float(F.binary_cross_entropy_with_logits(x, t, pos_weight=pw))))
    xg = x.clone().requires_grad_(); tg = t.clone().requires_grad_()
    F.binary_cross_entropy_with_logits(xg, tg, pos_weight=pw).backward()
    show("gx pw", xg.grad); show("gt pw", tg.grad)
    x4 = seq([2,3,2,2], 1.3, 0.4, 3.0); t4 = (seq([2,3,2,2], 0.8, 0.1) > 0).double()
    pw3 = torch.tensor([0.5, 2.0, 4.0]).reshape(3,1,1)
    print("pw[3,1,1]", repr(float(F.binary_cross_entropy_with_logits(x4, t4, pos_weight=pw3))))
    xl = torch.tensor([-200.0, -30.0, 0.0, 30.0, 200.0]); tl = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0])
    print("large", repr(float(F.binary_cross_entropy_with_logits(xl, tl))))

    print("=== nearest scale 2.6")
    show("nearest scale 2.6", F.interpolate(seq([1,2,3,4], 0.9, 0.2, 1.5), scale_factor=2.6, mode="nearest"))

    print("=== unet parameter counts")
    for cfg in [dict(levels=5, base=16, bn=True), dict(levels=5, base=16, bn=False),
                dict(in_channels=3, classes=4, levels=4, base=8, bn=True), dict(in_channels=3, classes=1, levels=5, base=64, bn=True)]:
        m = UNet(**cfg)
        print(cfg, sum(p.numel() for p in m.parameters()), len(list(m.parameters())))
    print([n for n, _ in UNet(levels=3, base=2, bn=True).named_parameters()])

    print("=== unet forward")
    m = UNet(in_channels=2, classes=3, levels=3, base=4, bn=True)
    with torch.no_grad():
        for k, (name, p) in enumerate(m.named_parameters()):
            v = seq(list(p.shape), 0.37, 0.1 * k, 0.5)
            # batch-norm weights near 1, so that the ReLUs pass about half of what they see
            p.copy_(1 + v if p.dim() == 1 and name.endswith("weight") else v)
    m.train()
    x = seq([2,2,8,8], 0.9, 0.2, 1.5)
    y = m(x)
    print("shape", list(y.shape))
    show("first 8", y.flatten()[:8])
    print("sum", repr(float(y.sum())), "sumsq", repr(float((y*y).sum())), "cos-weighted", repr(float((y*seq(list(y.shape),0.1,0.0,1.0,True)).sum())))
    m.eval()
    y = m(x)
    print("eval after one training pass: cos-weighted", repr(float((y*seq(list(y.shape),0.1,0.0,1.0,True)).sum())))


if __name__ == "__main__":
    main()
