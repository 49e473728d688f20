"""Gradient-descent optimizers written from scratch behind the torch.optim interface (Chapter 3).

Each class subclasses ``torch.optim.Optimizer`` and takes the same
hyperparameters, with the same names, defaults and meaning, as its namesake
in ``torch.optim``, so that it can replace it in any training loop and
follow it step for step (the tests check this to 1e-12 in float64):

* :class:`SGD`: plain gradient descent, heavy-ball momentum, Nesterov momentum;
* :class:`Adagrad`, :class:`RMSprop`, :class:`Adadelta`: per-coordinate step sizes
  from squared gradients (Adadelta also from squared past steps);
* :class:`Adam` with bias correction, and AMSGrad (``amsgrad=True``);
* :class:`Adamax`: Adam with an infinity norm in place of the root mean square;
* :class:`AdamW`: Adam with decoupled weight decay.

The update of each is written out in a few lines of ``step``, with the
formula in the docstring. ``weight_decay`` in SGD, Adagrad, RMSprop,
Adadelta, Adam and Adamax is *coupled* (it adds ``weight_decay * param`` to
the gradient, the same as an L2 penalty); only AdamW decouples it, as in torch.

Iterate averaging (Polyak-Ruppert averages and exponential moving averages of
the iterates, like ``torch.optim.swa_utils.AveragedModel``) works on a stored
trajectory: :func:`polyak_ruppert_average`, :func:`exponential_moving_average`.
:func:`deviation_from_torch` runs one of these classes and its torch namesake
side by side, for the chapter and the tests.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from . import nets
from .runtime import generator
from .validation import as_tensor, check_bool, check_choice, check_float, check_int, check_sequence, describe

__all__ = ["SGD", "Adagrad", "RMSprop", "Adadelta", "Adam", "Adamax", "AdamW", "polyak_ruppert_average",
           "exponential_moving_average", "deviation_from_torch"]


def _betas(betas) -> tuple[float, float]:
    """Adam's (beta1, beta2): two decay rates in [0, 1)."""
    beta1, beta2 = check_sequence("betas", betas, check_float, length=2, low=0.0, high=1.0, high_open=True)
    return beta1, beta2


class _ScratchOptimizer(torch.optim.Optimizer):
    """Shared plumbing: iterate over parameters that have a gradient."""

    def _params_with_grad(self, group):
        for param in group["params"]:
            if param.grad is None:
                continue
            if param.grad.is_sparse:
                raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")
            # maximize=True ascends: descend on the negated gradient.
            grad = -param.grad if group["maximize"] else param.grad
            yield param, grad, self.state[param]

    @staticmethod
    def _closure_loss(closure):
        if closure is None:
            return None
        with torch.enable_grad():
            return closure()


