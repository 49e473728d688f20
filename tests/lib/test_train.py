from dataclasses import dataclass

import pytest
import torch

from dlbook import data, train


def _problem():
    X, y = data.gaussian_blobs(200, num_classes=2, spread=0.5, seed=0)
    model = torch.nn.Linear(2, 2)
    return X, y, model


def test_fit_learns_separable_blobs_and_records_history():
    torch.manual_seed(0)
    X, y, model = _problem()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    history = train.fit(model, torch.nn.functional.cross_entropy, optimizer, (X, y), epochs=30,
                        batch_size=32, val_data=(X, y), metrics={"accuracy": train.accuracy})
    assert history.num_epochs == 30
    assert history["train_loss"][-1] < 0.5 * history["train_loss"][0]
    assert history["val_accuracy"][-1] > 0.95
    assert "train_accuracy" in history


def test_fit_is_reproducible():
    runs = []
    for _ in range(2):
        torch.manual_seed(1)
        X, y, model = _problem()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        runs.append(train.fit(model, torch.nn.functional.cross_entropy, optimizer, (X, y),
                              epochs=3, batch_size=16, seed=5)["train_loss"])
    assert runs[0] == runs[1]


def test_accuracy_for_one_output_and_for_classes():
    assert train.accuracy(torch.tensor([[2.0, 1.0], [0.0, 3.0]]), torch.tensor([0, 0])) == 0.5
    assert train.accuracy(torch.tensor([1.0, -1.0, 2.0]), torch.tensor([1, 0, 0])) == pytest.approx(2 / 3)


def test_history_reports_unknown_metric():
    with pytest.raises(KeyError, match="val_loss"):
        train.History()["val_loss"]


@pytest.mark.parametrize("kwargs, match", [
    ({"epochs": 0}, "epochs"),
    ({"epochs": 1, "batch_size": 0}, "batch_size"),
    ({"epochs": 1, "train_data": "abc"}, "train_data"),
    ({"epochs": 1, "train_data": (torch.zeros(3, 2), torch.zeros(2))}, "train_data"),
    ({"epochs": 1, "val_data": (torch.zeros(3, 2),)}, "val_data"),
])
def test_bad_arguments(kwargs, match):
    X, y, model = _problem()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    arguments = {"train_data": (X, y), **kwargs}
    train_data = arguments.pop("train_data")
    with pytest.raises((TypeError, ValueError), match=match):
        train.fit(model, torch.nn.functional.cross_entropy, optimizer, train_data, **arguments)


def test_evaluate_defaults_to_accuracy_and_takes_a_loss():
    X, y, model = _problem()
    model.train()
    scores = train.evaluate(model, X, y)
    assert set(scores) == {"accuracy"} and 0 <= scores["accuracy"] <= 1
    with_loss = train.evaluate(model, X, y, loss_fn=torch.nn.functional.cross_entropy)
    assert set(with_loss) == {"loss"}
    assert with_loss["loss"] == pytest.approx(torch.nn.functional.cross_entropy(model(X), y).item())
    assert model.training, "evaluate restores the training mode"


def test_fit_hands_extra_tensors_of_the_batch_to_the_loss():
    X, y, model = _problem()
    weights = torch.linspace(0.5, 1.5, len(X))
    seen = []

    def weighted_loss(logits, targets, batch_weights):
        seen.append(len(batch_weights))
        per_example = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
        return (batch_weights * per_example).mean()

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    history = train.fit(model, weighted_loss, optimizer, (X, y, weights), epochs=2, batch_size=64,
                        val_data=(X, y, weights))
    assert seen[:4] == [64, 64, 64, 8] and "val_loss" in history
    with pytest.raises(ValueError, match=r"train_data\[2\]"):
        train.fit(model, weighted_loss, optimizer, (X, y, weights[:5]), epochs=1)


@dataclass(frozen=True)
class _Config:
    width: int
    seed: int = 0


def test_cached_runs_train_once_per_config_and_return_copies(monkeypatch):
    monkeypatch.setattr(train, "RUNS", {})
    calls = []

    @train.cached
    def run(config):
        calls.append(config)
        return {"weights": torch.full((2,), float(config.width))}

    first = run(_Config(3))
    first["weights"][0] = -1.0
    again = run(_Config(3))
    assert calls == [_Config(3)] and again["weights"].tolist() == [3.0, 3.0]
    run(_Config(3, seed=1))
    assert len(calls) == 2
    with pytest.raises(TypeError, match="frozen dataclass"):
        run({"width": 3})
    train.clear_cache()
    assert train.RUNS == {}
