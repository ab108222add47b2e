# The R parity runner: the training loop of runners.py written in R against ampkit's R API
# (with_autocast, amp_grad_scaler). The scenario format, model, data, gradient injection and
# the record of a run come from the shared Python module parity_models.py, imported with
# reticulate::import_from_path, so both languages train the same model on the same data and
# record the same things.
#
# Sourced in-process through rpy2 (tests/parity/test_parity.py) and out of process by
# run_rscript.R. Only defines functions.

library(ampkit)

parity_dir <- function() {
  dir <- Sys.getenv("AMPKIT_PARITY_DIR")
  if (!nzchar(dir)) stop("AMPKIT_PARITY_DIR must name tests/parity")
  dir
}

parity_modules <- function() {
  # torch keeps its own BLAS whichever is imported first (?ampkit, "torch keeps its own BLAS").
  if (!ampkit_available()) stop("the Python module ampkit cannot be imported")
  list(
    torch = reticulate::import("torch"),
    pm = reticulate::import_from_path("parity_models", path = parity_dir()),
    # Unconverted: a scenario goes back to Python as the very dict it was read into (an R round
    # trip would turn a one-element list such as "frozen": [3] into the number 3).
    pm_raw = reticulate::import_from_path("parity_models", path = parity_dir(), convert = FALSE)
  )
}

# Trains steps [start, stop) of one scenario (resuming a checkpoint first, saving one after,
# when asked); returns the run's record, a parity_models.Recorder.
run_scenario <- function(path, start = 0L, stop = NULL, resume_from = NULL, save_to = NULL) {
  m <- parity_modules()
  torch <- m$torch
  pm <- m$pm
  spec <- m$pm_raw$load_scenario(path)  # a Python dict, passed to parity_models as it is
  s <- reticulate::py_to_r(spec)         # the same, for reading here
  built <- pm$build(spec)
  model <- built[[1]]
  opts <- built[[2]]
  params <- built[[3]]
  # ampkit's options beyond torch.amp: those the scenario sets, by name, as in Python.
  scaler <- if (!is.null(s$preset$deepspeed)) {
    amp_grad_scaler_from_deepspeed(s$preset$deepspeed, "cpu")
  } else if (!is.null(s$preset$megatron)) {
    do.call(amp_grad_scaler_from_megatron, c(s$preset$megatron, list(device = "cpu")))
  } else {
    do.call(amp_grad_scaler, c(
      list("cpu", init_scale = s$init_scale, growth_factor = s$growth_factor,
           backoff_factor = s$backoff_factor, growth_interval = s$growth_interval,
           enabled = s$scaler),
      s$scaler_options))
  }
  if (!is.null(resume_from)) {
    # The scaler state comes back as an R list and loads through the R package's conversion.
    scaler$load_state_dict(pm$restore(resume_from, model, opts))
  }
  dtype <- s$dtype
  if (is.null(stop)) stop <- s$steps
  recorder <- pm$Recorder(opts, params)
  step <- as.integer(start)
  while (step < stop) {
    total <- 0
    for (micro in seq_len(s$accumulate) - 1L) {
      xy <- pm$batch(spec, step, micro)
      loss <- with_autocast(device_type = "cpu", dtype = dtype, enabled = s$autocast, {
        h <- pm$features(model, xy[[1]])
        out <- if (isTRUE(s$nested_disabled)) {
          with_autocast(device_type = "cpu", enabled = FALSE, pm$head_fp32(model, h))
        } else {
          pm$head(model, h)
        }
        pm$loss_fn(spec, out, xy[[2]])
      })
      if (isTRUE(s$gradient_penalty)) {
        grads <- torch$autograd$grad(scaler$scale(loss), params, create_graph = TRUE)
        grads <- pm$unscale_grads(grads, 1 / scaler$get_scale())
        loss <- with_autocast(device_type = "cpu", dtype = dtype, enabled = s$autocast, {
          loss$add(pm$grad_norm(grads))
        })
      }
      scaler$scale(loss)$backward()
      total <- total + loss$item()
    }
    pm$inject(spec, params, step)
    if (!is.null(s$clip)) {
      for (opt in opts) scaler$unscale_(opt)
      pm$clip(spec, params)
    }
    recorder$before_step()
    for (opt in opts) scaler$step(opt)
    collapse <- update_recording_collapse(scaler, pm$new_scale_at(spec, step))
    for (opt in opts) opt$zero_grad(set_to_none = TRUE)
    outcome <- list(
      stats = scaler$stats(),
      skipped_any = scaler$step_was_skipped(),
      skipped_each = lapply(opts, function(opt) scaler$step_was_skipped(opt)),
      overflow_report = if (isTRUE(s$scaler_options$track_overflow)) {
        report_rows(scaler$overflow_report())
      } else {
        list()
      },
      collapse = collapse
    )
    recorder$after_step(total, scaler$get_scale(), scaler$state_dict(), outcome)
    step <- step + 1L
  }
  if (!is.null(save_to)) pm$save_checkpoint(save_to, model, opts, scaler$state_dict())
  recorder
}

