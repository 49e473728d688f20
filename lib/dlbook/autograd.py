"""A small reverse-mode automatic-differentiation engine over tensors (Chapter 3).

Written in the spirit of micrograd, but every value is a whole torch tensor,
so the engine is vectorised like a real library while staying readable: each
operation computes its output with plain torch arithmetic (torch's own
autograd is never used) and, right next to it, a closure that turns the
gradient of the output into gradients of the inputs. ``backward()`` visits the
graph in reverse topological order and runs those closures.

Broadcasting follows torch's rules; the gradient of an input that was
broadcast is summed over the broadcast dimensions (:func:`unbroadcast`).
Operands whose shapes do not broadcast are refused with a ValueError that
names both shapes, before torch sees them.

The engine exists to be compared with torch.autograd to many digits, so it
works in float64 by default: integer data become float64 tensors, and
:class:`MLP` draws float64 weights.

    >>> x = Tensor(torch.tensor([1.0, 2.0]), requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([2., 4.])
"""
from __future__ import annotations

import math
import numbers
from typing import Callable, Sequence

import torch

from . import nets
from .runtime import generator
from .validation import (
    as_tensor,
    check_bool,
    check_broadcastable,
    check_choice,
    check_class_indices,
    check_device,
    check_dtype,
    check_float,
    check_int,
    check_ints,
    describe,
)


