# When mixed precision goes wrong, from R: one raw input feature in the hundreds overflows
# float16 (the same run as examples/when_amp_goes_wrong.py in the ampkit repository).
#   Rscript -e 'source(system.file("examples", "when_amp_goes_wrong.R", package = "ampkit"))'
#
# 1. Skipped steps: $step_was_skipped() says so at no cost, $stats() counts them, and the
#    learning-rate schedule is held back on skipped steps.
# 2. $overflow_report() names the parameters whose gradients held inf/NaN.
# 3. The scale backs off to min_scale and overflows there: an error of class
#    ampkit_scale_collapse, instead of a scale that silently falls towards zero.
# 4. The fix the report points to (normalise the input) trains without a skip.
library(ampkit)
stopifnot(ampkit_available())
torch <- reticulate::import("torch")

train <- function(x, y, steps = 12L) {
  torch$manual_seed(0L)
  nn <- torch$nn
  model <- nn$Sequential(nn$Linear(8L, 32L), nn$ReLU(), nn$Linear(32L, 32L), nn$ReLU(),
                         nn$Linear(32L, 1L))
  opt <- torch$optim$SGD(model$named_parameters(), lr = 1e-3)  # named: the report uses them
  sched <- torch$optim$lr_scheduler$StepLR(opt, step_size = 1L, gamma = 0.9)
  scaler <- amp_grad_scaler("cpu", min_scale = 2^10, track_overflow = TRUE)
  for (step in seq_len(steps) - 1L) {
    opt$zero_grad()
    loss <- with_autocast(device_type = "cpu", dtype = "float16", {
      nn$functional$mse_loss(model(x)$float(), y)
    })
    scaler$scale(loss)$backward()
    scaler$step(opt)
    collapsed <- tryCatch({
      scaler$update()
      FALSE
    }, ampkit_scale_collapse = function(e) {
      cat(sprintf("step %d: ampkit_scale_collapse: %s\n", step, conditionMessage(e)))
      TRUE
    })
    if (collapsed) {
      return(scaler)
    }
    if (!scaler$step_was_skipped(opt)) sched$step()  # the LR schedule follows the real steps
    report <- scaler$overflow_report()
    overflow <- if (nrow(report) > 0L) {
      paste0("  overflow: ", paste(sprintf("%s (%d inf, %d nan)", report$name, report$inf,
                                           report$nan), collapse = ", "))
    } else {
      ""
    }
    cat(sprintf("step %d: skipped=%-5s scale=%7.0f lr=%.2e loss=%.4g%s\n", step,
                scaler$step_was_skipped(opt), scaler$get_scale(), sched$get_last_lr()[[1]],
                loss$item(), overflow))
  }
  scaler
}

print_stats <- function(scaler) {
  s <- scaler$stats()
  cat(sprintf("stats: steps=%d skipped_steps=%d consecutive_skipped_steps=%d scale=%g\n",
              s$steps, s$skipped_steps, s$consecutive_skipped_steps, s$scale))
}

g <- torch$Generator()$manual_seed(1L)
x <- torch$randn(64L, 8L, generator = g)
invisible(x$select(1L, 3L)$mul_(300))  # a raw feature in the hundreds: float16 gradients overflow
y <- torch$randn(64L, 1L, generator = g)

cat("== raw inputs\n")
print_stats(train(x, y))

cat("\n== the same model, inputs normalised\n")
print_stats(train(x$sub(x$mean(0L))$div(x$std(0L)), y, steps = 6L))
