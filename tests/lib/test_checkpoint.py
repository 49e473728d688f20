"""Tests of dlbook.checkpoint: each relation passes, fails, prints and records."""
import json

import numpy as np
import pytest
import torch

from dlbook import checkpoint


@pytest.fixture(autouse=True)
def fresh_records(monkeypatch):
    monkeypatch.setattr(checkpoint, "RECORDS", [])


def test_close_passes_prints_and_records(capsys):
    assert checkpoint.close("capacity", torch.tensor(0.149), 0.138, atol=0.025) is None
    [record] = checkpoint.RECORDS
    assert record.passed
    line = capsys.readouterr().out.strip()
    assert line == "✅ capacity: 0.149 (expected 0.138 ± 0.025)"
    assert record.measured == pytest.approx(0.149) and record.reference == 0.138


def test_close_fails_with_the_same_line():
    with pytest.raises(AssertionError, match=r"❌ rate: 0.5 \(expected 0.4 within 10%\)"):
        checkpoint.close("rate", 0.5, 0.4, rtol=0.1)
    assert checkpoint.RECORDS[-1].passed is False


def test_close_needs_a_tolerance():
    with pytest.raises(ValueError, match="tolerance"):
        checkpoint.close("x", 1.0, 1.0)


def test_bounds_and_between(capsys):
    checkpoint.below("updates / bound", 0.2, 1.0)
    checkpoint.above("accuracy", np.float64(0.97), 0.95)
    checkpoint.between("fraction", 0.5, 0.45, 0.55, detail="N = 2d")
    out = capsys.readouterr().out
    assert "(bound: at most 1)" in out and "(bound: at least 0.95)" in out
    assert "(expected between 0.45 and 0.55); N = 2d" in out
    with pytest.raises(AssertionError):
        checkpoint.below("too big", 2.0, 1.0)
    with pytest.raises(AssertionError):
        checkpoint.between("outside", 0.6, 0.45, 0.55)
    with pytest.raises(ValueError, match="low"):
        checkpoint.between("bad", 0.5, 1.0, 0.0)


def test_holds_takes_a_boolean(capsys):
    checkpoint.holds("ordering", torch.tensor(True), "IBP <= PGD")
    assert capsys.readouterr().out.strip() == "✅ ordering: IBP <= PGD"
    with pytest.raises(AssertionError, match="❌ ordering"):
        checkpoint.holds("ordering", False)
    with pytest.raises(TypeError, match="condition"):
        checkpoint.holds("ordering", 1)


def test_bad_measurements_are_named():
    with pytest.raises(ValueError, match="measured is NaN"):
        checkpoint.below("x", float("nan"), 1.0)
    with pytest.raises(ValueError, match="measured must be one number"):
        checkpoint.below("x", torch.ones(3), 1.0)
    with pytest.raises(TypeError, match="label"):
        checkpoint.below("", 0.0, 1.0)
    with pytest.raises(TypeError, match="bound"):
        checkpoint.below("x", 0.0, "1")


def test_records_go_to_the_log_file(tmp_path, monkeypatch):
    log = tmp_path / "checkpoints.jsonl"
    monkeypatch.setenv(checkpoint.LOG_ENV, str(log))
    checkpoint.close("a", 1.0, 1.0, rtol=1e-9)
    checkpoint.holds("b", True)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [row["label"] for row in rows] == ["a", "b"]
    assert rows[0]["relation"] == "close" and rows[0]["rtol"] == 1e-9 and rows[1]["passed"] is True


@pytest.mark.slow
def test_in_a_kernel_the_output_carries_the_record():
    """The executed notebook holds each record in an empty output's metadata, after the printed line."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    code = ("from dlbook import checkpoint\n"
            "print('before')\n"
            "checkpoint.close('two plus two', 2 + 2, 4, atol=1e-12)\n"
            "checkpoint.below('no bound at all', 3.0, float('inf'))\n"
            "checkpoint.between('a fraction', 0.25, 0, 1)")  # last line: no Record shown after it
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbclient.NotebookClient(notebook, timeout=60, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    printed = "".join(out["text"] for out in outputs if out["output_type"] == "stream")
    carriers = [out for out in outputs if out["output_type"] != "stream"]
    assert len(carriers) == 3, "one record per checkpoint, and no Record repr for the last line"
    assert all(out["output_type"] == "display_data" and out["data"] == {"text/html": ""} for out in carriers)
    records = [out["metadata"][checkpoint.METADATA_KEY] for out in carriers]
    assert [r["label"] for r in records] == ["two plus two", "no bound at all", "a fraction"]
    assert records[0]["reference"] == 4 and records[0]["atol"] == 1e-12 and records[2]["high"] == 1
    assert records[1]["high"] == "inf", "an infinite bound must reach the notebook as JSON"
    lines = [checkpoint.Record(**record).line() for record in records]
    assert printed == "before\n" + "".join(line + "\n" for line in lines)
