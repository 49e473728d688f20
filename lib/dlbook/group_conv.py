"""Group-equivariant convolution for p4, the translations and rotations by multiples of 90° (Chapter 5).

A feature map on p4 is a tensor (N, C, 4, H, W): for each channel, one planar
map per rotation r of the filter. The *lifting* layer correlates a planar
image with the four rotated copies of each filter; a *group convolution*
correlates a p4 map with filters that are themselves p4 maps, transformed by
each group element (rotated in space and cyclically shifted along the rotation
axis). Both are one call of ``F.conv2d`` on an enlarged filter bank (the
split-group trick of Cohen and Welling, 2016), with the direct sum over the
rotations kept beside them as the readable reference. Rotating the input by
90° rotates every output map and shifts the rotation axis by one
(:func:`rotate_p4`), provided every rotation slice of a channel shares one bias.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .conv import draw_biases, draw_weights
from .runtime import generator
from .train import cached
from .validation import as_tensor, check_choice, check_device, check_dtype, check_int, check_ints, describe

#: The number of rotations in p4.
ORDER = 4


# ---------------------------------------------------------------------------
# The group action on images and on p4 feature maps
# ---------------------------------------------------------------------------

def rotate_images(X, k) -> torch.Tensor:
    """Rotate images (..., H, W) counterclockwise by k·90°; ``k`` an integer or one per image (Chapter 5).

    With one k per image the batch is grouped by k and torch.rot90 is called
    once per group, four calls in all instead of one per image.
    """
    X = as_tensor("X", X)
    if X.dim() < 2 or X.shape[-1] != X.shape[-2]:
        raise ValueError(f"X must hold square images (..., H, H), got {describe(X)}")
    if not isinstance(k, torch.Tensor):
        return torch.rot90(X, check_int("k", k) % ORDER, dims=(-2, -1))
    k = as_tensor("k", k, shape=(len(X),))
    if k.is_floating_point():
        raise TypeError(f"k must hold integers, got {describe(k)}")
    k = k.to(X.device) % ORDER
    out = X.clone()
    for turns in range(1, ORDER):
        chosen = k == turns
        out[chosen] = torch.rot90(X[chosen], turns, dims=(-2, -1))
    return out


def rotate_p4(y, k: int) -> torch.Tensor:
    """The action of the rotation by k·90° on p4 maps (N, C, 4, H, W): rotate each map, roll the rotation axis by k."""
    y = as_tensor("y", y, ndim=5)
    if y.shape[2] != ORDER:
        raise ValueError(f"y must have {ORDER} rotations along dimension 2, got {describe(y)}")
    k = check_int("k", k) % ORDER
    return torch.roll(torch.rot90(y, k, dims=(-2, -1)), k, dims=2)


# ---------------------------------------------------------------------------
# Filter banks: the split-group trick
# ---------------------------------------------------------------------------

def lifting_filter_bank(weight) -> torch.Tensor:
    """(C_out, C_in, k, k) filters -> (4 C_out, C_in, k, k): filter o rotated by r at row 4 o + r (Chapter 5)."""
    weight = as_tensor("weight", weight, ndim=4, floating=True)
    bank = torch.stack([torch.rot90(weight, r, dims=(-2, -1)) for r in range(ORDER)], dim=1)  # (C_out, 4, C_in, k, k)
    return bank.reshape(-1, *weight.shape[1:])


def group_filter_bank(weight) -> torch.Tensor:
    """(C_out, C_in, 4, k, k) p4 filters -> (4 C_out, 4 C_in, k, k), filter o transformed by r at row 4 o + r.

    The rotation r acts on a p4 filter by rotating it in space and shifting its
    rotation axis by r, (L_r ψ)(y, s) = ψ(R⁻¹ y, s - r) (Chapter 5).
    """
    weight = as_tensor("weight", weight, ndim=5, floating=True)
    if weight.shape[2] != ORDER:
        raise ValueError(f"weight must have shape (C_out, C_in, {ORDER}, k, k), got {describe(weight)}")
    bank = torch.stack([torch.roll(torch.rot90(weight, r, dims=(-2, -1)), r, dims=2) for r in range(ORDER)],
                       dim=1)                                                  # (C_out, 4, C_in, 4, k, k)
    c_out, c_in, _, kh, kw = weight.shape
    return bank.reshape(c_out * ORDER, c_in * ORDER, kh, kw)


def _bias_term(bias, c_out: int, dtype, device):
    """A bias of shape (C_out,) (one per G-feature map) or (C_out, 4) (one per rotation), as (C_out, 4, 1, 1)."""
    if bias is None:
        return 0
    bias = as_tensor("bias", bias, floating=True)
    if tuple(bias.shape) == (c_out,):
        bias = bias[:, None].expand(c_out, ORDER)
    elif tuple(bias.shape) != (c_out, ORDER):
        raise ValueError(f"bias must have shape ({c_out},) (one per feature map) or ({c_out}, {ORDER}) "
                         f"(one per rotation), got {describe(bias)}")
    return bias.to(dtype=dtype, device=device)[:, :, None, None]


def _check_input(x, ndim: int, channels: int, what: str) -> torch.Tensor:
    x = as_tensor("x", x, ndim=ndim, floating=True)
    if x.shape[1] != channels:
        raise ValueError(f"x must have {channels} channels (dimension 1) to match the weight, got {describe(x)}")
    if ndim == 5 and x.shape[2] != ORDER:
        raise ValueError(f"x must be a p4 map (N, C, {ORDER}, H, W), got {describe(x)}")
    if x.shape[-1] != x.shape[-2]:
        raise ValueError(f"x must hold square {what}, got {describe(x)}")
    return x


def lifting_conv(x, weight, bias=None, *, padding: int = 1) -> torch.Tensor:
    """Lift planar images (N, C_in, H, W) to p4 maps (N, C_out, 4, H', W'): one conv2d on the rotated bank
    (Chapter 5)."""
    weight = as_tensor("weight", weight, ndim=4, floating=True)
    x = _check_input(x, 4, weight.shape[1], "images")
    padding = check_int("padding", padding, minimum=0)
    out = F.conv2d(x, lifting_filter_bank(weight), padding=padding)        # (N, 4 C_out, H', W')
    out = out.reshape(len(x), weight.shape[0], ORDER, *out.shape[-2:])
    return out + _bias_term(bias, weight.shape[0], out.dtype, out.device)


def group_conv(x, weight, bias=None, *, padding: int = 1) -> torch.Tensor:
    """p4 maps (N, C_in, 4, H, W) -> (N, C_out, 4, H', W'): one conv2d on the transformed bank (Chapter 5)."""
    weight = as_tensor("weight", weight, ndim=5, floating=True)
    x = _check_input(x, 5, weight.shape[1], "maps")
    padding = check_int("padding", padding, minimum=0)
    n, c_in, _, h, w = x.shape
    out = F.conv2d(x.reshape(n, c_in * ORDER, h, w), group_filter_bank(weight), padding=padding)
    out = out.reshape(n, weight.shape[0], ORDER, *out.shape[-2:])
    return out + _bias_term(bias, weight.shape[0], out.dtype, out.device)


def lifting_conv_by_sum(x, weight, bias=None, *, padding: int = 1) -> torch.Tensor:
    """:func:`lifting_conv` as the definition reads, one planar correlation per rotation r (reference)."""
    weight = as_tensor("weight", weight, ndim=4, floating=True)
    x = _check_input(x, 4, weight.shape[1], "images")
    maps = [F.conv2d(x, torch.rot90(weight, r, dims=(-2, -1)), padding=padding) for r in range(ORDER)]
    out = torch.stack(maps, dim=2)
    return out + _bias_term(bias, weight.shape[0], out.dtype, out.device)


def group_conv_by_sum(x, weight, bias=None, *, padding: int = 1) -> torch.Tensor:
    """:func:`group_conv` as the definition reads (reference):

    out[:, o, r] = sum_s sum_c (x[:, c, s] ⋆ rot_r ψ[o, c, s - r]), a sum over the rotations s of the input.
    """
    weight = as_tensor("weight", weight, ndim=5, floating=True)
    x = _check_input(x, 5, weight.shape[1], "maps")
    maps = []
    for r in range(ORDER):
        total = 0
        for s in range(ORDER):
            filters = torch.rot90(weight[:, :, (s - r) % ORDER], r, dims=(-2, -1))   # (C_out, C_in, k, k)
            total = total + F.conv2d(x[:, :, s], filters, padding=padding)
        maps.append(total)
    out = torch.stack(maps, dim=2)
    return out + _bias_term(bias, weight.shape[0], out.dtype, out.device)


# ---------------------------------------------------------------------------
# Layers and a small p4 classifier
# ---------------------------------------------------------------------------

class LiftingConv2d(nn.Module):
    """Planar images -> p4 maps, with one bias per output channel (Chapter 5)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, padding: int = 1, *,
                 init: str = "torch", seed: int = 0):
        super().__init__()
        in_channels, out_channels = check_int("in_channels", in_channels, minimum=1), check_int(
            "out_channels", out_channels, minimum=1)
        kernel_size = check_int("kernel_size", kernel_size, minimum=1)
        self.padding = check_int("padding", padding, minimum=0)
        rng = generator(check_int("seed", seed, minimum=0))
        fan_in = in_channels * kernel_size**2
        shape = (out_channels, in_channels, kernel_size, kernel_size)
        self.weight = nn.Parameter(draw_weights(shape, fan_in, init, rng))
        self.bias = nn.Parameter(draw_biases(out_channels, fan_in, init, rng))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return lifting_conv(x, self.weight, self.bias, padding=self.padding)


