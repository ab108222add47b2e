"""When mixed precision goes wrong: one raw input feature in the hundreds overflows float16.

Run: python examples/when_amp_goes_wrong.py [headroom.png]   (CPU; float16 autocast)

1. The scaler skips steps: step_was_skipped() says so at no cost, stats() counts them, and the
   learning-rate schedule is held back on skipped steps (no torch warning).
2. overflow_report() names the parameters whose gradients held inf/NaN.
3. The scale backs off to min_scale and overflows there: ScaleCollapseError, instead of a scale
   that silently falls towards zero.
4. The fix the report points to (normalise the input) trains without a skip.
5. overflow_locator() says where the inf is made: not in the forward pass (8 bits of float16
   headroom left), but in the parameters' gradients, first those of the last layer; the
   headroom plot is saved as a PNG (the path given, else in the temporary directory).
6. suggest_policy() names the layers to keep in float32, with the reasons; under that
   precision_policy() the raw inputs train without a skip (at lr=1e-5: with a raw feature in
   the hundreds, 1e-3 diverges even in float32).
"""

import os
import sys
import tempfile

import torch

import ampkit


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))


def mse(output, target):
    return torch.nn.functional.mse_loss(output.float(), target)


def train(x, y, steps=12, lr=1e-3, rules=None):
    model = make_model()
    policy = ampkit.precision_policy(model, rules) if rules else None
    opt = torch.optim.SGD(model.named_parameters(), lr=lr)  # named: the report uses the names
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    scaler = ampkit.GradScaler("cpu", min_scale=2.0**10, track_overflow=True)
    for step in range(steps):
        opt.zero_grad()
        with ampkit.autocast("cpu", dtype=torch.float16):
            loss = mse(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        try:
            scaler.update()
        except ampkit.ScaleCollapseError as error:
            print(f"step {step}: ScaleCollapseError: {error}")
            return scaler
        if not scaler.step_was_skipped(opt):  # the LR schedule follows the real steps
            sched.step()
        report = ", ".join(f"{r['name']} ({r['inf']} inf, {r['nan']} nan)"
                           for r in scaler.overflow_report())
        print(f"step {step}: skipped={scaler.step_was_skipped(opt)!s:5} "
              f"scale={scaler.get_scale():>7.0f} lr={sched.get_last_lr()[0]:.2e} "
              f"loss={loss.item():.4g}" + (f"  overflow: {report}" if report else ""))
    if policy is not None:
        policy.remove()
    return scaler


def locate(x, y, plot_path, steps=3):
    """Three raw-input steps under the overflow locator: where the inf is made."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = ampkit.GradScaler("cpu")
    with ampkit.overflow_locator(model) as locator:
        for _ in range(steps):
            opt.zero_grad()
            with ampkit.autocast("cpu", dtype=torch.float16):
                loss = mse(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    rows = [r for r in locator.summary() if r["module"] != "(model)"]
    for first in locator.first_nonfinite():
        step = first["step"]
        print(f"locator step {step}: first non-finite: forward={first['forward'] or 'none'} "
              f"backward={first['backward'] or 'none'} "
              f"parameters={first['parameters'] or 'none'}")
        for phase in ("forward", "backward", "parameters"):
            cells = ", ".join(f"{r['module']} {r['headroom']:.2f}" for r in rows
                              if r["step"] == step and r["pass"] == phase)
            print(f"locator step {step}: headroom {phase}: {cells}")
    print(f"locator: {locator.host_reads} host reads for {steps} steps")
    locator.plot(plot_path, modules=["0", "2", "4"], passes=("forward", "backward"),
                 title="float16 headroom of the Linear layers, raw inputs")
    return locator


def main():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 8, generator=g)
    x[:, 3] *= 300  # a raw feature in the hundreds: float16 gradients overflow
    y = torch.randn(64, 1, generator=g)

    print("== raw inputs")
    scaler = train(x, y)
    print("stats:", scaler.stats())

    print("\n== the same model, inputs normalised")
    scaler = train((x - x.mean(0)) / x.std(0), y, steps=6)
    print("stats:", scaler.stats())

    print("\n== where the inf is made: overflow_locator, raw inputs")
    plot = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.gettempdir(),
                                                                 "when_amp_goes_wrong.png")
    locate(x, y, plot)
    print(f"headroom plot: {plot}")

    print("\n== suggest_policy, then the raw inputs under that precision_policy")
    suggestion = ampkit.suggest_policy(make_model(), [(x, y)], loss_fn=mse)
    for name, reasons in suggestion.reasons.items():
        print(f"keep {name} in float32: {'; '.join(reasons)}")
    scaler = train(x, y, steps=6, lr=1e-5, rules=suggestion.rules)
    print("stats:", scaler.stats())


if __name__ == "__main__":
    main()