def unbroadcast(grad: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """Sum ``grad`` over the dimensions broadcasting added or stretched, to get ``shape`` (Chapter 3).

    If y = f(x) broadcast x from ``shape`` to grad.shape, every copy of an
    entry of x contributed to the loss, so its gradient is the sum over copies.
    """
    if not isinstance(grad, torch.Tensor):
        raise TypeError(f"grad must be a tensor, got {describe(grad)}")
    shape = torch.Size(check_ints("shape", tuple(shape), minimum=0, min_length=0))
    if len(shape) > grad.dim() or check_broadcastable("shape", shape, "grad", grad.shape) != tuple(grad.shape):
        raise ValueError(f"shape {tuple(shape)} does not broadcast to the gradient's shape {tuple(grad.shape)}")
    leading = grad.dim() - len(shape)
    if leading:
        grad = grad.sum(dim=tuple(range(leading)))  # dimensions broadcasting prepended
    stretched = tuple(i for i, size in enumerate(shape) if size == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(dim=stretched, keepdim=True)  # dimensions of size 1 that were stretched
    return grad


class Tensor:
    """A torch tensor that remembers how it was computed, for reverse-mode differentiation (Chapter 3).

    ``data`` is a plain floating torch tensor; after ``backward()`` every tensor
    created with ``requires_grad=True`` that the result depends on holds
    d(result)/d(itself) in ``grad`` (same shape as ``data``).
    """

    def __init__(self, data, *, requires_grad: bool = False,
                 _parents: tuple["Tensor", ...] = (), _op: str = ""):
        data = as_tensor("data", data)
        if not data.is_floating_point():
            data = data.to(torch.float64)  # the engine's default dtype (module docstring)
        self.data = data.detach()
        self.grad: torch.Tensor | None = None
        self.requires_grad = check_bool("requires_grad", requires_grad)
        self._parents = _parents
        self._backward: Callable[[torch.Tensor], None] = lambda grad: None
        self._op = _op

    # --- helpers -----------------------------------------------------------------------------

    @property
    def shape(self) -> torch.Size:
        return self.data.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.data.dtype

    @property
    def device(self) -> torch.device:
        return self.data.device

    def dim(self) -> int:
        return self.data.dim()

    def numel(self) -> int:
        return self.data.numel()

    def item(self) -> float:
        return self.data.item()

    def __repr__(self) -> str:
        op = f", op={self._op!r}" if self._op else ""
        return f"Tensor({self.data.tolist() if self.numel() <= 6 else tuple(self.shape)}{op})"

    def _lift(self, other) -> "Tensor":
        """Wrap a number or a torch tensor as a constant Tensor on our dtype and device."""
        if isinstance(other, Tensor):
            return other
        if isinstance(other, bool) or not isinstance(other, (numbers.Real, torch.Tensor)):
            raise TypeError(f"cannot combine a Tensor with {describe(other)}")
        return Tensor(torch.as_tensor(other, dtype=self.dtype, device=self.device))

    def _operand(self, other, op: str) -> "Tensor":
        """``other`` lifted to a Tensor, after checking that the two shapes broadcast under ``op``."""
        other = self._lift(other)
        check_broadcastable(f"the left operand of {op}", self.shape, "the right operand", other.shape)
        return other

    def _result(self, data: torch.Tensor, parents: tuple["Tensor", ...], op: str) -> "Tensor":
        return Tensor(data, requires_grad=any(p.requires_grad for p in parents),
                      _parents=parents, _op=op)

    def _accumulate(self, grad: torch.Tensor) -> None:
        if self.requires_grad:
            grad = grad.to(self.dtype)  # a float32 leaf keeps float32 gradients, as in torch
            self.grad = grad.clone() if self.grad is None else self.grad + grad

    # --- elementwise arithmetic (with broadcasting) ----------------------------------------

    def __add__(self, other) -> "Tensor":
        other = self._operand(other, "+")
        out = self._result(self.data + other.data, (self, other), "+")

        def backward(grad):  # d(a + b) = da + db
            self._accumulate(unbroadcast(grad, self.shape))
            other._accumulate(unbroadcast(grad, other.shape))
        out._backward = backward
        return out

    def __mul__(self, other) -> "Tensor":
        other = self._operand(other, "*")
        out = self._result(self.data * other.data, (self, other), "*")

        def backward(grad):  # d(a b) = b da + a db
            self._accumulate(unbroadcast(grad * other.data, self.shape))
            other._accumulate(unbroadcast(grad * self.data, other.shape))
        out._backward = backward
        return out

    def __truediv__(self, other) -> "Tensor":
        other = self._operand(other, "/")
        out = self._result(self.data / other.data, (self, other), "/")

        def backward(grad):  # d(a / b) = da / b - a db / b^2
            self._accumulate(unbroadcast(grad / other.data, self.shape))
            other._accumulate(unbroadcast(-grad * self.data / other.data**2, other.shape))
        out._backward = backward
        return out

    def __pow__(self, exponent) -> "Tensor":
        exponent = check_float("exponent", exponent)
        out = self._result(self.data ** exponent, (self,), f"**{exponent}")

        def backward(grad):  # d(a^p) = p a^(p-1) da
            self._accumulate(grad * exponent * self.data ** (exponent - 1))
        out._backward = backward
        return out

    def __neg__(self) -> "Tensor":
        return self * -1.0

    def __sub__(self, other) -> "Tensor":
        return self + (-self._operand(other, "-"))

    def __radd__(self, other) -> "Tensor":
        return self._lift(other) + self  # lifted first, so errors name the operands in order

    def __rmul__(self, other) -> "Tensor":
        return self._lift(other) * self

    def __rsub__(self, other) -> "Tensor":
        return self._lift(other) - self

    def __rtruediv__(self, other) -> "Tensor":
        return self._lift(other) / self

    # --- linear algebra and reductions -------------------------------------------------------

    def __matmul__(self, other) -> "Tensor":
        other = self._lift(other)
        if self.dtype != other.dtype:
            raise TypeError(f"matmul operands must have the same dtype, got {self.dtype} and {other.dtype}")
        if self.dim() < 2 or other.dim() < 2:
            raise ValueError(f"matmul needs operands with at least 2 dimensions, got shapes "
                             f"{tuple(self.shape)} and {tuple(other.shape)}")
        if self.shape[-1] != other.shape[-2]:
            raise ValueError(f"matmul shapes {tuple(self.shape)} and {tuple(other.shape)} do not match "
                             f"({self.shape[-1]} != {other.shape[-2]})")
        out = self._result(self.data @ other.data, (self, other), "@")

        def backward(grad):  # C = A B: dA = dC B^T, dB = A^T dC (summed over broadcast batch dims)
            # The guards skip a whole matrix product for constants such as the data X.
            if self.requires_grad:
                self._accumulate(unbroadcast(grad @ other.data.mT, self.shape))
            if other.requires_grad:
                other._accumulate(unbroadcast(self.data.mT @ grad, other.shape))
        out._backward = backward
        return out

    def sum(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> "Tensor":
        """Sum over ``dim`` (all dimensions by default), like torch.sum."""
        dims = self._dims(dim)
        out = self._result(self.data.sum(dim=dims, keepdim=keepdim), (self,), "sum")

        def backward(grad):  # every summed entry receives the gradient of the sum
            if not keepdim:
                for d in sorted(dims):
                    grad = grad.unsqueeze(d)
            self._accumulate(grad.expand(self.shape))
        out._backward = backward
        return out

    def mean(self, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> "Tensor":
        """Mean over ``dim`` (all dimensions by default): a sum divided by the count."""
        dims = self._dims(dim)
        count = math.prod(self.shape[d] for d in dims)
        return self.sum(dim, keepdim) / float(count)

    def _dims(self, dim) -> tuple[int, ...]:
        if dim is None:
            return tuple(range(self.dim()))
        dims = check_ints("dim", [dim] if isinstance(dim, numbers.Integral) else dim, min_length=0)
        for d in dims:
            check_int("dim", d, minimum=-self.dim(), maximum=self.dim() - 1)
        return tuple(sorted(d % self.dim() for d in dims))

    def reshape(self, *shape: int) -> "Tensor":
        shape = check_ints("shape", list(shape), minimum=-1, min_length=0)
        try:
            data = self.data.reshape(*shape)
        except RuntimeError:
            raise ValueError(f"shape {tuple(shape)} does not fit a tensor of shape {tuple(self.shape)} "
                             f"({self.numel()} entries)") from None
        out = self._result(data, (self,), "reshape")

        def backward(grad):
            self._accumulate(grad.reshape(self.shape))
        out._backward = backward
        return out

    # --- elementwise functions ---------------------------------------------------------------

    def exp(self) -> "Tensor":
        out = self._result(self.data.exp(), (self,), "exp")

        def backward(grad):  # (e^a)' = e^a
            self._accumulate(grad * out.data)
        out._backward = backward
        return out

    def log(self) -> "Tensor":
        out = self._result(self.data.log(), (self,), "log")

        def backward(grad):  # (log a)' = 1 / a
            self._accumulate(grad / self.data)
        out._backward = backward
        return out

    def relu(self) -> "Tensor":
        out = self._result(self.data.clamp_min(0), (self,), "relu")

        def backward(grad):  # slope 1 where a > 0, else 0 (torch's convention at a = 0)
            self._accumulate(grad * (self.data > 0).to(grad.dtype))
        out._backward = backward
        return out

    def tanh(self) -> "Tensor":
        out = self._result(self.data.tanh(), (self,), "tanh")

        def backward(grad):  # tanh' = 1 - tanh^2
            self._accumulate(grad * (1 - out.data**2))
        out._backward = backward
        return out

    def sigmoid(self) -> "Tensor":
        out = self._result(torch.sigmoid(self.data), (self,), "sigmoid")

        def backward(grad):  # sigma' = sigma (1 - sigma)
            self._accumulate(grad * out.data * (1 - out.data))
        out._backward = backward
        return out

    # --- reverse mode ------------------------------------------------------------------------

    def backward(self, grad=None) -> None:
        """Fill ``.grad`` of every tensor with requires_grad that this one depends on.

        ``grad`` is d(loss)/d(self); it may be omitted for a one-element tensor
        (then it is 1). Leaves accumulate gradients, as in torch: reset them to
        None between steps. Intermediate results keep theirs too (the adjoints
        of backpropagation), which is handy for inspecting them.
        """
        if not self.requires_grad:
            raise RuntimeError("backward() needs a result that depends on a tensor with requires_grad=True")
        if grad is None:
            if self.numel() != 1:
                raise ValueError(f"grad must be given for a non-scalar result of shape {tuple(self.shape)}")
            grad = torch.ones_like(self.data)
        else:
            grad = as_tensor("grad", grad, dtype=self.dtype, device=self.device)
            if grad.shape != self.shape:
                raise ValueError(f"grad must have shape {tuple(self.shape)}, got {tuple(grad.shape)}")
        order = topological_order(self)
        for node in order:  # interior nodes start afresh; leaves accumulate, as in torch
            if node._parents:
                node.grad = None
        self._accumulate(grad)
        # Reverse topological order: a node's gradient is complete (all of its
        # consumers have contributed) before it is passed on to its parents.
        for node in reversed(order):
            if node._parents and node.grad is not None:
                node._backward(node.grad)


def topological_order(root: Tensor) -> list[Tensor]:
    """Nodes that ``root`` depends on (with requires_grad), each after all of its parents (Chapter 3).

    An iterative depth-first search, so very deep graphs do not hit Python's recursion limit.
    """
    if not isinstance(root, Tensor):
        raise TypeError(f"root must be a dlbook.autograd.Tensor, got {describe(root)}")
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
            continue
        if id(node) in visited or not node.requires_grad:
            continue
        visited.add(id(node))
        stack.append((node, True))
        stack.extend((parent, False) for parent in node._parents if id(parent) not in visited)
    return order


def cross_entropy(logits: Tensor, targets) -> Tensor:
    """Mean softmax cross-entropy of (N, C) logits against N integer classes, as one node (Chapter 3).

    Forward: log-sum-exp with the row maximum subtracted, so large logits do not overflow.
    Backward: d(loss)/d(logits) = (softmax(logits) - one_hot(targets)) / N.
    """
    if not isinstance(logits, Tensor):
        raise TypeError(f"logits must be a dlbook.autograd.Tensor, got {describe(logits)}")
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (N, C), got shape {tuple(logits.shape)}")
    num_rows, num_classes = logits.shape
    targets = check_class_indices("targets", targets, num_classes).to(logits.device)
    if len(targets) != num_rows:
        raise ValueError(f"targets must have {num_rows} entries to match logits, got {len(targets)}")

    shifted = logits.data - logits.data.max(dim=1, keepdim=True).values
    log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()  # (N, C)
    rows = torch.arange(num_rows, device=logits.device)
    out = logits._result(-log_probs[rows, targets].mean(), (logits,), "cross_entropy")

    def backward(grad):
        delta = log_probs.exp()
        delta[rows, targets] -= 1.0
        logits._accumulate(grad * delta / num_rows)
    out._backward = backward
    return out


_ACTIVATIONS = ("relu", "tanh", "sigmoid")


class MLP:
    """A multilayer perceptron built from engine Tensors (Chapter 3).

    ``widths = (64, 32, 10)`` gives 64 inputs, one hidden layer of 32 units and
    10 outputs (logits). The weights are those :func:`dlbook.nets.mlp` draws for
    the same widths and seed (torch.nn.Linear's initialisation), stored as
    (fan_in, fan_out) so that a layer is ``h @ W + b``; ``to_torch()`` builds
    the same network as torch.nn modules.
    """

    def __init__(self, widths: Sequence[int], *, activation: str = "relu", seed: int = 0,
                 device="cpu", dtype: torch.dtype = torch.float64):
        self.widths = check_ints("widths", widths, minimum=1, min_length=2)
        self.activation = check_choice("activation", activation, _ACTIVATIONS)
        device, dtype = check_device("device", device), check_dtype("dtype", dtype)
        layers = nets.random_layers(self.widths, seed=check_int("seed", seed, minimum=0), dtype=torch.float64)
        self.layers: list[tuple[Tensor, Tensor]] = [
            (Tensor(W.T.to(device, dtype), requires_grad=True), Tensor(b.to(device, dtype), requires_grad=True))
            for W, b in layers]  # nets stores W as (fan_out, fan_in)

    def parameters(self) -> list[Tensor]:
        return [p for layer in self.layers for p in layer]

    def __call__(self, X) -> Tensor:
        """Logits for the rows of X (N, widths[0]); X is cast to the network's dtype and device."""
        W0 = self.layers[0][0]
        if isinstance(X, Tensor):
            h = X
        else:
            h = Tensor(as_tensor("X", X, ndim=2, floating=True).to(W0.device, W0.dtype))
        if h.dim() != 2 or h.shape[-1] != self.widths[0]:
            raise ValueError(f"X must have shape (N, {self.widths[0]}), got shape {tuple(h.shape)}")
        for i, (W, b) in enumerate(self.layers):
            h = h @ W + b
            if i < len(self.layers) - 1:
                h = getattr(h, self.activation)()
        return h

    def to_torch(self) -> torch.nn.Sequential:
        """The same network as torch.nn.Linear layers, with copies of the current weights."""
        return nets.from_layers([(W.data.T, b.data) for W, b in self.layers], self.activation)


def finite_difference_gradient(fn: Callable[[torch.Tensor], float], x, *, eps: float = 1e-6) -> torch.Tensor:
    """Central differences (fn(x + eps e_i) - fn(x - eps e_i)) / (2 eps) for every entry i (Chapter 3).

    The error is O(eps^2) from truncation plus O(machine epsilon / eps) from
    rounding; eps = 1e-6 balances them in float64.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {describe(fn)}")
    x = as_tensor("x", x, floating=True)
    eps = check_float("eps", eps, low=0.0, low_open=True)
    flat = x.detach().clone().reshape(-1)
    grad = torch.empty_like(flat)
    for i in range(flat.numel()):
        original = flat[i].item()
        flat[i] = original + eps
        up = float(fn(flat.reshape(x.shape)))
        flat[i] = original - eps
        down = float(fn(flat.reshape(x.shape)))
        flat[i] = original
        grad[i] = (up - down) / (2 * eps)
    return grad.reshape(x.shape)


def gradient_gap(ours: Callable, theirs: Callable, inputs: Sequence, *, seed: int = 0) -> float:
    """Largest difference between this engine and torch.autograd on the same computation (Chapter 3).

    ``ours(*leaves)`` is evaluated on engine Tensors and ``theirs(*leaves)`` on
    torch tensors with ``requires_grad``, both made from copies of ``inputs``;
    often they are the same function, since the engine's methods carry torch's
    names. A non-scalar result is differentiated against a random upstream
    gradient drawn from ``seed``. Returns the largest absolute difference over
    the value and every input's gradient (infinity if any shape differs).
    """
    if not callable(ours) or not callable(theirs):
        raise TypeError(f"ours and theirs must be callable, got {describe(ours)} and {describe(theirs)}")
    if isinstance(inputs, torch.Tensor) or not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError(f"inputs must be a non-empty list of tensors, got {describe(inputs)}")
    inputs = [as_tensor(f"inputs[{i}]", x, floating=True) for i, x in enumerate(inputs)]
    engine_leaves = [Tensor(x.detach().clone(), requires_grad=True) for x in inputs]
    torch_leaves = [x.detach().clone().requires_grad_() for x in inputs]
    mine, reference = ours(*engine_leaves), theirs(*torch_leaves)
    if not isinstance(mine, Tensor) or not isinstance(reference, torch.Tensor):
        raise TypeError(f"ours must return an engine Tensor and theirs a torch tensor, got "
                        f"{describe(mine)} and {describe(reference)}")
    if mine.shape != reference.shape:
        return math.inf
    upstream = torch.randn(reference.shape, generator=generator(check_int("seed", seed, minimum=0)),
                           dtype=torch.float64).to(reference)
    mine.backward(upstream.to(mine.dtype))
    reference.backward(upstream)
    gap = (mine.data - reference.detach()).abs().max().item()
    for engine_leaf, torch_leaf in zip(engine_leaves, torch_leaves):
        if engine_leaf.grad is None or torch_leaf.grad is None:  # the result does not depend on it
            if (engine_leaf.grad is None) != (torch_leaf.grad is None):
                return math.inf
            continue
        if engine_leaf.grad.shape != torch_leaf.grad.shape:
            return math.inf
        gap = max(gap, (engine_leaf.grad - torch_leaf.grad).abs().max().item())
    return gap
