"""Convolution from scratch: 1-D three ways, 2-D by im2col, pooling, output sizes and operator norms (Chapter 5).

The 1-D functions compute the *full* linear convolution
``(f * h)[u] = sum_t h[t] f[u - t]`` of a signal of length n with a kernel of
length m (length n + m - 1) by the direct sum, by a Toeplitz matrix and by a
zero-padded FFT. The 2-D layer is what deep-learning libraries call
convolution: a multi-channel cross-correlation, computed by unfolding the
input into patches (im2col) and one matrix product, with the direct sum over
kernel offsets kept beside it as the readable reference. Functions that are
compared with NumPy, PyTorch or a closed form to many digits default to
float64; models that are trained (:func:`cnn`) default to float32.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .runtime import generator
from .validation import (
    as_tensor,
    check_choice,
    check_device,
    check_dtype,
    check_int,
    check_ints,
    check_square,
    describe,
)

#: The three ways :func:`convolve1d` computes a full 1-D convolution.
METHODS_1D = ("direct", "toeplitz", "fft")
#: How a 2-D layer fills the border: zeros, or the opposite edge (a torus).
PADDING_MODES = ("zeros", "circular")
#: Global pooling at the end of :func:`cnn`.
GLOBAL_POOLS = ("max", "mean")


# ---------------------------------------------------------------------------
# One dimension: three ways to convolve
# ---------------------------------------------------------------------------

def _signal(name: str, value) -> torch.Tensor:
    tensor = as_tensor(name, value, ndim=1, floating=True)
    if len(tensor) == 0:
        raise ValueError(f"{name} must not be empty")
    return tensor


def _signal_pair(f, h) -> tuple[torch.Tensor, torch.Tensor]:
    f, h = _signal("f", f), _signal("h", h)
    if f.dtype != h.dtype or f.device != h.device:
        raise TypeError(f"f and h must share dtype and device, got {describe(f)} and {describe(h)}")
    return f, h


def toeplitz_matrix(h, n: int) -> torch.Tensor:
    """The (n + m - 1) x n matrix H with H[i, j] = h[i - j] (zero outside 0..m-1): H f = f * h (Chapter 5)."""
    h = _signal("h", h)
    n = check_int("n", n, minimum=1)
    m = len(h)
    lag = torch.arange(n + m - 1, device=h.device)[:, None] - torch.arange(n, device=h.device)[None, :]
    inside = (lag >= 0) & (lag < m)
    return torch.where(inside, h[lag.clamp(0, m - 1)], torch.zeros((), dtype=h.dtype, device=h.device))


def convolve1d(f, h, *, method: str = "direct", fft_length: int | None = None) -> torch.Tensor:
    """Full linear convolution (f * h)[u] = sum_t h[t] f[u - t], u = 0..n+m-2 (Chapter 5).

    ``method``: "direct" (the sum, one term per kernel tap: the reference),
    "toeplitz" (a matrix-vector product) or "fft" (the product of zero-padded
    transforms; ``fft_length`` >= n + m - 1, by default exactly that, so that
    the circular convolution the FFT computes has no wrap-around).
    """
    f, h = _signal_pair(f, h)
    check_choice("method", method, METHODS_1D)
    n, m = len(f), len(h)
    if method == "direct":
        out = torch.zeros(n + m - 1, dtype=f.dtype, device=f.device)
        for t in range(m):          # tap t moves a copy of f, weighted by h[t], t places right
            out[t:t + n] += h[t] * f
        return out
    if method == "toeplitz":
        return toeplitz_matrix(h, n) @ f
    length = n + m - 1 if fft_length is None else check_int("fft_length", fft_length, minimum=1)
    if length < n + m - 1:
        raise ValueError(f"fft_length must be at least n + m - 1 = {n + m - 1} for a linear convolution "
                         f"(shorter transforms wrap around: see circular_convolve1d), got {length}")
    product = torch.fft.rfft(f, length) * torch.fft.rfft(h, length)
    return torch.fft.irfft(product, length)[:n + m - 1]


def circular_convolve1d(f, h) -> torch.Tensor:
    """Circular convolution on Z_n: sum_t h[t] f[(u - t) mod n], the kernel zero-padded to n (Chapter 5)."""
    f, h = _signal_pair(f, h)
    if len(h) > len(f):
        raise ValueError(f"h must not be longer than f for a circular convolution on Z_{len(f)}, "
                         f"got lengths {len(h)} and {len(f)}")
    n = len(f)
    return torch.fft.irfft(torch.fft.rfft(f, n) * torch.fft.rfft(h, n), n)


def cross_correlate1d(f, h) -> torch.Tensor:
    """Valid cross-correlation (h ⋆ f)[u] = sum_t h[t] f[u + t], u = 0..n-m: what F.conv1d computes (Chapter 5)."""
    f, h = _signal_pair(f, h)
    if len(h) > len(f):
        raise ValueError(f"h must not be longer than f, got lengths {len(h)} and {len(f)}")
    windows = f.unfold(0, len(h), 1)          # (n - m + 1, m): row u is f[u:u + m]
    return windows @ h


def cyclic_shift_matrix(n: int, *, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """The n x n permutation S with (S x)[i] = x[i - 1 mod n] (Chapter 5)."""
    n = check_int("n", n, minimum=1)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    return torch.roll(torch.eye(n, dtype=dtype, device=device), 1, dims=0)


def commutant_dimension(A) -> int:
    """Dimension of the space of matrices M with A M = M A (Chapter 5).

    With row-major vectorisation, vec(A M - M A) = (A ⊗ I - I ⊗ Aᵀ) vec(M),
    so the dimension is n² minus the rank of that n² x n² matrix.
    """
    A = check_square("A", A)
    n = len(A)
    eye = torch.eye(n, dtype=A.dtype, device=A.device)
    commutator = torch.kron(A, eye) - torch.kron(eye, A.T.contiguous())
    return n * n - int(torch.linalg.matrix_rank(commutator).item())


# ---------------------------------------------------------------------------
# Two dimensions: output sizes, the layer by im2col, pooling
# ---------------------------------------------------------------------------

def output_size(n: int, kernel_size: int, *, padding: int = 0, stride: int = 1, dilation: int = 1) -> int:
    """Side of a convolution's or pooling's output: ⌊(n + 2p - d(f - 1) - 1)/s⌋ + 1 (Chapter 5).

    With dilation d = 1 this is ⌊(n + 2p - f)/s⌋ + 1.
    """
    n = check_int("n", n, minimum=1)
    kernel_size = check_int("kernel_size", kernel_size, minimum=1)
    padding = check_int("padding", padding, minimum=0)
    stride = check_int("stride", stride, minimum=1)
    dilation = check_int("dilation", dilation, minimum=1)
    span = dilation * (kernel_size - 1) + 1
    if n + 2 * padding < span:
        raise ValueError(f"the kernel spans {span} pixels but the padded input has only "
                         f"n + 2 padding = {n + 2 * padding}: no output")
    return (n + 2 * padding - span) // stride + 1


def receptive_field(kernel_sizes, strides=None, dilations=None) -> int:
    """Side of the input window one output pixel of a stack of layers depends on (Chapter 5).

    r = 1 + Σ_l d_l (k_l - 1) Π_{j<l} s_j: each layer widens the window by its
    dilated kernel span, measured in input pixels, i.e. times the product of the
    strides below it. L stride-1 layers of size k give L (k - 1) + 1.
    """
    kernel_sizes = check_ints("kernel_sizes", kernel_sizes, minimum=1)
    strides = [1] * len(kernel_sizes) if strides is None else check_ints("strides", strides, minimum=1)
    dilations = [1] * len(kernel_sizes) if dilations is None else check_ints("dilations", dilations, minimum=1)
    if not len(kernel_sizes) == len(strides) == len(dilations):
        raise ValueError(f"kernel_sizes, strides and dilations must have the same length, got "
                         f"{len(kernel_sizes)}, {len(strides)} and {len(dilations)}")
    field, jump = 1, 1
    for k, s, d in zip(kernel_sizes, strides, dilations):
        field += d * (k - 1) * jump
        jump *= s
    return field


def _pair(name: str, value, minimum: int) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        values = check_ints(name, value, minimum=minimum, min_length=2)
        if len(values) != 2:
            raise ValueError(f"{name} must be an integer or a pair of integers, got {value!r}")
        return values[0], values[1]
    value = check_int(name, value, minimum=minimum)
    return value, value


def _layer_arguments(x, weight, bias):
    x = as_tensor("x", x, ndim=4, floating=True)
    weight = as_tensor("weight", weight, ndim=4, floating=True)
    if weight.shape[1] != x.shape[1]:
        raise ValueError(f"weight has {weight.shape[1]} input channels (dimension 1) but x has "
                         f"{x.shape[1]}: weight must have shape (C_out, C_in, kh, kw)")
    if weight.dtype != x.dtype or weight.device != x.device:
        raise TypeError(f"x and weight must share dtype and device, got {describe(x)} and {describe(weight)}")
    if bias is not None:
        bias = as_tensor("bias", bias, shape=(weight.shape[0],), floating=True)
    return x, weight, bias


def _circular_pad(x: torch.Tensor, padding: tuple[int, int]) -> torch.Tensor:
    ph, pw = padding
    if ph > x.shape[2] or pw > x.shape[3]:
        raise ValueError(f"circular padding {padding} is larger than the input's side {tuple(x.shape[2:])}")
    return F.pad(x, (pw, pw, ph, ph), mode="circular")


def conv2d(x, weight, bias=None, *, stride=1, padding=0, dilation=1, padding_mode: str = "zeros") -> torch.Tensor:
    """Multi-channel 2-D cross-correlation by im2col: ``F.conv2d`` from scratch (Chapter 5).

    out[n, o, i, j] = b[o] + sum_{c,a,b} x_pad[n, c, s i + d a, s j + d b] w[o, c, a, b]. ``x`` is
    (N, C_in, H, W) and ``weight`` (C_out, C_in, kh, kw); ``stride``, ``padding`` and
    ``dilation`` are integers or (height, width) pairs; ``padding_mode="circular"``
    wraps the image around a torus instead of padding with zeros.
    """
    x, weight, bias = _layer_arguments(x, weight, bias)
    stride, padding = _pair("stride", stride, 1), _pair("padding", padding, 0)
    dilation = _pair("dilation", dilation, 1)
    check_choice("padding_mode", padding_mode, PADDING_MODES)
    if padding_mode == "circular":
        x, padding = _circular_pad(x, padding), (0, 0)
    c_out, _, kh, kw = weight.shape
    out_h = output_size(x.shape[2], kh, padding=padding[0], stride=stride[0], dilation=dilation[0])
    out_w = output_size(x.shape[3], kw, padding=padding[1], stride=stride[1], dilation=dilation[1])
    patches = F.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)  # (N, C_in kh kw, L)
    out = weight.reshape(c_out, -1) @ patches                                            # (N, C_out, L)
    out = out.reshape(x.shape[0], c_out, out_h, out_w)
    return out if bias is None else out + bias[:, None, None]


def conv2d_by_sum(x, weight, bias=None, *, stride=1, padding=0, dilation=1,
                  padding_mode: str = "zeros") -> torch.Tensor:
    """The same layer as :func:`conv2d`, as a sum over the kernel's offsets: the readable reference (Chapter 5).

    Offset (a, b) contributes the strided slice of the padded input that starts
    at (d a, d b), mixed across channels by the matrix w[:, :, a, b].
    """
    x, weight, bias = _layer_arguments(x, weight, bias)
    stride, padding = _pair("stride", stride, 1), _pair("padding", padding, 0)
    dilation = _pair("dilation", dilation, 1)
    check_choice("padding_mode", padding_mode, PADDING_MODES)
    if padding_mode == "circular":
        x = _circular_pad(x, padding)
    else:
        x = F.pad(x, (padding[1], padding[1], padding[0], padding[0]))
    _, _, kh, kw = weight.shape
    out_h = output_size(x.shape[2], kh, stride=stride[0], dilation=dilation[0])
    out_w = output_size(x.shape[3], kw, stride=stride[1], dilation=dilation[1])
    out = 0
    for a in range(kh):
        for b in range(kw):
            top, left = a * dilation[0], b * dilation[1]
            window = x[:, :, top:top + stride[0] * (out_h - 1) + 1:stride[0],
                       left:left + stride[1] * (out_w - 1) + 1:stride[1]]       # (N, C_in, out_h, out_w)
            out = out + torch.einsum("oc,nchw->nohw", weight[:, :, a, b], window)
    return out if bias is None else out + bias[:, None, None]


def max_pool2d(x, kernel_size, stride=None) -> torch.Tensor:
    """Max-pooling over kernel_size windows moved by ``stride`` (default: the window), by unfold (Chapter 5).

    Pooling is set by its window f and stride s; the output side is ⌊(n - f)/s⌋ + 1.
    """
    x = as_tensor("x", x, ndim=4, floating=True)
    kernel = _pair("kernel_size", kernel_size, 1)
    stride = kernel if stride is None else _pair("stride", stride, 1)
    n, c, h, w = x.shape
    out_h = output_size(h, kernel[0], stride=stride[0])
    out_w = output_size(w, kernel[1], stride=stride[1])
    patches = F.unfold(x, kernel, stride=stride)                    # (N, C kh kw, L)
    patches = patches.reshape(n, c, kernel[0] * kernel[1], -1)      # (N, C, kh kw, L)
    return patches.amax(dim=2).reshape(n, c, out_h, out_w)


def circular_cross_correlate2d(x, kernel) -> torch.Tensor:
    """sum_{a,b} x[(i + a) mod H, (j + b) mod W] k[a, b] by the FFT: IFFT(FFT x · conj FFT k) (Chapter 5).

    ``x`` is (..., H, W) and ``kernel`` (kh, kw) with kh <= H, kw <= W.
    """
    x = as_tensor("x", x, floating=True)
    kernel = as_tensor("kernel", kernel, ndim=2, floating=True)
    if x.dim() < 2 or kernel.shape[0] > x.shape[-2] or kernel.shape[1] > x.shape[-1]:
        raise ValueError(f"x must be (..., H, W) with H, W at least the kernel's sides {tuple(kernel.shape)}, "
                         f"got {describe(x)}")
    size = x.shape[-2:]
    spectrum = torch.fft.rfft2(x) * torch.fft.rfft2(kernel, s=size).conj()
    return torch.fft.irfft2(spectrum, s=size)


# ---------------------------------------------------------------------------
# The layer as a matrix, and its operator norm
# ---------------------------------------------------------------------------

def conv_matrix(weight, size: int, *, padding_mode: str = "circular") -> torch.Tensor:
    """The matrix of x -> conv2d(x, weight) on (C_in, size, size) inputs, 'same' padding (Chapter 5).

    Column k is the layer applied to the k-th standard basis image; with circular
    padding the matrix is doubly block circulant, with zeros doubly block Toeplitz.
    Shape (C_out size², C_in size²).
    """
    weight = as_tensor("weight", weight, ndim=4, floating=True)
    size = check_int("size", size, minimum=1)
    check_choice("padding_mode", padding_mode, PADDING_MODES)
    c_out, c_in, kh, kw = weight.shape
    if kh % 2 == 0 or kw % 2 == 0:
        raise ValueError(f"weight must have odd kernel sides for 'same' padding, got {(kh, kw)}")
    basis = torch.eye(c_in * size * size, dtype=weight.dtype, device=weight.device)
    basis = basis.reshape(-1, c_in, size, size)
    images = conv2d(basis, weight, padding=(kh // 2, kw // 2), padding_mode=padding_mode)
    return images.reshape(len(basis), -1).T


def operator_norm(weight, size: int, *, steps: int = 500, padding_mode: str = "circular",
                  seed: int = 0) -> float:
    """Largest singular value of a convolution layer by power iteration on AᵀA (Chapter 5).

    A is the layer on (C_in, size, size) inputs with 'same' padding; its
    adjoint Aᵀ is applied by differentiating <A x, y> with respect to x, so
    the dense matrix is never formed.
    """
    weight = as_tensor("weight", weight, ndim=4, floating=True)
    size = check_int("size", size, minimum=1)
    steps = check_int("steps", steps, minimum=1)
    check_choice("padding_mode", padding_mode, PADDING_MODES)
    kh, kw = weight.shape[2:]
    padding = (kh // 2, kw // 2)

    def layer(x):
        return conv2d(x, weight, padding=padding, padding_mode=padding_mode)

    v = torch.randn(1, weight.shape[1], size, size, generator=generator(seed), dtype=torch.float64)
    v = (v / v.norm()).to(dtype=weight.dtype, device=weight.device)
    for _ in range(steps):
        x = v.clone().requires_grad_(True)
        out = layer(x)
        (adjoint,) = torch.autograd.grad(out, x, grad_outputs=out)     # Aᵀ A v
        v = adjoint / adjoint.norm()
    with torch.no_grad():
        return layer(v).norm().item()


def operator_norm_fft(weight, size: int) -> float:
    """Largest singular value of the circular layer: max over 2-D frequencies of the C_out x C_in
    transfer matrices' spectral norms (Sedghi, Gupta and Long 2019) (Chapter 5)."""
    weight = as_tensor("weight", weight, ndim=4, floating=True)
    size = check_int("size", size, minimum=max(weight.shape[2:]))
    transfer = torch.fft.fft2(weight, s=(size, size))                   # (C_out, C_in, size, size)
    per_frequency = transfer.permute(2, 3, 0, 1)                        # (size, size, C_out, C_in)
    return torch.linalg.matrix_norm(per_frequency, ord=2).max().item()


