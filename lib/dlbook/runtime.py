"""Run-time set-up: seeding, threads, device choice and environment detection.

``setup()`` is the one call every chapter's first cell makes.
"""
from __future__ import annotations

import os
import random
import sys

import numpy as np
import torch

from .validation import check_int

#: Environment variable that overrides the number of torch threads.
THREADS_ENV = "DLBOOK_NUM_THREADS"
#: Environment variable that forces a device ("cpu", "cuda", "mps").
DEVICE_ENV = "DLBOOK_DEVICE"
#: Set to 1 by the book build, so chapters know they are rendered to HTML.
BOOK_BUILD_ENV = "DLBOOK_BOOK_BUILD"
#: The book-wide switch for paper-scale settings: DLBOOK_SCALE=full (meant for a GPU).
SCALE_ENV = "DLBOOK_SCALE"
SCALES = ("default", "full")


def in_colab() -> bool:
    """True inside Google Colab."""
    return "google.colab" in sys.modules


def in_kernel() -> bool:
    """True when running inside an IPython kernel (Jupyter, Colab), not a terminal."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def in_ci() -> bool:
    """True on a continuous-integration runner (CI=true or a test run)."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or "PYTEST_CURRENT_TEST" in os.environ


def in_book_build() -> bool:
    """True while Jupyter Book executes the notebook to build the HTML book."""
    return os.environ.get(BOOK_BUILD_ENV, "") == "1"


def scale() -> str:
    """The settings chapters run at: "default" (a minute on a 2-core CPU) or "full" (DLBOOK_SCALE=full).

    The tests and the book build always run the default; "full" selects the
    paper-scale settings a chapter names, meant for a GPU.
    """
    value = os.environ.get(SCALE_ENV, "default").strip().lower() or "default"
    if value not in SCALES:
        raise ValueError(f"{SCALE_ENV} must be one of {list(SCALES)}, got {value!r}")
    return value


def at_scale(default, full):
    """``full`` when DLBOOK_SCALE=full, else ``default``: ``epochs = runtime.at_scale(8, 30)``."""
    return full if scale() == "full" else default


def get_device(prefer: str | None = None) -> torch.device:
    """Pick the best available device: CUDA, then Apple MPS, then the CPU.

    ``prefer`` (or the DLBOOK_DEVICE environment variable) forces one.
    """
    prefer = prefer or os.environ.get(DEVICE_ENV)
    if prefer is not None:
        if prefer not in ("cpu", "cuda", "mps"):
            raise ValueError(f"prefer must be 'cpu', 'cuda' or 'mps', got {prefer!r}")
        if prefer == "cuda" and not torch.cuda.is_available():
            raise ValueError("prefer='cuda' but no CUDA device is available")
        if prefer == "mps" and not _mps_available():
            raise ValueError("prefer='mps' but Apple MPS is not available")
        return torch.device(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's generators (all devices)."""
    seed = check_int("seed", seed, minimum=0)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def set_threads(num_threads: int | None = None) -> int:
    """Set torch's intra-op threads and NumPy/SciPy/scikit-learn's thread pools: 1 by default,
    DLBOOK_NUM_THREADS overrides.

    Tiny models run fastest on one thread: on a busy 2-core machine two
    threads made them tens of times slower.
    """
    if num_threads is None:
        num_threads = int(os.environ.get(THREADS_ENV, "1"))
    num_threads = check_int("num_threads", num_threads, minimum=1)
    torch.set_num_threads(num_threads)
    try:  # NumPy's and SciPy's BLAS and scikit-learn's OpenMP pools, which torch's setting does not reach
        from threadpoolctl import threadpool_limits
    except ImportError:
        return num_threads
    threadpool_limits(num_threads)
    return num_threads


def setup(seed: int = 0, num_threads: int | None = None, device: str | None = None,
          quiet: bool = False) -> torch.device:
    """Prepare a chapter: seed everything, set threads and plot style, pick a device.

    Returns the device the chapter should put its tensors on.
    """
    from . import plot

    seed_everything(seed)
    threads = set_threads(num_threads)
    chosen = get_device(device)
    plot.use_style()
    if not quiet:
        print(f"dlbook: device={chosen.type}, torch {torch.__version__}, "
              f"threads={threads}, seed={seed}")
    return chosen


def generator(seed: int) -> torch.Generator:
    """A seeded CPU torch.Generator.

    dlbook draws random numbers on the CPU and then moves them to the device,
    so the same seed gives the same data on the CPU, CUDA and MPS.
    """
    seed = check_int("seed", seed, minimum=0)
    return torch.Generator().manual_seed(seed)
