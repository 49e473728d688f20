"""Tests of dlbook.seq2seq: tasks, the recurrent encoder-decoder, greedy decoding, cached runs."""
import pytest
import torch

from dlbook import seq2seq


def test_tasks_and_teacher_forcing():
    X, Y = seq2seq.sequence_task("reverse", 5, 6, 4, seed=1)
    assert torch.equal(Y, X.flip(1)) and X.max() < 4
    X, Y = seq2seq.sequence_task("sort", 5, 6, 4, seed=1)
    assert torch.equal(Y, X.sort(1).values)
    pairs = seq2seq.teacher_forcing_pairs(X, Y, 4)
    assert pairs.shape == (5, 2, 6) and torch.equal(pairs[:, 0], X)
    assert torch.all(pairs[:, 1, 0] == 4) and torch.equal(pairs[:, 1, 1:], Y[:, :-1])


@pytest.mark.parametrize("attention, encoder", [(False, "recurrent"), (True, "recurrent"), (True, "positions")])
def test_recurrent_decoder_is_causal_and_attention_is_a_distribution(attention, encoder):
    model = seq2seq.RecurrentSeq2Seq(5, embed_dim=8, hidden_size=6, attention=attention, encoder=encoder,
                                     dtype=torch.float64)
    X, Y = seq2seq.sequence_task("reverse", 3, 7, 5)
    pairs = seq2seq.teacher_forcing_pairs(X, Y, 5)
    changed = pairs.clone()
    changed[:, 1, 4:] = (changed[:, 1, 4:] + 1) % 5
    logits, weights = model.run(pairs)
    assert logits.shape == (3, 7, 5)
    assert torch.equal(logits[:, :4], model(changed)[:, :4])
    if attention:
        assert weights.shape == (3, 7, 7) and (weights.sum(-1) - 1).abs().max() < 1e-14
    else:
        assert weights is None


def test_greedy_decoding_feeds_predictions_back():
    class Echo(torch.nn.Module):
        """Outputs at step t the decoder input at step t plus one: greedy decoding counts up from begin."""

        def forward(self, pairs):
            return torch.nn.functional.one_hot((pairs[:, 1] + 1) % 9, 9).double()

    X = torch.zeros(2, 5, dtype=torch.long)
    assert torch.equal(seq2seq.greedy_decode(Echo(), X, 3), torch.tensor([[4, 5, 6, 7, 8]] * 2))


def test_accuracies_and_alignment():
    Y = torch.tensor([[1, 2, 3], [4, 5, 6]])
    predicted = torch.tensor([[1, 2, 3], [4, 0, 6]])
    assert seq2seq.token_accuracy(predicted, Y) == pytest.approx(5 / 6)
    assert seq2seq.sequence_accuracy(predicted, Y) == 0.5
    anti = torch.eye(4, dtype=torch.float64).flip(1)[None].repeat(2, 1, 1)
    assert seq2seq.mirror_alignment(anti) == 1.0 and seq2seq.mirror_alignment(torch.eye(4)[None]) == 0.0


def test_a_short_cached_run_learns_and_is_reused():
    config = seq2seq.TaskRun("tagger", task="sort", length=4, num_symbols=3, dim=16, ff_dim=32, steps=60,
                             batch_size=32, epochs=2, num_test=200)
    first = seq2seq.train_task(config)
    assert first.token_accuracy > 0.6 and first.history.num_epochs == 2
    again = seq2seq.train_task(config)
    assert again.token_accuracy == first.token_accuracy and again.model is not first.model


def test_bad_arguments():
    with pytest.raises(ValueError, match="task must be one of"):
        seq2seq.sequence_task("copy", 2, 3)
    with pytest.raises(ValueError, match="same shape"):
        seq2seq.teacher_forcing_pairs(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="model must be one of"):
        seq2seq.TaskRun("lstm")
    with pytest.raises(ValueError, match="epochs must divide"):
        seq2seq.TaskRun("gru", steps=3, batch_size=1, epochs=2)
    with pytest.raises(ValueError, match="use it with attention=True"):
        seq2seq.RecurrentSeq2Seq(4, attention=False, encoder="positions")
    with pytest.raises(ValueError, match="pairs must be integer tokens"):
        seq2seq.RecurrentSeq2Seq(4)(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="weights must be"):
        seq2seq.mirror_alignment(torch.zeros(2, 3, 4))
    with pytest.raises(TypeError, match="config must be a TaskRun"):
        seq2seq.build_model({"model": "gru"})
