#!/usr/bin/env Rscript
# The shared benchmark suite driven from R (invoked by `python -m ampkit bench`):
#   Rscript run.R SUITE.json SIZE DEVICE OUT.json
# The workload (model, data, optimizer) is built by ampkit.bench.workloads, so R trains the very
# same model on the very same data as the Python runner; the training loop itself runs in R,
# through ampkit's R API, as an R user would write it.
args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 4) stop("usage: Rscript run.R SUITE.json SIZE DEVICE OUT.json")
suite_path <- args[[1]]
size_name <- args[[2]]
device <- args[[3]]
out_path <- args[[4]]

suppressPackageStartupMessages(library(ampkit))
# ampkit's first call imports torch with its own BLAS (?ampkit, "Load ampkit before torch").
if (!ampkit_available()) stop("the Python module ampkit cannot be imported")
workloads <- reticulate::import("ampkit.bench.workloads")
measure <- reticulate::import("ampkit.bench.measure")
suite <- jsonlite::fromJSON(suite_path, simplifyVector = FALSE)
size <- suite$sizes[[size_name]]

# R torch's run(autocast, scale) loop, `count` steps over the workload's batches.
train_steps <- function(w, count, use_autocast, scaler) {
  inputs <- w$inputs
  targets <- w$targets
  model <- w$model
  loss_fn <- w$loss_fn
  opt <- w$optimizer
  n <- length(inputs)
  loss <- NULL
  for (i in seq_len(count)) {
    k <- (i - 1) %% n + 1
    with_autocast(device_type = device, dtype = w$dtype, enabled = use_autocast, {
      output <- model(inputs[[k]])
      loss <- loss_fn(output, targets[[k]])
    })
    scaler$scale(loss)$backward()
    scaler$step(opt)
    scaler$update()
    opt$zero_grad()
  }
  loss
}

elapsed <- function(expr_fn) {
  measure$synchronize(device)
  start <- proc.time()[["elapsed"]]
  value <- expr_fn()
  measure$synchronize(device)
  list(seconds = proc.time()[["elapsed"]] - start, value = value)
}

steps <- size$batches * size$epochs
rows <- list()
for (mode in unlist(suite$modes)) {
  message(sprintf("    R %s ...", mode))
  w <- workloads$build(suite, size, device)
  scaler <- amp_grad_scaler(device, enabled = identical(mode, "autocast+scaler"))
  use_autocast <- !identical(mode, "fp32")
  train_steps(w, size$warmup, use_autocast, scaler)
  times <- numeric(0)
  peak <- 0
  loss <- NULL
  for (r in seq_len(size$repeats)) {
    measure$reset_peak_memory(device)
    run <- elapsed(function() train_steps(w, steps, use_autocast, scaler))
    times <- c(times, run$seconds)
    loss <- run$value
    peak <- max(peak, measure$peak_memory_bytes(device))
  }
  rows[[length(rows) + 1]] <- list(
    workload = suite$name, mode = mode, impl = "ampkit-r", device = device, steps = steps,
    time_s = stats::median(times), times_s = as.list(times),
    steps_per_s = steps / stats::median(times), peak_bytes = peak,
    final_loss = loss$detach()$float()$item())
}
# Written by Python's json module: doubles keep all 17 digits (jsonlite keeps at most 15), so the
# final losses can be compared with the Python runner's exactly.
writeLines(reticulate::import("json")$dumps(rows), out_path)