class GroupConv2d(nn.Module):
    """p4 maps -> p4 maps, with one bias per output channel shared by its four rotations (Chapter 5)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, padding: int = 1, *,
                 init: str = "torch", seed: int = 0):
        super().__init__()
        in_channels, out_channels = check_int("in_channels", in_channels, minimum=1), check_int(
            "out_channels", out_channels, minimum=1)
        kernel_size = check_int("kernel_size", kernel_size, minimum=1)
        self.padding = check_int("padding", padding, minimum=0)
        rng = generator(check_int("seed", seed, minimum=0))
        fan_in = in_channels * ORDER * kernel_size**2
        shape = (out_channels, in_channels, ORDER, kernel_size, kernel_size)
        self.weight = nn.Parameter(draw_weights(shape, fan_in, init, rng))
        self.bias = nn.Parameter(draw_biases(out_channels, fan_in, init, rng))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return group_conv(x, self.weight, self.bias, padding=self.padding)


class GroupMaxPool2d(nn.Module):
    """2 x 2 max-pooling of every planar slice of a p4 map (Chapter 5)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, g, h, w = x.shape
        return F.max_pool2d(x.reshape(n, c * g, h, w), 2).reshape(n, c, g, h // 2, w // 2)


class RandomRotation(nn.Module):
    """Rotation augmentation: in training mode each image is turned by a random multiple of 90° (Chapter 5)."""

    def __init__(self, *, seed: int = 0):
        super().__init__()
        self.rng = generator(check_int("seed", seed, minimum=0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        return rotate_images(x, torch.randint(ORDER, (len(x),), generator=self.rng))


class RotationPool(nn.Module):
    """Max over the four rotations, then the max (or mean) over positions: p4 maps -> invariant features (N, C)
    (Chapter 5)."""

    def __init__(self, kind: str = "max"):
        super().__init__()
        self.kind = check_choice("kind", kind, ("max", "mean"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.amax(dim=2)
        return x.amax(dim=(-2, -1)) if self.kind == "max" else x.mean(dim=(-2, -1))


def p4_cnn(channels=(8, 8, 16), *, in_channels: int = 1, num_classes: int = 10, pool_after=(1,), padding: int = 1,
           global_pool: str = "max", init: str = "torch", seed: int = 0, dtype: torch.dtype = torch.float32,
           device="cpu") -> nn.Sequential:
    """A lifting layer, p4 group convolutions with ReLU, 2 x 2 pooling after the layers in ``pool_after``,
    max over rotations and ``global_pool`` ("max" or "mean") over positions, and a linear classifier (Chapter 5).

    Its class scores are invariant to rotations of the input by multiples of 90°.
    """
    from .nets import mlp

    channels = check_ints("channels", channels, minimum=1)
    pool_after = set(check_ints("pool_after", pool_after, minimum=0, min_length=0))
    if pool_after and max(pool_after) >= len(channels):
        raise ValueError(f"pool_after must name layers 0..{len(channels) - 1}, got {sorted(pool_after)}")
    padding = check_int("padding", padding, minimum=0)
    seed = check_int("seed", seed, minimum=0)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    layers: list[nn.Module] = []
    for index, (c_in, c_out) in enumerate(zip([in_channels, *channels[:-1]], channels)):
        layer_type = LiftingConv2d if index == 0 else GroupConv2d
        layers += [layer_type(c_in, c_out, padding=padding, init=init, seed=seed * 100 + index), nn.ReLU()]
        if index in pool_after:
            layers.append(GroupMaxPool2d())
    layers.append(RotationPool(global_pool))
    layers += list(mlp((channels[-1], num_classes), init=init, seed=seed + 1))
    return nn.Sequential(*layers).to(dtype=dtype, device=device)


# ---------------------------------------------------------------------------
# The experiment: trained upright, tested rotated
# ---------------------------------------------------------------------------

#: The two models of the rotated-digits experiment.
ROTATION_MODELS = ("cnn", "p4")


@dataclass(frozen=True)
class RotationRun:
    """One run of the rotated-digits experiment: which model, how long, whether to augment with rotations."""

    model: str = "p4"
    epochs: int = 8
    augment: bool = False
    seed: int = 0
    device: str = "cpu"


class RotationResult(NamedTuple):
    """Test accuracy on upright digits and on digits rotated by a random multiple of 90°, and the model."""

    upright: float
    rotated: float
    model: nn.Module


def rotated_test_set(X, y, *, seed: int = 0):
    """Each image rotated by its own random multiple of 90° (k drawn from ``seed``) (Chapter 5)."""
    X = as_tensor("X", X, ndim=4, floating=True)
    k = torch.randint(ORDER, (len(X),), generator=generator(check_int("seed", seed, minimum=0)))
    return rotate_images(X, k), y


def rotation_model(name: str, *, seed: int = 0, device="cpu") -> nn.Sequential:
    """The plain CNN (16-16-pool-32, 7,450 weights) or the P4-CNN (8-8-pool-16, 7,186 weights), both with
    global max pooling and He initialisation (Chapter 5)."""
    from .conv import cnn

    check_choice("name", name, ROTATION_MODELS)
    if name == "cnn":
        return cnn((16, 16, 32), pool_after=(1,), global_pool="max", init="he", seed=seed, device=device)
    return p4_cnn((8, 8, 16), pool_after=(1,), global_pool="max", init="he", seed=seed, device=device)


@cached
def rotation_run(config: RotationRun) -> RotationResult:
    """Train on upright 8 x 8 digits (Adam 3e-3, batch 32), test upright and rotated (Chapter 5).

    With ``augment`` each minibatch is rotated by random multiples of 90°
    (vectorised: four calls of torch.rot90 per batch).
    """
    from . import data, train

    if not isinstance(config, RotationRun):
        raise TypeError(f"config must be a RotationRun, got {describe(config)}")
    digits = data.load_digits(flatten=False, device=config.device)
    model = rotation_model(config.model, seed=config.seed, device=config.device)
    if config.augment:
        model = nn.Sequential(RandomRotation(seed=config.seed + 1), *model)
    train.fit(model, F.cross_entropy, torch.optim.Adam(model.parameters(), lr=3e-3),
              (digits.X_train, digits.y_train), epochs=config.epochs, batch_size=32, seed=config.seed)
    X_rot, y_rot = rotated_test_set(digits.X_test, digits.y_test, seed=config.seed + 2)
    return RotationResult(train.evaluate(model, digits.X_test, digits.y_test)["accuracy"],
                          train.evaluate(model, X_rot, y_rot)["accuracy"], model)
