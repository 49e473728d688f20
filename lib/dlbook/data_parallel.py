"""Data-parallel training: DistributedDataParallel in real processes, and local SGD simulated (Chapter 15).

Each rank holds a copy of the model and a shard of every global batch; after the backward
pass DistributedDataParallel all-reduces the gradients and divides by the number of ranks,
so every rank applies the same averaged gradient and the copies stay identical. The
average of per-rank *mean* gradients is the mean gradient of the global batch only when
the shards have equal sizes; with unequal shards the shard-size-weighted average is.

The rank function lives here rather than in a notebook because the ``spawn`` start method
(the default on macOS and the one that is safe in Jupyter) pickles it by module and name.
:func:`spawn_data_parallel` launches it with ``torch.multiprocessing.spawn`` and a file
rendezvous (no TCP port); ``python -m dlbook.data_parallel`` runs the same code under
PyTorch's launcher, ``torchrun`` (environment-variable rendezvous). Each rank writes its
results to a file, since spawn returns nothing. Comparisons run in float64.

:func:`local_sgd` simulates K workers in one process: each takes H SGD steps on its own
shard, then the parameters are averaged, which with H = 1 and equal shards is synchronous
mini-batch SGD and with size weighting and full participation is federated averaging.
"""
from __future__ import annotations

import copy
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from .nets import mlp, model_with_parameters
from .runtime import generator
from .train import accuracy
from .validation import (
    as_tensor,
    check_choice,
    check_class_indices,
    check_dtype,
    check_float,
    check_int,
    check_ints,
    check_same_length,
    describe,
)

_INPUTS = "inputs.pt"


@dataclass(frozen=True)
class DataParallelRun:
    """A data-parallel run: an MLP trained by SGD on consecutive global batches of the data (Chapter 15).

    Global batch t is rows t·B .. (t+1)·B - 1 with B = sum(shard_sizes); rank k takes the
    ``shard_sizes[k]`` rows after those of ranks 0..k-1. The world size is len(shard_sizes).
    """
    widths: tuple[int, ...] = (64, 32, 10)
    shard_sizes: tuple[int, ...] = (64, 64)
    num_steps: int = 3
    lr: float = 0.1
    seed: int = 0
    dtype: torch.dtype = torch.float64

    def __post_init__(self):
        object.__setattr__(self, "widths", tuple(check_ints("widths", self.widths, minimum=1, min_length=2)))
        object.__setattr__(self, "shard_sizes", tuple(check_ints("shard_sizes", self.shard_sizes, minimum=1)))
        check_int("num_steps", self.num_steps, minimum=0)
        check_float("lr", self.lr, low=0.0)
        check_int("seed", self.seed, minimum=0)
        check_dtype("dtype", self.dtype)

    @property
    def world_size(self) -> int:
        return len(self.shard_sizes)

    @property
    def global_batch_size(self) -> int:
        return sum(self.shard_sizes)


class RankResult(NamedTuple):
    """What one rank (or the single-process reference) measured (Chapter 15)."""
    local_gradient: list[torch.Tensor]    # gradient of the mean loss on its own shard of batch 0, not reduced
    gradient: list[torch.Tensor]          # the gradient it applies on batch 0 (after DDP's all-reduce)
    parameters: list[torch.Tensor]        # the parameters after num_steps SGD steps


def _check_data(config: DataParallelRun, X, y) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(config, DataParallelRun):
        raise TypeError(f"config must be a DataParallelRun, got {describe(config)}")
    X = as_tensor("X", X, shape=(None, config.widths[0]), floating=True)
    y = check_class_indices("y", y, config.widths[-1])
    check_same_length("X", X, "y", y)
    needed = config.global_batch_size * max(config.num_steps, 1)
    if len(X) < needed:
        raise ValueError(f"X must have at least {needed} rows (num_steps global batches of "
                         f"{config.global_batch_size}), got {len(X)}")
    return X.to(config.dtype), y


def _batch(config: DataParallelRun, X, y, step: int, rank: int | None):
    """Rows of global batch ``step``: all of them (rank None) or rank's shard."""
    start = step * config.global_batch_size
    if rank is None:
        stop = start + config.global_batch_size
    else:
        start += sum(config.shard_sizes[:rank])
        stop = start + config.shard_sizes[rank]
    return X[start:stop], y[start:stop]


