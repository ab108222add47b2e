"""ampkit inside Lightning, accelerate and transformers' Trainer (the wiring of
``ampkit.integrations``), on the CPU in float16 with a tiny model built here (no downloads).
CPU-only for now: each framework picks its accelerator itself; a CUDA variant is future work.

For each framework: (a) a run with stock torch.amp and a run with ampkit give bit-identical
parameters and the same scale after every step, equal to the textbook torch.amp loop's;
(b) an inf injected into a gradient at one step is skipped the same way (the scale backs off);
(c) a checkpoint saved by the torch.amp run is resumed by the ampkit run and the reverse, and
both continue exactly as the uninterrupted run. The resumed runs build their scaler with the
defaults, so the scale, growth interval and growth tracker they continue with can only come from
the checkpoint.

"Stock torch.amp" is each framework's own wiring of ``torch.amp.GradScaler("cpu")``: Lightning's
``MixedPrecision`` plugin given that scaler; for accelerate and the Trainer, which have no public
way to take a scaler (and on the CPU make none), the workaround users poke today
(``accelerator.scaler = ...; accelerator.native_amp = True``), done here in test code only.
"""

import math

import accelerate
import ampkit
import lightning.pytorch as pl
import pytest
import torch
import transformers
from accelerate.state import AcceleratorState, GradientState
from ampkit.integrations.accelerate import use_ampkit
from ampkit.integrations.lightning import MixedPrecision
from ampkit.integrations.transformers import AmpkitTrainerMixin, Trainer
from lightning.pytorch.plugins import MixedPrecision as LightningMixedPrecision

F = torch.nn.functional
BATCH, STEPS_PER_EPOCH, EPOCHS = 8, 4, 2
# A scale that grows (every 3 clean steps) and a checkpoint after step 4 with the growth tracker
# at 1, so a resumed run that lost the tracker or the scale would diverge.
SCALER = {"init_scale": 4096.0, "growth_interval": 3}
INF_STEP = 5  # the step (from 0) whose gradient gets an inf


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH * STEPS_PER_EPOCH, 8, generator=g), torch.randn(
        BATCH * STEPS_PER_EPOCH, 1, generator=g)


X, Y = _data()
BATCHES = [(X[i:i + BATCH], Y[i:i + BATCH]) for i in range(0, len(X), BATCH)] * EPOCHS