class SGD(_ScratchOptimizer):
    """Gradient descent with optional heavy-ball or Nesterov momentum, like torch.optim.SGD (Chapter 3).

    g = grad + weight_decay * p;  b = momentum * b + (1 - dampening) * g  (b = g at the first step);
    p -= lr * b  (heavy ball), or  p -= lr * (g + momentum * b)  (Nesterov).
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False):
        defaults = dict(lr=check_float("lr", lr, low=0.0),
                        momentum=check_float("momentum", momentum, low=0.0),
                        dampening=check_float("dampening", dampening),
                        weight_decay=check_float("weight_decay", weight_decay, low=0.0),
                        nesterov=check_bool("nesterov", nesterov),
                        maximize=check_bool("maximize", maximize))
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("nesterov=True requires momentum > 0 and dampening = 0, "
                             f"got momentum={momentum}, dampening={dampening}")
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            momentum, lr = group["momentum"], group["lr"]
            for param, grad, state in self._params_with_grad(group):
                if group["weight_decay"]:
                    grad = grad.add(param, alpha=group["weight_decay"])  # coupled: an L2 penalty's gradient
                if momentum:
                    if "momentum_buffer" not in state:
                        buf = state["momentum_buffer"] = grad.clone()
                    else:
                        buf = state["momentum_buffer"]
                        buf.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
                    # Nesterov: the step looks one momentum step ahead of the heavy ball.
                    grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
                param.add_(grad, alpha=-lr)
        return loss


class Adagrad(_ScratchOptimizer):
    """AdaGrad, like torch.optim.Adagrad (Chapter 3).

    G += g^2 (elementwise);  p -= lr_t * g / (sqrt(G) + eps),  lr_t = lr / (1 + (t - 1) lr_decay).
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0,
                 initial_accumulator_value: float = 0.0, eps: float = 1e-10, *, maximize: bool = False):
        defaults = dict(lr=check_float("lr", lr, low=0.0),
                        lr_decay=check_float("lr_decay", lr_decay, low=0.0),
                        weight_decay=check_float("weight_decay", weight_decay, low=0.0),
                        initial_accumulator_value=check_float(
                            "initial_accumulator_value", initial_accumulator_value, low=0.0),
                        eps=check_float("eps", eps, low=0.0),
                        maximize=check_bool("maximize", maximize))
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            for param, grad, state in self._params_with_grad(group):
                if not state:
                    state["step"] = 0
                    state["sum"] = torch.full_like(param, group["initial_accumulator_value"])
                state["step"] += 1
                if group["weight_decay"]:
                    grad = grad.add(param, alpha=group["weight_decay"])
                lr_t = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
                state["sum"].addcmul_(grad, grad)  # the sum of all squared gradients so far
                param.addcdiv_(grad, state["sum"].sqrt().add_(group["eps"]), value=-lr_t)
        return loss


class RMSprop(_ScratchOptimizer):
    """RMSProp, like torch.optim.RMSprop (Chapter 3).

    v = alpha v + (1 - alpha) g^2;  p -= lr * g / (sqrt(v) + eps)
    (centered: v minus the square of a running mean of g; momentum: a buffer of those steps).
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False, *,
                 maximize: bool = False):
        defaults = dict(lr=check_float("lr", lr, low=0.0),
                        alpha=check_float("alpha", alpha, low=0.0, high=1.0),
                        eps=check_float("eps", eps, low=0.0),
                        weight_decay=check_float("weight_decay", weight_decay, low=0.0),
                        momentum=check_float("momentum", momentum, low=0.0),
                        centered=check_bool("centered", centered),
                        maximize=check_bool("maximize", maximize))
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            alpha = group["alpha"]
            for param, grad, state in self._params_with_grad(group):
                if not state:
                    state["step"] = 0
                    state["square_avg"] = torch.zeros_like(param)
                    if group["momentum"]:
                        state["momentum_buffer"] = torch.zeros_like(param)
                    if group["centered"]:
                        state["grad_avg"] = torch.zeros_like(param)
                state["step"] += 1
                if group["weight_decay"]:
                    grad = grad.add(param, alpha=group["weight_decay"])
                square_avg = state["square_avg"].mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
                if group["centered"]:  # subtract the squared running mean: a running variance
                    grad_avg = state["grad_avg"].lerp_(grad, 1 - alpha)
                    denom = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_().add_(group["eps"])
                else:
                    denom = square_avg.sqrt().add_(group["eps"])
                if group["momentum"]:
                    buf = state["momentum_buffer"].mul_(group["momentum"]).addcdiv_(grad, denom)
                    param.add_(buf, alpha=-group["lr"])
                else:
                    param.addcdiv_(grad, denom, value=-group["lr"])
        return loss


class Adadelta(_ScratchOptimizer):
    """Adadelta (Zeiler), like torch.optim.Adadelta (Chapter 3).

    v = rho v + (1 - rho) g^2;  step = sqrt(u + eps) / sqrt(v + eps) * g;  u = rho u + (1 - rho) step^2;
    p -= lr * step.  The step carries the units of p (from u, the running mean of squared
    steps), so the original method needs no learning rate: torch's lr = 1 is that method.
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, *, maximize: bool = False):
        defaults = dict(lr=check_float("lr", lr, low=0.0),
                        rho=check_float("rho", rho, low=0.0, high=1.0),
                        eps=check_float("eps", eps, low=0.0),
                        weight_decay=check_float("weight_decay", weight_decay, low=0.0),
                        maximize=check_bool("maximize", maximize))
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            rho, eps = group["rho"], group["eps"]
            for param, grad, state in self._params_with_grad(group):
                if not state:
                    state["step"] = 0
                    state["square_avg"] = torch.zeros_like(param)  # running mean of g^2
                    state["acc_delta"] = torch.zeros_like(param)   # running mean of squared steps
                state["step"] += 1
                if group["weight_decay"]:
                    grad = grad.add(param, alpha=group["weight_decay"])
                square_avg = state["square_avg"].mul_(rho).addcmul_(grad, grad, value=1 - rho)
                delta = state["acc_delta"].add(eps).sqrt_().div_(square_avg.add(eps).sqrt_()).mul_(grad)
                state["acc_delta"].mul_(rho).addcmul_(delta, delta, value=1 - rho)
                param.add_(delta, alpha=-group["lr"])
        return loss


