"""Tests of dlbook.masked_lm: BERT's masking rates, special tokens, the character corpus."""
import math

import pytest
import torch

from dlbook import masked_lm


def _tokens(n=400, t=50, vocab=30, seed=0):
    tokens = torch.randint(3, vocab, (n, t), generator=torch.Generator().manual_seed(seed))
    tokens[:, 0] = 0                                                   # a [CLS] in front of every row
    return tokens


def test_masking_rates_are_binomial_and_special_tokens_untouched():
    tokens = _tokens()
    out = masked_lm.bert_mask(tokens, vocab_size=30, mask_id=2, special_ids=(0, 1), seed=3)
    n = tokens[:, 1:].numel()
    for part, rate in ((out.selected, 0.15), (out.masked, 0.12), (out.randomized, 0.015), (out.kept, 0.015)):
        count = part.sum().item()
        assert abs(count - n * rate) < 3 * math.sqrt(n * rate * (1 - rate))
    assert not out.selected[:, 0].any() and torch.all(out.inputs[:, 0] == 0)
    assert torch.all(out.inputs[out.masked] == 2)
    assert torch.equal(out.inputs[~out.selected], tokens[~out.selected])
    assert torch.equal(out.inputs[out.kept], tokens[out.kept])
    replaced = out.inputs[out.randomized]
    assert replaced.min() >= 3 and replaced.max() < 30                # random replacements are never special


def test_masking_is_seeded():
    tokens = _tokens()
    a = masked_lm.bert_mask(tokens, vocab_size=30, mask_id=2, seed=1)
    b = masked_lm.bert_mask(tokens, vocab_size=30, mask_id=2, seed=1)
    c = masked_lm.bert_mask(tokens, vocab_size=30, mask_id=2, seed=2)
    assert torch.equal(a.inputs, b.inputs) and not torch.equal(a.selected, c.selected)


def test_corpus_vocabulary_and_windows():
    text = masked_lm.pydoc_text(5000)
    assert len(text) == 5000
    vocabulary = masked_lm.CharVocabulary.from_text(text)
    assert vocabulary.symbols[:3] == masked_lm.SPECIAL_TOKENS and vocabulary.special_ids == (0, 1, 2)
    ids = vocabulary.encode(text)
    assert vocabulary.decode(ids[:100]) == text[:100]
    windows = masked_lm.text_windows(ids, 16, 10, cls_id=vocabulary.id("[CLS]"), seed=0)
    assert windows.shape == (10, 17) and torch.all(windows[:, 0] == 0)
    starts = [text.find(vocabulary.decode(row[1:])) for row in windows]
    assert all(start >= 0 for start in starts)


def test_a_short_masked_lm_run_beats_the_unigram_guess():
    result = masked_lm.train_masked_lm(masked_lm.MaskedLMRun(length=16, dim=32, ff_dim=64, steps=80,
                                                              train_chars=20_000, test_chars=5_000, num_test=300))
    assert result.unigram_accuracy < 0.3 and result.accuracy > result.unigram_accuracy


def test_bad_arguments():
    tokens = _tokens(4, 5)
    with pytest.raises(TypeError, match="tokens must hold integer"):
        masked_lm.bert_mask(tokens.double(), vocab_size=30, mask_id=2)
    with pytest.raises(ValueError, match="tokens must lie"):
        masked_lm.bert_mask(tokens, vocab_size=10, mask_id=2)
    with pytest.raises(ValueError, match="mask_prob \\+ random_prob"):
        masked_lm.bert_mask(tokens, vocab_size=30, mask_id=2, mask_prob=0.8, random_prob=0.3)
    with pytest.raises(ValueError, match="mask_id must be <="):
        masked_lm.bert_mask(tokens, vocab_size=30, mask_id=30)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        masked_lm.CharVocabulary.from_text("abc").encode("abd")
    with pytest.raises(ValueError, match="length must be <="):
        masked_lm.text_windows(torch.arange(5), 6, 2, cls_id=0)
