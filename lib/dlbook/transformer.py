"""Transformers from their parts: positional encodings, blocks, small models and parameter counts (Chapter 7).

A block is multi-head attention and a position-wise feed-forward network, each
wrapped in a residual connection with layer normalisation, either before the
branch (pre-LN, the default here) or after the sum (post-LN, the original
Transformer). :func:`block_from_torch` loads the weights of
``torch.nn.TransformerEncoderLayer``/``TransformerDecoderLayer`` so the tests can
compare the two. The models are an encoder that labels every token
(:class:`TokenTransformer`, also the masked language model), an encoder-decoder
(:class:`Seq2SeqTransformer`) and a vision transformer (:class:`VisionTransformer`).
Every model draws its parameters from ``seed`` (:func:`initialize`), never from
the global stream. The exact parameter counts of BERT-base and ViT-B/16 come in
closed form and from the same architectures assembled out of torch's modules,
which can be built on the "meta" device without allocating memory.
Encodings and rotations default to float64 (they are compared with identities);
trained models default to float32.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from . import train
from .attention import MultiHeadAttention
from .data import load_digits
from .runtime import generator
from .validation import (
    as_tensor,
    check_bool,
    check_choice,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_ints,
    describe,
)

#: How a model learns where a token is: not at all, fixed sinusoids, or a learned vector per position.
POSITIONS = ("none", "sinusoidal", "learned")


# ---------------------------------------------------------------------------
# Sinusoidal positional encodings
# ---------------------------------------------------------------------------

def frequencies(dim: int, *, base: float = 10_000.0, dtype: torch.dtype = torch.float64, device="cpu") -> torch.Tensor:
    """ω_i = base^(-2i/d) for i = 0, ..., d/2 - 1: one frequency per (sin, cos) pair (Chapter 7)."""
    dim = check_int("dim", dim, minimum=2)
    if dim % 2:
        raise ValueError(f"dim must be even (the encodings come in sin/cos pairs), got {dim}")
    base = check_float("base", base, low=1.0, low_open=True)
    dtype, device = check_dtype("dtype", dtype), check_device("device", device)
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim).to(device, dtype)


def sinusoidal_encoding(num_positions: int, dim: int, *, base: float = 10_000.0, dtype: torch.dtype = torch.float64,
                        device="cpu") -> torch.Tensor:
    """P (T, d) with P[t, 2i] = sin(t ω_i) and P[t, 2i + 1] = cos(t ω_i), ω_i = base^(-2i/d) (Chapter 7)."""
    num_positions = check_int("num_positions", num_positions, minimum=1)
    omega = frequencies(dim, base=base, dtype=torch.float64)
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * omega    # (T, d/2)
    P = torch.stack((angles.sin(), angles.cos()), dim=-1).reshape(num_positions, dim)   # pairs interleaved
    return P.to(check_device("device", device), check_dtype("dtype", dtype))


def relative_rotation(offset: float, dim: int, *, base: float = 10_000.0, dtype: torch.dtype = torch.float64,
                      device="cpu") -> torch.Tensor:
    """Block-diagonal R_Δ (d, d) with p_{t+Δ} = p_t R_Δ for row vectors p_t (Chapter 7).

    Each 2 x 2 block is [[cos Δω_i, -sin Δω_i], [sin Δω_i, cos Δω_i]]: it rotates the pair
    (sin tω_i, cos tω_i) into (sin (t+Δ)ω_i, cos (t+Δ)ω_i).
    """
    offset = check_float("offset", offset)
    angles = offset * frequencies(dim, base=base, dtype=torch.float64)
    c, s = angles.cos(), angles.sin()
    blocks = torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)), -2)   # (d/2, 2, 2)
    return torch.block_diag(*blocks).to(check_device("device", device), check_dtype("dtype", dtype))


# ---------------------------------------------------------------------------
# Blocks
# ---------------------------------------------------------------------------

def _feedforward(dim: int, ff_dim: int, dtype, device) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim, ff_dim, dtype=dtype, device=device), nn.ReLU(),
                         nn.Linear(ff_dim, dim, dtype=dtype, device=device))


def _check_block_sizes(dim, num_heads, ff_dim) -> tuple[int, int, int]:
    dim, num_heads = check_int("dim", dim, minimum=1), check_int("num_heads", num_heads, minimum=1)
    ff_dim = check_int("ff_dim", ff_dim, minimum=1)
    if dim % num_heads:
        raise ValueError(f"num_heads must divide dim, got dim={dim} and num_heads={num_heads}")
    return dim, num_heads, ff_dim


class EncoderBlock(nn.Module):
    """Self-attention and a feed-forward network, each with a residual connection and LayerNorm (Chapter 7).

    Pre-LN (``norm_first=True``): x + SA(LN(x)), then x + FF(LN(x)).
    Post-LN, the original Transformer: LN(x + SA(x)), then LN(x + FF(x)).
    """

    def __init__(self, dim: int, num_heads: int, ff_dim: int, *, norm_first: bool = True,
                 dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        dim, num_heads, ff_dim = _check_block_sizes(dim, num_heads, ff_dim)
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        self.norm_first = check_bool("norm_first", norm_first)
        self.attention = MultiHeadAttention(dim, num_heads, dtype=dtype, device=device)
        self.norm1 = nn.LayerNorm(dim, dtype=dtype, device=device)
        self.norm2 = nn.LayerNorm(dim, dtype=dtype, device=device)
        self.feedforward = _feedforward(dim, ff_dim, dtype, device)

    def forward(self, x: torch.Tensor, *, mask=None, causal: bool = False) -> torch.Tensor:
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.attention(h, mask=mask, causal=causal)
            return x + self.feedforward(self.norm2(x))
        x = self.norm1(x + self.attention(x, mask=mask, causal=causal))
        return self.norm2(x + self.feedforward(x))


class DecoderBlock(nn.Module):
    """Causal self-attention, cross-attention to the encoder's output, feed-forward; pre- or post-LN (Chapter 7).

    Cross-attention takes its queries from the decoder and its keys and values from ``memory``.
    """

    def __init__(self, dim: int, num_heads: int, ff_dim: int, *, norm_first: bool = True,
                 dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        dim, num_heads, ff_dim = _check_block_sizes(dim, num_heads, ff_dim)
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        self.norm_first = check_bool("norm_first", norm_first)
        self.self_attention = MultiHeadAttention(dim, num_heads, dtype=dtype, device=device)
        self.cross_attention = MultiHeadAttention(dim, num_heads, dtype=dtype, device=device)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(dim, dtype=dtype, device=device) for _ in range(3))
        self.feedforward = _feedforward(dim, ff_dim, dtype, device)

    def attend(self, y: torch.Tensor, memory: torch.Tensor, *, memory_mask=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The block's output and its cross-attention weights, (B, h, T_y, T_memory)."""
        if self.norm_first:
            y = y + self.self_attention(self.norm1(y), causal=True)
            cross = self.cross_attention.attend(self.norm2(y), memory, mask=memory_mask)
            y = y + cross.output
            return y + self.feedforward(self.norm3(y)), cross.weights
        y = self.norm1(y + self.self_attention(y, causal=True))
        cross = self.cross_attention.attend(y, memory, mask=memory_mask)
        y = self.norm2(y + cross.output)
        return self.norm3(y + self.feedforward(y)), cross.weights

    def forward(self, y: torch.Tensor, memory: torch.Tensor, *, memory_mask=None) -> torch.Tensor:
        return self.attend(y, memory, memory_mask=memory_mask)[0]


