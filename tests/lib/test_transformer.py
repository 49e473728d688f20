"""Tests of dlbook.transformer: encodings, blocks against torch's layers, models, parameter counts."""
import math

import pytest
import torch

from dlbook import nets, transformer


def _randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_sinusoidal_encoding_pairs_sines_and_cosines():
    P = transformer.sinusoidal_encoding(50, 16)
    omega = 10_000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    t = torch.arange(50, dtype=torch.float64)[:, None]
    assert torch.allclose(P[:, 0::2], torch.sin(t * omega), atol=0, rtol=0)
    assert torch.allclose(P[:, 1::2], torch.cos(t * omega), atol=0, rtol=0)
    assert transformer.frequencies(16)[0] == 1.0
    assert ((P ** 2).sum(1) - 8).abs().max() < 1e-13


def test_relative_rotation_moves_encodings_along():
    P = transformer.sinusoidal_encoding(100, 64)
    for offset in (1, 7, 30):
        R = transformer.relative_rotation(offset, 64)
        assert (P[:-offset] @ R - P[offset:]).abs().max() < 1e-12
        assert (P[:-offset] @ R.T - P[offset:]).abs().max() > 0.5       # the transposed block is wrong
        assert torch.allclose(R @ R.T, torch.eye(64, dtype=torch.float64), atol=1e-14)
    dots = (P[:-5] * P[5:]).sum(1)
    assert (dots - torch.cos(5 * transformer.frequencies(64)).sum()).abs().max() < 1e-12


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_encoder_block_matches_torch(norm_first, dtype, tol):
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first,
                                             dtype=dtype).eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.1 * _randn(*p.shape, seed=p.numel(), dtype=dtype))
    block = transformer.block_from_torch(layer)
    X = _randn(3, 7, 16, dtype=dtype)
    with torch.no_grad():
        assert (block(X) - layer(X)).abs().max() < tol
        causal = torch.ones(7, 7, dtype=torch.bool).triu(1)
        assert (block(X, causal=True) - layer(X, src_mask=causal)).abs().max() < tol


@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_block_matches_torch(norm_first):
    layer = torch.nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first,
                                             dtype=torch.float64).eval()
    block = transformer.block_from_torch(layer)
    Y, memory = _randn(2, 5, 16), _randn(2, 9, 16, seed=1)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    with torch.no_grad():
        assert (block(Y, memory) - layer(Y, memory, tgt_mask=causal)).abs().max() < 1e-12