def _gradients(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters()]


def _train(model: nn.Module, ddp_model: nn.Module, config: DataParallelRun, X, y, rank: int | None) -> RankResult:
    """The shared body of every rank and of the reference: two gradients, then num_steps SGD steps."""
    loss_fn = nn.functional.cross_entropy
    Xb, yb = _batch(config, X, y, 0, rank)
    no_sync = getattr(ddp_model, "no_sync", None)
    if no_sync is None:
        loss_fn(ddp_model(Xb), yb).backward()
    else:
        with no_sync():  # accumulate locally, without the all-reduce
            loss_fn(ddp_model(Xb), yb).backward()
    local = _gradients(model)
    model.zero_grad()
    loss_fn(ddp_model(Xb), yb).backward()
    reduced = _gradients(model)
    model.zero_grad()
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=config.lr)
    for step in range(config.num_steps):
        Xb, yb = _batch(config, X, y, step, rank)
        optimizer.zero_grad()
        loss_fn(ddp_model(Xb), yb).backward()
        optimizer.step()
    return RankResult(local, reduced, [p.detach().clone() for p in model.parameters()])


def single_process_run(config: DataParallelRun, X, y) -> RankResult:
    """The same run in one process on whole global batches: what the ranks must reproduce (Chapter 15).

    Its local and applied gradients are both the gradient of the mean loss on batch 0.
    """
    X, y = _check_data(config, X, y)
    model = mlp(config.widths, seed=config.seed, dtype=config.dtype)
    return _train(model, model, config, X, y, None)