class Adam(_ScratchOptimizer):
    """Adam with bias correction, and AMSGrad with ``amsgrad=True``, like torch.optim.Adam (Chapter 3).

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  m_hat = m / (1 - b1^t);  v_hat = v / (1 - b2^t);
    p -= lr * m_hat / (sqrt(v_hat) + eps).  AMSGrad uses the running maximum of v in place of v.
    """

    _decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, amsgrad: bool = False, *,
                 maximize: bool = False):
        defaults = dict(lr=check_float("lr", lr, low=0.0), betas=_betas(betas),
                        eps=check_float("eps", eps, low=0.0),
                        weight_decay=check_float("weight_decay", weight_decay, low=0.0),
                        amsgrad=check_bool("amsgrad", amsgrad),
                        maximize=check_bool("maximize", maximize))
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            (beta1, beta2), lr, weight_decay = group["betas"], group["lr"], group["weight_decay"]
            for param, grad, state in self._params_with_grad(group):
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_avg_sq"] = torch.zeros_like(param)
                    if group["amsgrad"]:
                        state["max_exp_avg_sq"] = torch.zeros_like(param)
                state["step"] += 1
                t = state["step"]
                if weight_decay and self._decoupled:
                    param.mul_(1 - lr * weight_decay)  # AdamW: shrink the weights, outside the moments
                elif weight_decay:
                    grad = grad.add(param, alpha=weight_decay)  # Adam: an L2 penalty, inside the moments
                m = state["exp_avg"].lerp_(grad, 1 - beta1)
                v = state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                if group["amsgrad"]:  # never let the second moment (hence 1/step) shrink
                    v = torch.maximum(state["max_exp_avg_sq"], v, out=state["max_exp_avg_sq"])
                # Both averages start at 0, so early on they are too small by the factors 1 - beta^t.
                bias_correction1 = 1 - beta1**t
                bias_correction2 = 1 - beta2**t
                denom = (v.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
                param.addcdiv_(m, denom, value=-lr / bias_correction1)
        return loss


class Adamax(_ScratchOptimizer):
    """Adamax (Kingma and Ba's infinity-norm Adam), like torch.optim.Adamax (Chapter 3).

    m = b1 m + (1 - b1) g;  u = max(b2 u, |g| + eps);  p -= lr / (1 - b1^t) * m / u.
    u needs no bias correction: a maximum is not pulled towards its zero start.
    """

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, *, maximize: bool = False):
        defaults = dict(lr=check_float("lr", lr, low=0.0), betas=_betas(betas),
                        eps=check_float("eps", eps, low=0.0),
                        weight_decay=check_float("weight_decay", weight_decay, low=0.0),
                        maximize=check_bool("maximize", maximize))
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param, grad, state in self._params_with_grad(group):
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_inf"] = torch.zeros_like(param)  # the decaying maximum of |g|
                state["step"] += 1
                if group["weight_decay"]:
                    grad = grad.add(param, alpha=group["weight_decay"])
                m = state["exp_avg"].lerp_(grad, 1 - beta1)
                u = torch.maximum(state["exp_inf"].mul_(beta2), grad.abs().add_(group["eps"]),
                                  out=state["exp_inf"])
                param.addcdiv_(m, u, value=-group["lr"] / (1 - beta1 ** state["step"]))
        return loss


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter), like torch.optim.AdamW (Chapter 3).

    p *= 1 - lr * weight_decay, then the Adam step on the bare gradient.
    """

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize)



# ---------------------------------------------------------------------------
# Iterate averaging
# ---------------------------------------------------------------------------

def _trajectory(iterates) -> torch.Tensor:
    iterates = as_tensor("iterates", iterates, floating=True)
    if iterates.dim() == 0 or len(iterates) == 0:
        raise ValueError(f"iterates must hold at least one iterate along dimension 0, got {describe(iterates)}")
    return iterates


def polyak_ruppert_average(iterates) -> torch.Tensor:
    """Running means of a trajectory (T, ...): row t is (θ_0 + ... + θ_t) / (t + 1) (Chapter 3).

    Polyak and Juditsky's averaged iterate, the same as the running equal-weight
    average of torch.optim.swa_utils.AveragedModel. Pass ``iterates[start:]``
    to average only the tail of a run.
    """
    iterates = _trajectory(iterates)
    counts = torch.arange(1, len(iterates) + 1, dtype=iterates.dtype, device=iterates.device)
    return iterates.cumsum(0) / counts.reshape(-1, *([1] * (iterates.dim() - 1)))


def exponential_moving_average(iterates, decay: float) -> torch.Tensor:
    """Exponential moving averages of a trajectory (T, ...) (Chapter 3).

    Row 0 is θ_0 and row t is decay * row(t - 1) + (1 - decay) * θ_t, the
    convention of torch.optim.swa_utils.get_ema_multi_avg_fn: it weighs the last
    1 / (1 - decay) or so iterates and forgets the start at the rate decay^t.
    """
    iterates = _trajectory(iterates)
    decay = check_float("decay", decay, low=0.0, high=1.0, high_open=True)
    averages = torch.empty_like(iterates)
    averages[0] = iterates[0]
    for t in range(1, len(iterates)):
        averages[t] = torch.lerp(iterates[t], averages[t - 1], decay)
    return averages


# ---------------------------------------------------------------------------
# Side by side with torch.optim
# ---------------------------------------------------------------------------

class TorchComparison(NamedTuple):
    """Ours against torch.optim on the same run: the largest parameter difference over all steps,
    and how far torch's parameters moved (a comparison of runs that never moved would prove nothing)."""

    max_difference: float
    distance_moved: float