def test_models_are_seeded_and_without_positions_permutation_equivariant():
    a = transformer.TokenTransformer(5, 3, positions="none", seed=1, dtype=torch.float64)
    b = transformer.TokenTransformer(5, 3, positions="none", seed=1, dtype=torch.float64)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    X = torch.randint(0, 5, (4, 10), generator=torch.Generator().manual_seed(0))
    perm = torch.randperm(10, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (a(X[:, perm]) - a(X)[:, perm]).abs().max() < 1e-12
        positioned = transformer.TokenTransformer(5, 3, positions="sinusoidal", dtype=torch.float64)
        assert (positioned(X[:, perm]) - positioned(X)[:, perm]).abs().max() > 1e-3


def test_seq2seq_decoder_is_causal():
    model = transformer.Seq2SeqTransformer(6, dim=16, ff_dim=32, dtype=torch.float64).eval()
    pairs = torch.randint(0, 6, (3, 2, 8), generator=torch.Generator().manual_seed(0))
    changed = pairs.clone()
    changed[:, 1, 5:] = (changed[:, 1, 5:] + 1) % 6
    with torch.no_grad():
        assert torch.equal(model(pairs)[:, :5], model(changed)[:, :5])
        assert not torch.equal(model(pairs)[:, 5:], model(changed)[:, 5:])
    source = pairs.clone()
    source[:, 0, 7] = (source[:, 0, 7] + 1) % 6                   # the encoder sees the whole source
    with torch.no_grad():
        assert not torch.equal(model(pairs)[:, 0], model(source)[:, 0])


def test_patch_embedding_equals_a_strided_convolution():
    images = _randn(5, 3, 8, 8)
    conv = torch.nn.Conv2d(3, 12, 2, stride=2, dtype=torch.float64)
    linear = torch.nn.Linear(12, 12, dtype=torch.float64)
    with torch.no_grad():
        linear.weight.copy_(conv.weight.reshape(12, -1))
        linear.bias.copy_(conv.bias)
        via_conv = conv(images).flatten(2).transpose(1, 2)              # (B, 16, 12)
        assert (linear(transformer.patchify(images, 2)) - via_conv).abs().max() < 1e-13


def test_vision_transformer_runs_on_flat_digits_and_is_counted():
    model = transformer.VisionTransformer()
    assert model(torch.rand(4, 64)).shape == (4, 10)
    config = transformer.ViTConfig(image_size=8, patch_size=2, channels=1, dim=32, num_layers=2, num_heads=4,
                                   ff_dim=64, num_classes=10)
    assert nets.num_parameters(model) == transformer.vit_parameter_count(config)
    assert nets.num_parameters(transformer.VisionTransformer(positions="none")) == \
        transformer.vit_parameter_count(config) - config.num_tokens * config.dim


def test_parameter_counts_of_the_big_models():
    assert transformer.encoder_layer_parameter_count(768, 3072) == 7_087_872
    block = transformer.EncoderBlock(24, 4, 40)
    assert nets.num_parameters(block) == transformer.encoder_layer_parameter_count(24, 40)
    assert transformer.bert_parameter_count() == 109_482_240
    assert transformer.vit_parameter_count() == 86_567_656
    assert transformer.ViTConfig().num_tokens == 197
    with torch.device("meta"):
        bert, vit = transformer.build_bert(), transformer.build_vit()
    assert nets.num_parameters(bert) == 109_482_240 and nets.num_parameters(vit) == 86_567_656
    small = transformer.BertConfig(vocab_size=100, max_positions=16, dim=8, num_layers=3, num_heads=2, ff_dim=12,
                                   pooler=False)
    with torch.device("meta"):
        assert nets.num_parameters(transformer.build_bert(small)) == transformer.bert_parameter_count(small)


def test_flip_sensitivity_falls_with_length():
    model = transformer.TokenTransformer(2, 2, max_length=256, dtype=torch.float64)
    result = transformer.flip_sensitivity(model, [8, 32, 128], num_sequences=2, num_positions=4)
    assert result.lengths == [8, 32, 128]
    slope = (math.log(result.change[-1]) - math.log(result.change[0])) / math.log(16)
    assert -1.4 < slope < -0.6


def test_bad_arguments():
    with pytest.raises(ValueError, match="dim must be even"):
        transformer.sinusoidal_encoding(4, 5)
    with pytest.raises(ValueError, match="num_heads must divide dim"):
        transformer.EncoderBlock(10, 3, 8)
    with pytest.raises(ValueError, match="positions must be one of"):
        transformer.TokenTransformer(4, 4, positions="rotary")
    with pytest.raises(ValueError, match="tokens must lie"):
        transformer.TokenTransformer(4, 4)(torch.tensor([[0, 4]]))
    with pytest.raises(TypeError, match="tokens must hold integer"):
        transformer.TokenTransformer(4, 4)(torch.zeros(1, 2))
    with pytest.raises(ValueError, match="at most max_length"):
        transformer.TokenTransformer(4, 4, max_length=3)(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="patch_size must divide"):
        transformer.patchify(torch.zeros(1, 1, 8, 8), 3)
    with pytest.raises(ValueError, match="pairs must have shape"):
        transformer.Seq2SeqTransformer(4)(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="layer must be"):
        transformer.block_from_torch(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="ReLU"):
        transformer.block_from_torch(torch.nn.TransformerEncoderLayer(8, 2, 16, activation="gelu"))
    with pytest.raises(ValueError, match="patch_size must divide image_size"):
        transformer.ViTConfig(image_size=10, patch_size=3)
    with pytest.raises(TypeError, match="config must be a BertConfig"):
        transformer.bert_parameter_count(transformer.ViTConfig())
    with pytest.raises(TypeError, match="model must be a TokenTransformer"):
        transformer.flip_sensitivity(torch.nn.Linear(2, 2), [4])