def _run_rank(rank: int, world_size: int, init_method: str, outdir: str, config: DataParallelRun, X, y) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world_size)
    try:
        model = mlp(config.widths, seed=config.seed, dtype=config.dtype)
        ddp_model = nn.parallel.DistributedDataParallel(model)
        result = _train(model, ddp_model, config, X, y, rank)
        torch.save(result._asdict(), os.path.join(outdir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def data_parallel_worker(rank: int, world_size: int, outdir: str, config: DataParallelRun, X, y) -> None:
    """One rank under ``torch.multiprocessing.spawn``: file rendezvous in ``outdir``, DDP, results to a file
    (Chapter 15)."""
    _run_rank(rank, world_size, f"file://{os.path.join(outdir, 'rendezvous')}", outdir, config, X, y)


def _load(outdir: str, world_size: int) -> list[RankResult]:
    results = []
    for rank in range(world_size):
        path = os.path.join(outdir, f"rank{rank}.pt")
        if not os.path.exists(path):
            raise RuntimeError(f"rank {rank} wrote no results ({path} is missing)")
        results.append(RankResult(**torch.load(path)))
    return results


def spawn_data_parallel(config: DataParallelRun, X, y, *, timeout: float = 120.0) -> list[RankResult]:
    """Run ``config`` with one process per shard via torch.multiprocessing.spawn; one result per rank
    (Chapter 15).

    Raises RuntimeError naming the rank if one fails, TimeoutError (after stopping the
    ranks) if they have not finished in ``timeout`` seconds.
    """
    import torch.multiprocessing as mp

    X, y = _check_data(config, X, y)
    timeout = check_float("timeout", timeout, low=0.0, low_open=True)
    with tempfile.TemporaryDirectory() as outdir:
        context = mp.spawn(data_parallel_worker, args=(config.world_size, outdir, config, X, y),
                           nprocs=config.world_size, join=False)
        deadline = time.monotonic() + timeout
        try:
            while not context.join(timeout=max(deadline - time.monotonic(), 0.01)):
                if time.monotonic() >= deadline:
                    for process in context.processes:
                        if process.is_alive():
                            process.terminate()
                    raise TimeoutError(f"the {config.world_size} ranks did not finish within {timeout:g} s")
        except mp.ProcessRaisedException as err:
            raise RuntimeError(f"a data-parallel rank failed:\n{err}") from None
        except mp.ProcessExitedException as err:
            raise RuntimeError(f"a data-parallel rank died: {err}") from None
        return _load(outdir, config.world_size)


def torchrun_command(outdir: str, *, nproc_per_node: int = 2) -> list[str]:
    """The torchrun command line that runs this module's ranks on one machine (Chapter 15).

    On several machines replace ``--standalone`` by ``--nnodes N --rdzv-backend c10d
    --rdzv-endpoint HOST:PORT`` (the same on every machine).
    """
    nproc_per_node = check_int("nproc_per_node", nproc_per_node, minimum=1)
    return ["torchrun", "--standalone", f"--nproc-per-node={nproc_per_node}", "-m", "dlbook.data_parallel", outdir]


def torchrun_data_parallel(config: DataParallelRun, X, y, *, timeout: float = 120.0) -> list[RankResult]:
    """Run ``config`` under torchrun (environment-variable rendezvous) in a subprocess (Chapter 15)."""
    X, y = _check_data(config, X, y)
    timeout = check_float("timeout", timeout, low=0.0, low_open=True)
    with tempfile.TemporaryDirectory() as outdir:
        torch.save({"config": config, "X": X, "y": y}, os.path.join(outdir, _INPUTS))
        command = torchrun_command(outdir, nproc_per_node=config.world_size)
        command[0] = os.path.join(os.path.dirname(sys.executable), "torchrun")
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"torchrun failed (exit status {done.returncode}):\n{done.stderr[-3000:]}")
        return _load(outdir, config.world_size)


def _torchrun_main(outdir: str) -> None:
    inputs = torch.load(os.path.join(outdir, _INPUTS), weights_only=False)
    config = inputs["config"]
    world_size = int(os.environ["WORLD_SIZE"])
    if world_size != config.world_size:
        raise ValueError(f"torchrun started {world_size} ranks but the run has {config.world_size} shards")
    _run_rank(int(os.environ["RANK"]), world_size, "env://", outdir, config, inputs["X"], inputs["y"])


def shard_weighted_average(gradients, shard_sizes) -> list[torch.Tensor]:
    """Σ_k n_k g_k / Σ_k n_k over ranks' per-parameter gradient lists: the full-batch gradient (Chapter 15)."""
    shard_sizes = check_ints("shard_sizes", shard_sizes, minimum=1)
    if not isinstance(gradients, (list, tuple)) or len(gradients) != len(shard_sizes):
        raise ValueError(f"gradients must hold one list per shard ({len(shard_sizes)}), got {describe(gradients)}")
    total = sum(shard_sizes)
    return [sum(n * g for n, g in zip(shard_sizes, parts)) / total for parts in zip(*gradients)]


# ---------------------------------------------------------------------------
# Local SGD and federated averaging, simulated in one process
# ---------------------------------------------------------------------------

class LocalSGDResult(NamedTuple):
    """The averaged model after every round and the full-data loss before and after each (Chapter 15)."""
    model: nn.Module
    losses: list[float]  # rounds + 1 values


def local_sgd(model: nn.Module, X, y, shards, *, local_steps: int, rounds: int, lr: float,
              batch_size: int | None = None, weighting: str = "size") -> LocalSGDResult:
    """K workers each take ``local_steps`` SGD steps on their shard, then average parameters; repeat (Chapter 15).

    ``shards`` lists each worker's row indices into X. Worker k's step s of round r uses
    rows (r·H + s)·b .. of its shard, cyclically (b = ``batch_size``, the whole shard if
    None). ``weighting`` "size" averages with weights n_k / N (federated averaging),
    "equal" with 1/K. ``model`` is not changed; the result holds a trained copy. With
    H = 1 and equal shards this is synchronous mini-batch SGD; with H = 1, full shards and
    size weighting, full-batch gradient descent.
    """
    from torch.func import functional_call

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    X = as_tensor("X", X, ndim=2, floating=True)
    y = as_tensor("y", y, ndim=1)
    check_same_length("X", X, "y", y)
    if isinstance(shards, torch.Tensor) or not isinstance(shards, (list, tuple)) or len(shards) == 0:
        raise TypeError(f"shards must be a non-empty list of index tensors, got {describe(shards)}")
    shards = [as_tensor(f"shards[{k}]", s, ndim=1).long() for k, s in enumerate(shards)]
    for k, s in enumerate(shards):
        if len(s) == 0 or s.min() < 0 or s.max() >= len(X):
            raise ValueError(f"shards[{k}] must hold between 1 and len(X) row indices in 0..{len(X) - 1}")
    local_steps = check_int("local_steps", local_steps, minimum=1)
    rounds = check_int("rounds", rounds, minimum=0)
    lr = check_float("lr", lr, low=0.0)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, minimum=1)
    weighting = check_choice("weighting", weighting, ("size", "equal"))
    sizes = torch.tensor([len(s) for s in shards], dtype=torch.float64)
    weights = sizes / sizes.sum() if weighting == "size" else torch.full_like(sizes, 1 / len(shards))

    loss_fn = nn.functional.cross_entropy
    params = {name: p.detach().clone() for name, p in model.named_parameters()}

    def loss_at(p, rows):
        return loss_fn(functional_call(model, p, (X[rows],)), y[rows])

    all_rows = torch.arange(len(X))
    losses = [float(loss_at(params, all_rows))]
    for r in range(rounds):
        averaged = {name: torch.zeros_like(p) for name, p in params.items()}
        for shard, weight in zip(shards, weights.tolist()):
            local = {name: p.clone().requires_grad_(True) for name, p in params.items()}
            b = len(shard) if batch_size is None else min(batch_size, len(shard))
            for s in range(local_steps):
                start = ((r * local_steps + s) * b) % len(shard)
                rows = shard[(start + torch.arange(b)) % len(shard)]
                grads = torch.autograd.grad(loss_at(local, rows), list(local.values()))
                local = {name: (p - lr * g).detach().requires_grad_(True)
                         for (name, p), g in zip(local.items(), grads)}
            for name, p in local.items():
                averaged[name] += weight * p.detach()
        params = averaged
        losses.append(float(loss_at(params, all_rows)))
    trained = model_with_parameters(model, params)
    return LocalSGDResult(trained, losses)


