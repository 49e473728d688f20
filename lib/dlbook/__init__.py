"""dlbook: the companion package of *Deep Learning by Experiment*.

Every chapter notebook starts with ``device = dlbook.setup()`` and then calls
the modules named after the concepts it teaches (perceptron, hopfield, ...).
"""
from .runtime import get_device, setup

__version__ = "0.1.0"
__all__ = ["setup", "get_device", "__version__"]
