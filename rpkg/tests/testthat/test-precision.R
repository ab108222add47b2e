# precision_policy(), overflow_locator() and suggest_policy() on R's modules: bit-identical to the
# hand-edited module, the same numbers as Python's implementations on a PyTorch model with the
# same weights (one home for each rule: Python's rule resolution and suggestion rule, the core's
# statistics), R's shapes and errors. PyTorch modules still go to Python's implementations.

precision_model <- function(seed = 0) {
  torch_manual_seed(seed)
  nn_sequential(nn_linear(8, 16), nn_relu(), nn_linear(16, 4))
}

# The same model in PyTorch, its weights loaded from the R model's state dict.
python_twin <- function(model) {
  nn <- reticulate::import("torch")$nn
  twin <- nn$Sequential(nn$Linear(8L, 16L), nn$ReLU(), nn$Linear(16L, 4L))
  twin$load_state_dict(model$state_dict())
  twin
}

precision_input <- function(scale = 1) {
  torch_manual_seed(3)
  torch_randn(5, 8) * torch_tensor(c(scale, rep(1, 7)))
}

forward_of <- function(m) .subset2(ampkit:::module_of(m), "forward")
forwards <- function(model) lapply(ampkit:::model_modules(model)$modules, forward_of)
policy_region <- function() .Call(ampkit:::C_policy_current)

# One step: the output under float16 autocast, then the gradients of its float32 sum.
precision_step <- function(model, forward = model, x = precision_input()) {
  model$zero_grad()
  y <- with_autocast(device_type = "cpu", dtype = "float16", forward(x))
  y$float()$sum()$backward()
  list(y = y, grads = lapply(unname(model$parameters), function(p) p$grad$clone()))
}

expect_same_step <- function(a, b) {
  testthat::expect_identical(a$y$dtype, b$y$dtype)
  testthat::expect_true(torch_equal(a$y, b$y))
  testthat::expect_identical(length(a$grads), length(b$grads))
  for (i in seq_along(a$grads)) testthat::expect_true(torch_equal(a$grads[[i]], b$grads[[i]]))
}

test_that("a float32 rule equals the hand-edited module, bit for bit, forward and backward", {
  skip_if_no_ampkit()
  model <- precision_model()
  policy <- precision_policy(model, c("2" = "float32"))
  expect_s3_class(policy, "ampkit_precision_policy")
  expect_identical(policy$modules, c("2" = "float32"))
  expect_identical(policy$device_type, "cpu")
  expect_true(policy$active())
  got <- precision_step(model)
  policy$remove()
  expect_false(policy$active())
  # The hand edit: layer 2 with autocast off and its float16 input cast to float32.
  hand <- precision_step(model, function(x) {
    h <- model[[2]](model[[1]](x))
    with_autocast(device_type = "cpu", enabled = FALSE, model[[3]](h$float()))
  })
  expect_same_step(got, hand)
  expect_identical(got$y$dtype, torch_float32())
  plain <- precision_step(model)
  expect_identical(plain$y$dtype, torch_float16())
  expect_output(print(policy), "removed")
})

test_that("low-precision rules equal their hand edit, also nested in a float32 module", {
  skip_if_no_ampkit()
  model <- precision_model(1)
  policy <- precision_policy(model, c("(model)" = "float32", "0" = "bfloat16", "2" = "float32"))
  expect_identical(policy$modules, c("(model)" = "float32", "0" = "bfloat16", "2" = "float32"))
  got <- precision_step(model)
  policy$remove()
  hand <- precision_step(model, function(x) {
    with_autocast(device_type = "cpu", enabled = FALSE, {
      h <- model[[2]](with_autocast(device_type = "cpu", dtype = "bfloat16", model[[1]](x)))
      with_autocast(device_type = "cpu", enabled = FALSE, model[[3]](h$float()))
    })
  })
  expect_identical(got$y$dtype, torch_float32())
  expect_same_step(got, hand)
  # without any region around the model: the rule's own region
  policy <- precision_policy(model, list(list(nn_linear, torch_bfloat16())))
  expect_identical(model(precision_input())$dtype, torch_bfloat16())
  policy$remove()
  expect_identical(model(precision_input())$dtype, torch_float32())
})