# ---------------------------------------------------------------------------
# A small convolutional classifier
# ---------------------------------------------------------------------------

#: Initialisations of :func:`cnn`: PyTorch's default U(±1/sqrt(fan_in)), or He normal N(0, 2/fan_in) with zero biases.
INITS = ("torch", "he")


def draw_weights(shape, fan_in: int, init: str, rng: torch.Generator) -> torch.Tensor:
    """Initial weights in float64 on the CPU: U(±1/sqrt(fan_in)) ("torch") or N(0, 2/fan_in) ("he") (Chapter 5)."""
    check_choice("init", init, INITS)
    if init == "torch":
        return (2 * torch.rand(shape, generator=rng, dtype=torch.float64) - 1) / math.sqrt(fan_in)
    return torch.randn(shape, generator=rng, dtype=torch.float64) * math.sqrt(2.0 / fan_in)


def draw_biases(size: int, fan_in: int, init: str, rng: torch.Generator) -> torch.Tensor:
    """Initial biases: U(±1/sqrt(fan_in)) ("torch") or zeros ("he") (Chapter 5)."""
    check_choice("init", init, INITS)
    if init == "torch":
        return (2 * torch.rand(size, generator=rng, dtype=torch.float64) - 1) / math.sqrt(fan_in)
    return torch.zeros(size, dtype=torch.float64)


