# The R front end's parity scenarios (issue 18), R's half: the models and training loop of
# frontend_models.py written once in R with ampkit's R torch front end, as an R torch user
# writes them. Records each step's loss, scale and parameters (in PyTorch's parameter order)
# for test_frontend_parity.py.
#
#   Rscript frontend_runner.R <out_dir> <scenario.json>...   (out of process)
#   source("frontend_runner.R"); frontend_run_all(paths, out_dir)   (in process, via rpy2)

library(ampkit)

mlp <- nn_module(
  "mlp",
  initialize = function(n_in, hidden, n_out) {
    self$fc1 <- nn_linear(n_in, hidden)
    self$fc2 <- nn_linear(hidden, hidden)
    self$fc3 <- nn_linear(hidden, n_out)
  },
  forward = function(x) {
    x <- nnf_relu(self$fc1(x))
    x <- nnf_gelu(self$fc2(x))
    self$fc3(x)
  }
)

convnet <- nn_module(
  "convnet",
  initialize = function(classes) {
    self$conv1 <- nn_conv2d(1, 4, kernel_size = 3, padding = 1)
    self$bn <- nn_batch_norm2d(4)
    self$pool <- nn_max_pool2d(2)
    self$fc <- nn_linear(4 * 4 * 4, classes)
  },
  forward = function(x) {
    x <- self$pool(nnf_relu(self$bn(self$conv1(x))))
    x <- torch_flatten(x, start_dim = 2)
    self$fc(x)
  }
)

build_model <- function(spec) {
  switch(spec$model,
    mlp = mlp(spec$features, spec$hidden, spec$classes),
    seq = {
      layers <- list(nn_linear(spec$features, spec$hidden), nn_tanh(),
                     nn_linear(spec$hidden, spec$classes))
      nn_sequential(!!!layers)
    },
    conv = convnet(spec$classes)
  )
}

build_optimizer <- function(spec, params) {
  switch(spec$optimizer,
    sgd = optim_sgd(params, lr = spec$lr, momentum = 0.9),
    adam = optim_adam(params, lr = spec$lr),
    adamw = optim_adamw(params, lr = spec$lr, weight_decay = 0.01)
  )
}

frontend_run <- function(spec) {
  torch_manual_seed(spec$seed)
  net <- build_model(spec)
  opt <- build_optimizer(spec, net$parameters)
  loss_fn <- if (spec$loss == "ce") nn_cross_entropy_loss() else nn_mse_loss()
  scaler <- amp_grad_scaler("cpu", init_scale = spec$init_scale,
                            growth_interval = spec$growth_interval)
  dtype <- if (spec$dtype == "float16") torch_float16() else torch_bfloat16()
  record <- list(loss = list(), scale = list(), params = list())
  for (step in seq_len(spec$steps)) {
    x <- if (spec$model == "conv") {
      torch_randn(spec$batch, 1, 8, 8)
    } else {
      torch_randn(spec$batch, spec$features)
    }
    y <- if (spec$loss == "ce") {
      torch_randint(1, spec$classes + 1, spec$batch, dtype = torch_long()) # labels 1..classes
    } else {
      torch_randn(spec$batch, spec$classes)
    }
    with_autocast(device_type = "cpu", dtype = dtype, {
      output <- net(x)
      loss <- loss_fn(output, y)
    })
    scaler$scale(loss)$backward()
    scaler$step(opt)
    scaler$update()
    opt$zero_grad()
    record$loss[[step]] <- loss$item()
    record$scale[[step]] <- scaler$get_scale()
    record$params[[step]] <- unlist(lapply(unname(net$parameters), function(p) {
      as.numeric(as_array(p$detach()$flatten()))
    }))
  }
  record
}

# The scenario files as R lists, with frontend_models.py's defaults (the one reader).
frontend_run_all <- function(paths, out_dir) {
  fm <- reticulate::import_from_path("frontend_models", path = dirname(dirname(paths[[1]])))
  as_json_list <- function(e) if (length(e) == 1L) e else as.list(e)
  for (path in paths) {
    spec <- fm$load_scenario(path)
    record <- frontend_run(spec)
    # Python's json writes every double exactly (R's writers round).
    record <- lapply(record, function(v) lapply(v, as_json_list))
    fm$save_json(file.path(out_dir, paste0(spec$name, ".json")), record)
  }
  invisible(length(paths))
}

if (sys.nframe() == 0L) {
  args <- commandArgs(trailingOnly = TRUE)
  frontend_run_all(args[-1], args[[1]])
}