def make_net(inject_at=None):
    """The tiny model, the same initial weights every time; ``inject_at``: the backward pass
    (counted from 0) at which the first layer's weight gradient becomes inf."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    if inject_at is not None:
        seen = [0]

        def inject(grad):
            seen[0] += 1
            return torch.full_like(grad, math.inf) if seen[0] - 1 == inject_at else grad

        net[0].weight.register_hook(inject)
    return net


def params(net):
    return [p.detach().clone() for p in net.parameters()]


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def textbook(inject_at=None):
    """The torch.amp recipe: float16 autocast on the CPU, scale, clip after unscale_, step."""
    net = make_net(inject_at)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", **SCALER)
    scales = []
    for x, y in BATCHES:
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            out = net(x)
        scaler.scale(F.mse_loss(out.float(), y)).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return params(net), scales


@pytest.fixture(scope="module")
def oracle():
    return {None: textbook(), INF_STEP: textbook(INF_STEP)}


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    """accelerate (and so the Trainer) keeps one process-wide state: clear it after each test,
    as accelerate's own test case does, so that no test sees another's."""
    yield
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


SCALER_CLASS = {"torch.amp": torch.amp.GradScaler, "ampkit": ampkit.GradScaler}


def check_backoff(scales):
    """The injected inf halved the scale at INF_STEP (growth never halves it)."""
    assert scales[INF_STEP] == scales[INF_STEP - 1] / 2


# ---- Lightning ----------------------------------------------------------------------------------

# Lightning 2.6.6 calls torch.utils._pytree.LeafSpec, which torch 2.13 deprecates (a
# FutureWarning from inside Lightning's CombinedLoader on every fit); nothing of ampkit's.
lightning_warnings = pytest.mark.filterwarnings(
    r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning")


class LitRegression(pl.LightningModule):
    def __init__(self, inject_at=None):
        super().__init__()
        self.net = make_net(inject_at)
        self.scales = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.mse_loss(self.net(x).float(), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def on_train_batch_end(self, *args):
        self.scales.append(self.trainer.precision_plugin.scaler.get_scale())


def lightning_plugin(kind, scaler_kwargs=SCALER):
    if kind == "torch.amp":
        return LightningMixedPrecision(
            "16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu", **scaler_kwargs))
    if kind == "ampkit scaler":  # Lightning's own plugin given ampkit's scaler
        return LightningMixedPrecision(
            "16-mixed", "cpu", scaler=ampkit.GradScaler("cpu", **scaler_kwargs))
    return MixedPrecision("16-mixed", "cpu", scaler=ampkit.GradScaler("cpu", **scaler_kwargs))


def fit_lightning(plugin, epochs=EPOCHS, inject_at=None, resume=None, save=None):
    module = LitRegression(inject_at)
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, max_epochs=epochs, gradient_clip_val=1.0, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        plugins=[plugin])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=BATCH)
    trainer.fit(module, loader, ckpt_path=resume, weights_only=True if resume else None)
    if save:
        trainer.save_checkpoint(save)
    return params(module.net), module.scales


AMPKIT_PLUGINS = ["ampkit plugin", "ampkit scaler"]


@lightning_warnings
@pytest.mark.parametrize("inject_at", [None, INF_STEP])
@pytest.mark.parametrize("kind", AMPKIT_PLUGINS)
def test_lightning_matches_torch_amp(oracle, kind, inject_at):
    expected = fit_lightning(lightning_plugin("torch.amp"), inject_at=inject_at)
    got = fit_lightning(lightning_plugin(kind), inject_at=inject_at)
    assert got[1] == expected[1] == oracle[inject_at][1]
    assert_same(got[0], expected[0])
    assert_same(got[0], oracle[inject_at][0])
    if inject_at is not None:
        check_backoff(got[1])


@lightning_warnings
@pytest.mark.parametrize("saver, resumer", [("torch.amp", "ampkit plugin"),
                                            ("ampkit plugin", "torch.amp")])
def test_lightning_checkpoint_round_trip(oracle, tmp_path, saver, resumer):
    ckpt = str(tmp_path / "epoch1.ckpt")
    fit_lightning(lightning_plugin(saver), epochs=1, save=ckpt)
    got = fit_lightning(lightning_plugin(resumer, scaler_kwargs={}), resume=ckpt)
    assert got[1] == oracle[None][1][STEPS_PER_EPOCH:]
    assert_same(got[0], oracle[None][0])


def test_lightning_plugin_defaults():
    plugin = MixedPrecision("16-mixed", "cpu")
    assert isinstance(plugin.scaler, ampkit.GradScaler)
    assert type(plugin).__qualname__ == LightningMixedPrecision.__qualname__  # checkpoint key
    with plugin.forward_context():
        assert ampkit.get_autocast_dtype("cpu") == torch.float16
        assert torch.is_autocast_enabled("cpu")
    assert MixedPrecision("bf16-mixed", "cpu").scaler is None
    with pytest.raises(ampkit.ArgumentTypeError, match="`device`"):
        MixedPrecision("16-mixed", 0)


# ---- accelerate ---------------------------------------------------------------------------------

def run_accelerate(kind, steps, inject_at=None, scaler_kwargs=SCALER, resume=None, save=None):
    accelerator = accelerate.Accelerator(mixed_precision="fp16", cpu=True)
    if kind == "ampkit":
        use_ampkit(accelerator, **scaler_kwargs)
    else:  # today's workaround for torch.amp on the CPU: private attributes
        accelerator.scaler = torch.amp.GradScaler("cpu", **scaler_kwargs)
        accelerator.native_amp = True
    net = make_net(inject_at)
    dtypes = []
    net[0].register_forward_hook(lambda module, inputs, out: dtypes.append(out.dtype))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    assert isinstance(accelerator.scaler, SCALER_CLASS[kind])
    net, opt = accelerator.prepare(net, opt)
    if resume:
        accelerator.load_state(resume)
    scales, skipped = [], []
    for x, y in steps:
        loss = F.mse_loss(net(x), y)  # accelerate returns the forward's outputs in float32
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        scales.append(accelerator.scaler.get_scale())
        skipped.append(accelerator.optimizer_step_was_skipped)
    if save:
        accelerator.save_state(save)
    assert set(dtypes) == {torch.float16}  # the forward really ran in float16 on the CPU
    return params(net), scales, skipped


@pytest.mark.parametrize("inject_at", [None, INF_STEP])
def test_accelerate_matches_torch_amp(oracle, inject_at):
    expected = run_accelerate("torch.amp", BATCHES, inject_at)
    got = run_accelerate("ampkit", BATCHES, inject_at)
    assert got[1:] == expected[1:]
    assert got[1] == oracle[inject_at][1]
    assert_same(got[0], expected[0])
    assert_same(got[0], oracle[inject_at][0])
    if inject_at is not None:
        check_backoff(got[1])
        assert got[2][INF_STEP] and sum(got[2]) == 1


@pytest.mark.parametrize("saver, resumer", [("torch.amp", "ampkit"), ("ampkit", "torch.amp")])
def test_accelerate_checkpoint_round_trip(oracle, tmp_path, saver, resumer):
    run_accelerate(saver, BATCHES[:STEPS_PER_EPOCH], save=str(tmp_path))
    got = run_accelerate(resumer, BATCHES[STEPS_PER_EPOCH:], scaler_kwargs={},
                         resume=str(tmp_path))
    assert got[1] == oracle[None][1][STEPS_PER_EPOCH:]
    assert_same(got[0], oracle[None][0])


def test_use_ampkit_options_and_errors():
    handler = accelerate.utils.GradScalerKwargs(init_scale=8.0, growth_interval=7)
    accelerator = accelerate.Accelerator(mixed_precision="fp16", cpu=True,
                                         kwargs_handlers=[handler])
    assert use_ampkit(accelerator, growth_interval=5) is accelerator
    scaler = accelerator.scaler
    assert isinstance(scaler, ampkit.GradScaler)
    assert (scaler.get_scale(), scaler.get_growth_interval()) == (8.0, 5)
    with pytest.raises(ampkit.ArgumentTypeError, match="`accelerator`"):
        use_ampkit(object())
    with pytest.raises(ampkit.ArgumentError, match="`device`"):
        use_ampkit(accelerator, device="cpu")
    with pytest.raises(ampkit.ArgumentError, match="`init_scale`"):
        use_ampkit(accelerator, init_scale=-1.0)
    accelerator.prepare(torch.nn.Linear(2, 2))
    with pytest.raises(ampkit.StateError, match=r"before accelerator\.prepare"):
        use_ampkit(accelerator)


@pytest.mark.parametrize("precision", ["bf16", "no"])
def test_use_ampkit_needs_fp16(precision):
    with pytest.raises(ampkit.ArgumentError, match=f"`accelerator`.*mixed_precision='{precision}'"):
        use_ampkit(accelerate.Accelerator(mixed_precision=precision, cpu=True))


# ---- transformers' Trainer ----------------------------------------------------------------------

class Regression(torch.nn.Module):
    def __init__(self, inject_at=None):
        super().__init__()
        self.net = make_net(inject_at)

    def forward(self, x, labels):
        return {"loss": F.mse_loss(self.net(x).float(), labels)}


class TorchAmpTrainer(transformers.Trainer):
    """The stock Trainer with torch.amp's scaler on the CPU: today's private workaround."""

    def __init__(self, *args, scaler_kwargs, **kwargs):
        self.scaler_kwargs = scaler_kwargs
        super().__init__(*args, **kwargs)

    def create_accelerator_and_postprocess(self):
        super().create_accelerator_and_postprocess()
        self.accelerator.scaler = torch.amp.GradScaler("cpu", **self.scaler_kwargs)
        self.accelerator.native_amp = True


class RecordScale(transformers.TrainerCallback):
    def __init__(self):
        self.trainer, self.scales = None, []

    def on_step_end(self, args, state, control, **kwargs):
        self.scales.append(self.trainer.accelerator.scaler.get_scale())


def train_transformers(kind, out, inject_at=None, scaler_kwargs=SCALER, resume=None, save=False):
    args = transformers.TrainingArguments(
        str(out), fp16=True, use_cpu=True, num_train_epochs=EPOCHS, optim="sgd",
        learning_rate=0.1, lr_scheduler_type="constant", per_device_train_batch_size=BATCH,
        max_grad_norm=1.0, train_sampling_strategy="sequential", report_to=[],
        logging_strategy="no", disable_tqdm=True, save_strategy="steps" if save else "no",
        save_steps=STEPS_PER_EPOCH)
    model = Regression(inject_at)
    data = [{"x": x, "labels": y} for x, y in zip(X, Y)]
    record = RecordScale()
    if kind == "ampkit":
        trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[record],
                          ampkit_scaler_kwargs=scaler_kwargs)
    else:
        trainer = TorchAmpTrainer(model=model, args=args, train_dataset=data, callbacks=[record],
                                  scaler_kwargs=scaler_kwargs)
    assert isinstance(trainer.accelerator.scaler, SCALER_CLASS[kind])
    record.trainer = trainer
    trainer.train(resume_from_checkpoint=resume)
    return params(model.net), record.scales


@pytest.mark.parametrize("inject_at", [None, INF_STEP])
def test_trainer_matches_torch_amp(oracle, tmp_path, inject_at):
    expected = train_transformers("torch.amp", tmp_path / "torch", inject_at)
    got = train_transformers("ampkit", tmp_path / "ampkit", inject_at)
    assert got[1] == expected[1] == oracle[inject_at][1]
    assert_same(got[0], expected[0])
    assert_same(got[0], oracle[inject_at][0])
    if inject_at is not None:
        check_backoff(got[1])


@pytest.mark.parametrize("saver, resumer", [("torch.amp", "ampkit"), ("ampkit", "torch.amp")])
def test_trainer_checkpoint_round_trip(oracle, tmp_path, saver, resumer):
    train_transformers(saver, tmp_path / "first", save=True)
    checkpoint = tmp_path / "first" / f"checkpoint-{STEPS_PER_EPOCH}"
    assert (checkpoint / "scaler.pt").is_file()
    got = train_transformers(resumer, tmp_path / "second", scaler_kwargs={},
                             resume=str(checkpoint))
    assert got[1] == oracle[None][1][STEPS_PER_EPOCH:]
    assert_same(got[0], oracle[None][0])


def test_trainer_mixin_keeps_bf16_and_checks_its_argument(tmp_path):
    class MyTrainer(AmpkitTrainerMixin, transformers.Trainer):
        pass

    args = transformers.TrainingArguments(str(tmp_path), bf16=True, use_cpu=True, report_to=[])
    trainer = MyTrainer(model=Regression(), args=args)
    assert trainer.accelerator.scaler is None  # bfloat16: no loss scaling, nothing changed
    with pytest.raises(ampkit.ArgumentTypeError, match="`ampkit_scaler_kwargs`"):
        MyTrainer(model=Regression(), args=args, ampkit_scaler_kwargs=[1])
