"""When mixed precision goes wrong: one raw input feature in the hundreds overflows float16.

Run: python examples/when_amp_goes_wrong.py   (CPU; float16 autocast)

1. The scaler skips steps: step_was_skipped() says so at no cost, stats() counts them, and the
   learning-rate schedule is held back on skipped steps (no torch warning).
2. overflow_report() names the parameters whose gradients held inf/NaN.
3. The scale backs off to min_scale and overflows there: ScaleCollapseError, instead of a scale
   that silently falls towards zero.
4. The fix the report points to (normalise the input) trains without a skip.
"""

import torch

import ampkit


def train(x, y, steps=12):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.named_parameters(), lr=1e-3)  # named: the report uses the names
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    scaler = ampkit.GradScaler("cpu", min_scale=2.0**10, track_overflow=True)
    for step in range(steps):
        opt.zero_grad()
        with ampkit.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
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
    return scaler


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


if __name__ == "__main__":
    main()
