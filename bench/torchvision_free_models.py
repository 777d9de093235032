"""The benchmarked networks written as torchvision (and milesial's Pytorch-UNet) write them, since
Debian's python3-torch has no torchvision: ResNet-18/50 with a CIFAR stem (3x3 stride-1 first
conv, no max-pool), VGG-16, and a UNet with transposed-convolution upsampling."""
import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inp, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inp != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inp, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + (self.downsample(x) if self.downsample is not None else x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inp, planes, stride):
        super().__init__()
        out = planes * 4
        self.conv1 = nn.Conv2d(inp, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inp != out:
            self.downsample = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (self.downsample(x) if self.downsample is not None else x))


def _resnet_cifar(block, counts, num_classes):
    layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True)]
    inp = 64
    for stage, planes in enumerate([64, 128, 256, 512]):
        for b in range(counts[stage]):
            stride = 2 if stage > 0 and b == 0 else 1
            layers.append(block(inp, planes, stride))
            inp = planes * block.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inp, num_classes)]
    return nn.Sequential(*layers)


def resnet18_cifar(num_classes):
    return _resnet_cifar(BasicBlock, [2, 2, 2, 2], num_classes)


def resnet50_cifar(num_classes):
    return _resnet_cifar(Bottleneck, [3, 4, 6, 3], num_classes)


def vgg16(num_classes):
    layers, inp = [], 3
    for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(inp, v, 3, padding=1), nn.ReLU(inplace=True)]
            inp = v
    return nn.Sequential(nn.Sequential(*layers), nn.AdaptiveAvgPool2d((7, 7)), nn.Flatten(),
                         nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(),
                         nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(), nn.Linear(4096, num_classes))


def _double_conv(inp, out):
    return nn.Sequential(nn.Conv2d(inp, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True),
                         nn.Conv2d(out, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """levels resolutions, widths base * 2^level, max-pool down, 2x2 stride-2 transposed conv up."""

    def __init__(self, in_channels, classes, levels=5, base=16):
        super().__init__()
        widths = [base << level for level in range(levels)]
        self.inc = _double_conv(in_channels, widths[0])
        self.downs = nn.ModuleList(nn.Sequential(nn.MaxPool2d(2), _double_conv(widths[l - 1], widths[l]))
                                   for l in range(1, levels))
        self.ups = nn.ModuleList()
        for l in reversed(range(1, levels)):
            self.ups.append(nn.ModuleList([nn.ConvTranspose2d(widths[l], widths[l] // 2, 2, stride=2),
                                           _double_conv(widths[l], widths[l - 1])]))
        self.outc = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(skips[-1]))
        y = skips.pop()
        for up, conv in self.ups:
            y = conv(torch.cat([skips.pop(), up(y)], dim=1))
        return self.outc(y)
