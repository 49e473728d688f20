"""Tests of dlbook.pruning: masks against torch.nn.utils.prune, exact sparsities, pruned weights that stay
zero while training, and iterative pruning with rewinding."""
import copy

import pytest
import torch
import torch.nn.utils.prune as torch_prune
from torch import nn

from dlbook import nets, pruning


def _model(seed=0):
    return nets.mlp((64, 256, 256, 10), dtype=torch.float64, seed=seed)


def _data(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 64, generator=g, dtype=torch.float64), torch.randint(0, 10, (n,), generator=g)


@pytest.mark.parametrize("sparsity", [0.0, 0.3, 0.5, 0.9, 0.98, 1.0])
def test_layer_masks_equal_torch_l1_unstructured(sparsity):
    model = _model()
    ours = pruning.magnitude_masks(pruning.model_weights(model), sparsity, scope="layer")
    for linear, mask in zip(nets.linear_layers(model), ours):
        theirs = torch_prune.l1_unstructured(copy.deepcopy(linear), "weight", amount=sparsity).weight_mask
        assert torch.equal(mask, theirs)
        assert (mask == 0).sum().item() == round(sparsity * mask.numel())


@pytest.mark.parametrize("sparsity", [0.0, 0.5, 0.8, 0.95])
def test_global_masks_equal_torch_global_unstructured(sparsity):
    model = _model(seed=1)
    ours = pruning.magnitude_masks(pruning.model_weights(model), sparsity, scope="global")
    theirs_model = copy.deepcopy(model)
    parameters = [(linear, "weight") for linear in nets.linear_layers(theirs_model)]
    torch_prune.global_unstructured(parameters, pruning_method=torch_prune.L1Unstructured, amount=sparsity)
    for (linear, _), mask in zip(parameters, ours):
        assert torch.equal(mask, linear.weight_mask)
    total = sum(m.numel() for m in ours)
    assert pruning.sparsity_of(ours) == round(sparsity * total) / total
    if 0 < sparsity:  # one threshold, so the layers lose different fractions
        assert len({round(pruning.sparsity_of([m]), 6) for m in ours}) > 1


def test_zero_sparsity_is_bitwise_the_dense_model():
    model = _model(seed=2)
    dense = copy.deepcopy(model)
    pruning.prune_model(model, 0.0)
    X, _ = _data()
    assert torch.equal(model(X), dense(X))


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_pruned_weights_stay_zero_while_training(optimizer):
    model = _model(seed=3)
    masks = pruning.prune_model(model, 0.9, scope="global")
    assert pruning.sparsity_of(pruning.model_weights(model)) == pruning.sparsity_of(masks)
    opt = (torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3) if optimizer == "sgd"
           else torch.optim.Adam(model.parameters(), lr=1e-2))
    X, y = _data()
    before = [w.detach().clone() for w in pruning.model_weights(model)]
    for _ in range(5):
        opt.zero_grad()
        nn.functional.cross_entropy(model(X), y).backward()
        opt.step()
    for w, w0, mask in zip(pruning.model_weights(model), before, masks):
        assert torch.all(w[mask == 0] == 0)
        assert not torch.equal(w[mask == 1], w0[mask == 1])  # the survivors did train


def test_masks_extend_earlier_masks():
    weights = pruning.model_weights(_model(seed=4))
    first = pruning.magnitude_masks(weights, 0.5, scope="global")
    perturbed = [w.detach() + 0.05 * torch.randn(w.shape, generator=torch.Generator().manual_seed(9),
                                                   dtype=w.dtype) for w in weights]
    second = pruning.magnitude_masks(perturbed, 0.75, scope="global", masks=first)
    for a, b in zip(first, second):
        assert torch.all(b[a == 0] == 0)
    assert pruning.sparsity_of(second) == pytest.approx(0.75, abs=1e-4)


def test_random_masks_keep_the_count_per_layer():
    masks = pruning.magnitude_masks(pruning.model_weights(_model()), 0.8, scope="global")
    shuffled = pruning.random_masks_like(masks, seed=1)
    for a, b in zip(masks, shuffled):
        assert a.sum() == b.sum() and not torch.equal(a, b)
    assert all(torch.equal(a, b) for a, b in zip(shuffled, pruning.random_masks_like(masks, seed=1)))


def test_round_sparsities():
    targets = pruning.round_sparsities(0.875, 3)
    assert targets == pytest.approx([0.5, 0.75, 0.875], abs=1e-14)


def test_iterative_magnitude_pruning_rewinds_to_the_initial_weights():
    model = _model(seed=5)
    initial = copy.deepcopy(model.state_dict())
    X, y = _data()
    trained = []

    def train(net):
        trained.append(copy.deepcopy(net.state_dict()))  # the weights each round starts from
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(net(X), y).backward()
            opt.step()

    ticket = pruning.iterative_magnitude_pruning(model, train, 0.875, 3)
    assert ticket.sparsities == pytest.approx([0.5, 0.75, 0.875], abs=1e-4)
    assert all(torch.equal(model.state_dict()[k], initial[k]) for k in initial)  # model untouched
    assert all(torch.equal(ticket.initial_state[k], initial[k]) for k in initial)
    assert [pruning.sparsity_of(m) for m in ticket.round_masks] == ticket.sparsities
    assert all(torch.equal(a, b) for a, b in zip(ticket.round_masks[-1], ticket.masks))
    # Each round's mask prunes everything the previous round pruned.
    for earlier, later in zip(ticket.round_masks, ticket.round_masks[1:]):
        assert all(bool((b[a == 0] == 0).all()) for a, b in zip(earlier, later))
    # Every round restarts from W0 (masked): rewinding, not continued training.
    for state in trained[1:]:
        assert torch.equal(state["0.bias"], initial["0.bias"])
        W, W0 = state["0.weight"], initial["0.weight"]
        assert torch.equal(W[W != 0], W0[W != 0])


def test_bad_inputs():
    weights = pruning.model_weights(_model())
    with pytest.raises(ValueError, match="sparsity"):
        pruning.magnitude_masks(weights, 1.5)
    with pytest.raises(TypeError, match="sparsity"):
        pruning.magnitude_masks(weights, "half")
    with pytest.raises(ValueError, match="scope"):
        pruning.magnitude_masks(weights, 0.5, scope="row")
    with pytest.raises(TypeError, match="weights"):
        pruning.magnitude_masks(weights[0], 0.5)
    with pytest.raises(ValueError, match="masks"):
        pruning.magnitude_masks(weights, 0.5, masks=[torch.ones(2, 2)])
    with pytest.raises(ValueError, match="rounds"):
        pruning.round_sparsities(0.5, 0)
    with pytest.raises(TypeError, match="train"):
        pruning.iterative_magnitude_pruning(_model(), None, 0.5, 2)
    with pytest.raises(TypeError, match="model"):
        pruning.iterative_magnitude_pruning(weights, lambda net: None, 0.5, 2)
    with pytest.raises(TypeError, match="tensors"):
        pruning.sparsity_of("weights")