test_that("rules by name, glob, regular expression and module type", {
  skip_if_no_ampkit()
  model <- precision_model()
  p <- precision_policy(model, list("*" = "bfloat16"))
  # "*" matches every name, the model's own ("(model)" in R, "" in Python) included
  expect_identical(p$modules, stats::setNames(rep("bfloat16", 4L), c("(model)", "0", "1", "2")))
  p$remove()
  p <- precision_policy(model, c("re:[02]" = "float32"))
  expect_identical(p$modules, c("0" = "float32", "2" = "float32"))
  p$remove()
  p <- precision_policy(model, list(list(nn_relu, "float32")))
  expect_identical(p$modules, c("1" = "float32"))
  p$remove()
  net <- nn_module("net",
    initialize = function() {
      self$encoder <- nn_sequential(nn_linear(4, 4), nn_relu(), nn_linear(4, 4))
      self$head <- nn_linear(4, 2)
    },
    forward = function(x) self$head(self$encoder(x))
  )
  m <- net()
  p <- precision_policy(m, c("encoder.*" = "float32", "head" = "bfloat16"))
  expect_identical(p$modules, c(encoder.0 = "float32", encoder.1 = "float32",
                                encoder.2 = "float32", head = "bfloat16"))
  p$remove()
  p <- precision_policy(m, list(list(net, "float32"), list(nn_linear, "bfloat16")))
  expect_identical(names(p$modules), c("(model)", "encoder.0", "encoder.2", "head"))
  p$remove()
})

test_that("bad rules are Python's errors, name the rule, and leave the model untouched", {
  skip_if_no_ampkit()
  model <- precision_model()
  twin <- python_twin(model)
  ampkit_py <- reticulate::import("ampkit")
  before <- forwards(model)
  # the same message as Python's precision_policy on the same model
  err <- expect_error(precision_policy(model, c("0" = "float32", "encoder" = "float32")),
                      "rule 'encoder' matches no module", class = "ampkit_error")
  expect_match(conditionMessage(err), "are '(the model)', '0', ", fixed = TRUE)
  expect_identical(conditionMessage(err), python_error_message(
    ampkit_py$precision_policy(twin, list("0" = "float32", encoder = "float32"))))
  expect_error(precision_policy(model, c("0" = "double")), "rule '0' maps to 'double'",
               class = "ampkit_error")
  expect_error(precision_policy(model, list("0" = "float32", "re:0" = "float16")),
               "both claim module '0'", class = "ampkit_error")
  expect_error(precision_policy(model, list(list(nn_linear, "float32"), "2" = "bfloat16")),
               "rules nn_linear (float32) and '2' (bfloat16) both claim module '2'",
               fixed = TRUE)
  expect_error(precision_policy(model, c("re:(" = "float32")), "not a valid regular expression")
  if (!cuda_is_available()) {
    # a float32 rule too: every rule would do nothing where autocast cannot run
    expect_error(precision_policy(model, c("0" = "float32"), device_type = "cuda"),
                 "`device_type` 'cuda' is one autocast cannot use here", class = "ampkit_error")
  }
  expect_error(precision_policy(model, "float32"), "rule 1 of `rules` has no name",
               class = "ampkit_error")
  expect_error(precision_policy("model", c("0" = "float32")), "`model` must be an nn_module",
               class = "ampkit_error")
  expect_identical(forwards(model), before)
  first <- precision_policy(model, c("0" = "float32"))
  expect_error(precision_policy(model, c("2" = "float32", "0" = "bfloat16")),
               "module '0' already has a precision policy", class = "ampkit_error")
  expect_identical(forwards(model)[-2], before[-2])  # the first policy's only
  first$remove()
  first$remove()  # harmless
  expect_identical(forwards(model), before)
})

test_that("a module's region is closed however its forward is left", {
  skip_if_no_ampkit()
  failing <- nn_module("failing", forward = function(x) stop("inside the module"))
  model <- failing()
  policy <- precision_policy(model, c("(model)" = "float32"))
  expect_error(with_autocast(device_type = "cpu", dtype = "bfloat16", model(torch_ones(2))),
               "inside the module")
  expect_null(policy_region())
  expect_false(is_autocast_enabled("cpu"))
  policy$remove()
})

