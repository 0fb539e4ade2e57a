"""DCGAN's alternating training, written once against `fw`: a discriminator step on real images
and detached fakes (two backward calls, as the example makes), then a generator step; run in
PyTorch, dualflow eager, GRAPH mode, and as two nn.Graphs (one per optimizer)."""
from __future__ import annotations

import functools
import importlib

import numpy as np

import dualflow as flow

from .bridge import load_arrays, state_arrays, to_fw
from .harness import Run
from .models.dcgan import dcgan_classes

STEPS, BATCH = 3, 4


def _data() -> list:
    rng = np.random.default_rng(5)
    nz, nc = dcgan_classes(flow).nz, dcgan_classes(flow).nc
    return [(np.tanh(rng.normal(size=(BATCH, nc, 16, 16))), rng.normal(size=(BATCH, nz, 1, 1)))
            for _ in range(STEPS)]


def _labels(fw, like, value: float):
    return fw.full((like.size(0),), value, dtype=like.dtype)


def d_step_losses(fw, netG, netD, real, noise):
    """The discriminator's loss on real images, then on fakes detached from the generator; each
    backpropagated as soon as it is computed."""
    criterion = fw.nn.BCELoss()
    err_real = criterion(netD(real), _labels(fw, real, 1.0))
    err_real.backward()
    fake = netG(noise)
    err_fake = criterion(netD(fake.detach()), _labels(fw, real, 0.0))
    err_fake.backward()
    return err_real + err_fake


def g_step_loss(fw, netG, netD, noise):
    """The generator's loss: fakes scored as real (the generator runs again here, so that the
    step is self-contained, as an nn.Graph per optimizer needs)."""
    fake = netG(noise)
    err = fw.nn.BCELoss()(netD(fake), _labels(fw, fake, 1.0))
    err.backward()
    return err


@functools.lru_cache(maxsize=None)
def initial_gan_state() -> tuple[dict, dict]:
    flow.manual_seed(0)
    net = dcgan_classes(flow)
    return state_arrays(net.Generator()), state_arrays(net.Discriminator())


def _nets(fw, dtype: str):
    net = dcgan_classes(fw)
    netG, netD = net.Generator().to(getattr(fw, dtype)), net.Discriminator().to(getattr(fw, dtype))
    start_g, start_d = initial_gan_state()
    load_arrays(fw, netG, start_g)
    load_arrays(fw, netD, start_d)
    opt_d = fw.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = fw.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    return netG, netD, opt_g, opt_d


def _eager_loop(fw, netG, netD, opt_g, opt_d, batches) -> list:
    losses = []
    for real, noise in batches:
        netD.zero_grad()
        err_d = d_step_losses(fw, netG, netD, real, noise)
        opt_d.step()
        netG.zero_grad()
        err_g = g_step_loss(fw, netG, netD, noise)
        opt_g.step()
        losses += [err_d.item(), err_g.item()]
    return losses


class _DStep(flow.nn.Graph):
    def __init__(self, netG, netD, opt_d):
        super().__init__()
        self.netG, self.netD = netG, netD
        self.add_optimizer(opt_d)

    def build(self, real, noise):
        return d_step_losses(flow, self.netG, self.netD, real, noise)


class _GStep(flow.nn.Graph):
    def __init__(self, netG, netD, opt_g):
        super().__init__()
        self.netG, self.netD = netG, netD
        self.add_optimizer(opt_g)

    def build(self, noise):
        return g_step_loss(flow, self.netG, self.netD, noise)


def _graph_loop(netG, netD, opt_g, opt_d, batches) -> list:
    d_step, g_step = _DStep(netG, netD, opt_d), _GStep(netG, netD, opt_g)
    losses = []
    for real, noise in batches:
        losses.append(d_step(real, noise).item())
        losses.append(g_step(noise).item())
    return losses


@functools.lru_cache(maxsize=None)
def gan_run(framework: str, dtype: str, mode: str) -> Run:
    """Losses (D, G per step) and both networks' final state ("G."/"D." keys)."""
    fw = flow if framework == "dualflow" else importlib.import_module(framework)
    netG, netD, opt_g, opt_d = _nets(fw, dtype)
    batches = [tuple(to_fw(fw, a, dtype) for a in b) for b in _data()]
    if mode == "nn.Graph":
        losses = _graph_loop(netG, netD, opt_g, opt_d, batches)
    else:
        flow.set_mode(flow.GRAPH if mode == "GRAPH" else flow.EAGER)
        try:
            losses = _eager_loop(fw, netG, netD, opt_g, opt_d, batches)
        finally:
            flow.set_mode(flow.EAGER)
    state = {**{f"G.{k}": v for k, v in state_arrays(netG).items()},
             **{f"D.{k}": v for k, v in state_arrays(netD).items()}}
    return Run(losses, state, [], (netG, netD))
