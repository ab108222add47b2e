# precision_policy(), overflow_locator() and suggest_policy() from R: the same results as
# Python's (the same Python objects computed them), R's shapes (data.frames, named vectors) and
# R's error classes.

precision_torch <- function() reticulate::import("torch")

precision_model <- function(torch, seed = 0L) {
  torch$manual_seed(seed)
  nn <- torch$nn
  nn$Sequential(nn$Linear(8L, 16L), nn$ReLU(), nn$Linear(16L, 4L))
}

test_that("a float32 rule equals Python's policy and the hand-edited forward, bit for bit", {
  skip_if_no_ampkit()
  torch <- precision_torch()
  model <- precision_model(torch)
  x <- torch$randn(5L, 8L, generator = torch$Generator()$manual_seed(3L))
  policy <- precision_policy(model, c("0" = "float32"))
  expect_s3_class(policy, "ampkit_precision_policy")
  expect_identical(policy$modules, c("0" = "float32"))
  expect_true(policy$active())
  y <- with_autocast(device_type = "cpu", dtype = "float16", model(x))
  policy$remove()
  expect_false(policy$active())
  # The hand edit: layer 0 with autocast off and a float32 input, the rest in float16.
  expected <- with_autocast(device_type = "cpu", dtype = "float16", {
    h <- with_autocast(device_type = "cpu", enabled = FALSE, model$`_modules`[["0"]](x$float()))
    model$`_modules`[["2"]](model$`_modules`[["1"]](h))
  })
  expect_true(torch$equal(y, expected))
  expect_identical(y$dtype, torch$float16)
  plain <- with_autocast(device_type = "cpu", dtype = "float16", model(x))
  expect_false(torch$equal(plain, y))
  expect_output(print(policy), "removed")
})

test_that("rules by pattern, regular expression and module type", {
  skip_if_no_ampkit()
  torch <- precision_torch()
  model <- precision_model(torch)
  p <- precision_policy(model, list("*" = "bfloat16"))
  # "*" matches every name, the model's own ("(model)" in R, "" in Python) included
  expect_identical(p$modules, stats::setNames(rep("bfloat16", 4L), c("(model)", "0", "1", "2")))
  p$remove()
  p <- precision_policy(model, c("(model)" = "float32"))
  expect_identical(p$modules, c("(model)" = "float32"))
  x <- torch$randn(2L, 8L)
  y <- with_autocast(device_type = "cpu", dtype = "bfloat16", model(x))
  expect_identical(y$dtype, torch$float32)
  p$remove()
  p <- precision_policy(model, c("re:[02]" = "float32"))
  expect_identical(p$modules, c("0" = "float32", "2" = "float32"))
  p$remove()
  p <- precision_policy(model, list(list(torch$nn$ReLU, torch$float32)))
  expect_identical(p$modules, c("1" = "float32"))
  p$remove()
})

test_that("bad rules are R errors naming the rule, and leave the model untouched", {
  skip_if_no_ampkit()
  torch <- precision_torch()
  model <- precision_model(torch)
  untouched <- function() {
    !any(vapply(c("0", "1", "2"), function(n) {
      "forward" %in% names(reticulate::py_get_attr(model$`_modules`[[n]], "__dict__"))
    }, NA))
  }
  expect_error(precision_policy(model, c("0" = "float32", "encoder" = "float32")),
               "rule 'encoder' matches no module", class = "ampkit_error")
  expect_error(precision_policy(model, c("0" = "double")),
               "rule \"0\" maps to \"double\"", class = "ampkit_error")
  expect_error(precision_policy(model, list("0" = "float32", "re:0" = "float16")),
               "both claim module '0'", class = "ampkit_error")
  expect_error(precision_policy(model, "float32"), "rule 1 of `rules` has no name",
               class = "ampkit_error")
  expect_error(precision_policy("model", c("0" = "float32")), "`model` must be a torch module",
               class = "ampkit_error")
  expect_true(untouched())
  first <- precision_policy(model, c("0" = "float32"))
  expect_error(precision_policy(model, c("0" = "float32")), "already has a precision policy",
               class = "ampkit_error")
  first$remove()
  expect_true(untouched())
})