test_that("a module's arguments are computed in the caller's precision, not the policy's", {
  skip_if_no_ampkit()
  torch_manual_seed(0)
  lin <- nn_linear(4, 4)
  a <- torch_randn(4, 4)
  # the product computed first by hand, in the caller's bfloat16 region
  by_hand <- with_autocast(device_type = "cpu", dtype = "bfloat16", {
    h <- torch_mm(a, a)
    lin(h)
  })
  for (rule in c("float32", "float16")) {
    policy <- precision_policy(lin, c("(model)" = rule))
    h <- with_autocast(device_type = "cpu", dtype = "bfloat16", torch_mm(a, a))
    expected <- with_autocast(device_type = "cpu", dtype = "bfloat16", lin(h))
    inline <- with_autocast(device_type = "cpu", dtype = "bfloat16", lin(torch_mm(a, a)))
    expect_true(torch_equal(inline, expected))
    policy$remove()
  }
  expect_true(torch_equal(with_autocast(device_type = "cpu", dtype = "bfloat16",
                                        lin(torch_mm(a, a))), by_hand))
})

test_that("forward hooks run outside the module's region, whichever came first", {
  skip_if_no_ampkit()
  model <- precision_model()
  own <- forward_of(model[[1]])
  for (hooks_first in c(TRUE, FALSE)) {
    seen <- logical()
    add_hook <- function() {
      model[[1]]$register_forward_hook(function(module, input, output) {
        seen <<- c(seen, is_autocast_enabled("cpu"))
        NULL
      })
    }
    if (hooks_first) hook <- add_hook()
    policy <- precision_policy(model, c("0" = "float32"))
    if (!hooks_first) hook <- add_hook()
    y <- with_autocast(device_type = "cpu", dtype = "float16", model[[1]](precision_input()))
    expect_identical(y$dtype, torch_float32())
    expect_identical(seen, TRUE)  # in the caller's region, not the policy's
    hook$remove()  # the policy stays
    y <- with_autocast(device_type = "cpu", dtype = "float16", model[[1]](precision_input()))
    expect_identical(y$dtype, torch_float32())
    policy$remove()
    expect_identical(forward_of(model[[1]]), own)
  }
  # the policy removed first, its hooks after: the module's own forward again
  policy <- precision_policy(model, c("0" = "float32"))
  hook <- model[[1]]$register_forward_hook(function(module, input, output) NULL)
  policy$remove()
  y <- with_autocast(device_type = "cpu", dtype = "float16", model[[1]](precision_input()))
  expect_identical(y$dtype, torch_float16())
  hook$remove()
  expect_identical(forward_of(model[[1]]), own)
})

test_that("the overflow locator's numbers are Python's locator's on the same weights", {
  skip_if_no_ampkit()
  model <- precision_model()
  twin <- python_twin(model)
  x <- precision_input(1e6)
  steps <- function(m) {
    for (i in 1:2) {
      m$zero_grad()
      y <- with_autocast(device_type = "cpu", dtype = "float16", m(x))
      (y$float()$sum() * 1024)$backward()
    }
  }
  loc <- overflow_locator(model, steps(model))
  expect_s3_class(loc, "ampkit_overflow_locator")
  expect_s3_class(loc$summary, "data.frame")
  expect_identical(loc$host_reads, 2L)
  expect_identical(loc$first_nonfinite$forward, c("0", "0"))
  expect_identical(loc$first_nonfinite$step, 0:1)
  expect_setequal(loc$summary$pass, c("forward", "backward", "parameters"))
  python <- overflow_locator(twin, steps(twin))  # Python's ampkit.overflow_locator
  expect_identical(loc$summary, python$summary)
  expect_identical(loc$first_nonfinite, python$first_nonfinite)
  expect_identical(loc$host_reads, python$host_reads)
  png <- tempfile(fileext = ".png")
  loc$plot(png, passes = c("forward", "parameters"))
  expect_identical(readBin(png, "raw", 4L), as.raw(c(0x89, 0x50, 0x4e, 0x47)))
  expect_output(print(loc), "2 steps, 2 host reads")
  expect_error(overflow_locator(model), "`code` must be given", class = "ampkit_error")
})

