# autocast_audit(): the data.frame, its totals, the same numbers as Python's summary, and the
# audit left however the code is left.

# Linear(4, 3), ReLU, Linear(3, 2) on 5 rows; a step under bfloat16 autocast, backward outside.
audit_model <- function() {
  torch <- reticulate::import("torch")
  torch$manual_seed(0L)
  nn <- torch$nn
  list(torch = torch,
       model = nn$Sequential(nn$Linear(4L, 3L), nn$ReLU(), nn$Linear(3L, 2L)),
       x = torch$randn(5L, 4L), y = torch$randn(5L, 2L))
}

audit_step <- function(m) {
  loss <- with_autocast(device_type = "cpu", dtype = "bfloat16", {
    m$torch$nn$functional$mse_loss(m$model(m$x), m$y)
  })
  loss$backward()
  invisible(loss)
}

no_modes_left <- function() {
  c <- reticulate::import("torch")$`_C`
  c$`_len_torch_function_stack`() == 0L && c$`_len_torch_dispatch_stack`() == 0L
}

test_that("a data.frame of the ops, their dtypes and the totals counted by hand", {
  skip_if_no_ampkit()
  m <- audit_model()
  audit <- autocast_audit({
    audit_step(m)
    z <- m$torch$mm(m$x, m$torch$randn(4L, 4L)) # float32, outside any region
  })
  expect_s3_class(audit, c("ampkit_autocast_audit", "data.frame"), exact = TRUE)
  expect_identical(names(audit)[1:5], c("op", "in_dtypes", "out_dtype", "calls", "autocast"))
  expect_identical(z$dtype, m$torch$float32) # assigned in the calling environment
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
  expect_identical(is_autocast_enabled("cpu"), FALSE)
  expect_true(no_modes_left())
})

test_that("the data.frame carries the same numbers as Python's summary", {
  skip_if_no_ampkit()
  audit <- autocast_audit(audit_step(audit_model()))
  python <- reticulate::import("ampkit")$autocast_audit()
  python$`__enter__`()
  tryCatch(audit_step(audit_model()), finally = python$`__exit__`(NULL, NULL, NULL))
  summary <- python$summary()
  for (total in c("casts", "cast_bytes", "fp32_matmuls_outside_autocast", "user_casts",
                  "user_cast_bytes", "calls")) {
    expect_equal(attr(audit, total), summary[[total]], label = total)
  }
  key <- function(op, in_dtypes, out_dtype, calls, autocast, backward, cast, bytes) {
    paste(op, in_dtypes, out_dtype, calls, autocast, backward, cast, bytes, sep = " | ")
  }
  r_rows <- key(audit$op, audit$in_dtypes, audit$out_dtype, audit$calls, audit$autocast,
                audit$backward, audit$cast, audit$bytes)
  python_rows <- vapply(summary$ops, function(row) {
    key(row$op, paste(unlist(row$in_dtypes), collapse = ", "), row$out_dtype, row$calls,
        row$autocast, row$backward, row$cast %||% NA, row$bytes)
  }, "")
  expect_identical(sort(r_rows), sort(python_rows))
})

test_that("the audit is left on an error, return() and a nested region, with no state left", {
  skip_if_no_ampkit()
  torch <- reticulate::import("torch")
  a <- torch$randn(3L, 3L)
  expect_error(
    autocast_audit(with_autocast(device_type = "cpu", {
      torch$mm(a, a)
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
    audit <- autocast_audit(torch$mm(a, a))
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
})

test_that("bad input is an ampkit_error naming the argument", {
  skip_if_no_ampkit()
  expect_error(autocast_audit(), "`code` must be given", class = "ampkit_error")
})
