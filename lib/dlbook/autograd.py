"""A small reverse-mode automatic-differentiation engine over tensors (Chapter 3).

Written in the spirit of micrograd, but every value is a whole torch tensor,
so the engine is vectorised like a real library while staying readable: each
operation computes its output with plain torch arithmetic (torch's own
autograd is never used) and, right next to it, a closure that turns the
gradient of the output into gradients of the inputs. ``backward()`` visits the
graph in reverse topological order and runs those closures.

Broadcasting follows torch's rules; the gradient of an input that was
broadcast is summed over the broadcast dimensions (:func:`unbroadcast`).

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

from .runtime import generator
from .validation import as_tensor, check_device, check_dtype, check_int, describe


def unbroadcast(grad: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """Sum ``grad`` over the dimensions broadcasting added or stretched, to get ``shape`` (Chapter 3).

    If y = f(x) broadcast x from ``shape`` to grad.shape, every copy of an
    entry of x contributed to the loss, so its gradient is the sum over copies.
    """
    if not isinstance(grad, torch.Tensor):
        raise TypeError(f"grad must be a tensor, got {describe(grad)}")
    shape = torch.Size(shape)
    if not _broadcasts_to(shape, grad.shape):
        raise ValueError(f"shape {tuple(shape)} does not broadcast to the gradient's shape {tuple(grad.shape)}")
    leading = grad.dim() - len(shape)
    if leading:
        grad = grad.sum(dim=tuple(range(leading)))  # dimensions broadcasting prepended
    stretched = tuple(i for i, size in enumerate(shape) if size == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(dim=stretched, keepdim=True)  # dimensions of size 1 that were stretched
    return grad


def _broadcasts_to(shape: torch.Size, target: torch.Size) -> bool:
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


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
            data = data.to(torch.get_default_dtype())
        if not isinstance(requires_grad, bool):
            raise TypeError(f"requires_grad must be True or False, got {describe(requires_grad)}")
        self.data = data.detach()
        self.grad: torch.Tensor | None = None
        self.requires_grad = requires_grad
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

    def _result(self, data: torch.Tensor, parents: tuple["Tensor", ...], op: str) -> "Tensor":
        return Tensor(data, requires_grad=any(p.requires_grad for p in parents),
                      _parents=parents, _op=op)

    def _accumulate(self, grad: torch.Tensor) -> None:
        if self.requires_grad:
            self.grad = grad.clone() if self.grad is None else self.grad + grad

    # --- elementwise arithmetic (with broadcasting) ----------------------------------------

    def __add__(self, other) -> "Tensor":
        other = self._lift(other)
        out = self._result(self.data + other.data, (self, other), "+")

        def backward(grad):  # d(a + b) = da + db
            self._accumulate(unbroadcast(grad, self.shape))
            other._accumulate(unbroadcast(grad, other.shape))
        out._backward = backward
        return out

    def __mul__(self, other) -> "Tensor":
        other = self._lift(other)
        out = self._result(self.data * other.data, (self, other), "*")

        def backward(grad):  # d(a b) = b da + a db
            self._accumulate(unbroadcast(grad * other.data, self.shape))
            other._accumulate(unbroadcast(grad * self.data, other.shape))
        out._backward = backward
        return out

    def __truediv__(self, other) -> "Tensor":
        other = self._lift(other)
        out = self._result(self.data / other.data, (self, other), "/")

        def backward(grad):  # d(a / b) = da / b - a db / b^2
            self._accumulate(unbroadcast(grad / other.data, self.shape))
            other._accumulate(unbroadcast(-grad * self.data / other.data**2, other.shape))
        out._backward = backward
        return out

    def __pow__(self, exponent) -> "Tensor":
        if isinstance(exponent, bool) or not isinstance(exponent, numbers.Real):
            raise TypeError(f"exponent must be a real number, got {describe(exponent)}")
        out = self._result(self.data ** exponent, (self,), f"**{exponent}")

        def backward(grad):  # d(a^p) = p a^(p-1) da
            self._accumulate(grad * exponent * self.data ** (exponent - 1))
        out._backward = backward
        return out

    def __neg__(self) -> "Tensor":
        return self * -1.0

    def __sub__(self, other) -> "Tensor":
        return self + (-self._lift(other))

    def __radd__(self, other) -> "Tensor":
        return self + other

    def __rmul__(self, other) -> "Tensor":
        return self * other

    def __rsub__(self, other) -> "Tensor":
        return self._lift(other) - self

    def __rtruediv__(self, other) -> "Tensor":
        return self._lift(other) / self

    # --- linear algebra and reductions -------------------------------------------------------

    def __matmul__(self, other) -> "Tensor":
        other = self._lift(other)
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
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        for d in dims:
            if isinstance(d, bool) or not isinstance(d, int) or not -self.dim() <= d < max(self.dim(), 1):
                raise ValueError(f"dim must be integers in [-{self.dim()}, {self.dim() - 1}], got {dim!r}")
        return tuple(sorted(d % self.dim() for d in dims))

    def reshape(self, *shape: int) -> "Tensor":
        out = self._result(self.data.reshape(*shape), (self,), "reshape")

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
    targets = as_tensor("targets", targets, ndim=1)
    if targets.is_floating_point() or targets.dtype == torch.bool:
        raise TypeError(f"targets must hold integer class indices, got {describe(targets)}")
    num_rows, num_classes = logits.shape
    if len(targets) != num_rows:
        raise ValueError(f"targets must have {num_rows} entries to match logits, got {len(targets)}")
    targets = targets.to(logits.device)
    if num_rows and (targets.min() < 0 or targets.max() >= num_classes):
        raise ValueError(f"targets must lie in [0, {num_classes - 1}]")

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
    """A multilayer perceptron built from engine Tensors, initialised like torch.nn.Linear (Chapter 3).

    ``sizes = [64, 32, 10]`` gives 64 inputs, one hidden layer of 32 units and
    10 outputs (logits). Weights are stored as (fan_in, fan_out), so a layer is
    ``h @ W + b``; ``to_torch()`` builds the same network as torch.nn modules.
    """

    def __init__(self, sizes: Sequence[int], *, activation: str = "relu", seed: int = 0,
                 device="cpu", dtype: torch.dtype = torch.float64):
        if not isinstance(sizes, (list, tuple)) or len(sizes) < 2:
            raise ValueError(f"sizes must list at least an input and an output size, got {describe(sizes)}")
        self.sizes = [check_int(f"sizes[{i}]", s, minimum=1) for i, s in enumerate(sizes)]
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {list(_ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        device, dtype = check_device("device", device), check_dtype("dtype", dtype)
        rng = generator(seed)
        self.layers: list[tuple[Tensor, Tensor]] = []
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:]):
            bound = 1.0 / math.sqrt(fan_in)  # torch.nn.Linear's default: U(-1/sqrt(fan_in), +)
            W = (torch.rand(fan_in, fan_out, generator=rng, dtype=torch.float64) * 2 - 1) * bound
            b = (torch.rand(fan_out, generator=rng, dtype=torch.float64) * 2 - 1) * bound
            self.layers.append((Tensor(W.to(device, dtype), requires_grad=True),
                                Tensor(b.to(device, dtype), requires_grad=True)))

    def parameters(self) -> list[Tensor]:
        return [p for layer in self.layers for p in layer]

    def __call__(self, X) -> Tensor:
        h = X if isinstance(X, Tensor) else Tensor(as_tensor("X", X, ndim=2))
        if h.shape[-1] != self.sizes[0]:
            raise ValueError(f"X must have {self.sizes[0]} columns, got shape {tuple(h.shape)}")
        for i, (W, b) in enumerate(self.layers):
            h = h @ W + b
            if i < len(self.layers) - 1:
                h = getattr(h, self.activation)()
        return h

    def to_torch(self) -> torch.nn.Sequential:
        """The same network as torch.nn.Linear layers, with copies of the current weights."""
        modules: list[torch.nn.Module] = []
        activation = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid}
        for i, (W, b) in enumerate(self.layers):
            linear = torch.nn.Linear(W.shape[0], W.shape[1], device=W.device, dtype=W.dtype)
            with torch.no_grad():
                linear.weight.copy_(W.data.T)  # torch stores (fan_out, fan_in)
                linear.bias.copy_(b.data)
            modules.append(linear)
            if i < len(self.layers) - 1:
                modules.append(activation[self.activation]())
        return torch.nn.Sequential(*modules)


def finite_difference_gradient(fn: Callable[[torch.Tensor], float], x, *, eps: float = 1e-6) -> torch.Tensor:
    """Central differences (fn(x + eps e_i) - fn(x - eps e_i)) / (2 eps) for every entry i (Chapter 3).

    The error is O(eps^2) from truncation plus O(machine epsilon / eps) from
    rounding; eps = 1e-6 balances them in float64.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {describe(fn)}")
    x = as_tensor("x", x)
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating tensor, got {describe(x)}")
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not eps > 0:
        raise ValueError(f"eps must be a positive number, got {eps!r}")
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