# update() (or update(new_scale)), recording what it did about a collapse, as runners.py does:
# `error`, whether it raised an error of class ampkit_scale_collapse (caught here: training goes
# on; it must be an ampkit_error too), and `warnings`, the messages of its ampkit_warnings.
update_recording_collapse <- function(scaler, new_scale) {
  error <- FALSE
  warned <- list()
  withCallingHandlers(
    tryCatch(
      if (is.null(new_scale)) scaler$update() else scaler$update(new_scale),
      ampkit_scale_collapse = function(e) {
        if (!inherits(e, "ampkit_error")) stop(e)
        error <<- TRUE
      }
    ),
    warning = function(w) {
      message <- conditionMessage(w)
      if (!inherits(w, "ampkit_warning")) message <- paste("not ampkit_warning:", message)
      warned[[length(warned) + 1L]] <<- message
      invokeRestart("muffleWarning")
    }
  )
  list(error = error, warnings = warned)
}

# overflow_report()'s data.frame as a list of rows, list(name, inf, nan), for the record.
report_rows <- function(report) {
  lapply(seq_len(nrow(report)), function(i) {
    list(name = report$name[[i]], inf = report$inf[[i]], nan = report$nan[[i]])
  })
}

# Runs every scenario in `paths` in this one process, writing <out_dir>/<name>.json each.
run_all <- function(paths, out_dir) {
  for (path in paths) {
    name <- sub("\\.json$", "", basename(path))
    run_scenario(path)$save(file.path(out_dir, paste0(name, ".json")))
  }
  invisible(length(paths))
}

# Checkpoint hand-over, R's half: resume from `resume_from` (or start fresh), train
# [start, stop), optionally save; writes the record to `out`.
run_segment <- function(path, out, start = 0L, stop = NULL, resume_from = NULL,
                        save_to = NULL) {
  run_scenario(path, as.integer(start), if (is.null(stop)) NULL else as.integer(stop),
               resume_from, save_to)$save(out)
  invisible(out)
}

# Error parity, R's half: runs each named misuse case and returns, per case, the message of
# the ampkit_error it raised (or "<no error>" / "<not ampkit_error: ...>").
misuse_cases <- function() {
  torch <- parity_modules()$torch
  setup <- function() {
    torch$manual_seed(0L)
    lin <- torch$nn$Linear(2L, 1L)
    opt <- torch$optim$SGD(lin$parameters(), lr = 0.1)
    s <- amp_grad_scaler("cpu")
    s$scale(lin(torch$ones(1L, 2L))$sum())$backward()
    list(opt = opt, s = s)
  }
  list(
    unscale_twice = function() { e <- setup(); e$s$unscale_(e$opt); e$s$unscale_(e$opt) },
    step_twice = function() { e <- setup(); e$s$step(e$opt); e$s$step(e$opt) },
    update_without_step = function() { e <- setup(); e$s$update() },
    load_empty_state = function() { s <- amp_grad_scaler("cpu"); s$load_state_dict(list()) },
    growth_factor_le_1 = function() amp_grad_scaler("cpu", growth_factor = 0.5),
    backoff_factor_ge_1 = function() amp_grad_scaler("cpu", backoff_factor = 2),
    growth_interval_0 = function() amp_grad_scaler("cpu", growth_interval = 0),
    unknown_device = function() amp_grad_scaler("nodevice"),
    autocast_unknown_device = function() with_autocast(device_type = "nodevice", 1),
    unsupported_dtype = function() with_autocast(device_type = "cpu", dtype = "int32", 1),
    scale_non_tensor = function() { s <- amp_grad_scaler("cpu"); s$scale("a") },
    new_scale_non_number = function() {
      e <- setup(); e$s$step(e$opt); e$s$update(new_scale = "x")
    }
  )
}

run_misuse <- function() {
  cases <- misuse_cases()
  out <- lapply(cases, function(f) {
    warned <- NULL
    tryCatch({
      withCallingHandlers(f(), warning = function(w) {
        if (is.null(warned)) warned <<- conditionMessage(w)
        invokeRestart("muffleWarning")
      })
      if (is.null(warned)) "<no error>" else paste0("<warning: ", warned, ">")
    }, ampkit_error = function(e) conditionMessage(e),
    error = function(e) paste("<not ampkit_error:", conditionMessage(e), ">"))
  })
  out
}
