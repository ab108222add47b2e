# Two R processes, one per rank (gloo on 127.0.0.1), training an FSDP2 model with
# amp_grad_scaler(process_group = ...): an inf in rank 1's gradient shard must be a skip on both
# ranks, and the ranks' scales must agree step for step.

rank_script <- '
args <- commandArgs(trailingOnly = TRUE)
out <- args[[1]]
library(ampkit)
torch <- reticulate::import("torch")
dist <- torch$distributed
dist$init_process_group("gloo", timeout = reticulate::import("datetime")$timedelta(seconds = 60))
rank <- dist$get_rank()
torch$manual_seed(0L)
model <- torch$nn$Sequential(torch$nn$Linear(8L, 16L), torch$nn$ReLU(), torch$nn$Linear(16L, 4L))
torch$distributed$fsdp$fully_shard(model)
opt <- torch$optim$SGD(model$parameters(), lr = 0.05)
scaler <- amp_grad_scaler("cpu", init_scale = 1024, growth_interval = 2,
                          process_group = dist$group$WORLD)
g <- torch$Generator()$manual_seed(rank)
scales <- numeric()
skipped <- logical()
for (step in 0:4) {
  opt$zero_grad()
  loss <- with_autocast(device_type = "cpu", {
    model(torch$randn(4L, 8L, generator = g))$float()$pow(2)$mean()
  })
  scaler$scale(loss)$backward()
  if (step == 2L && rank == 1L) {
    # Unconverted: FSDP2\'s gradients are DTensors, Python objects.
    py <- reticulate::import_builtins(convert = FALSE)
    first <- py$`next`(py$iter(model$parameters()))
    first$grad$to_local()$view(-1L)$`__setitem__`(0L, Inf)
  }
  scaler$step(opt)
  scaler$update()
  scales <- c(scales, scaler$get_scale())
  skipped <- c(skipped, scaler$step_was_skipped(opt))
}
# the scaler\'s documented methods and R torch\'s `.scale`, as on one process
scale_field <- as_array(scaler$.scale)
scaler$set_growth_factor(3)
scaler$set_backoff_factor(0.25)
scaler$set_growth_interval(7)
factors <- c(scaler$get_growth_factor(), scaler$get_backoff_factor(), scaler$get_growth_interval())
dist$destroy_process_group()
part <- paste0(out, ".part")  # renamed when complete: the test reads only whole files
saveRDS(list(scales = scales, skipped = skipped, stats = scaler$stats(),
             scale_field = scale_field, factors = factors), part)
file.rename(part, out)
'

test_that("ranks driven from R agree: an inf in one rank's shard is a skip on every rank", {
  skip_if_no_ampkit()
  skip_on_os("windows")
  script <- tempfile(fileext = ".R")
  writeLines(rank_script, script)
  socket <- reticulate::import("socket")$socket()
  socket$bind(reticulate::tuple("127.0.0.1", 0L))
  port <- socket$getsockname()[[2L]]
  socket$close()
  rscript <- file.path(R.home("bin"), "Rscript")
  outs <- c(tempfile(fileext = ".rds"), tempfile(fileext = ".rds"))
  for (rank in 0:1) {
    env <- c(paste0("RANK=", rank), "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
             paste0("MASTER_PORT=", port), "OMP_NUM_THREADS=1")
    system2(rscript, c(shQuote(script), shQuote(outs[[rank + 1L]])), env = env, wait = FALSE,
            stdout = FALSE, stderr = FALSE)
  }
  deadline <- Sys.time() + 180
  while (!all(file.exists(outs)) && Sys.time() < deadline) Sys.sleep(0.5)
  expect_true(all(file.exists(outs)), label = "both ranks finished within 180 s")
  skip_if_not(all(file.exists(outs)))
  ranks <- lapply(outs, readRDS)
  expect_identical(ranks[[1]]$scales, ranks[[2]]$scales)
  expect_identical(ranks[[1]]$skipped, c(FALSE, FALSE, TRUE, FALSE, FALSE))
  expect_identical(ranks[[2]]$skipped, ranks[[1]]$skipped)
  expect_identical(ranks[[1]]$stats, ranks[[2]]$stats)
  expect_identical(ranks[[1]]$scale_field, utils::tail(ranks[[1]]$scales, 1L))
  expect_identical(ranks[[1]]$factors, c(3, 0.25, 7))
})

test_that("a process_group that is not one is refused, naming it", {
  skip_if_no_ampkit()
  expect_error(amp_grad_scaler("cpu", process_group = "world"), class = "ampkit_error",
               "`process_group` must be a torch.distributed ProcessGroup")
})