test_that("the locator's float16 fractions are what a cast to float16 does", {
  skip_if_no_ampkit()
  tiny <- 2^-25
  values <- torch_tensor(c(0, tiny, -tiny, tiny * 1.0000001, 2^-24, 1e-30, 1, 65504, 65519.99,
                           65520, -65520, 1e6, Inf, -Inf, NaN, 3e38), dtype = torch_float64())
  model <- nn_sequential(nn_identity())
  loc <- overflow_locator(model, {
    for (dtype in list(torch_float64(), torch_float32(), torch_bfloat16(), torch_float16())) {
      model(values$to(dtype = dtype))
    }
  })
  rows <- loc$summary[loc$summary$module == "0", ]
  expect_identical(rows$step, 0:3)
  expect_identical(rows$dtype, c("float64", "float32", "bfloat16", "float16"))
  for (i in 1:4) {
    t <- values$to(dtype = list(torch_float64(), torch_float32(), torch_bfloat16(),
                                torch_float16())[[i]])$to(dtype = torch_float64())
    v <- as_array(t)
    half <- as_array(t$to(dtype = torch_float16())$to(dtype = torch_float64()))
    finite <- is.finite(v)
    expect_identical(rows$inf[[i]], as.numeric(sum(is.infinite(v))))
    expect_identical(rows$nan[[i]], as.numeric(sum(is.nan(v))))
    expect_identical(rows$underflow[[i]], sum(v != 0 & finite & half == 0, na.rm = TRUE) / 16)
    expect_identical(rows$overflow[[i]], sum(finite & is.infinite(half)) / 16)
  }
  expect_identical(rows$underflow[[2]], 3 / 16)
  expect_identical(rows$overflow[[2]], 4 / 16)
  expect_identical(rows$headroom[[2]], -Inf)
})

test_that("the locator leaves no hook behind, and hands on a parameter's own hook", {
  skip_if_no_ampkit()
  model <- precision_model()
  x <- precision_input()
  before <- forwards(model)
  expect_error(overflow_locator(model, stop("inside")), "inside")
  expect_identical(forwards(model), before)
  # a post-accumulate-grad hook of Python's on a parameter runs under the locator and after it
  reticulate::py_run_string(paste(
    "ampkit_test_calls = []", "def ampkit_test_hook(p):", "    ampkit_test_calls.append(1)",
    sep = "\n"))
  main <- reticulate::import_main()
  weight <- reticulate::r_to_py(model[[3]]$weight)
  weight$register_post_accumulate_grad_hook(main$ampkit_test_hook)
  loc <- overflow_locator(model, model(x)$sum()$backward())
  params <- loc$summary[loc$summary$pass == "parameters", ]
  expect_identical(params$module, c("2", "0"))
  expect_identical(params$calls, c(2L, 2L))  # weight and bias, once each
  expect_identical(forwards(model), before)
  model$zero_grad()
  model(x)$sum()$backward()
  expect_identical(length(main$ampkit_test_calls), 2L)
})

test_that("suggest_policy suggests what Python's does for the same weights", {
  skip_if_no_ampkit()
  model <- precision_model()
  twin <- python_twin(model)
  x <- precision_input(1e5)
  before <- lapply(model$parameters, function(p) p$clone())
  s <- suggest_policy(model, list(x))
  expect_identical(s, suggest_policy(twin, list(x)))  # Python's ampkit.suggest_policy
  expect_identical(s$rules[["0"]], "float32")
  expect_s3_class(s$reasons, "data.frame")
  expect_identical(s$reasons$module[[1]], "0")
  expect_match(s$reasons$reason[[1]], "output held \\d+ inf")
  expect_identical(s$rounds, length(s$rules) + 1L)  # a last round finds nothing new
  y <- torch_randn(5, 4)
  mse <- function(out, target) nnf_mse_loss(out$float(), target)
  model$zero_grad()
  grads <- lapply(model$parameters, function(p) {
    p$grad <- torch_full_like(p, 7)
    p$grad
  })
  s2 <- suggest_policy(model, list(list(x, y)), loss_fn = mse)
  expect_identical(s2, suggest_policy(twin, list(list(x, y)), loss_fn = mse))
  expect_true(any(grepl("parameters' gradients (loss scale 65536)", s2$reasons$reason,
                        fixed = TRUE)))
  for (i in seq_along(grads)) {  # the gradients are put back, the parameters untouched
    expect_true(torch_equal(model$parameters[[i]]$grad, grads[[i]]))
    expect_true(torch_equal(model$parameters[[i]], before[[i]]))
  }
  p <- precision_policy(model, s$rules)
  expect_identical(p$modules, s$rules)
  p$remove()
  expect_error(suggest_policy(model, list()), "`batches` must be a non-empty list",
               class = "ampkit_error")
  expect_error(suggest_policy(model, list(x), loss_fn = 3), "`loss_fn` must be NULL",
               class = "ampkit_error")
  expect_error(suggest_policy(model, list(x), dtype = "float32"),
               "`dtype` must be torch.float16 or torch.bfloat16", class = "ampkit_error")
  # each measured nothing, or nothing in float16, and returned an empty suggestion
  expect_error(suggest_policy(model, list(x), max_rounds = 0), "`max_rounds` must be at least 1",
               class = "ampkit_error")
  expect_error(suggest_policy(model, list(x), margin = NaN),
               "`margin` must be a finite number >= 0", class = "ampkit_error")
  expect_error(suggest_policy(model, list(list(x, y)), loss_fn = mse, loss_scale = 0),
               "`loss_scale` must be a finite number > 0", class = "ampkit_error")
  if (!cuda_is_available()) {
    # in suggest_policy()'s name, as Python's (it said "precision_policy: ...")
    expect_error(suggest_policy(model, list(x), device_type = "cuda"),
                 "suggest_policy: `device_type` 'cuda' is one autocast cannot use here",
                 class = "ampkit_error")
  }
})

