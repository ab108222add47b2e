"""ampkit inside training frameworks: Lightning, accelerate and transformers' Trainer.

Each submodule imports its framework, so import only the one you use (none is imported here):

* ``ampkit.integrations.lightning.MixedPrecision``: Lightning's ``MixedPrecision`` plugin with an
  ``ampkit.GradScaler`` and ``ampkit.autocast`` (``Trainer(plugins=[MixedPrecision(...)])``).
* ``ampkit.integrations.accelerate.use_ampkit(accelerator)``: an ``accelerate.Accelerator``
  built with ``mixed_precision="fp16"`` scales its losses with an ``ampkit.GradScaler``, on the
  CPU too (where accelerate alone silently trains in float32).
* ``ampkit.integrations.transformers.Trainer``: transformers' ``Trainer`` whose accelerator is
  wired by ``use_ampkit``; ``AmpkitTrainerMixin`` does the same for a Trainer subclass.

Checkpoints move both ways between these and the stock torch.amp runs: the scaler state is
saved where and as each framework saves torch.amp's. See docs/frameworks.md.
"""