test_that("the overflow locator's summary is Python's, as a data.frame", {
  skip_if_no_ampkit()
  torch <- precision_torch()
  model <- precision_model(torch)
  x <- torch$randn(5L, 8L, generator = torch$Generator()$manual_seed(3L))
  invisible(x$select(1L, 0L)$mul_(1e6))
  steps <- function() {
    for (i in 1:2) {
      model$zero_grad()
      y <- with_autocast(device_type = "cpu", dtype = "float16", model(x))
      y$float()$sum()$backward()
    }
  }
  loc <- overflow_locator(model, steps())
  expect_s3_class(loc, "ampkit_overflow_locator")
  expect_s3_class(loc$summary, "data.frame")
  expect_identical(loc$host_reads, 2L)
  expect_identical(loc$first_nonfinite$forward, c("0", "0"))
  expect_identical(loc$first_nonfinite$step, 0:1)
  # Python's own locator over the same steps gives the same rows.
  py_loc <- reticulate::import("ampkit")$overflow_locator(model)
  py_loc$`__enter__`()
  steps()
  py_loc$`__exit__`(NULL, NULL, NULL)
  rows <- py_loc$summary()
  expect_identical(nrow(loc$summary), length(rows))
  expect_identical(loc$summary$module, vapply(rows, function(r) r$module, ""))
  expect_identical(loc$summary$amax, vapply(rows, function(r) as.numeric(r$amax), 0))
  expect_identical(loc$summary$inf, vapply(rows, function(r) as.numeric(r$inf), 0))
  expect_identical(loc$summary$headroom, vapply(rows, function(r) r$headroom, 0))
  png <- tempfile(fileext = ".png")
  loc$plot(png)
  expect_identical(readBin(png, "raw", 4L), as.raw(c(0x89, 0x50, 0x4e, 0x47)))
  expect_output(print(loc), "2 steps, 2 host reads")
  expect_error(overflow_locator(model), "`code` must be given", class = "ampkit_error")
})

test_that("an error inside the locator's code leaves no hook on the model", {
  skip_if_no_ampkit()
  torch <- precision_torch()
  model <- precision_model(torch)
  expect_error(overflow_locator(model, stop("inside")), "inside")
  expect_identical(length(model$`_modules`[["0"]]$`_forward_hooks`), 0L)
})

test_that("suggest_policy returns R's rules and reasons, usable by precision_policy", {
  skip_if_no_ampkit()
  torch <- precision_torch()
  torch$manual_seed(0L)
  nn <- torch$nn
  model <- nn$Sequential(nn$Linear(4L, 8L), nn$ReLU(), nn$Linear(8L, 1L))
  x <- torch$randn(16L, 4L)
  invisible(x$select(1L, 0L)$mul_(1e5))
  s <- suggest_policy(model, list(x))
  expect_identical(s$rules, c("0" = "float32", "2" = "float32"))
  expect_s3_class(s$reasons, "data.frame")
  expect_identical(s$reasons$module[[1]], "0")
  expect_match(s$reasons$reason[[1]], "output held \\d+ inf")
  py <- reticulate::import("ampkit")$suggest_policy(model, list(x))
  expect_identical(names(s$rules), names(py$rules))
  y <- torch$randn(16L, 1L)
  mse <- function(out, target) torch$nn$functional$mse_loss(out$float(), target)
  s2 <- suggest_policy(model, list(list(x, y)), loss_fn = mse)
  expect_true(all(c("0", "2") %in% names(s2$rules)))
  p <- precision_policy(model, s$rules)
  expect_identical(p$modules, s$rules)
  p$remove()
  expect_error(suggest_policy(model, list()), "`batches` must be a non-empty list",
               class = "ampkit_error")
  expect_error(suggest_policy(model, list(x), loss_fn = 3), "`loss_fn` must be NULL",
               class = "ampkit_error")
})

test_that("the audit shows the ops a policy keeps in float32", {
  skip_if_no_ampkit()
  torch <- precision_torch()
  model <- precision_model(torch)
  x <- torch$randn(5L, 8L)
  p <- precision_policy(model, c("0" = "float32"))
  audit <- autocast_audit(with_autocast(device_type = "cpu", dtype = "bfloat16", model(x)))
  p$remove()
  addmm <- audit[audit$op == "addmm", ]
  expect_setequal(addmm$policy, c("float32", NA))
  expect_identical(attr(audit, "fp32_matmuls_outside_autocast"), 0L)
  expect_identical(attr(audit, "policy_fp32_matmuls"), 1L)
})

test_that("the documented examples run", {
  skip_if_no_ampkit()
  for (topic in c("precision_policy", "overflow_locator", "suggest_policy")) {
    expect_no_error(suppressMessages(utils::capture.output(
      utils::example(topic, package = "ampkit", character.only = TRUE, echo = FALSE,
                     ask = FALSE, local = new.env())
    )))
  }
})
