"""An SNGAN-style discriminator: strided convolutions and a linear head under spectral
normalization, the legacy hook (`nn.utils.spectral_norm`, what most GAN code calls) on three
layers and the parametrization (`nn.utils.parametrizations.spectral_norm`) on one."""
from __future__ import annotations


def sn_discriminator(fw, nc: int = 3, ndf: int = 4):
    """The discriminator class over `fw`, for (N, nc, 16, 16) images."""
    nn = fw.nn
    legacy, parametrized = nn.utils.spectral_norm, nn.utils.parametrizations.spectral_norm

    class Discriminator(nn.Module):
        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(
                legacy(nn.Conv2d(nc, ndf, 3, 1, 1)), nn.LeakyReLU(0.1),
                legacy(nn.Conv2d(ndf, ndf * 2, 4, 2, 1)), nn.LeakyReLU(0.1),       # 8x8
                parametrized(nn.Conv2d(ndf * 2, ndf * 2, 4, 2, 1)), nn.LeakyReLU(0.1))  # 4x4
            self.fc = legacy(nn.Linear(ndf * 2 * 4 * 4, 1))

        def forward(self, x):
            return self.fc(self.main(x).flatten(1))

    return Discriminator
