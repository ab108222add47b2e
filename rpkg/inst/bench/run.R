#!/usr/bin/env Rscript
# The shared benchmark suite driven from R, step by step, by `python -m ampkit bench`
# (python/ampkit/bench/training.py gives the R loop its turn between the Python loops' steps, so
# that both see the same machine at the same time):
#   Rscript run.R DEVICE THREADS [torch-first]
# reads one command a line from stdin, its words separated by tabs, and answers each with one
# line "AMPKIT <json>" on stdout (any other line on stdout is not an answer):
#   cell SUITE.json SIZE MODE   build a cell's workload (ampkit.bench.workloads) and warm it up
#   step                        one timed training step: {"seconds": s, "peak_bytes": b}
#                               (the Python runner takes turns with it, step by step)
#   loss                        the loss of the last step: {"loss": x}
#   matmul M K N NUMBER         NUMBER timed float32 products (M x K) @ (K x N): {"seconds": [..]}
#   op NUMBER                   NUMBER timed `x + x` (8x8 float32) with the R torch front end
#                               and through reticulate: {"front_end": s, "reticulate": s} per op
#   quit
# The workload (model, data, optimizer) is built by ampkit.bench.workloads, so R trains the very
# same model on the very same data as the Python runner; the training loop itself runs in R,
# through ampkit's R API, as an R user would write it. `torch-first`: torch is imported before
# ampkit's first call (the order of `library(ampkit); torch <- reticulate::import("torch")`).
args <- commandArgs(trailingOnly = TRUE)
if (!length(args) %in% 2:3) stop("usage: Rscript run.R DEVICE THREADS [torch-first]")
device <- args[[1]]
threads <- as.integer(args[[2]])
torch_first <- identical(args[3], "torch-first")

suppressPackageStartupMessages(library(ampkit))
if (torch_first) torch <- reticulate::import("torch")
if (!ampkit_available()) stop("the Python module ampkit cannot be imported")
torch <- reticulate::import("torch")
torch$set_num_threads(threads)  # as many as the Python runner's
workloads <- reticulate::import("ampkit.bench.workloads")
measure <- reticulate::import("ampkit.bench.measure")
invisible(measure$steady_allocator())  # the Python runner's allocator policy
json <- reticulate::import("json")
# R's own clock (wall time, microseconds): reading Python's perf_counter through reticulate
# would put a crossing (~40 us here) inside every timed step.
now <- function() as.numeric(Sys.time())

# R torch's run(autocast, scale) loop, `count` steps over the workload's batches, going on from
# batch `position` (the steps so far: the Python loop goes on through the data the same way).
train_steps <- function(w, count, use_autocast, scaler, position = 0) {
  inputs <- w$inputs
  targets <- w$targets
  model <- w$model
  loss_fn <- w$loss_fn
  opt <- w$optimizer
  n <- length(inputs)
  loss <- NULL
  for (i in position + seq_len(count)) {
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

# Waits for the device's queued work. A no-op on the CPU, so not called there: it would be one
# more crossing into Python inside the timed interval.
synchronize <- function() {
  if (!identical(device, "cpu")) measure$synchronize(device)
}

# Wall time of expr_fn(), the device synchronised before and after.
elapsed <- function(expr_fn) {
  synchronize()
  start <- now()
  value <- expr_fn()
  synchronize()
  list(seconds = now() - start, value = value)
}

# Answers are written by Python's json module: doubles keep all 17 digits (jsonlite keeps at
# most 15), so the final losses can be compared with the Python runner's exactly.
answer <- function(value) {
  cat("AMPKIT ", json$dumps(value), "\n", sep = "")
  flush(stdout())
}

cell <- NULL

# A suite with "r_front_end": R torch's article loop as an R torch user writes it, with ampkit's
# front end: the model is nn_sequential(!!!layers) of nn_linear/nn_relu built after
# torch_manual_seed(seed) (libtorch's generator: the weights of Python's model), the loss
# nn_mse_loss(), the optimizer optim_sgd(net$parameters); the data are Python's, as tensors.
front_end_workload <- function(suite, size, w) {
  torch_manual_seed(0)  # workloads.build's seed
  layers <- list()
  for (i in seq_len(size$layers - 1)) {
    layers <- c(layers, list(nn_linear(size$width, size$width), nn_relu()))
  }
  layers <- c(layers, list(nn_linear(size$width, size$width)))
  net <- nn_sequential(!!!layers)$to(device = device)
  list(model = net, loss_fn = nn_mse_loss(),
       optimizer = optim_sgd(net$parameters, lr = suite$optimizer$lr),
       inputs = lapply(w$inputs, ampkit:::new_torch_tensor),
       targets = lapply(w$targets, ampkit:::new_torch_tensor), dtype = w$dtype)
}

new_cell <- function(suite_path, size_name, mode) {
  suite <- jsonlite::fromJSON(suite_path, simplifyVector = FALSE)
  size <- suite$sizes[[size_name]]
  cell <<- NULL
  invisible(gc())  # the previous cell's tensors, held by R until collected
  w <- workloads$build(suite, size, device)
  if (isTRUE(suite$r_front_end)) w <- front_end_workload(suite, size, w)
  scaler <- amp_grad_scaler(device, enabled = identical(mode, "autocast+scaler"))
  use_autocast <- !identical(mode, "fp32")
  loss <- train_steps(w, size$warmup, use_autocast, scaler)
  cell <<- list(w = w, scaler = scaler, use_autocast = use_autocast, position = size$warmup,
                loss = loss)
  list(steps = size$batches * size$epochs)
}

timed_step <- function() {
  measure$reset_peak_memory(device)
  run <- elapsed(function() {
    train_steps(cell$w, 1, cell$use_autocast, cell$scaler, cell$position)
  })
  peak <- measure$peak_memory_bytes(device)
  cell$position <<- cell$position + 1
  cell$loss <<- run$value
  list(seconds = run$seconds, peak_bytes = peak)
}

matmul <- function(m, k, n, number) {
  g <- torch$Generator()$manual_seed(0L)
  a <- torch$randn(m, k, generator = g)
  b <- torch$randn(k, n, generator = g)
  torch$mm(a, b)
  seconds <- vapply(seq_len(number), function(i) {
    start <- now()
    torch$mm(a, b)
    now() - start
  }, numeric(1))
  list(seconds = as.list(seconds))
}

op <- function(number) {
  x <- torch_randn(8, 8, device = device)
  xp <- ampkit:::unwrap(x)
  add <- torch$add
  per_op <- function(f) {
    start <- now()
    for (i in seq_len(number)) f()
    (now() - start) / number
  }
  list(front_end = per_op(function() x + x), reticulate = per_op(function() add(xp, xp)))
}

answer(list(ready = TRUE, threads = torch$get_num_threads()))
input <- file("stdin", "r")
repeat {
  line <- readLines(input, n = 1L)
  if (length(line) == 0L) break
  words <- strsplit(line, "\t", fixed = TRUE)[[1L]]
  switch(words[[1L]],
    cell = answer(new_cell(words[[2L]], words[[3L]], words[[4L]])),
    step = answer(timed_step()),
    loss = answer(list(loss = cell$loss$detach()$float()$item())),
    matmul = answer(do.call(matmul, as.list(as.integer(words[2:5])))),
    op = answer(op(as.integer(words[[2L]]))),
    quit = break,
    stop("unknown command: ", line)
  )
}
