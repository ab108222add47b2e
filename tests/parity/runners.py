"""The Python runners: ampkit (ampkit.autocast + ampkit.GradScaler) and the reference
torch.amp (torch.autocast + torch.amp.GradScaler). One loop, two libraries; the R runner
(runner.R) is the same loop written in R against ampkit's R API."""

from typing import Any, Dict, Optional

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
        resume_from: Optional[str] = None, save_to: Optional[str] = None) -> Dict[str, Any]:
    """Trains steps [start, stop) of a scenario (resuming a checkpoint first, saving one after,
    when asked) and returns the record of those steps (parity_models.Recorder)."""
    autocast, GradScaler = _library(library)
    model, opts, params = pm.build(spec)
    scaler = GradScaler("cpu", init_scale=float(spec["init_scale"]),
                        growth_factor=float(spec["growth_factor"]),
                        backoff_factor=float(spec["backoff_factor"]),
                        growth_interval=int(spec["growth_interval"]), enabled=spec["scaler"])
    if resume_from is not None:
        scaler.load_state_dict(pm.restore(resume_from, model, opts))
    dtype = DTYPES[spec["dtype"]]
    stop = int(spec["steps"]) if stop is None else stop
    recorder = pm.Recorder(opts, params)
    for step in range(start, stop):
        total = 0.0
        for micro in range(int(spec["accumulate"])):
            x, y = pm.batch(spec, step, micro)
            with autocast("cpu", dtype=dtype, enabled=spec["autocast"]):
                h = pm.features(model, x)
                if spec["nested_disabled"]:
                    with autocast("cpu", enabled=False):
                        out = pm.head_fp32(model, h)
                else:
                    out = pm.head(model, h)
                loss = pm.loss_fn(spec, out, y)
            if spec["gradient_penalty"]:
                grads = torch.autograd.grad(scaler.scale(loss), params, create_graph=True)
                grads = pm.unscale_grads(grads, 1.0 / scaler.get_scale())
                with autocast("cpu", dtype=dtype, enabled=spec["autocast"]):
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
        if new_scale is None:
            scaler.update()
        else:
            scaler.update(new_scale)
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        recorder.after_step(total, scaler.get_scale(), scaler.state_dict())
    if save_to is not None:
        pm.save_checkpoint(save_to, model, opts, scaler.state_dict())
    return recorder.record
