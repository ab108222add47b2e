# R torch's AMP article benchmark, `run(autocast, scale)`, with library(ampkit).
#
#   Rscript rpkg/inst/examples/rtorch_article_benchmark.R
#   Rscript -e 'source(system.file("examples", "rtorch_article_benchmark.R", package = "ampkit"))'
#
# (R finds the package through R_LIBS: `export R_LIBS=$(.venv/bin/python -m ampkit r-library)`
# in a checkout after `make setup`.)
#
# An MLP of 3 linear layers with ReLU, MSE loss and SGD (lr = 0.1), trained three times: fp32,
# with autocast, with autocast and the grad scaler. The article's code as written, but for
# `library(ampkit)` in place of `library(torch)` and the device: on CUDA (when
# cuda_is_available()) the article's sizes and float16; on the CPU bfloat16, small sizes, and
# `amp_grad_scaler("cpu")` (R torch scales on CUDA only). AMPKIT_BENCH_DEVICE=cpu forces the CPU;
# AMPKIT_BENCH_BATCHES=n trains on n batches instead of the article's 50 (a quick run).

library(ampkit)
torch_manual_seed(1)

device <- Sys.getenv("AMPKIT_BENCH_DEVICE", if (cuda_is_available()) "cuda" else "cpu")
on_cuda <- device == "cuda"
dtype <- if (on_cuda) torch_float16() else torch_bfloat16()
batch_size <- if (on_cuda) 512 else 256 # Try, for example, 128, 256, 513.
in_size <- if (on_cuda) 4096 else 512
out_size <- in_size
num_layers <- 3
num_batches <- as.integer(Sys.getenv("AMPKIT_BENCH_BATCHES", "50"))
epochs <- 3

# Creates data in default precision.
# The same data is used for both default and mixed precision trials below.
# You don't need to manually change inputs' dtype when enabling mixed precision.
data <- lapply(1:num_batches, function(x) torch_randn(batch_size, in_size, device = device))
targets <- lapply(1:num_batches, function(x) torch_randn(batch_size, out_size, device = device))

make_model <- function(in_size, out_size, num_layers) {
  layers <- list()
  for (i in seq_len(num_layers - 1)) {
    layers <- c(layers, list(nn_linear(in_size, in_size), nn_relu()))
  }
  layers <- c(layers, list(nn_linear(in_size, out_size)))
  nn_sequential(!!!layers)$to(device = device)
}

# `n_epochs` and `batches` only for the warm-up below; the article's run(autocast, scale) as is.
run <- function(autocast, scale, n_epochs = epochs, batches = seq_along(data)) {
  loss_fn <- nn_mse_loss()$to(device = device)
  net <- make_model(in_size, out_size, num_layers)
  opt <- optim_sgd(net$parameters, lr = 0.1)
  # on CUDA: cuda_amp_grad_scaler(enabled = scale)
  scaler <- amp_grad_scaler(device, enabled = scale)

  for (epoch in seq_len(n_epochs)) {
    for (i in batches) {
      with_autocast(enabled = autocast, device_type = device, dtype = dtype, {
        output <- net(data[[i]])
        loss <- loss_fn(output, targets[[i]])
      })

      scaler$scale(loss)$backward()
      scaler$step(opt)
      scaler$update()
      opt$zero_grad()
    }
  }
  loss$item()
}

cat(sprintf(paste0("ampkit, R torch's AMP article benchmark: %s, autocast dtype %s, batch %d, ",
                   "width %d, %d layers, %d batches x %d epochs (%d threads)\n"),
            device, if (on_cuda) "float16" else "bfloat16", batch_size, in_size, num_layers,
            num_batches, epochs, torch_get_num_threads()))

# One short pass of each mode first, so that no mode pays the one-time costs of the others.
for (mode in list(c(FALSE, FALSE), c(TRUE, FALSE), c(TRUE, TRUE))) {
  invisible(run(autocast = mode[[1]], scale = mode[[2]], n_epochs = 1, batches = 1:2))
}

cat("\nfp32: run(autocast = FALSE, scale = FALSE)\n")
print(system.time(run(autocast = FALSE, scale = FALSE)))
cat("\nautocast: run(autocast = TRUE, scale = FALSE)\n")
print(system.time(run(autocast = TRUE, scale = FALSE)))
cat("\nautocast + grad scaler: run(autocast = TRUE, scale = TRUE)\n")
print(system.time(run(autocast = TRUE, scale = TRUE)))
