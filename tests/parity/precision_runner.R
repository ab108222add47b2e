# The R runner of the precision parity scenarios (precision_scenarios/*.json): the training
# steps of precision_parity.run_python written in R with R's own modules (nn_sequential of
# nn_linear and nn_relu, the weights loaded from the shared Python model's state dict), optimizer
# (optim_sgd) and scaler, under ampkit's R API (precision_policy, overflow_locator,
# with_autocast, amp_grad_scaler). The scenario, the starting weights and the data come from the
# shared Python module precision_parity.py, so both languages train the same model on the same
# data; what is recorded is what the R API returned (the locator's data.frames).
#
#   Rscript precision_runner.R <out_dir> <scenario.json>...
# or sourced in-process (rpy2, through ampkit.r_eval), then run_precision_all(paths, out_dir).

library(ampkit)

precision_dir <- function() {
  dir <- Sys.getenv("AMPKIT_PARITY_DIR")
  if (!nzchar(dir)) stop("AMPKIT_PARITY_DIR must name tests/parity")
  dir
}

# precision_parity.model() in R: Linear(8, 16), ReLU, Linear(16, 16), ReLU, Linear(16, 1), with
# the Python model's weights (the same seed's).
r_model <- function(pp, spec) {
  net <- nn_sequential(nn_linear(8, 16), nn_relu(), nn_linear(16, 16), nn_relu(),
                       nn_linear(16, 1))
  net$load_state_dict(pp$model(spec)$state_dict())
  net
}

# precision_parity.flat / params / mse in R.
flat <- function(t) as.numeric(as_array(t$detach()$to(dtype = torch_float64())$flatten()))
r_params <- function(net) unlist(lapply(unname(net$parameters), flat))
mse <- function(output, target) nnf_mse_loss(output$float(), target)
dtype_names <- c(Float = "float32", Half = "float16", BFloat16 = "bfloat16")

run_precision <- function(path) {
  if (!ampkit_available()) stop("the Python module ampkit cannot be imported")
  pp <- reticulate::import_from_path("precision_parity", path = precision_dir())
  spec <- pp$load(path)
  net <- r_model(pp, spec)
  xy <- pp$data(spec)  # Python's tensors, as R tensors (the same tensors)
  x <- xy[[1]]
  y <- xy[[2]]
  record <- pp$new_record()
  policy <- NULL
  if (length(spec$rules) > 0L) {
    policy <- precision_policy(net, unlist(spec$rules))
    record$modules <- as.list(policy$modules)
  }
  opt <- optim_sgd(net$parameters, lr = 1e-4)
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
        mse(out, y)
      })
      scaler$scale(loss)$backward()
      scaler$step(opt)
      scaler$update()
      outputs[[i]] <<- flat(out)
      dtypes[[i]] <<- dtype_names[[as.character(out$dtype)]]
      losses[[i]] <<- loss$item()
      params[[i]] <<- r_params(net)
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
