# The R runner of the precision parity scenarios (precision_scenarios/*.json): the training
# steps of precision_parity.run_python written in R against ampkit's R API (precision_policy,
# overflow_locator, with_autocast, amp_grad_scaler). The model, the data and the JSON come from
# the shared Python module precision_parity.py, so both languages train the same model on the
# same data; what is recorded is what the R API returned (the locator's data.frames).
#
#   Rscript precision_runner.R <out_dir> <scenario.json>...
# or sourced in-process (rpy2, through ampkit.r_eval), then run_precision_all(paths, out_dir).

library(ampkit)

precision_dir <- function() {
  dir <- Sys.getenv("AMPKIT_PARITY_DIR")
  if (!nzchar(dir)) stop("AMPKIT_PARITY_DIR must name tests/parity")
  dir
}

run_precision <- function(path) {
  if (!ampkit_available()) stop("the Python module ampkit cannot be imported")
  torch <- reticulate::import("torch")
  pp <- reticulate::import_from_path("precision_parity", path = precision_dir())
  spec <- pp$load(path)
  net <- pp$model(spec)
  xy <- pp$data(spec)
  x <- xy[[1]]
  y <- xy[[2]]
  record <- pp$new_record()
  policy <- NULL
  if (length(spec$rules) > 0L) {
    policy <- precision_policy(net, unlist(spec$rules))
    record$modules <- as.list(policy$modules)
  }
  opt <- torch$optim$SGD(net$parameters(), lr = 1e-4)
  scaler <- amp_grad_scaler("cpu", init_scale = 2^10)
  outputs <- list()
  dtypes <- list()
  losses <- list()
  params <- list()
  steps <- function() {
    for (i in seq_len(spec$steps)) {
      opt$zero_grad()
      loss <- with_autocast(device_type = "cpu", dtype = spec$outer, {
        out <- net(x)
        pp$mse(out, y)
      })
      scaler$scale(loss)$backward()
      scaler$step(opt)
      scaler$update()
      outputs[[i]] <<- pp$flat(out)
      dtypes[[i]] <<- sub("^torch\\.", "", reticulate::py_str(out$dtype))
      losses[[i]] <<- loss$item()
      params[[i]] <<- pp$params(net)
    }
  }
  if (identical(spec$kind, "locator")) {
    loc <- overflow_locator(net, steps())
    record$summary <- as.list(loc$summary)
    first <- loc$first_nonfinite
    none <- function(v) ifelse(is.na(v), "none", v)
    record$first_nonfinite <- lapply(seq_len(nrow(first)), function(i) {
      list(first$step[[i]], none(first$forward[[i]]), none(first$backward[[i]]),
           none(first$parameters[[i]]))
    })
    record$host_reads <- loc$host_reads
  } else {
    steps()
  }
  if (!is.null(policy)) policy$remove()
  record$output <- outputs
  record$output_dtype <- dtypes
  record$loss <- losses
  record$params <- params
  record
}

run_precision_all <- function(paths, out_dir) {
  pp <- reticulate::import_from_path("precision_parity", path = precision_dir())
  for (path in paths) {
    record <- run_precision(path)
    name <- sub("\\.json$", "", basename(path))
    pp$save_json(file.path(out_dir, paste0(name, ".json")), record)
  }
}

args <- commandArgs(trailingOnly = TRUE)
if (length(args) > 0L) {
  script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
  Sys.setenv(AMPKIT_PARITY_DIR = normalizePath(dirname(script)))
  run_precision_all(args[-1], args[[1]])
}