#: torch's parameter names -> ours, for the layers block_from_torch reads.
_TORCH_NAMES = {"self_attn.": "attention.", "linear1.": "feedforward.0.", "linear2.": "feedforward.2."}
_TORCH_DECODER_NAMES = {"self_attn.": "self_attention.", "multihead_attn.": "cross_attention.",
                        "linear1.": "feedforward.0.", "linear2.": "feedforward.2."}


def block_from_torch(layer: nn.Module) -> EncoderBlock | DecoderBlock:
    """An :class:`EncoderBlock` or :class:`DecoderBlock` holding copies of a torch layer's weights (Chapter 7).

    The layer must use ReLU and the default layer-norm epsilon; dropout does not matter in evaluation mode.
    """
    if isinstance(layer, nn.TransformerEncoderLayer):
        block_type, names = EncoderBlock, _TORCH_NAMES
        attention = layer.self_attn
    elif isinstance(layer, nn.TransformerDecoderLayer):
        block_type, names = DecoderBlock, _TORCH_DECODER_NAMES
        attention = layer.self_attn
    else:
        raise TypeError(f"layer must be a torch.nn.TransformerEncoderLayer or TransformerDecoderLayer, "
                        f"got {describe(layer)}")
    if layer.activation is not torch.nn.functional.relu and not isinstance(layer.activation, nn.ReLU):
        raise ValueError("layer must use the ReLU activation (torch's default)")
    if layer.norm1.eps != 1e-5:
        raise ValueError(f"layer must use layer_norm_eps=1e-5, got {layer.norm1.eps}")
    weight = layer.linear1.weight
    block = block_type(attention.embed_dim, attention.num_heads, layer.linear1.out_features,
                       norm_first=layer.norm_first, dtype=weight.dtype, device=weight.device)
    state = {}
    for key, value in layer.state_dict().items():
        for old, new in names.items():
            if key.startswith(old):
                key = new + key[len(old):]
        state[key] = value
    block.load_state_dict(state)
    return block.eval()


