"""Tests of dlbook.denoising: PSNR, noise, the wavelet baseline and the Deep Decoder's size."""
import math

import pytest
import torch

from dlbook import denoising, nets


def test_psnr_of_known_errors():
    clean = torch.zeros(4, 4, dtype=torch.float64)
    assert denoising.psnr(clean + 0.1, clean) == pytest.approx(20.0)
    assert denoising.psnr(clean, clean) == math.inf


def test_noise_is_seeded_and_clipped():
    image = torch.full((64, 64), 0.5, dtype=torch.float64)
    a, b = denoising.add_noise(image, 0.1, seed=1), denoising.add_noise(image, 0.1, seed=1)
    assert torch.equal(a, b)
    assert (a - image).std().item() == pytest.approx(0.1, rel=0.05)
    assert denoising.add_noise(image, 1.0, seed=1).min() >= 0
    assert denoising.add_noise(image, 1.0, seed=1, clip=False).min() < 0


def test_wavelet_denoising_helps_on_a_smooth_image():
    x = torch.linspace(0, 1, 64, dtype=torch.float64)
    clean = 0.5 + 0.3 * torch.outer(torch.sin(3 * x), torch.cos(2 * x))
    noisy = denoising.add_noise(clean, 0.1, seed=0)
    restored = denoising.wavelet_denoise(noisy, 0.1)
    assert restored.shape == clean.shape
    assert denoising.psnr(restored, clean) > denoising.psnr(noisy, clean) + 3


@pytest.mark.parametrize("channels, expected", [(16, 1_169), (32, 4_385), (64, 16_961)])
def test_deep_decoder_weight_count(channels, expected):
    assert denoising.deep_decoder_weight_count(channels, 4) == expected
    assert nets.num_parameters(denoising.DeepDecoder(channels, 4)) == expected


def test_deep_decoder_output_and_a_short_fit():
    model = denoising.DeepDecoder(8, 2, dtype=torch.float64)
    assert model().shape == (1, 1, 32, 32)
    x = torch.linspace(0, 1, 32, dtype=torch.float64)
    clean = 0.5 + 0.3 * torch.outer(torch.sin(3 * x), torch.cos(2 * x))
    noisy = denoising.add_noise(clean, 0.1, seed=0)
    fit = denoising.fit_deep_decoder(noisy, clean, channels=8, depth=2, steps=60, record_every=20)
    assert fit.steps == [20, 40, 60] and fit.image.shape == (32, 32)
    assert fit.psnr_noisy[-1] > fit.psnr_noisy[0]


def test_bad_arguments():
    with pytest.raises(ValueError, match="same shape"):
        denoising.psnr(torch.zeros(2, 2), torch.zeros(3, 3))
    with pytest.raises(ValueError, match="wavelet"):
        denoising.wavelet_denoise(torch.zeros(16, 16), 0.1, wavelet="nope")
    with pytest.raises(ValueError, match=r"\(32, 32\)"):
        denoising.fit_deep_decoder(torch.zeros(16, 16), torch.zeros(16, 16), depth=2)