# ---------------------------------------------------------------------------
# The limits of data parallelism: steps to a target against batch size
# ---------------------------------------------------------------------------

def steps_to_accuracy(model: nn.Module, X, y, *, batch_size: int, lr: float, target: float, max_steps: int,
                      momentum: float = 0.0, eval_every: int = 1, seed: int = 0) -> int | None:
    """SGD steps until the accuracy on (X, y) first reaches ``target``, or None within ``max_steps`` (Chapter 15).

    Trains a copy of ``model`` (the model itself is not changed) on mini-batches of
    ``batch_size`` rows drawn as ``train.fit`` draws them, checking every ``eval_every``
    steps. Plotted against the batch size, these counts fall in proportion at first and
    then flatten: beyond a critical batch more workers no longer save steps.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    X = as_tensor("X", X, ndim=2, floating=True)
    y = as_tensor("y", y, ndim=1)
    check_same_length("X", X, "y", y)
    batch_size = check_int("batch_size", batch_size, minimum=1, maximum=len(X))
    lr = check_float("lr", lr, low=0.0)
    target = check_float("target", target, low=0.0, high=1.0)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    momentum = check_float("momentum", momentum, low=0.0, high=1.0, high_open=True)
    eval_every = check_int("eval_every", eval_every, minimum=1)
    net = copy.deepcopy(model)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    shuffler = generator(check_int("seed", seed, minimum=0))
    step = 0
    while step < max_steps:
        order = torch.randperm(len(X), generator=shuffler).to(X.device)
        for start in range(0, len(X), batch_size):
            rows = order[start:start + batch_size]
            optimizer.zero_grad()
            nn.functional.cross_entropy(net(X[rows]), y[rows]).backward()
            optimizer.step()
            step += 1
            if step % eval_every == 0 or step == max_steps:
                with torch.no_grad():
                    if accuracy(net(X), y) >= target:
                        return step
            if step == max_steps:
                return None
    return None


if __name__ == "__main__":
    _torchrun_main(sys.argv[1])
