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
# 5. overflow_locator() says where the inf is made: not in the forward pass (8 bits of float16
#    headroom left), but in the parameters' gradients, first those of the last layer; the
#    headroom plot is saved as a PNG (the path given, else in the temporary directory).
# 6. suggest_policy() names the layers to keep in float32, with the reasons; under that
#    precision_policy() the raw inputs train without a skip (at lr = 1e-5: with a raw feature in
#    the hundreds, 1e-3 diverges even in float32).
library(ampkit)

make_model <- function() {
  torch_manual_seed(0)
  nn_sequential(nn_linear(8, 32), nn_relu(), nn_linear(32, 32), nn_relu(), nn_linear(32, 1))
}

mse <- function(output, target) nnf_mse_loss(output$float(), target)

train <- function(x, y, steps = 12L, lr = 1e-3, rules = NULL) {
  model <- make_model()
  policy <- if (!is.null(rules)) precision_policy(model, rules)
  on.exit(if (!is.null(policy)) policy$remove())
  opt <- optim_sgd(model$parameters, lr = lr)  # named ("2.weight"): the report uses the names
  sched <- lr_step(opt, step_size = 1, gamma = 0.9)
  scaler <- amp_grad_scaler("cpu", min_scale = 2^10, track_overflow = TRUE)
  for (step in seq_len(steps) - 1L) {
    opt$zero_grad()
    loss <- with_autocast(device_type = "cpu", dtype = torch_float16(), {
      mse(model(x), y)
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

# Python's spelling of a number with 2 decimals ("-inf" for -Inf).
fmt2 <- function(v) ifelse(is.infinite(v), ifelse(v > 0, "inf", "-inf"), sprintf("%.2f", v))

locate <- function(x, y, plot_path, steps = 3L) {
  model <- make_model()
  opt <- optim_sgd(model$parameters, lr = 1e-3)
  scaler <- amp_grad_scaler("cpu")
  loc <- overflow_locator(model, {
    for (i in seq_len(steps)) {
      opt$zero_grad()
      loss <- with_autocast(device_type = "cpu", dtype = torch_float16(), mse(model(x), y))
      scaler$scale(loss)$backward()
      scaler$step(opt)
      scaler$update()
    }
  })
  rows <- loc$summary[loc$summary$module != "(model)", ]
  none <- function(v) ifelse(is.na(v), "none", v)
  for (i in seq_len(nrow(loc$first_nonfinite))) {
    first <- loc$first_nonfinite[i, ]
    cat(sprintf("locator step %d: first non-finite: forward=%s backward=%s parameters=%s\n",
                first$step, none(first$forward), none(first$backward), none(first$parameters)))
    for (phase in c("forward", "backward", "parameters")) {
      mine <- rows[rows$step == first$step & rows$pass == phase, ]
      cat(sprintf("locator step %d: headroom %s: %s\n", first$step, phase,
                  paste(mine$module, fmt2(mine$headroom), collapse = ", ")))
    }
  }
  cat(sprintf("locator: %d host reads for %d steps\n", loc$host_reads, steps))
  loc$plot(plot_path, modules = c("0", "2", "4"), passes = c("forward", "backward"),
           title = "float16 headroom of the Linear layers, raw inputs")
  invisible(loc)
}

print_stats <- function(scaler) {
  s <- scaler$stats()
  cat(sprintf("stats: steps=%d skipped_steps=%d consecutive_skipped_steps=%d scale=%g\n",
              s$steps, s$skipped_steps, s$consecutive_skipped_steps, s$scale))
}

g <- torch_generator()
g$set_current_seed(1)
x <- torch_randn(64, 8, generator = g)
invisible(x[, 4]$mul_(300))  # a raw feature in the hundreds: float16 gradients overflow
y <- torch_randn(64, 1, generator = g)

cat("== raw inputs\n")
print_stats(train(x, y))

cat("\n== the same model, inputs normalised\n")
print_stats(train(x$sub(x$mean(dim = 1))$div(x$std(dim = 1)), y, steps = 6L))

cat("\n== where the inf is made: overflow_locator, raw inputs\n")
args <- commandArgs(trailingOnly = TRUE)
plot_path <- if (length(args) > 0L) args[[1]] else file.path(tempdir(), "when_amp_goes_wrong.png")
locate(x, y, plot_path)
cat(sprintf("headroom plot: %s\n", plot_path))

cat("\n== suggest_policy, then the raw inputs under that precision_policy\n")
suggestion <- suggest_policy(make_model(), list(list(x, y)), loss_fn = mse)
for (name in unique(suggestion$reasons$module)) {
  reasons <- suggestion$reasons$reason[suggestion$reasons$module == name]
  cat(sprintf("keep %s in float32: %s\n", name, paste(reasons, collapse = "; ")))
}
print_stats(train(x, y, steps = 6L, lr = 1e-5, rules = suggestion$rules))
