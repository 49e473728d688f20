"""Tests of dlbook.group_conv: the split-group trick equals the sum over the group, p4 equivariance, the bias rule."""
import pytest
import torch

from dlbook import equivariance, group_conv, nets


def _randn(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _layers(seed=0):
    return (_randn(5, 2, 3, 3, seed=seed), _randn(5, seed=seed + 1), _randn(4, 5, 4, 3, 3, seed=seed + 2),
            _randn(4, seed=seed + 3))


def _rotate_input(x):
    return group_conv.rotate_images(x, 1)


def _rotate_output(y):
    return group_conv.rotate_p4(y, 1)


def test_rotate_images_per_image_equals_one_call_per_image():
    X = _randn(9, 1, 5, 5)
    k = torch.tensor([0, 1, 2, 3, 4, -1, 2, 1, 0])
    expected = torch.stack([torch.rot90(x, int(turns), dims=(-2, -1)) for x, turns in zip(X, k)])
    assert torch.equal(group_conv.rotate_images(X, k), expected)
    assert torch.equal(group_conv.rotate_images(X, 5), torch.rot90(X, 1, dims=(-2, -1)))


def test_rotate_p4_is_a_group_action():
    y = _randn(2, 3, 4, 5, 5)
    assert torch.equal(group_conv.rotate_p4(group_conv.rotate_p4(y, 1), 3), y)
    assert torch.equal(group_conv.rotate_p4(group_conv.rotate_p4(y, 1), 2), group_conv.rotate_p4(y, 3))


@pytest.mark.parametrize("padding", [0, 1])
def test_split_group_trick_equals_the_sum_over_rotations(padding):
    w1, b1, w2, b2 = _layers()
    x = _randn(3, 2, 9, 9, seed=9)
    lifted = group_conv.lifting_conv(x, w1, b1, padding=padding)
    assert lifted.shape == (3, 5, 4, 9 - 2 + 2 * padding, 9 - 2 + 2 * padding)
    assert (lifted - group_conv.lifting_conv_by_sum(x, w1, b1, padding=padding)).abs().max() < 1e-12
    out = group_conv.group_conv(lifted, w2, b2, padding=padding)
    assert (out - group_conv.group_conv_by_sum(lifted, w2, b2, padding=padding)).abs().max() < 1e-12


def test_filter_banks_hold_the_transformed_filters():
    w1, _, w2, _ = _layers()
    bank = group_conv.lifting_filter_bank(w1)
    assert bank.shape == (20, 2, 3, 3) and torch.equal(bank[4 * 2 + 3], torch.rot90(w1[2], 3, dims=(-2, -1)))
    bank = group_conv.group_filter_bank(w2)
    assert bank.shape == (16, 20, 3, 3)
    # output channel o at rotation r, input channel c at rotation s: rot_r of psi[o, c, s - r]
    o, r, c, s = 1, 2, 3, 0
    expected = torch.rot90(w2[o, c, (s - r) % 4], r, dims=(-2, -1))
    assert torch.equal(bank[4 * o + r, 4 * c + s], expected)


@pytest.mark.parametrize("padding", [0, 1])
def test_lifting_and_group_conv_are_rotation_equivariant(padding):
    w1, b1, w2, b2 = _layers()

    def two_layers(x):
        return group_conv.group_conv(group_conv.lifting_conv(x, w1, b1, padding=padding).relu(), w2, b2,
                                     padding=padding)

    x = _randn(2, 2, 9, 9, seed=5)
    assert equivariance.equivariance_error(two_layers, _rotate_input, _rotate_output, x) < 1e-13
    # the naive action (rotate the maps, leave the rotation axis) is not the right one
    assert equivariance.equivariance_error(two_layers, _rotate_input,
                                           lambda y: torch.rot90(y, 1, dims=(-2, -1)), x) > 0.1


def test_one_bias_per_rotation_breaks_equivariance():
    w1, b1, w2, _ = _layers()
    per_rotation = _randn(4, 4, seed=11)

    def two_layers(x):
        return group_conv.group_conv(group_conv.lifting_conv(x, w1, b1).relu(), w2, per_rotation)

    assert equivariance.equivariance_error(two_layers, _rotate_input, _rotate_output, _randn(2, 2, 9, 9)) > 0.01
    shared = per_rotation[:, :1].expand(4, 4)
    assert equivariance.equivariance_error(
        lambda x: group_conv.group_conv(group_conv.lifting_conv(x, w1, b1).relu(), w2, shared),
        _rotate_input, _rotate_output, _randn(2, 2, 9, 9)) < 1e-13


def test_p4_cnn_is_rotation_invariant_and_has_the_planned_size():
    model = group_conv.p4_cnn((8, 8, 16), pool_after=(1,), dtype=torch.float64)
    assert nets.num_parameters(model) == 7_186
    x = _randn(4, 1, 8, 8)
    assert equivariance.invariance_error(model, _rotate_input, x) < 1e-13
    assert nets.num_parameters(group_conv.rotation_model("cnn")) == 7_450
    assert nets.num_parameters(group_conv.rotation_model("p4")) == 7_186


def test_p4_layers_are_seeded_and_leave_the_global_stream_alone():
    state = torch.random.get_rng_state()
    a, b = group_conv.p4_cnn(seed=3), group_conv.p4_cnn(seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_random_rotation_is_identity_in_evaluation_mode():
    layer = group_conv.RandomRotation(seed=0)
    x = _randn(64, 1, 4, 4)
    rotated = layer(x)
    assert not torch.equal(rotated, x)
    matches = [any(torch.equal(r, torch.rot90(image, k, dims=(-2, -1))) for k in range(4))
               for r, image in zip(rotated, x)]
    assert all(matches)
    layer.eval()
    assert torch.equal(layer(x), x)


def test_bad_arguments():
    w1, b1, w2, b2 = _layers()
    with pytest.raises(ValueError, match="channels"):
        group_conv.lifting_conv(_randn(1, 3, 5, 5), w1)
    with pytest.raises(ValueError, match="square"):
        group_conv.lifting_conv(_randn(1, 2, 5, 6), w1)
    with pytest.raises(ValueError, match="p4 map"):
        group_conv.group_conv(_randn(1, 5, 3, 5, 5), w2)
    with pytest.raises(ValueError, match="bias must have shape"):
        group_conv.group_conv(_randn(1, 5, 4, 5, 5), w2, torch.ones(3))
    with pytest.raises(ValueError, match="weight must have shape"):
        group_conv.group_filter_bank(_randn(2, 2, 3, 3, 3))
    with pytest.raises(TypeError, match="k must hold integers"):
        group_conv.rotate_images(_randn(2, 3, 3), torch.tensor([0.5, 1.0]))
    with pytest.raises(ValueError, match="name"):
        group_conv.rotation_model("resnet")
    with pytest.raises(TypeError, match="frozen dataclass"):
        group_conv.rotation_run({"model": "p4"})
