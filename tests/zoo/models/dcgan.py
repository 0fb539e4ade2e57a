"""DCGAN in the style of PyTorch's dcgan example, at 16x16: a generator of transposed
convolutions with BatchNorm, in-place ReLU and Tanh; a discriminator of strided convolutions with
in-place LeakyReLU(0.2) and a Sigmoid."""
from __future__ import annotations

from types import SimpleNamespace


def dcgan_classes(fw, nz: int = 8, ngf: int = 4, ndf: int = 4, nc: int = 3) -> SimpleNamespace:
    """Generator and Discriminator built over `fw` (`torch` or `dualflow`)."""
    nn = fw.nn

    def weights_init(m) -> None:
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight, 0.0, 0.02)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight, 1.0, 0.02)
            nn.init.zeros_(m.bias)

    class Generator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),     # 4x4
                nn.BatchNorm2d(ngf * 4),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),  # 8x8
                nn.BatchNorm2d(ngf * 2),
                nn.ReLU(True),
                nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),       # 16x16
                nn.Tanh())
            self.apply(weights_init)

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),                   # 8x8
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),              # 4x4
                nn.BatchNorm2d(ndf * 2),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),                # 1x1
                nn.Sigmoid())
            self.apply(weights_init)

        def forward(self, input):
            return self.main(input).view(-1, 1).squeeze(1)

    return SimpleNamespace(Generator=Generator, Discriminator=Discriminator, nz=nz, nc=nc)
