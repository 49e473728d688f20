"""Denoising one image without training data: wavelet shrinkage and the Deep Decoder (Chapter 5).

The Deep Decoder (Heckel and Hand, 2019) is an untrained, deliberately small
convolutional generator: a fixed random code of k channels at 8 x 8 passes
through d blocks of (1 x 1 convolution, bilinear upsampling by 2, ReLU,
channel normalisation), and a last 1 x 1 convolution and a sigmoid give the
image. Its weights are fitted to the one noisy image. With fewer weights than
pixels it cannot fit everything, and it fits natural structure before noise.
The baseline is soft thresholding of wavelet coefficients at Donoho and
Johnstone's universal threshold σ √(2 ln N).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .runtime import generator
from .validation import as_tensor, check_device, check_dtype, check_float, check_int, describe


def psnr(image, reference) -> float:
    """Peak signal-to-noise ratio 10 log10(1 / MSE) in dB, for images with values in [0, 1] (Chapter 5)."""
    image = as_tensor("image", image, floating=True)
    reference = as_tensor("reference", reference, floating=True)
    if image.shape != reference.shape:
        raise ValueError(f"image and reference must have the same shape, got {tuple(image.shape)} "
                         f"and {tuple(reference.shape)}")
    mse = ((image.double() - reference.double().to(image.device)) ** 2).mean().item()
    return math.inf if mse == 0 else 10 * math.log10(1 / mse)


def add_noise(image, sigma: float, *, seed: int = 0, clip: bool = True) -> torch.Tensor:
    """image + N(0, σ²) per pixel, drawn from ``seed``; clipped to [0, 1] unless ``clip=False`` (Chapter 5)."""
    image = as_tensor("image", image, floating=True)
    sigma = check_float("sigma", sigma, low=0.0)
    noise = torch.randn(image.shape, generator=generator(check_int("seed", seed, minimum=0)), dtype=torch.float64)
    noisy = image + (sigma * noise).to(dtype=image.dtype, device=image.device)
    return noisy.clamp(0, 1) if clip else noisy


def wavelet_denoise(noisy, sigma: float, *, wavelet: str = "db4", levels: int = 3) -> torch.Tensor:
    """Soft-threshold the detail coefficients of a 2-D wavelet transform at σ √(2 ln N) (Chapter 5)."""
    import pywt

    noisy = as_tensor("noisy", noisy, ndim=2, floating=True)
    sigma = check_float("sigma", sigma, low=0.0)
    levels = check_int("levels", levels, minimum=1)
    if wavelet not in pywt.wavelist(kind="discrete"):
        raise ValueError(f"wavelet must be a discrete wavelet name such as 'db4', got {wavelet!r}")
    pixels = noisy.detach().cpu().double().numpy()
    threshold = sigma * math.sqrt(2 * math.log(pixels.size))
    coefficients = pywt.wavedec2(pixels, wavelet, level=levels)
    shrunk = [coefficients[0]] + [tuple(pywt.threshold(band, threshold, mode="soft") for band in detail)
                                  for detail in coefficients[1:]]
    restored = pywt.waverec2(shrunk, wavelet)[:pixels.shape[0], :pixels.shape[1]]
    return torch.tensor(restored, dtype=noisy.dtype, device=noisy.device).clamp(0, 1)


def deep_decoder_weight_count(channels: int, depth: int) -> int:
    """d k² (1 x 1 convolutions without bias) + 2 d k (normalisation scales and shifts) + k + 1 (output) (Chapter 5)."""
    channels = check_int("channels", channels, minimum=1)
    depth = check_int("depth", depth, minimum=1)
    return depth * channels**2 + 2 * depth * channels + channels + 1


class DeepDecoder(nn.Module):
    """The generator: a fixed random code (1, k, 8, 8) -> d upsampling blocks -> an image (1, 1, 8·2^d, 8·2^d)
    (Chapter 5)."""

    def __init__(self, channels: int = 16, depth: int = 4, *, seed: int = 0, dtype: torch.dtype = torch.float32,
                 device="cpu"):
        super().__init__()
        channels, depth = check_int("channels", channels, minimum=1), check_int("depth", depth, minimum=1)
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        rng = generator(check_int("seed", seed, minimum=0))
        self.register_buffer("code", torch.rand(1, channels, 8, 8, generator=rng, dtype=torch.float64).to(
            dtype=dtype, device=device))
        bound = 1 / math.sqrt(channels)

        def draw(*shape):
            return nn.Parameter(((2 * torch.rand(shape, generator=rng, dtype=torch.float64) - 1) * bound).to(
                dtype=dtype, device=device))

        self.mixers = nn.ParameterList([draw(channels, channels, 1, 1) for _ in range(depth)])
        self.norms = nn.ModuleList([nn.BatchNorm2d(channels, dtype=dtype, device=device) for _ in range(depth)])
        self.out_weight, self.out_bias = draw(1, channels, 1, 1), draw(1)

    def forward(self) -> torch.Tensor:
        x = self.code
        for mixer, norm in zip(self.mixers, self.norms):
            x = F.conv2d(x, mixer)                                               # mix channels per pixel
            x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
            x = norm(torch.relu(x))
        return torch.sigmoid(F.conv2d(x, self.out_weight, self.out_bias))


class DecoderFit(NamedTuple):
    """PSNR against the clean and against the noisy image every ``record_every`` steps, and the final image."""

    steps: list
    psnr_clean: list
    psnr_noisy: list
    image: torch.Tensor


def fit_deep_decoder(noisy, clean, *, channels: int = 16, depth: int = 4, steps: int = 600, lr: float = 0.01,
                     record_every: int = 50, seed: int = 0) -> DecoderFit:
    """Fit a :class:`DeepDecoder` to one noisy image by Adam on the squared error (Chapter 5).

    ``clean`` is used only to report the PSNR along the way, never for fitting.
    """
    noisy = as_tensor("noisy", noisy, ndim=2, floating=True)
    clean = as_tensor("clean", clean, ndim=2, floating=True)
    steps = check_int("steps", steps, minimum=1)
    record_every = check_int("record_every", record_every, minimum=1)
    lr = check_float("lr", lr, low=0.0, low_open=True)
    depth = check_int("depth", depth, minimum=1)
    side = 8 * 2**depth
    if noisy.shape != (side, side) or clean.shape != noisy.shape:
        raise ValueError(f"noisy and clean must be ({side}, {side}) images for depth {depth}, got "
                         f"{describe(noisy)} and {describe(clean)}")
    model = DeepDecoder(channels, depth, seed=seed, dtype=noisy.dtype, device=noisy.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    target = noisy[None, None]
    record = DecoderFit([], [], [], noisy)
    for step in range(1, steps + 1):
        output = model()
        loss = F.mse_loss(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % record_every == 0 or step == steps:
            image = output.detach()[0, 0]
            record.steps.append(step)
            record.psnr_clean.append(psnr(image, clean))
            record.psnr_noisy.append(psnr(image, noisy))
    return record._replace(image=image)
