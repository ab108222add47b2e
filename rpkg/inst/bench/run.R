#!/usr/bin/env Rscript
# The shared benchmark suite driven from R, step by step, by `python -m ampkit bench`
# (python/ampkit/bench/training.py gives the R loop its turn between the Python loops' steps, so
# that both see the same machine at the same time):
#   Rscript run.R DEVICE THREADS
# reads one command a line from stdin, its words separated by tabs, and answers each with one
# line "AMPKIT <json>" on stdout (any other line on stdout is not an answer):
#   cell SUITE.json SIZE MODE   build a cell's workload and warm it up: {"steps": n}, or
#                               {"skipped": why} for a model this runner does not build
#   step COUNT                  COUNT training steps, back to back, timed together:
#                               {"seconds": s, "peak_bytes": b, "collections": n, "full": n,
#                               "collect_seconds": s} (the package's collections for tensor
#                               memory during them, young and full, and their time)
#   loss                        the loss of the last step: {"loss": x}
#   matmul M K N NUMBER         NUMBER timed float32 products (M x K) @ (K x N): {"seconds": [..]}
#   ops NUMBER                  each of the per-op rows (OPS below) NUMBER times in a loop:
#                               {name: seconds per call}
#   quit
# Everything here is R torch's API over ampkit's compiled layer: no Python runs in this process.
# The workloads are built as ampkit.bench.workloads builds them, in the same order from the same
# seeds (libtorch's generators, the same in both processes), so R trains the very same weights on
# the very same data as the Python runner and ends on the same loss.
args <- commandArgs(trailingOnly = TRUE)
if (length(args) != 2L) stop("usage: Rscript run.R DEVICE THREADS")
device <- args[[1]]
threads <- as.integer(args[[2]])

suppressPackageStartupMessages(library(ampkit))
torch_set_num_threads(threads)  # as many as the Python runner's
ampkit:::steady_allocator()  # the Python runner's allocator policy (ampkit.bench.measure)
# R's own clock (wall time, microseconds).
now <- function() as.numeric(Sys.time())

on_device <- !identical(device, "cpu")
synchronize <- function() if (on_device) cuda_synchronize()

# Peak memory since the last reset: CUDA's allocated bytes, else the process's peak resident set
# (Linux's VmHWM, reset by writing 5 to clear_refs), as ampkit.bench.measure reads them.
reset_peak_memory <- function() {
  if (on_device) return(ampkit:::cuda_reset_peak_memory())
  try(writeLines("5", "/proc/self/clear_refs"), silent = TRUE)
}
peak_memory_bytes <- function() {
  if (on_device) return(ampkit:::cuda_peak_memory())
  status <- readLines("/proc/self/status")
  kb <- sub("^VmHWM:\\s*([0-9]+) kB$", "\\1", grep("^VmHWM:", status, value = TRUE))
  as.numeric(kb) * 1024
}

# JSON with every double's 17 significant digits (jsonlite keeps 15): the final losses are
# compared with the Python runner's exactly.
to_json <- function(x) {
  if (is.list(x)) {
    items <- vapply(x, to_json, character(1))
    if (is.null(names(x))) return(paste0("[", paste(items, collapse = ", "), "]"))
    return(paste0("{", paste0('"', names(x), '": ', items, collapse = ", "), "}"))
  }
  if (is.logical(x)) return(if (x) "true" else "false")
  if (is.character(x)) return(paste0('"', gsub('(["\\\\])', "\\\\\\1", x), '"'))
  sprintf("%.17g", x)
}
answer <- function(value) {
  cat("AMPKIT ", to_json(value), "\n", sep = "")
  flush(stdout())
}

# ---- workloads: ampkit.bench.workloads.build, in R ----------------------------------------------

mlp <- function(width, layers) {
  mods <- list()
  for (i in seq_len(layers - 1)) mods <- c(mods, list(nn_linear(width, width), nn_relu()))
  nn_sequential(!!!c(mods, list(nn_linear(width, width))))
}