# ---------------------------------------------------------------------------
# Seeded initialisation
# ---------------------------------------------------------------------------

def initialize(module: nn.Module, seed: int = 0) -> nn.Module:
    """Redraw every parameter of a model from ``seed`` as torch would initialise it (Chapter 7).

    Linear layers uniform in ±1/√fan_in; attention's fused projections xavier-uniform with zero
    biases; embeddings N(0, 1); layer norms 1 and 0; learned positions and class tokens N(0, 0.02²).
    """
    gen = generator(check_int("seed", seed, minimum=0))

    def uniform(shape, bound):
        return (2 * torch.rand(shape, generator=gen, dtype=torch.float64) - 1) * bound

    with torch.no_grad():
        for submodule in module.modules():
            if isinstance(submodule, MultiHeadAttention):
                dim = submodule.in_proj_weight.shape[1]
                submodule.in_proj_weight.copy_(uniform(submodule.in_proj_weight.shape, math.sqrt(3 / dim)))
                submodule.in_proj_bias.zero_()
            elif isinstance(submodule, nn.Linear):
                bound = 1 / math.sqrt(submodule.in_features)
                submodule.weight.copy_(uniform(submodule.weight.shape, bound))
                if submodule.bias is not None:
                    submodule.bias.copy_(uniform(submodule.bias.shape, bound))
            elif isinstance(submodule, nn.Embedding):
                submodule.weight.copy_(torch.randn(submodule.weight.shape, generator=gen, dtype=torch.float64))
            elif isinstance(submodule, nn.LayerNorm):
                submodule.weight.fill_(1.0)
                submodule.bias.zero_()
            elif isinstance(submodule, (nn.GRU, nn.GRUCell)):
                bound = 1 / math.sqrt(submodule.hidden_size)
                for p in submodule.parameters(recurse=False):
                    p.copy_(uniform(p.shape, bound))
            for name in ("positions", "cls_token"):
                p = getattr(submodule, name, None)
                if isinstance(p, nn.Parameter):
                    p.copy_(0.02 * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    return module


class _Positions(nn.Module):
    """Adds position information to (B, T, d) token vectors: nothing, fixed sinusoids or learned vectors."""

    def __init__(self, kind: str, max_length: int, dim: int, dtype, device):
        super().__init__()
        self.kind = check_choice("positions", kind, POSITIONS)
        self.max_length = check_int("max_length", max_length, minimum=1)
        if kind == "sinusoidal":
            self.register_buffer("table", sinusoidal_encoding(max_length, dim, dtype=dtype, device=device))
        elif kind == "learned":
            self.positions = nn.Parameter(torch.zeros(max_length, dim, dtype=dtype, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > self.max_length:
            raise ValueError(f"sequences may have at most max_length={self.max_length} tokens, got {x.shape[1]}")
        if self.kind == "sinusoidal":
            return x + self.table[: x.shape[1]]
        if self.kind == "learned":
            return x + self.positions[: x.shape[1]]
        return x


def _check_tokens(name: str, tokens, vocab_size: int) -> torch.Tensor:
    tokens = as_tensor(name, tokens)
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got {describe(tokens)}")
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"{name} must lie in 0..{vocab_size - 1}, got values in "
                         f"{tokens.min().item()}..{tokens.max().item()}")
    return tokens


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

class TokenTransformer(nn.Module):
    """An encoder that gives every token of (B, T) a vector of ``num_outputs`` logits (Chapter 7).

    Token embedding, positions (``"none"``, ``"sinusoidal"`` or ``"learned"``), pre-LN blocks, a
    final LayerNorm and a linear head. :meth:`encode` returns the final layer's vectors (B, T, d).
    """

    def __init__(self, vocab_size: int, num_outputs: int, *, dim: int = 32, num_heads: int = 4, ff_dim: int = 64,
                 num_layers: int = 2, max_length: int = 64, positions: str = "sinusoidal", causal: bool = False,
                 seed: int = 0, dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        self.vocab_size = check_int("vocab_size", vocab_size, minimum=1)
        num_outputs = check_int("num_outputs", num_outputs, minimum=1)
        dim, num_heads, ff_dim = _check_block_sizes(dim, num_heads, ff_dim)
        num_layers = check_int("num_layers", num_layers, minimum=1)
        self.causal = check_bool("causal", causal)
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        self.embedding = nn.Embedding(self.vocab_size, dim, dtype=dtype, device=device)
        self.position = _Positions(positions, max_length, dim, dtype, device)
        self.blocks = nn.ModuleList(EncoderBlock(dim, num_heads, ff_dim, dtype=dtype, device=device)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(dim, dtype=dtype, device=device)
        self.head = nn.Linear(dim, num_outputs, dtype=dtype, device=device)
        initialize(self, seed)

    def encode(self, tokens) -> torch.Tensor:
        x = self.position(self.embedding(_check_tokens("tokens", tokens, self.vocab_size)))   # (B, T, d)
        for block in self.blocks:
            x = block(x, causal=self.causal)
        return self.norm(x)

    def forward(self, tokens) -> torch.Tensor:
        return self.head(self.encode(tokens))


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder transformer over ``num_symbols`` symbols, with sinusoidal positions (Chapter 7).

    ``forward(pairs)`` takes (B, 2, T) token ids: row 0 the source, row 1 the decoder's input
    (the begin symbol ``num_symbols`` followed by the target shifted right: teacher forcing), and
    returns (B, T, num_symbols) logits. The decoder's self-attention is causal, so the logits
    at step t depend only on decoder inputs up to t.
    """

    def __init__(self, num_symbols: int, *, dim: int = 32, num_heads: int = 4, ff_dim: int = 64,
                 num_layers: int = 2, max_length: int = 64, seed: int = 0, dtype: torch.dtype = torch.float32,
                 device="cpu"):
        super().__init__()
        self.num_symbols = check_int("num_symbols", num_symbols, minimum=1)
        dim, num_heads, ff_dim = _check_block_sizes(dim, num_heads, ff_dim)
        num_layers = check_int("num_layers", num_layers, minimum=1)
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        self.source_embedding = nn.Embedding(self.num_symbols, dim, dtype=dtype, device=device)
        self.target_embedding = nn.Embedding(self.num_symbols + 1, dim, dtype=dtype, device=device)
        self.position = _Positions("sinusoidal", max_length, dim, dtype, device)
        self.encoder = nn.ModuleList(EncoderBlock(dim, num_heads, ff_dim, dtype=dtype, device=device)
                                     for _ in range(num_layers))
        self.decoder = nn.ModuleList(DecoderBlock(dim, num_heads, ff_dim, dtype=dtype, device=device)
                                     for _ in range(num_layers))
        self.encoder_norm = nn.LayerNorm(dim, dtype=dtype, device=device)
        self.decoder_norm = nn.LayerNorm(dim, dtype=dtype, device=device)
        self.head = nn.Linear(dim, self.num_symbols, dtype=dtype, device=device)
        initialize(self, seed)

    def run(self, pairs) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits (B, T, V) and every decoder layer's cross-attention weights, (B, h, T, T) each."""
        pairs = as_tensor("pairs", pairs, ndim=3)
        if pairs.shape[1] != 2:
            raise ValueError(f"pairs must have shape (B, 2, T): source and decoder input, got {describe(pairs)}")
        source = _check_tokens("pairs[:, 0]", pairs[:, 0], self.num_symbols)
        target_in = _check_tokens("pairs[:, 1]", pairs[:, 1], self.num_symbols + 1)
        memory = self.position(self.source_embedding(source))
        for block in self.encoder:
            memory = block(memory)
        memory = self.encoder_norm(memory)
        y = self.position(self.target_embedding(target_in))
        cross_weights = []
        for block in self.decoder:
            y, weights = block.attend(y, memory)
            cross_weights.append(weights)
        return self.head(self.decoder_norm(y)), cross_weights

    def forward(self, pairs) -> torch.Tensor:
        return self.run(pairs)[0]


def patchify(images, patch_size: int) -> torch.Tensor:
    """Cut (B, C, H, W) images into (B, N, C·P·P) flattened P x P patches, row by row (Chapter 7).

    Each patch is flattened in (channel, row, column) order, the order of a Conv2d kernel, so a
    Linear layer on the patches equals Conv2d(kernel_size=P, stride=P) with reshaped weights.
    """
    images = as_tensor("images", images, ndim=4, floating=True)
    P = check_int("patch_size", patch_size, minimum=1)
    B, C, H, W = images.shape
    if H % P or W % P:
        raise ValueError(f"patch_size must divide the image height and width, got {P} for {H} x {W} images")
    patches = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)   # (B, H/P, W/P, C, P, P)
    return patches.reshape(B, (H // P) * (W // P), C * P * P)


class VisionTransformer(nn.Module):
    """A vision transformer: linear patch embedding, a class token, positions, pre-LN blocks, a head (Chapter 7).

    ``positions`` is ``"learned"`` (a vector per token, class token included) or ``"none"``.
    The head reads the class token's final vector.
    """

    def __init__(self, *, image_size: int = 8, patch_size: int = 2, channels: int = 1, num_classes: int = 10,
                 dim: int = 32, num_heads: int = 4, ff_dim: int = 64, num_layers: int = 2,
                 positions: str = "learned", seed: int = 0, dtype: torch.dtype = torch.float32, device="cpu"):
        super().__init__()
        image_size = check_int("image_size", image_size, minimum=1)
        self.patch_size = check_int("patch_size", patch_size, minimum=1)
        channels = check_int("channels", channels, minimum=1)
        num_classes = check_int("num_classes", num_classes, minimum=1)
        if image_size % self.patch_size:
            raise ValueError(f"patch_size must divide image_size, got {self.patch_size} and {image_size}")
        dim, num_heads, ff_dim = _check_block_sizes(dim, num_heads, ff_dim)
        num_layers = check_int("num_layers", num_layers, minimum=1)
        check_choice("positions", positions, ("none", "learned"))
        dtype, device = check_dtype("dtype", dtype), check_device("device", device)
        self.image_shape = (channels, image_size, image_size)
        self.num_tokens = (image_size // self.patch_size) ** 2 + 1
        self.patch_embedding = nn.Linear(channels * self.patch_size ** 2, dim, dtype=dtype, device=device)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim, dtype=dtype, device=device))
        self.position = _Positions(positions, self.num_tokens, dim, dtype, device)
        self.blocks = nn.ModuleList(EncoderBlock(dim, num_heads, ff_dim, dtype=dtype, device=device)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(dim, dtype=dtype, device=device)
        self.head = nn.Linear(dim, num_classes, dtype=dtype, device=device)
        initialize(self, seed)

    def forward(self, images) -> torch.Tensor:
        images = as_tensor("images", images, floating=True)
        images = images.reshape(len(images), *self.image_shape)                          # flat digits too
        tokens = self.patch_embedding(patchify(images, self.patch_size))                 # (B, N, d)
        x = torch.cat((self.cls_token.expand(len(tokens), -1, -1), tokens), dim=1)       # (B, N + 1, d)
        x = self.position(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


@dataclass(frozen=True)
class VisionRun:
    """A small vision transformer trained on scikit-learn's 8 x 8 digits (every setting that changes the run)."""

    patch_size: int = 2
    positions: str = "learned"
    dim: int = 32
    ff_dim: int = 64
    num_layers: int = 2
    num_heads: int = 4
    epochs: int = 15
    batch_size: int = 64
    lr: float = 3e-3
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self):
        check_choice("positions", self.positions, ("none", "learned"))
        for name in ("patch_size", "dim", "ff_dim", "num_layers", "num_heads", "epochs", "batch_size"):
            check_int(name, getattr(self, name), minimum=1)
        check_float("lr", self.lr, low=0.0, low_open=True)


class VisionResult(NamedTuple):
    """The trained model, its test accuracy and the per-epoch training loss."""

    model: VisionTransformer
    test_accuracy: float
    history: train.History


@train.cached
def train_vision_transformer(config: VisionRun) -> VisionResult:
    """Train a :class:`VisionTransformer` on the bundled digits with Adam; test accuracy (Chapter 7)."""
    c = config
    digits = load_digits(device=c.device, flatten=False)
    model = VisionTransformer(patch_size=c.patch_size, positions=c.positions, dim=c.dim, ff_dim=c.ff_dim,
                              num_layers=c.num_layers, num_heads=c.num_heads, seed=c.seed, device=c.device)
    history = train.fit(model, nn.functional.cross_entropy, torch.optim.Adam(model.parameters(), lr=c.lr),
                        (digits.X_train, digits.y_train), epochs=c.epochs, batch_size=c.batch_size, seed=c.seed)
    return VisionResult(model.eval(), train.evaluate(model, digits.X_test, digits.y_test)["accuracy"], history)


# ---------------------------------------------------------------------------
# Parameter counts of the big models
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class BertConfig:
    """BERT's sizes; the defaults are BERT-base (Devlin et al. 2019)."""

    vocab_size: int = 30_522
    max_positions: int = 512
    num_segments: int = 2
    dim: int = 768
    num_layers: int = 12
    num_heads: int = 12
    ff_dim: int = 3_072
    pooler: bool = True

    def __post_init__(self):
        for name in ("vocab_size", "max_positions", "num_segments", "dim", "num_layers", "num_heads", "ff_dim"):
            check_int(name, getattr(self, name), minimum=1)
        check_bool("pooler", self.pooler)


@dataclass(frozen=True)
class ViTConfig:
    """A vision transformer's sizes; the defaults are ViT-B/16 on 224 x 224 images (Dosovitskiy et al. 2021)."""

    image_size: int = 224
    patch_size: int = 16
    channels: int = 3
    dim: int = 768
    num_layers: int = 12
    num_heads: int = 12
    ff_dim: int = 3_072
    num_classes: int = 1_000

    def __post_init__(self):
        for name in ("image_size", "patch_size", "channels", "dim", "num_layers", "num_heads", "ff_dim",
                     "num_classes"):
            check_int(name, getattr(self, name), minimum=1)
        if self.image_size % self.patch_size:
            raise ValueError(f"patch_size must divide image_size, got {self.patch_size} and {self.image_size}")

    @property
    def num_tokens(self) -> int:
        """Patches plus the class token: (224/16)² + 1 = 197 for ViT-B/16."""
        return (self.image_size // self.patch_size) ** 2 + 1


def encoder_layer_parameter_count(dim: int, ff_dim: int) -> int:
    """Parameters of one encoder layer: attention 4d² + 4d, feed-forward 2·d·f + f + d, two norms 4d (Chapter 7)."""
    dim, ff_dim = check_int("dim", dim, minimum=1), check_int("ff_dim", ff_dim, minimum=1)
    return (4 * dim * dim + 4 * dim) + (2 * dim * ff_dim + ff_dim + dim) + 4 * dim


def bert_parameter_count(config: BertConfig = BertConfig()) -> int:
    """BERT's parameters in closed form: embeddings and their norm, the layers, the pooler (Chapter 7)."""
    if not isinstance(config, BertConfig):
        raise TypeError(f"config must be a BertConfig, got {describe(config)}")
    c = config
    embeddings = (c.vocab_size + c.max_positions + c.num_segments) * c.dim + 2 * c.dim
    pooler = c.dim * c.dim + c.dim if c.pooler else 0
    return embeddings + c.num_layers * encoder_layer_parameter_count(c.dim, c.ff_dim) + pooler


def vit_parameter_count(config: ViTConfig = ViTConfig()) -> int:
    """A vision transformer's parameters in closed form: patch embedding, class token, positions, layers,
    final norm, head (Chapter 7)."""
    if not isinstance(config, ViTConfig):
        raise TypeError(f"config must be a ViTConfig, got {describe(config)}")
    c = config
    patch_embedding = c.channels * c.patch_size ** 2 * c.dim + c.dim
    tokens = c.dim + c.num_tokens * c.dim                                     # class token and positions
    head = 2 * c.dim + c.dim * c.num_classes + c.num_classes                  # final norm and classifier
    return patch_embedding + tokens + c.num_layers * encoder_layer_parameter_count(c.dim, c.ff_dim) + head


def _torch_encoder_layers(num_layers: int, dim: int, num_heads: int, ff_dim: int) -> nn.ModuleList:
    return nn.ModuleList(nn.TransformerEncoderLayer(dim, num_heads, ff_dim, batch_first=True)
                         for _ in range(num_layers))


def build_bert(config: BertConfig = BertConfig()) -> nn.ModuleDict:
    """BERT's modules assembled from torch's layers, for counting (build it inside ``torch.device("meta")``)
    (Chapter 7)."""
    if not isinstance(config, BertConfig):
        raise TypeError(f"config must be a BertConfig, got {describe(config)}")
    c = config
    parts = {"tokens": nn.Embedding(c.vocab_size, c.dim), "positions": nn.Embedding(c.max_positions, c.dim),
             "segments": nn.Embedding(c.num_segments, c.dim), "embedding_norm": nn.LayerNorm(c.dim),
             "layers": _torch_encoder_layers(c.num_layers, c.dim, c.num_heads, c.ff_dim)}
    if c.pooler:
        parts["pooler"] = nn.Linear(c.dim, c.dim)
    return nn.ModuleDict(parts)


def build_vit(config: ViTConfig = ViTConfig()) -> nn.ModuleDict:
    """A vision transformer assembled from torch's layers, for counting (build it inside ``torch.device("meta")``)
    (Chapter 7)."""
    if not isinstance(config, ViTConfig):
        raise TypeError(f"config must be a ViTConfig, got {describe(config)}")
    c = config
    tokens = nn.ParameterDict({"cls_token": nn.Parameter(torch.zeros(1, 1, c.dim)),
                               "positions": nn.Parameter(torch.zeros(1, c.num_tokens, c.dim))})
    return nn.ModuleDict({"patch_embedding": nn.Conv2d(c.channels, c.dim, c.patch_size, stride=c.patch_size),
                          "tokens": tokens,
                          "layers": _torch_encoder_layers(c.num_layers, c.dim, c.num_heads, c.ff_dim),
                          "norm": nn.LayerNorm(c.dim), "head": nn.Linear(c.dim, c.num_classes)})


# ---------------------------------------------------------------------------
# Hahn's lemma: how much one symbol can move the last output
# ---------------------------------------------------------------------------

class Sensitivity(NamedTuple):
    """For each length n: the largest change of the last position's output when one earlier symbol flips."""

    lengths: list[int]
    change: torch.Tensor     # (len(lengths),): mean over sequences of the largest change over flipped positions


@torch.no_grad()
def flip_sensitivity(model: TokenTransformer, lengths, *, num_sequences: int = 4, num_positions: int = 16,
                     seed: int = 0) -> Sensitivity:
    """‖y_n(x') - y_n(x)‖ for binary inputs x and x' that differ in one symbol before the last (Chapter 7).

    For each length n, draws ``num_sequences`` random sequences over the symbols {0, 1}, flips
    ``num_positions`` positions i < n - 1 (chosen at random; all of them if fewer), and records the
    largest change of the final layer's vector at the last position, averaged over the sequences.
    """
    if not isinstance(model, TokenTransformer):
        raise TypeError(f"model must be a TokenTransformer, got {describe(model)}")
    if model.vocab_size < 2:
        raise ValueError("model must have at least the two symbols 0 and 1")
    lengths = check_ints("lengths", lengths, minimum=2)
    num_sequences = check_int("num_sequences", num_sequences, minimum=1)
    num_positions = check_int("num_positions", num_positions, minimum=1)
    gen = generator(seed)
    device = model.head.weight.device
    changes = []
    was_training = model.training
    model.eval()
    for n in lengths:
        X = torch.randint(0, 2, (num_sequences, n), generator=gen)
        count = min(num_positions, n - 1)
        flipped_at = torch.randperm(n - 1, generator=gen)[:count]
        flipped = X[:, None, :].repeat(1, count, 1)                                   # (S, P, n)
        flipped[:, torch.arange(count), flipped_at] = 1 - flipped[:, torch.arange(count), flipped_at]
        batch = torch.cat((X[:, None], flipped), dim=1).reshape(-1, n).to(device)    # (S (P + 1), n)
        last = model.encode(batch)[:, -1].reshape(num_sequences, count + 1, -1)      # (S, P + 1, d)
        change = (last[:, 1:] - last[:, :1]).norm(dim=-1).max(dim=1).values          # (S,)
        changes.append(change.mean().item())
    model.train(was_training)
    return Sensitivity(lengths, torch.tensor(changes, dtype=torch.float64))