test_that("PyTorch modules go to Python's implementations, as before", {
  skip_if_no_ampkit()
  torch <- import_torch()
  twin <- python_twin(precision_model())
  x <- precision_input()
  policy <- precision_policy(twin, list(list(torch$nn$ReLU, "float32"), "0" = "bfloat16"))
  expect_identical(policy$modules, c("0" = "bfloat16", "1" = "float32"))
  expect_identical(twin(x)$dtype, torch_float32())  # the ReLU hands float32 on
  expect_output(print(policy), "0: bfloat16")
  policy$remove()
  expect_false(policy$active())
  loc <- overflow_locator(twin, twin(x))
  expect_identical(loc$summary$module, c("0", "1", "2", "(model)"))
  expect_identical(loc$host_reads, 1L)
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

test_that("a clone of a policed module runs its own weights in the policy's dtype, as Python's", {
  skip_if_no_ampkit()
  x <- precision_input()
  first <- function(m) with_autocast(device_type = "cpu", dtype = "float16", m[[1]](x))
  # Python's copy.deepcopy of a module under a policy: a wrapper bound to the copy, which the
  # policy's remove() leaves on it; the copy has no policy, so it may get one of its own
  twin <- python_twin(precision_model())
  py_policy <- precision_policy(twin, c("0" = "float32"))
  py_copy <- reticulate::import("copy")$deepcopy(twin)
  py_policy$remove()
  for (hooked in c(FALSE, TRUE)) {
    model <- precision_model()
    if (hooked) hook <- model[[1]]$register_forward_hook(function(module, input, output) NULL)
    policy <- precision_policy(model, c("0" = "float32"))
    copy <- model$clone(deep = TRUE)
    policy$remove()
    with_no_grad({
      copy[[1]]$weight$zero_()
      copy[[1]]$bias$zero_()
    })
    py_copy$load_state_dict(copy$state_dict())
    expect_identical(first(copy)$dtype, torch_float32())  # still kept in float32
    expect_true(torch_equal(first(copy), torch_zeros(5, 16)))
    r_step <- precision_step(copy)
    py_y <- with_autocast(device_type = "cpu", dtype = "float16", py_copy(x))
    expect_identical(r_step$y$dtype, py_y$dtype)
    expect_true(torch_equal(r_step$y, py_y))
    expect_true(is_undefined_tensor(model[[1]]$weight$grad))  # the original's were not used
    expect_identical(first(model)$dtype, torch_float16())  # the policy is off the original
    again <- precision_policy(copy, c("0" = "bfloat16"))  # nests around the copied float32 one
    expect_identical(first(copy)$dtype, torch_float32())
    again$remove()
    if (hooked) hook$remove()
  }
  # a clone of a module with hooks and no policy (its plain forward one of R6's locked methods)
  model <- precision_model()
  hook <- model[[1]]$register_forward_hook(function(module, input, output) NULL)
  copy <- model$clone(deep = TRUE)
  policy <- precision_policy(copy, c("0" = "float32"))
  expect_identical(first(copy)$dtype, torch_float32())
  expect_identical(first(model)$dtype, torch_float16())
  policy$remove()
  expect_identical(first(copy)$dtype, torch_float16())
  hook$remove()
})
