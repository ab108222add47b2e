# autocast_audit(): R's own operations seen by Python's audit (one libtorch), the data.frame and
# its totals, the same numbers as for a PyTorch model with the same weights, the policy column
# for R's precision_policy(), and the audit left however the code is left.

# Linear(4, 3), ReLU, Linear(3, 2) on 5 rows, as an R model and as its PyTorch twin.
audit_model <- function() {
  torch_manual_seed(0)
  model <- nn_sequential(nn_linear(4, 3), nn_relu(), nn_linear(3, 2))
  nn <- reticulate::import("torch")$nn
  twin <- nn$Sequential(nn$Linear(4L, 3L), nn$ReLU(), nn$Linear(3L, 2L))
  twin$load_state_dict(model$state_dict())
  list(model = model, twin = twin, x = torch_randn(5, 4), y = torch_randn(5, 2))
}

# A step under bfloat16 autocast, the backward pass outside it.
audit_step <- function(m, model = m$model) {
  loss <- with_autocast(device_type = "cpu", dtype = "bfloat16", {
    nnf_mse_loss(model(m$x), m$y)
  })
  loss$backward()
  invisible(loss)
}

no_modes_left <- function() {
  c <- reticulate::import("torch")$`_C`
  c$`_len_torch_function_stack`() == 0L && c$`_len_torch_dispatch_stack`() == 0L
}

audit_keys <- function(audit) {
  sort(paste(audit$op, audit$in_dtypes, audit$out_dtype, audit$calls, audit$autocast,
             audit$backward, audit$cast, audit$policy, audit$bytes, sep = " | "))
}

test_that("R's operations: a data.frame of their dtypes and the totals counted by hand", {
  skip_if_no_ampkit()
  m <- audit_model()
  audit <- autocast_audit({
    audit_step(m)
    z <- torch_mm(m$x, torch_randn(4, 4)) # float32, outside any region
  })
  expect_s3_class(audit, c("ampkit_autocast_audit", "data.frame"), exact = TRUE)
  expect_identical(names(audit)[1:5], c("op", "in_dtypes", "out_dtype", "calls", "autocast"))
  expect_identical(z$dtype, torch_float32()) # assigned in the calling environment
  addmm <- audit[audit$op == "addmm", ]
  expect_identical(nrow(addmm), 1L)
  expect_identical(addmm$in_dtypes, "bfloat16, bfloat16, bfloat16")
  expect_identical(addmm$out_dtype, "bfloat16")
  expect_identical(addmm$calls, 2L)
  expect_true(addmm$autocast)
  mse <- audit[audit$op == "mse_loss", ]
  expect_identical(mse$out_dtype, "float32")
  expect_true(mse$autocast)
  backward_mm <- audit[audit$op == "mm" & audit$backward, ]
  expect_identical(backward_mm$out_dtype, "bfloat16")
  # x, W1, b1, W2, b2 to bfloat16 and the output to float32; backward: the loss's gradient to
  # bfloat16 and the four parameter gradients to float32.
  expect_identical(attr(audit, "casts"), 11L)
  expect_identical(attr(audit, "cast_bytes"), 40 + 24 + 6 + 12 + 4 + 40 + 20 + 48 + 12 + 24 + 8)
  expect_identical(attr(audit, "fp32_matmuls_outside_autocast"), 1L)
  expect_identical(attr(audit, "user_casts"), 0L)
  casts <- audit[!is.na(audit$cast) & audit$cast == "autocast", ]
  expect_identical(sum(casts$calls), 11L)
  expect_true(all(is.na(audit$cast[audit$op != "_to_copy"])))
  expect_true(all(is.na(audit$policy)))
  expect_identical(is_autocast_enabled("cpu"), FALSE)
  expect_true(no_modes_left())
})

test_that("an R model and its PyTorch twin give the same rows and totals", {
  skip_if_no_ampkit()
  m <- audit_model()
  audit <- autocast_audit(audit_step(m))
  twin <- autocast_audit(audit_step(m, m$twin))
  expect_identical(audit_keys(audit), audit_keys(twin))
  for (total in c("casts", "cast_bytes", "fp32_matmuls_outside_autocast",
                  "policy_fp32_matmuls", "user_casts", "user_cast_bytes", "calls")) {
    expect_identical(attr(audit, total), attr(twin, total), label = total)
  }
})

