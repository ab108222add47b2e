# R torch's AMP article benchmark, `run(autocast, scale)`, ported to ampkit.
#
#   Rscript rpkg/inst/examples/rtorch_article_benchmark.R
#   Rscript -e 'source(system.file("examples", "rtorch_article_benchmark.R", package = "ampkit"))'
#
# An MLP of 3 linear layers with ReLU, MSE loss and SGD (lr = 0.1), trained three times:
# fp32, with autocast, with autocast and the grad scaler. The article's code, with
# `torch <- reticulate::import("torch")` in place of R torch. On CUDA (when
# torch$cuda$is_available()) it uses the article's sizes and float16; on the CPU it uses bfloat16
# and small sizes. AMPKIT_BENCH_DEVICE=cpu forces the CPU.

library(ampkit)

stopifnot(ampkit_available())
# torch keeps its own BLAS however it is imported after library(ampkit) (see ?ampkit, "torch
# keeps its own BLAS"); otherwise fp32 would run on R's reference BLAS.
torch <- reticulate::import("torch")
invisible(torch$manual_seed(1L))

device <- Sys.getenv("AMPKIT_BENCH_DEVICE", if (torch$cuda$is_available()) "cuda" else "cpu")
on_cuda <- device == "cuda"
dtype <- if (on_cuda) "float16" else "bfloat16"
batch_size <- if (on_cuda) 512L else 256L  # CUDA: try, for example, 128, 256, 513.
in_size <- if (on_cuda) 4096L else 512L
out_size <- in_size
num_layers <- 3L
num_batches <- 50L
epochs <- 3L

# Creates data in default precision.
# The same data is used for both default and mixed precision trials below.
# You don't need to manually change inputs' dtype when enabling mixed precision.
data <- lapply(1:num_batches, function(x) torch$randn(batch_size, in_size, device = device))
targets <- lapply(1:num_batches, function(x) torch$randn(batch_size, out_size, device = device))

make_model <- function(in_size, out_size, num_layers) {
  layers <- list()
  for (i in seq_len(num_layers - 1L)) {
    layers <- c(layers, list(torch$nn$Linear(in_size, in_size), torch$nn$ReLU()))
  }
  layers <- c(layers, list(torch$nn$Linear(in_size, out_size)))
  do.call(torch$nn$Sequential, layers)$to(device)
}

# `n_epochs` and `batches` only for the warm-up below; the article's run(autocast, scale) as is.
run <- function(autocast, scale, n_epochs = epochs, batches = seq_along(data)) {
  loss_fn <- torch$nn$MSELoss()$to(device)
  net <- make_model(in_size, out_size, num_layers)
  opt <- torch$optim$SGD(net$parameters(), lr = 0.1)
  # R torch: cuda_amp_grad_scaler(enabled = scale); ampkit also scales on the CPU.
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
  loss$item()  # reads the loss to the host: waits for the device
}

cat(sprintf(paste0("ampkit, R torch's AMP article benchmark: %s, autocast dtype %s, batch %d, ",
                   "width %d, %d layers, %d batches x %d epochs (torch %s, %d threads)\n"),
            device, dtype, batch_size, in_size, num_layers, num_batches, epochs,
            torch$`__version__`, torch$get_num_threads()))

# One short pass of each mode first, so that no mode pays the one-time costs of the others.
for (mode in list(c(FALSE, FALSE), c(TRUE, FALSE), c(TRUE, TRUE))) {
  invisible(run(autocast = mode[[1]], scale = mode[[2]], n_epochs = 1L, batches = 1:2))
}

cat("\nfp32: run(autocast = FALSE, scale = FALSE)\n")
print(system.time(run(autocast = FALSE, scale = FALSE)))
cat("\nautocast: run(autocast = TRUE, scale = FALSE)\n")
print(system.time(run(autocast = TRUE, scale = FALSE)))
cat("\nautocast + grad scaler: run(autocast = TRUE, scale = TRUE)\n")
print(system.time(run(autocast = TRUE, scale = TRUE)))