build_workload <- function(suite, size, seed = 0) {
  torch_manual_seed(seed)
  g <- torch_generator()
  g$set_current_seed(seed + 1)
  n <- size$batches
  randn <- function(...) lapply(seq_len(n), function(i) torch_randn(..., generator = g))
  model <- switch(suite$model,
    mlp = ,
    deep_narrow = mlp(size$width, size$layers),
    tabular_mlp = nn_sequential(nn_linear(size$features, size$hidden), nn_relu(),
                                nn_linear(size$hidden, 1)),
    small_conv = nn_sequential(nn_conv2d(3, size$channels, 3, padding = 1), nn_relu(),
                               nn_max_pool2d(2), nn_flatten(),
                               nn_linear(size$channels * (size$side %/% 2)^2, size$classes)),
    return(NULL)
  )
  switch(suite$model,
    mlp = ,
    deep_narrow = {
      inputs <- randn(size$batch, size$width)
      targets <- randn(size$batch, size$width)
    },
    tabular_mlp = {
      inputs <- randn(size$batch, size$features)
      targets <- randn(size$batch, 1)
    },
    small_conv = {
      inputs <- randn(size$batch, 3, size$side, size$side)
      # R torch's class targets are 1-based: Python's 0-based draws, plus one.
      targets <- lapply(seq_len(n), function(i) {
        torch_randint(0, size$classes, size$batch, generator = g, dtype = torch_long()) + 1L
      })
    }
  )
  loss_fn <- switch(suite$loss, mse = nn_mse_loss(), cross_entropy = nn_cross_entropy_loss())
  model$to(device = device)
  optimizer <- switch(suite$optimizer$name, sgd = optim_sgd, adamw = optim_adamw)
  list(model = model, loss_fn = loss_fn,
       optimizer = optimizer(model$parameters, lr = suite$optimizer$lr),
       inputs = lapply(inputs, function(x) x$to(device = device)),
       targets = lapply(targets, function(y) y$to(device = device)),
       dtype = if (on_device) torch_float16() else torch_bfloat16())
}

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
    # The gradients dropped, as the Python loop's zero_grad() does (PyTorch's default): R
    # torch's default zeroes them in place, and backward then adds into them, one more pass over
    # every gradient a step (3 x 64 MiB for the seeds' MLP on a GPU) and its memory held between
    # steps. The same losses either way; here both languages do the same work.
    opt$zero_grad(set_to_none = TRUE)
  }
  loss
}

cell <- NULL

new_cell <- function(suite_path, size_name, mode) {
  suite <- jsonlite::fromJSON(suite_path, simplifyVector = FALSE)
  size <- suite$sizes[[size_name]]
  cell <<- NULL
  invisible(gc())  # the previous cell's tensors
  w <- build_workload(suite, size)
  if (is.null(w)) return(list(skipped = paste("the R runner does not build", suite$model)))
  scaler <- amp_grad_scaler(device, enabled = identical(mode, "autocast+scaler"))
  use_autocast <- !identical(mode, "fp32")
  loss <- train_steps(w, size$warmup, use_autocast, scaler)
  # The package judges a full collection against the working set its last full one measured:
  # one measured during the workload's build is smaller, and the first full collection after
  # the build (70-90 ms on a GPU machine's slow host) would fall among the timed steps, which
  # are to time a loop running on (Python's frees its tensors as it goes).
  ampkit:::tensor_memory_collect()
  cell <<- list(w = w, scaler = scaler, use_autocast = use_autocast, position = size$warmup,
                loss = loss)
  list(steps = size$batches * size$epochs)
}

timed_steps <- function(count) {
  reset_peak_memory()
  before <- ampkit:::tensor_memory_stats()
  synchronize()
  start <- now()
  loss <- train_steps(cell$w, count, cell$use_autocast, cell$scaler, cell$position)
  synchronize()
  seconds <- now() - start
  after <- ampkit:::tensor_memory_stats()
  peak <- peak_memory_bytes()
  cell$position <<- cell$position + count
  cell$loss <<- loss
  # The collections the package ran for tensor memory during these steps, and their time.
  list(seconds = seconds, peak_bytes = peak,
       collections = after$collections - before$collections, full = after$full - before$full,
       collect_seconds = after$seconds - before$seconds)
}

matmul <- function(m, k, n, number) {
  # Drawn on the CPU's generator, then moved, as the Python runner does (a CPU generator cannot
  # draw on CUDA).
  g <- torch_generator()
  g$set_current_seed(0)
  a <- torch_randn(m, k, generator = g)$to(device = device)
  b <- torch_randn(k, n, generator = g)$to(device = device)
  torch_mm(a, b)
  seconds <- vapply(seq_len(number), function(i) {
    synchronize()
    start <- now()
    torch_mm(a, b)
    synchronize()
    now() - start
  }, numeric(1))
  list(seconds = as.list(seconds))
}

