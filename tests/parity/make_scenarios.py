"""Writes scenarios/*.json (run once; the JSON files are the source of truth)."""
import json
import pathlib

S = {
    "01_bf16_sgd_mse": {"dtype": "bfloat16", "optimizer": "sgd"},
    "02_fp16_sgd_mse": {"dtype": "float16", "optimizer": "sgd"},
    "03_bf16_adam_l1": {"dtype": "bfloat16", "optimizer": "adam", "loss": "l1", "seed": 1},
    "04_fp16_adam_ce": {"dtype": "float16", "optimizer": "adam", "loss": "ce", "seed": 2},
    "05_fp16_adamw_mse_l1": {"dtype": "float16", "optimizer": "adamw", "loss": "mse+l1", "seed": 3},
    "06_fp16_sgd_inf_step2": {"dtype": "float16", "inject": [{"step": 2, "param": 0, "value": "inf"}]},
    "07_fp16_adam_nan_step1_3": {"dtype": "float16", "optimizer": "adam",
                                 "inject": [{"step": 1, "param": 3, "value": "nan"},
                                            {"step": 3, "param": 4, "value": "-inf"}]},
    "08_bf16_sgd_fused": {"dtype": "bfloat16", "optimizer": "sgd", "fused": True,
                          "inject": [{"step": 2, "param": 1, "value": "inf"}]},
    "09_fp16_adam_fused_nan": {"dtype": "float16", "optimizer": "adam", "fused": True,
                               "inject": [{"step": 1, "param": 2, "value": "nan"}]},
    "10_bf16_adamw_fused": {"dtype": "bfloat16", "optimizer": "adamw", "fused": True, "loss": "ce"},
    "11_fp16_sgd_clip": {"dtype": "float16", "clip": 0.5,
                         "inject": [{"step": 3, "param": 5, "value": "inf"}]},
    "12_bf16_adam_clip": {"dtype": "bfloat16", "optimizer": "adam", "clip": 0.1},
    "13_fp16_sgd_accumulate": {"dtype": "float16", "accumulate": 3},
    "14_bf16_adamw_accumulate_inf": {"dtype": "bfloat16", "optimizer": "adamw", "accumulate": 2,
                                     "inject": [{"step": 2, "param": 0, "value": "inf"}]},
    "15_fp16_growth_interval_2": {"dtype": "float16", "growth_interval": 2, "steps": 8,
                                  "inject": [{"step": 4, "param": 1, "value": "nan"}]},
    "16_bf16_growth3_backoff": {"dtype": "bfloat16", "optimizer": "adam", "growth_interval": 3,
                                "growth_factor": 4.0, "backoff_factor": 0.25, "steps": 8,
                                "inject": [{"step": 5, "param": 2, "value": "inf"}]},
    "17_fp16_update_new_scale": {"dtype": "float16", "growth_interval": 2,
                                 "new_scale": {"1": 1024.0, "4": 8.0}},
    "18_fp16_gradient_penalty": {"dtype": "float16", "gradient_penalty": True, "steps": 4},
    "19_bf16_gradient_penalty_adam": {"dtype": "bfloat16", "optimizer": "adam",
                                      "gradient_penalty": True, "steps": 4,
                                      "inject": [{"step": 2, "param": 0, "value": "inf"}]},
    "20_bf16_nested_disabled": {"dtype": "bfloat16", "nested_disabled": True},
    "21_fp16_nested_disabled_adamw": {"dtype": "float16", "optimizer": "adamw",
                                      "nested_disabled": True, "loss": "ce"},
    "22_autocast_off_scaler_on": {"autocast": False, "optimizer": "adam",
                                  "inject": [{"step": 1, "param": 1, "value": "inf"}]},
    "23_fp16_autocast_on_scaler_off": {"dtype": "float16", "scaler": False},
    "24_both_off": {"autocast": False, "scaler": False, "optimizer": "adamw"},
    "25_fp16_small_init_scale": {"dtype": "float16", "init_scale": 1.0, "growth_interval": 1,
                                 "steps": 8},
}

here = pathlib.Path(__file__).parent / "scenarios"
here.mkdir(exist_ok=True)
for name, spec in S.items():
    spec = {"name": name, "seed": spec.pop("seed", 0), **spec}
    (here / f"{name}.json").write_text(json.dumps(spec, indent=1) + "\n")