def deviation_from_torch(name: str, steps: int = 50, *, seed: int = 0, **hyperparameters) -> TorchComparison:
    """Train one small network with this module's optimizer ``name`` and with torch's (Chapter 3).

    A (5, 8, 1) tanh network from :func:`dlbook.nets.mlp` fits y = sin(x_1 + ... + x_5)
    on 64 Gaussian inputs in float64, with full-batch gradients; both runs
    start from the same weights and see the same data. With ``maximize=True``
    both ascend the negated loss, which is the same descent.
    """
    name = check_choice("name", name, [n for n in __all__ if n[0].isupper()])
    steps = check_int("steps", steps, minimum=1)
    rng = generator(check_int("seed", seed, minimum=0))
    X = torch.randn(64, 5, generator=rng, dtype=torch.float64)
    y = torch.sin(X.sum(1, keepdim=True))
    sign = -1.0 if hyperparameters.get("maximize") else 1.0
    paths = []
    for optimizer_class in (globals()[name], getattr(torch.optim, name)):
        model = nets.mlp((5, 8, 1), activation="tanh", seed=seed, dtype=torch.float64)
        optimizer = optimizer_class(model.parameters(), **hyperparameters)
        path = [torch.cat([p.detach().flatten() for p in model.parameters()])]
        for _ in range(steps):
            loss = sign * ((model(X) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            path.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
        paths.append(torch.stack(path))
    ours, theirs = paths
    return TorchComparison((ours - theirs).abs().max().item(), (theirs[-1] - theirs[0]).abs().max().item())
