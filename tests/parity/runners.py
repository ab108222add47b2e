"""The Python runners: ampkit (ampkit.autocast + ampkit.GradScaler) and the reference
torch.amp (torch.autocast + torch.amp.GradScaler). One loop, two libraries; the R runner
(runner.R) is the same loop written in R against ampkit's R API."""

from typing import Any, Dict, Optional

import torch

import parity_models as pm

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
    autocast, GradScaler = _library(library)
    model, opt, params = pm.build(spec)
    scaler = GradScaler("cpu", init_scale=float(spec["init_scale"]),
                        growth_factor=float(spec["growth_factor"]),
                        backoff_factor=float(spec["backoff_factor"]),
                        growth_interval=int(spec["growth_interval"]), enabled=spec["scaler"])
    if resume_from is not None:
        ckpt = pm.load_checkpoint(resume_from)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        scaler.load_state_dict(ckpt["scaler"])
    dtype = DTYPES[spec["dtype"]]
    stop = int(spec["steps"]) if stop is None else stop
    record: Dict[str, Any] = {"loss": [], "scale": [], "skipped": []}
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
            scaler.unscale_(opt)
            pm.clip(spec, params)
        before = pm.snapshot(params)
        scaler.step(opt)
        new_scale = pm.new_scale_at(spec, step)
        if new_scale is None:
            scaler.update()
        else:
            scaler.update(new_scale)
        opt.zero_grad(set_to_none=True)
        record["loss"].append(total)
        record["scale"].append(float(scaler.get_scale()))
        record["skipped"].append(not pm.changed(params, before))
    record["params"] = pm.flat_params(params)
    if save_to is not None:
        pm.save_checkpoint(save_to, model, opt, scaler.state_dict())
    return record