def _seeded_conv(c_in: int, c_out: int, kernel_size: int, padding: int, init: str, rng: torch.Generator,
                 dtype, device) -> nn.Conv2d:
    """An nn.Conv2d whose weights are drawn from ``rng`` (skip_init: torch's own would use the global stream)."""
    conv = nn.utils.skip_init(nn.Conv2d, c_in, c_out, kernel_size, padding=padding, dtype=dtype, device=device)
    fan_in = c_in * kernel_size * kernel_size
    with torch.no_grad():
        conv.weight.copy_(draw_weights(conv.weight.shape, fan_in, init, rng))
        conv.bias.copy_(draw_biases(c_out, fan_in, init, rng))
    return conv


class GlobalPool(nn.Module):
    """Max or mean over all spatial positions: (N, C, H, W) -> (N, C) (Chapter 5)."""

    def __init__(self, kind: str = "max"):
        super().__init__()
        self.kind = check_choice("kind", kind, GLOBAL_POOLS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.amax(dim=(-2, -1)) if self.kind == "max" else x.mean(dim=(-2, -1))


def cnn(channels, *, in_channels: int = 1, num_classes: int = 10, kernel_size: int = 3, padding: int = 1,
        pool_after=(), global_pool: str = "max", init: str = "torch", seed: int = 0,
        dtype: torch.dtype = torch.float32, device="cpu") -> nn.Sequential:
    """Conv-ReLU layers with ``channels[i]`` filters, 2x2 max-pooling after the layers listed in
    ``pool_after`` (0-based), global max or mean pooling, and a linear classifier (Chapter 5).

    ``cnn((16, 32, 32), pool_after=(1,))`` is conv16-conv32-pool-conv32-global max-linear.
    Weights are drawn from ``seed`` with ``init`` ("torch": PyTorch's default; "he": He normal).
    """
    from .nets import mlp

    channels = check_ints("channels", channels, minimum=1)
    in_channels = check_int("in_channels", in_channels, minimum=1)
    num_classes = check_int("num_classes", num_classes, minimum=1)
    kernel_size = check_int("kernel_size", kernel_size, minimum=1)
    padding = check_int("padding", padding, minimum=0)
    pool_after = set(check_ints("pool_after", pool_after, minimum=0, min_length=0))
    if pool_after and max(pool_after) >= len(channels):
        raise ValueError(f"pool_after must name layers 0..{len(channels) - 1}, got {sorted(pool_after)}")
    check_choice("global_pool", global_pool, GLOBAL_POOLS)
    check_choice("init", init, INITS)
    seed = check_int("seed", seed, minimum=0)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    rng = generator(seed)
    layers: list[nn.Module] = []
    for index, (c_in, c_out) in enumerate(zip([in_channels, *channels[:-1]], channels)):
        layers += [_seeded_conv(c_in, c_out, kernel_size, padding, init, rng, dtype, device), nn.ReLU()]
        if index in pool_after:
            layers.append(nn.MaxPool2d(2))
    layers.append(GlobalPool(global_pool))
    layers += list(mlp((channels[-1], num_classes), init=init, seed=seed + 1, dtype=dtype, device=device))
    return nn.Sequential(*layers)
