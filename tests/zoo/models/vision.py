"""Image classifiers in the style of torchvision, at small widths: ResNet-18 (BasicBlock with a
downsampling shortcut), MobileNetV2 (inverted residuals, depthwise convolutions, ReLU6) and a
MobileNetV3-style network (Hardswish / SiLU, squeeze-and-excite with Hardsigmoid). Every
activation is in-place, as those models write them."""
from __future__ import annotations

from types import SimpleNamespace


def vision_classes(fw) -> SimpleNamespace:
    """The classifier classes built over `fw` (`torch` or `dualflow`)."""
    nn, F = fw.nn, fw.nn.functional

    def conv3x3(in_planes: int, out_planes: int, stride: int = 1):
        return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1,
                         bias=False)

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample=None):
            super().__init__()
            self.conv1 = conv3x3(inplanes, planes, stride)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = conv3x3(planes, planes)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class ResNet(nn.Module):
        """ResNet-18's layout ([2, 2, 2, 2] BasicBlocks) with a CIFAR-style 3x3 stem."""

        def __init__(self, widths=(4, 8, 16, 32), layers=(2, 2, 2, 2), num_classes: int = 10):
            super().__init__()
            self.inplanes = widths[0]
            self.conv1 = conv3x3(3, self.inplanes)
            self.bn1 = nn.BatchNorm2d(self.inplanes)
            self.relu = nn.ReLU(inplace=True)
            self.layer1 = self._make_layer(widths[0], layers[0])
            self.layer2 = self._make_layer(widths[1], layers[1], stride=2)
            self.layer3 = self._make_layer(widths[2], layers[2], stride=2)
            self.layer4 = self._make_layer(widths[3], layers[3], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(widths[3] * BasicBlock.expansion, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def _make_layer(self, planes: int, blocks: int, stride: int = 1):
            downsample = None
            if stride != 1 or self.inplanes != planes * BasicBlock.expansion:
                downsample = nn.Sequential(
                    nn.Conv2d(self.inplanes, planes * BasicBlock.expansion, 1, stride=stride,
                              bias=False),
                    nn.BatchNorm2d(planes * BasicBlock.expansion))
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes * BasicBlock.expansion
            layers += [BasicBlock(self.inplanes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            x = fw.flatten(self.avgpool(x), 1)
            return self.fc(x)

    class ConvBNActivation(nn.Sequential):
        def __init__(self, in_planes: int, out_planes: int, kernel_size: int = 3,
                     stride: int = 1, groups: int = 1, activation=None):
            padding = (kernel_size - 1) // 2
            act = (activation or nn.ReLU6)(inplace=True)
            super().__init__(nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding,
                                       groups=groups, bias=False),
                             nn.BatchNorm2d(out_planes), act)

    class InvertedResidual(nn.Module):
        """MobileNetV2's block: 1x1 expand, depthwise 3x3 (groups = channels), 1x1 project."""

        def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int):
            super().__init__()
            hidden_dim = int(round(inp * expand_ratio))
            self.use_res_connect = stride == 1 and inp == oup
            layers = [] if expand_ratio == 1 else [ConvBNActivation(inp, hidden_dim, 1)]
            layers += [ConvBNActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
                       nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
                       nn.BatchNorm2d(oup)]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            if self.use_res_connect:
                return x + self.conv(x)
            return self.conv(x)

    class MobileNetV2(nn.Module):
        def __init__(self, num_classes: int = 10, settings=((1, 8, 1, 1), (4, 12, 2, 2),
                                                            (4, 16, 2, 2)), last_channel: int = 32,
                     dropout: float = 0.0):
            super().__init__()
            input_channel = 8
            features = [ConvBNActivation(3, input_channel, stride=2)]
            for t, c, n, s in settings:
                for i in range(n):
                    features.append(InvertedResidual(input_channel, c, s if i == 0 else 1, t))
                    input_channel = c
            features.append(ConvBNActivation(input_channel, last_channel, kernel_size=1))
            self.features = nn.Sequential(*features)
            self.classifier = nn.Sequential(nn.Dropout(dropout),
                                            nn.Linear(last_channel, num_classes))
            _init_mobilenet(self)

        def forward(self, x):
            x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
            return self.classifier(fw.flatten(x, 1))

    class SqueezeExcitation(nn.Module):
        def __init__(self, input_channels: int, squeeze_channels: int):
            super().__init__()
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
            self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
            self.activation = nn.ReLU()
            self.scale_activation = nn.Hardsigmoid()

        def forward(self, input):
            scale = self.fc2(self.activation(self.fc1(self.avgpool(input))))
            return self.scale_activation(scale) * input

    class V3Block(nn.Module):
        """MobileNetV3's inverted residual: expand, depthwise, squeeze-excite, project."""

        def __init__(self, inp: int, expanded: int, out: int, stride: int, activation):
            super().__init__()
            self.use_res_connect = stride == 1 and inp == out
            self.block = nn.Sequential(
                ConvBNActivation(inp, expanded, 1, activation=activation),
                ConvBNActivation(expanded, expanded, stride=stride, groups=expanded,
                                 activation=activation),
                SqueezeExcitation(expanded, max(8, expanded // 4)),
                nn.Conv2d(expanded, out, 1, bias=False),
                nn.BatchNorm2d(out))

        def forward(self, input):
            result = self.block(input)
            if self.use_res_connect:
                result += input
            return result

    class MobileNetV3Small(nn.Module):
        def __init__(self, num_classes: int = 10):
            super().__init__()
            self.features = nn.Sequential(
                ConvBNActivation(3, 8, stride=2, activation=nn.Hardswish),
                V3Block(8, 16, 8, 1, nn.Hardswish),
                V3Block(8, 24, 12, 2, nn.SiLU))
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Linear(12, 16), nn.Hardswish(inplace=True),
                                            nn.Linear(16, num_classes))
            _init_mobilenet(self)

        def forward(self, x):
            x = fw.flatten(self.avgpool(self.features(x)), 1)
            return self.classifier(x)

    def _init_mobilenet(model) -> None:
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    return SimpleNamespace(ResNet=ResNet, MobileNetV2=MobileNetV2,
                           MobileNetV3Small=MobileNetV3Small)
