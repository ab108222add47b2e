"""The Python half of the R front end's modules (R's nn_module(), nn_embedding(), losses).

An R module defined with ``nn_module()`` holds an :class:`RModule`: a real ``torch.nn.Module``
that owns the parameters, buffers and submodules the R code registers (so optimizers,
``state_dict()``, ``.to()``, DDP and autocast see an ordinary module), and whose ``forward`` calls
back into the R ``forward`` when Python calls the module (R calls the R forward directly).

The built-in layers are PyTorch's own modules. Where R torch's semantics differ from PyTorch's
(1-based indices and class labels), a subclass here converts at the border, so that the module
means the same whether R or a Python container (``torch.nn.Sequential``) calls it.

Imported by the R package with ``reticulate::import_from_path``; imports torch only.
"""

import torch


class RModule(torch.nn.Module):
    """A module whose forward is an R function (set by the R package as ``_r_forward``)."""

    def __init__(self, classname: str = "nn_module") -> None:
        super().__init__()
        self._r_classname = classname
        self._r_forward = None

    def forward(self, *args, **kwargs):
        if self._r_forward is None:
            raise NotImplementedError(f"{self._r_classname}: forward is not implemented")
        return self._r_forward(*args, **kwargs)

    def _get_name(self) -> str:
        return self._r_classname

    def __getstate__(self):
        # The R function cannot be pickled (deepcopy, torch.save of the whole module).
        state = self.__dict__.copy()
        state["_r_forward"] = None
        return state


def _one_based(target: torch.Tensor) -> torch.Tensor:
    """R's 1-based class labels / indices as PyTorch's 0-based ones (integer tensors only)."""
    if target.dtype.is_floating_point or target.dtype == torch.bool:
        return target
    return target - 1


class OneBasedEmbedding(torch.nn.Embedding):
    """nn_embedding(): indices 1..num_embeddings (padding_idx is converted by the R side)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return super().forward(_one_based(input))


class OneBasedCrossEntropyLoss(torch.nn.CrossEntropyLoss):
    """nn_cross_entropy_loss(): integer targets are 1-based class labels (class probabilities,
    floating-point targets, are taken as they are)."""

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return super().forward(input, _one_based(target))


class OneBasedNLLLoss(torch.nn.NLLLoss):
    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return super().forward(input, _one_based(target))


def named_parameters(module: torch.nn.Module, recurse: bool = True):
    """(names, tensors) of a module's parameters in one call."""
    items = list(module.named_parameters(recurse=recurse))
    return [n for n, _ in items], [p for _, p in items]


def state_dict(module: torch.nn.Module, keep_vars: bool = False):
    """(keys, values) of a module's state dict in one call."""
    sd = module.state_dict(keep_vars=keep_vars)
    return list(sd.keys()), list(sd.values())


def load_state_dict(module: torch.nn.Module, keys, values):
    """Loads (keys, values) with strict=False; returns (missing, unexpected) keys."""
    result = module.load_state_dict(dict(zip(keys, values)), strict=False)
    return list(result.missing_keys), list(result.unexpected_keys)


def set_group_value(group: dict, key: str, value):
    """param_groups[i][key] = value, keeping a tuple a tuple (betas)."""
    if isinstance(group.get(key), tuple) and isinstance(value, list):
        value = tuple(value)
    group[key] = value


def local_tensors(module: torch.nn.Module):
    """(parameter names, parameters, buffer names, buffers) of the module itself, not of its
    submodules; unset (None) entries left out."""
    params = [(n, p) for n, p in module._parameters.items() if p is not None]
    buffers = [(n, b) for n, b in module._buffers.items() if b is not None]
    return ([n for n, _ in params], [p for _, p in params],
            [n for n, _ in buffers], [b for _, b in buffers])


def shape_of(t: torch.Tensor):
    return list(t.shape)


def optimizer_state_from_r(state):
    """An optimizer state dict that came from R back in PyTorch's types: the keys of "state"
    are parameter numbers (ints), "params" lists of ints, and a list where the optimizer keeps
    a tuple (betas) a tuple."""
    out = dict(state)
    out["state"] = {int(k): dict(v) for k, v in dict(state.get("state") or {}).items()}
    groups = []
    for group in state.get("param_groups") or []:
        group = dict(group)
        params = group.get("params", [])
        if isinstance(params, (int, float)):
            params = [params]
        group["params"] = [int(p) for p in params]
        for key, value in group.items():
            if key != "params" and isinstance(value, list):
                group[key] = tuple(value)
        groups.append(group)
    out["param_groups"] = groups
    return out


def call_closure(optimizer, closure):
    """optimizer.step(closure), the closure an R function returning a loss tensor."""
    return optimizer.step(closure)


def group_options(group):
    """A parameter group's options (everything but "params"), in order."""
    return {k: v for k, v in group.items() if k != "params"}


def scheduler_state(scheduler):
    """A scheduler's state dict without its functions (LambdaLR keeps R functions there)."""
    return {k: v for k, v in scheduler.state_dict().items() if not callable(v)}


def scheduler_step(scheduler):
    """scheduler.step() without PyTorch's warning about a scheduler step before any optimizer
    step (R torch has no such warning, and a grad scaler that skips the first step causes it)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)`")
        scheduler.step()
