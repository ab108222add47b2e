# The R package's CUDA scaler on a GPU: R torch's article loop (float16 autocast, the scaler,
# an Inf gradient on one step) against torch.amp on the same GPU, bit for bit, with the scale
# kept on the device. Skipped where torch sees no CUDA device (tools/gpu_proof.sh runs it there).

test_that("cuda_amp_grad_scaler scales a CUDA loss as torch.amp does, a skipped step included", {
  skip_if_no_ampkit()
  torch <- import_torch()
  if (!torch$cuda$is_available()) skip("CUDA is not available")
  make <- function() {
    torch$manual_seed(1L)
    model <- torch$nn$Sequential(torch$nn$Linear(6L, 5L), torch$nn$ReLU(),
                                 torch$nn$Linear(5L, 3L))$cuda()
    list(model = model, opt = torch$optim$SGD(model$parameters(), lr = 0.1))
  }
  ours_net <- make()
  theirs_net <- make()
  ours <- cuda_amp_grad_scaler(init_scale = 256, growth_interval = 2)
  theirs <- torch$amp$GradScaler("cuda", init_scale = 256, growth_interval = 2L)
  torch$manual_seed(2L)
  for (i in 1:5) {
    x <- torch$randn(4L, 6L)$cuda()
    y <- torch$randn(4L, 3L)$cuda()
    for (pair in list(list(ours_net, ours), list(theirs_net, theirs))) {
      net <- pair[[1L]]
      scaler <- pair[[2L]]
      with_autocast(device_type = "cuda", dtype = "float16", {
        loss <- torch$nn$functional$mse_loss(net$model(x)$float(), y)
      })
      scaler$scale(loss)$backward()
      if (i == 3L) {
        grad <- net$model$parameters()$`__next__`()$grad
        grad$view(-1L)$`__setitem__`(0L, Inf)
      }
      scaler$step(net$opt)
      scaler$update()
      net$opt$zero_grad()
    }
    expect_identical(ours$get_scale(), theirs$get_scale())
  }
  pa <- reticulate::iterate(ours_net$model$parameters())
  pb <- reticulate::iterate(theirs_net$model$parameters())
  expect_true(all(mapply(function(p, q) torch$equal(p, q), pa, pb)))
  expect_identical(ours$python$`_scale`$device$type, "cuda")
  expect_identical(ours$state_dict()$scale, theirs$state_dict()$scale)
})
