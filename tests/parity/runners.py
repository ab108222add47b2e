"""The Python runners: ampkit (ampkit.autocast + ampkit.GradScaler) and the reference
torch.amp (torch.autocast + torch.amp.GradScaler). One loop, two libraries; the R runner
(runner.R) is the same loop written in R against ampkit's R API.

ampkit's options beyond torch.amp (a scenario's "scaler_options") go to ampkit only. Where they
change the scale policy (parity_models.uses_policy), torch.amp keeps the training itself
(scale, unscale, inf checks, skipping) while the plain-Python Reference of the policy decides,
from torch.amp's own inf checks, the scale and growth tracker that update(new_scale) then sets:
the reference run of such a scenario, and ampkit's state keys in its checkpoints."""

import warnings
from typing import Any, Dict, List, Optional

import parity_models as pm
import torch

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def _library(name: str):
    if name == "torch.amp":
        return torch.autocast, torch.amp.GradScaler
    if name == "ampkit":
        import ampkit

        return ampkit.autocast, ampkit.GradScaler
    raise ValueError(name)


def run(spec: Dict[str, Any], library: str, start: int = 0, stop: Optional[int] = None,
        resume_from: Optional[str] = None, save_to: Optional[str] = None,
        device: str = "cpu") -> Dict[str, Any]:
    """Trains steps [start, stop) of a scenario on `device` ("cpu" or "cuda": the model, the
    batches, the regions and the scaler; resuming a checkpoint first, saving one after, when
    asked) and returns the record of those steps (parity_models.Recorder)."""
    autocast, GradScaler = _library(library)
    model, opts, params = pm.build(spec)
    model.to(device)  # in place: the optimizers keep the same Parameter objects
    options = dict(spec["scaler_options"]) if library == "ampkit" else {}
    if library == "ampkit" and spec["preset"] is not None:
        scaler = pm.build_preset(spec["preset"], device)
    else:
        scaler = GradScaler(device, init_scale=float(spec["init_scale"]),
                            growth_factor=float(spec["growth_factor"]),
                            backoff_factor=float(spec["backoff_factor"]),
                            growth_interval=int(spec["growth_interval"]),
                            enabled=spec["scaler"], **options)
    # torch.amp with a policy it does not have: the Reference decides the scale.
    policy = None
    if library == "torch.amp" and spec["scaler"] and pm.uses_policy(spec):
        if spec["new_scale"]:
            raise ValueError(f"{spec['name']}: no reference for update(new_scale) with ampkit's "
                             "policy options")
        policy = pm.reference_policy(spec)
    if resume_from is not None:
        state = pm.restore(resume_from, model, opts, device)
        scaler.load_state_dict(state)
        if policy is not None:
            policy = pm.reference_policy(spec, state)
    dtype = DTYPES[spec["dtype"]]
    stop = int(spec["steps"]) if stop is None else stop
    recorder = pm.Recorder(opts, params)
    for step in range(start, stop):
        total = 0.0
        for micro in range(int(spec["accumulate"])):
            x, y = (t.to(device) for t in pm.batch(spec, step, micro))
            with autocast(device, dtype=dtype, enabled=spec["autocast"]):
                h = pm.features(model, x)
                if spec["nested_disabled"]:
                    with autocast(device, enabled=False):
                        out = pm.head_fp32(model, h)
                else:
                    out = pm.head(model, h)
                loss = pm.loss_fn(spec, out, y)
            if spec["gradient_penalty"]:
                grads = torch.autograd.grad(scaler.scale(loss), params, create_graph=True)
                grads = pm.unscale_grads(grads, 1.0 / scaler.get_scale())
                with autocast(device, dtype=dtype, enabled=spec["autocast"]):
                    loss = loss + pm.grad_norm(grads)
            scaler.scale(loss).backward()
            total += loss.item()
        pm.inject(spec, params, step)
        if spec["clip"] is not None:
            for opt in opts:
                scaler.unscale_(opt)
            pm.clip(spec, params)
        recorder.before_step()
        for opt in opts:
            scaler.step(opt)
        new_scale = pm.new_scale_at(spec, step)
        outcome = None
        if library == "ampkit":
            collapse = _update_ampkit(scaler, new_scale)
        elif policy is not None:
            policy.update(_torch_found_inf(scaler))
            scaler.update(policy.scale)
            scaler._growth_tracker.fill_(policy.tracker)
        elif new_scale is None:
            scaler.update()
        else:
            scaler.update(new_scale)
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        if library == "ampkit":
            outcome = {"stats": scaler.stats(), "skipped_any": scaler.step_was_skipped(),
                       "skipped_each": [scaler.step_was_skipped(opt) for opt in opts],
                       "overflow_report": (scaler.overflow_report()
                                           if pm.scaler_options(spec)["track_overflow"] else []),
                       "collapse": collapse}
        recorder.after_step(total, scaler.get_scale(), _state(scaler, policy, spec), outcome)
    if save_to is not None:
        pm.save_checkpoint(save_to, model, opts, _state(scaler, policy, spec))
    return recorder.record


def _update_ampkit(scaler, new_scale) -> Dict[str, Any]:
    """ampkit's update(), recording what it did about a collapse: whether it raised
    ScaleCollapseError (caught: training goes on) and the messages of the warnings it gave."""
    import ampkit

    error = False
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            if new_scale is None:
                scaler.update()
            else:
                scaler.update(new_scale)
        except ampkit.ScaleCollapseError:
            error = True
    messages: List[str] = [str(w.message) if issubclass(w.category, RuntimeWarning)
                           else f"{w.category.__name__}: {w.message}" for w in seen]
    return {"error": error, "warnings": messages}


def _torch_found_inf(scaler) -> bool:
    """Whether torch.amp's inf checks of this iteration found an inf/NaN: what its update()
    reads."""
    return any(bool(found.item()) for state in scaler._per_optimizer_states.values()
               for found in state["found_inf_per_device"].values())


def _state(scaler, policy, spec) -> Dict[str, Any]:
    """The scaler's state_dict(); torch.amp's under the Reference policy with ampkit's keys
    (from the Reference) after its own, so that ampkit resumes its checkpoints mid-policy."""
    state = scaler.state_dict()
    if policy is not None:
        state.update(pm.reference_state(policy, spec))
    return state