test_that("the policy column shows the operations R's precision_policy kept", {
  skip_if_no_ampkit()
  m <- audit_model()
  p <- precision_policy(m$model, c("0" = "float32", "2" = "bfloat16"))
  audit <- autocast_audit(with_autocast(device_type = "cpu", dtype = "float16", m$model(m$x)))
  p$remove()
  addmm <- audit[audit$op == "addmm", ]
  expect_setequal(addmm$policy, c("float32", "bfloat16"))
  expect_identical(addmm$out_dtype[addmm$policy == "float32"], "float32")
  expect_false(addmm$autocast[addmm$policy == "float32"])
  expect_identical(addmm$out_dtype[addmm$policy == "bfloat16"], "bfloat16")
  expect_true(addmm$autocast[addmm$policy == "bfloat16"])
  expect_identical(audit$policy[audit$op == "relu"], NA_character_)
  expect_identical(attr(audit, "fp32_matmuls_outside_autocast"), 0L)
  expect_identical(attr(audit, "policy_fp32_matmuls"), 1L)
  # the same policy on the PyTorch twin, through Python's precision_policy
  p <- precision_policy(m$twin, c("0" = "float32", "2" = "bfloat16"))
  twin <- autocast_audit(with_autocast(device_type = "cpu", dtype = "float16", m$twin(m$x)))
  p$remove()
  # Rows come costliest first (host time), so the two addmm rows may come in either order: each
  # policy's row is compared with R's.
  twin_addmm <- twin[twin$op == "addmm", ]
  expect_setequal(twin_addmm$policy, addmm$policy)
  for (policy in addmm$policy) {
    expect_identical(twin_addmm$out_dtype[twin_addmm$policy == policy],
                     addmm$out_dtype[addmm$policy == policy], label = policy)
    expect_identical(twin_addmm$autocast[twin_addmm$policy == policy],
                     addmm$autocast[addmm$policy == policy], label = policy)
  }
  expect_identical(attr(twin, "policy_fp32_matmuls"), 1L)
})

test_that("the audit is left on an error, return() and a nested region, with no state left", {
  skip_if_no_ampkit()
  a <- torch_randn(3, 3)
  expect_error(
    autocast_audit(with_autocast(device_type = "cpu", {
      torch_mm(a, a)
      stop("boom")
    })),
    "boom"
  )
  expect_true(no_modes_left())
  expect_identical(cpu_state(), list(enabled = FALSE, dtype = "torch.bfloat16", cache = TRUE))
  early <- function() {
    autocast_audit(return("left"))
    "not reached"
  }
  expect_identical(early(), "left")
  expect_true(no_modes_left())
  with_outer_region({
    audit <- autocast_audit(torch_mm(a, a))
    expect_identical(cpu_state(), outer_state)
  })
  expect_identical(audit$out_dtype[audit$op == "mm"], "float16")
  expect_true(audit$autocast[audit$op == "mm"])
})

test_that("printing shows the totals and the table", {
  skip_if_no_ampkit()
  audit <- autocast_audit(audit_step(audit_model()))
  out <- capture.output(printed <- print(audit))
  expect_identical(printed, audit)
  expect_match(out[1L], "^autocast audit: \\d+ op calls, .*autocast casts: 11 \\(238 bytes")
  expect_match(out[1L], "fp32 matmuls outside autocast: 0$")
  expect_true(any(grepl("addmm", out, fixed = TRUE)))
  empty <- autocast_audit(NULL)
  expect_identical(nrow(empty), 0L)
  expect_match(capture.output(print(empty))[1L], "^autocast audit: 0 op calls")
  # a part of it is a plain table: its columns print, without the whole audit's totals
  part <- audit[audit$autocast, c("op", "calls")]
  expect_identical(class(part), "data.frame")
  expect_null(attr(part, "casts"))
  expect_identical(names(part), c("op", "calls"))
  expect_false(any(grepl("autocast audit", capture.output(print(part)), fixed = TRUE)))
  expect_identical(audit[, "op"], audit$op)
})

test_that("bad input is an ampkit_error naming the argument; the example runs", {
  skip_if_no_ampkit()
  expect_error(autocast_audit(), "`code` must be given", class = "ampkit_error")
  expect_no_error(suppressMessages(utils::capture.output(
    utils::example("autocast_audit", package = "ampkit", character.only = TRUE, echo = FALSE,
                   ask = FALSE, local = new.env())
  )))
})

test_that("an op's error under the audit keeps its message, and Python is left clean", {
  skip_if_no_ampkit()
  x <- torch_randn(3, 3)
  # the audit's Python dispatch mode raised it: torch's python_error, whose text is built later
  expect_error(autocast_audit(torch_mm(x, x$to(dtype = torch_bfloat16()))),
               "expected m1 and m2 to have the same dtype", class = "runtime_error")
  expect_error(autocast_audit(torch_mm(x, x$to(dtype = torch_bfloat16()))),
               "expected m1 and m2 to have the same dtype", class = "runtime_error")
  audit <- autocast_audit(torch_mm(x, x)) # no exception left set for Python's next call
  expect_true("mm" %in% audit$op)
})
