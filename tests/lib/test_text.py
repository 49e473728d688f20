"""Tests of dlbook.text: the frozen corpus, encoding, windows, the character model and sampling (Chapter 6)."""
import sys

import pytest
import torch

from dlbook import text


@pytest.fixture(scope="module")
def corpus():
    return text.load_corpus()


def test_the_frozen_corpus_has_its_length_and_alphabet(corpus):
    assert len(corpus) == text.CORPUS_LENGTH == 200_000
    assert corpus.startswith('The "assert" statement')
    assert len(text.vocabulary(corpus)) == 100


def test_a_missing_corpus_file_falls_back_to_this_pythons_topics(monkeypatch, tmp_path):
    monkeypatch.setattr(text, "CORPUS_PATH", tmp_path / "missing.txt")
    with pytest.warns(UserWarning, match="missing"):
        fallback = text.load_corpus()
    assert len(fallback) == text.CORPUS_LENGTH and fallback == text.pydoc_topics_text()[:text.CORPUS_LENGTH]


@pytest.mark.skipif(sys.version_info[:3] != (3, 11, 7), reason="the help topics change between Python versions")
def test_the_corpus_is_the_start_of_this_pythons_help_topics(corpus):
    full = text.pydoc_topics_text()
    assert len(full) == 464_970 and full.startswith(corpus)


def test_encoding_round_trips_and_rejects_unknown_characters(corpus):
    vocab = text.vocabulary(corpus)
    ids = vocab.encode(corpus[:5000])
    assert ids.dtype == torch.long and vocab.decode(ids) == corpus[:5000]
    assert vocab.symbols == "".join(sorted(set(corpus)))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        vocab.encode("naïve")
    with pytest.raises(ValueError, match="ids"):
        vocab.decode(torch.tensor([0, len(vocab)]))


def test_windows_are_shifted_by_one_character():
    ids = torch.arange(100)
    X, Y = text.random_windows(ids, 10, 7, seed=1)
    assert X.shape == Y.shape == (7, 10) and torch.equal(Y, X + 1)
    assert torch.equal(X, text.random_windows(ids, 10, 7, seed=1).X)
    X, Y = text.consecutive_windows(ids, 10)
    assert X.shape == (9, 10) and torch.equal(X.flatten(), torch.arange(90)) and torch.equal(Y, X + 1)


def test_the_character_model_predicts_every_position_and_its_loss_starts_near_log_v():
    model = text.CharModel(30, kind="gru", hidden_size=16, seed=2)
    ids = torch.randint(30, (4, 12), generator=torch.Generator().manual_seed(0))
    logits = model(ids)
    assert logits.shape == (4, 12, 30)
    assert abs(text.sequence_loss(logits, ids).item() - torch.log(torch.tensor(30.0)).item()) < 0.5
    stepped, _ = model.step(ids[:, :5])
    torch.testing.assert_close(stepped, logits[:, :5])  # causal: a prefix gives the same predictions


def test_sampling_is_reproducible_and_temperature_sharpens(corpus):
    vocab = text.vocabulary(corpus)
    model = text.CharModel(len(vocab), hidden_size=8, seed=0)
    a = text.sample(model, vocab, "The ", 40, temperature=0.8, seed=3)
    assert len(a) == 40 and a == text.sample(model, vocab, "The ", 40, temperature=0.8, seed=3)
    assert a != text.sample(model, vocab, "The ", 40, temperature=0.8, seed=4)
    logits = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    cold = text.temperature_probabilities(logits, 0.01)
    torch.testing.assert_close(cold, torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64))
    torch.testing.assert_close(text.temperature_probabilities(logits, 1.0), torch.softmax(logits, 0))
    hot = text.temperature_probabilities(logits, 1e6)
    torch.testing.assert_close(hot, torch.full((3,), 1 / 3, dtype=torch.float64), rtol=0, atol=1e-5)


def test_bad_arguments_are_named(corpus):
    with pytest.raises(ValueError, match="temperature"):
        text.temperature_probabilities(torch.zeros(3), 0.0)
    with pytest.raises(ValueError, match="ids must be longer"):
        text.random_windows(torch.arange(5), 10, 2)
    with pytest.raises(TypeError, match="ids must be integer"):
        text.consecutive_windows(torch.zeros(50), 10)
    with pytest.raises(ValueError, match="kind"):
        text.CharModel(10, kind="transformer")
    with pytest.raises(TypeError, match="model"):
        text.sample(torch.nn.Linear(2, 2), text.vocabulary("ab"), "a", 3)
    with pytest.raises(ValueError, match="repeat"):
        text.Vocabulary("aab")