# ---- one call at a time: the per-op rows ---------------------------------------------------------
#
# Each is an expression as an R user writes it, over the objects `fixtures()` makes; the Python
# runner times its own twin of each (ampkit.bench.r_runner.OPS, the same names). Each is timed
# inline in a byte-compiled loop, so the time is the call's, not a closure's around it.
OPS <- list( # nolint: object_name_linter.
  "torch_add(x, y), 2x2" = quote(torch_add(x2, y2)),
  "x + y, 2x2" = quote(x2 + y2),
  "torch_matmul, 64x64" = quote(torch_matmul(a64, b64)),
  "x$sum(dim = 1), 64x64" = quote(a64$sum(dim = 1)),
  "x[1, ], 64x64" = quote(a64[1, ]),
  "x[1:2, ], 64x64" = quote(a64[1:2, ]),
  "x$view(-1, 64), 64x64" = quote(a64$view(-1, 64)),
  "torch_zeros(32, 10)" = quote(torch_zeros(32, 10, device = device)),
  "nn_linear(10, 32) forward, batch 32" = quote(linear(input)),
  "nnf_cross_entropy, batch 32, 10 classes" = quote(nnf_cross_entropy(logits, classes)),
  "$parameters of a 3-layer nn_sequential" = quote(mlp$parameters),
  "with_autocast enter+exit" = quote(with_autocast(device_type = device, NULL)),
  "scaler scale/step/update" = quote({
    scaler$scale(loss)
    scaler$step(opt)
    scaler$update()
  }),
  "optim_adam step, nn_linear(10, 32)" = quote(adam$step()),
  "optim_sgd step, momentum, nn_linear(10, 32)" = quote(sgd$step()),
  "optim_rmsprop step, nn_linear(10, 32)" = quote(rmsprop$step())
)

fixtures <- function() {
  torch_manual_seed(0)
  linear <- nn_linear(10, 32)$to(device = device)
  for (p in linear$parameters) p$grad <- torch_ones_like(p)
  env <- list2env(list(
    x2 = torch_randn(2, 2, device = device), y2 = torch_randn(2, 2, device = device),
    a64 = torch_randn(64, 64, device = device), b64 = torch_randn(64, 64, device = device),
    linear = linear, input = torch_randn(32, 10, device = device),
    logits = torch_randn(32, 10, device = device),
    classes = torch_randint(1, 11, size = 32, dtype = torch_long(), device = device),
    mlp = nn_sequential(nn_linear(10, 32), nn_relu(), nn_linear(32, 1))$to(device = device),
    scaler = amp_grad_scaler(device), opt = optim_sgd(linear$parameters, lr = 0),
    adam = optim_adam(linear$parameters, lr = 0),
    sgd = optim_sgd(linear$parameters, lr = 0, momentum = 0.9),
    rmsprop = optim_rmsprop(linear$parameters, lr = 0),
    loss = torch_ones(1, device = device), device = device
  ), parent = globalenv())
  lapply(OPS, function(expr) {
    loop <- eval(bquote(function(n) {
      for (i in seq_len(n)) .(expr)
      NULL
    }))
    environment(loop) <- env
    compiler::cmpfun(loop)
  })
}
loops <- NULL

ops <- function(number) {
  if (is.null(loops)) loops <<- fixtures()
  lapply(loops, function(loop) {
    # Each row from a collected heap, as system.time() times R code (gcFirst): what the rows run
    # before leaves R's heap and glibc's in a state that costs the next row up to 1.6x (an SGD
    # step: 27.5 us in a fresh process, 45-58 us after the other rows, ~33 after a gc()).
    invisible(gc())
    synchronize()
    start <- now()
    loop(number)
    synchronize()
    (now() - start) / number
  })
}

answer(list(ready = TRUE, threads = torch_get_num_threads()))
input <- file("stdin", "r")
repeat {
  line <- readLines(input, n = 1L)
  if (length(line) == 0L) break
  words <- strsplit(line, "\t", fixed = TRUE)[[1L]]
  switch(words[[1L]],
    cell = answer(new_cell(words[[2L]], words[[3L]], words[[4L]])),
    step = answer(timed_steps(as.integer(words[[2L]]))),
    loss = answer(list(loss = cell$loss$detach()$float()$item())),
    matmul = answer(do.call(matmul, as.list(as.integer(words[2:5])))),
    ops = answer(ops(as.integer(words[[2L]]))),
    quit = break,
    stop("unknown command: ", line)
  )
}
