# `[` and `[<-` on tensors with R torch's rules. The oracle is R's own indexing of the same
# values (as_array()) where R and R torch agree, and PyTorch's indexing where they differ
# (negative positions count from the end in R torch).

test_that("positions, empty arguments and ranges index as R does", {
  skip_if_no_ampkit()
  x <- torch_randn(5, 6, 7)
  a <- as_array(x)
  expect_equal(as_array(x[1, 1, 1]), a[1, 1, 1])
  expect_equal(as_array(x[2, , ]), a[2, , ])
  expect_equal(as_array(x[, 3, ]), a[, 3, ])
  expect_equal(as_array(x[1:3, , ]), a[1:3, , ])
  expect_equal(as_array(x[2:4, 2, 5:7]), a[2:4, 2, 5:7])
  expect_equal(as_array(x[1:5:2, , ]), a[seq(1, 5, by = 2), , ])
  expect_equal(as_array(x[slc(2, 6, 3), 1, 1]), a[c(2, 5), 1, 1])
  expect_equal(as_array(x[2:N, 1, 1]), a[2:5, 1, 1])
  expect_equal(as_array(x[slc(2, Inf), 1, 1]), a[2:5, 1, 1])
  expect_equal(as_array(x[c(4, 1, 2), , ]), a[c(4, 1, 2), , ])
  # several vectors: every combination, as in R (PyTorch would pair them)
  expect_equal(as_array(x[c(2, 3, 1), c(3, 2, 1), 1]), a[c(2, 3, 1), c(3, 2, 1), 1])
  expect_equal(as_array(x[c(1, 2), 1:2, c(1, 3)]), a[c(1, 2), 1:2, c(1, 3)])
  # positions computed outside `[` are positions, not ranges
  index <- 1:3
  expect_equal(as_array(x[index, 1, 1]), a[index, 1, 1])
  # integer and double positions alike
  expect_equal(as_array(x[2L, 3L, 4L]), a[2, 3, 4])
})

test_that("negative positions count from the end (R torch), as PyTorch's do", {
  skip_if_no_ampkit()
  x <- torch_tensor(0:9)
  p <- py_of(x)
  expect_identical(as_array(x[-1]), 9L)
  expect_identical(as_array(x[-1]), reticulate::py_to_r(p$`__getitem__`(-1L)$item()))
  expect_identical(as_array(x[c(-1, -2)]), c(9L, 8L))
  expect_identical(as_array(x[-2:10]), c(8L, 9L))
  y <- torch_tensor(c(1, 2, 3))
  expect_equal(as_array(y[2:-1]), c(2, 3))
  expect_equal(as_array(y[-2:-1]), c(2, 3))
  expect_equal(as_array(y[-3:-2]), c(1, 2))
  m <- torch_randn(3, 4)
  expect_same_as_torch(m[-1, ], py_of(m)$`__getitem__`(-1L))
})

test_that("`..`, newaxis/NULL and drop = FALSE", {
  skip_if_no_ampkit()
  x <- torch_randn(3, 4, 5, 6)
  a <- as_array(x)
  expect_equal(as_array(x[1, ..]), a[1, , , ])
  expect_equal(as_array(x[1, 2, ..]), a[1, 2, , ])
  expect_equal(as_array(x[.., 1]), a[, , , 1])
  expect_equal(as_array(x[.., 2, 1]), a[, , 2, 1])
  expect_equal(as_array(x[1, .., 1]), a[1, , , 1])
  v <- torch_randn(10)
  expect_equal(dim(v[, NULL]), c(10L, 1L))
  expect_equal(dim(v[NULL, , NULL]), c(1L, 10L, 1L))
  expect_equal(dim(v[newaxis, , newaxis, newaxis]), c(1L, 10L, 1L, 1L))
  m <- torch_randn(10, 10)
  expect_equal(dim(m[1, , drop = FALSE]), c(1L, 10L))
  expect_equal(dim(m[.., 1, drop = FALSE]), c(10L, 1L))
  expect_equal(dim(m[.., -1, drop = FALSE]), c(10L, 1L))
  expect_equal(as_array(m[2, 3:4, drop = FALSE]), as_array(m)[2, 3:4, drop = FALSE])
  y <- torch_randn(3, 3, 3)
  expect_equal(as_array(y[c(1, 2), newaxis, 1:2, c(1, 2)]), as_array(y[1:2, newaxis, 1:2, 1:2]))
  expect_equal(dim(y[newaxis, c(1, 2), newaxis, 1:2, c(1, 2)]), c(1L, 2L, 1L, 2L, 2L))
  # no index at all is the tensor itself (R torch's), a one-number matrix one number
  whole <- y[drop = FALSE]
  expect_equal(as_array(whole), as_array(y))
  whole[1, 1, 1] <- 100
  expect_equal(as_array(y[1, 1, 1]), 100)
  expect_equal(as_array(m[matrix(2)]), as_array(m[2]))
  expect_equal(as_array(m[matrix(2), array(3, c(1, 1, 1))]), as_array(m[2, 3]))
})

test_that("logical vectors and boolean tensors select", {
  skip_if_no_ampkit()
  x <- torch_randn(4, 4, 4)
  a <- as_array(x)
  i <- c(TRUE, FALSE, TRUE, FALSE)
  expect_equal(as_array(x[i, i, i]), a[i, i, i])
  expect_equal(as_array(x[i, 2, ]), a[i, 2, ])
  expect_equal(dim(torch_zeros(2, 2)[c(TRUE, FALSE), ]), c(1L, 2L))
  # one TRUE is a mask of one element, as in R torch (R would recycle it)
  expect_equal(as_array(torch_tensor(1)[TRUE]), 1)
  expect_error(torch_tensor(c(1, 2))[TRUE], "does not match the shape of the indexed tensor",
               class = "index_error")
  v <- torch_tensor(c(-1, -2, 0, 1, 2))
  expect_equal(as_array(v[v < 0]), c(-1, -2))
  m <- torch_tensor(rbind(c(-1, -2, 0, 1, 2), c(2, 1, 0, -1, -2)))
  pm <- py_of(m)
  expect_same_as_torch(m[m < 0], pm$`__getitem__`(pm$lt(0)))
  # an R logical matrix is a mask too
  expect_equal(as_array(m[as_array(m < 0)]), as_array(m[m < 0]))
  expect_error(m[m < 0, 1], class = "ampkit_error")
  mask <- torch_tensor(c(TRUE, FALSE, TRUE))
  y <- torch_randn(3, 2)
  expect_equal(as_array(y[mask, 2]), as_array(y)[c(TRUE, FALSE, TRUE), 2])
  expect_error(y[c(TRUE, FALSE), ], class = "ampkit_error")
})

test_that("long tensors are 1-based positions", {
  skip_if_no_ampkit()
  x <- torch_randn(4, 4)
  a <- as_array(x)
  index <- torch_tensor(1L)
  expect_equal(x[index, index]$item(), x[1, 1]$item())
  expect_equal(dim(x[index, index]), c(1L, 1L))
  index <- torch_tensor(c(-1L, 1L))
  expect_equal(as_array(x[index, index]), as_array(x[c(-1, 1), c(-1, 1)]))
  b <- torch_tensor(c(1L, 3L))
  y <- torch_randn(3, 4, 3)
  expect_equal(as_array(y[.., b, b]), as_array(y)[, c(1, 3), c(1, 3)])
  expect_equal(as_array(y[b, .., b]), as_array(y)[c(1, 3), , c(1, 3)])
  # a 0-dim long tensor drops its dim, as a number does
  expect_equal(dim(x[torch_tensor(2L)$sum(), ]), 4L)
  expect_error(x[torch_tensor(c(-1L, 0L, 1L)), ], regexp = "Indexing starts at 1")
})

test_that("!!! splices positions", {
  skip_if_no_ampkit()
  x <- torch_randn(3, 4, 5, 6)
  a <- as_array(x)
  # Each result is made outside expect_equal(), whose own quasiquotation (rlang's enquo()) would
  # splice before `[` runs.
  i <- c(1, 2, 3, 4)
  got <- x[!!!i]
  expect_equal(as_array(got), a[1, 2, 3, 4])
  i <- c(2, 3)
  got <- x[!!!i, 3, 4]
  expect_equal(as_array(got), a[2, 3, 3, 4])
  parts <- list(1, slc(1, 2))
  got <- x[!!!parts]
  expect_equal(dim(got), c(2, 5, 6))
  y <- torch_zeros(2, 3)
  y[!!!c(2, 3)] <- 5
  expect_equal(as_array(y), matrix(c(0, 0, 0, 0, 0, 5), 2))
  mask <- c(TRUE, FALSE, TRUE)
  got <- torch_zeros(3)[!mask] # one `!` is R's negation
  expect_equal(dim(got), 1)
  splice_a_string <- function() x[!!!"a"]
  expect_error(splice_a_string(), "`!!!` splices numbers", class = "value_error")
})

test_that("errors name the rule in 1-based terms", {
  skip_if_no_ampkit()
  x <- torch_tensor(c(1, 2, 3))
  # R torch's message for a 0 among numbers
  expect_error(x[0], "Indexing in R is 1-based and found a 0", class = "index_error")
  expect_error(x[c(0, 1)], "Indexing starts at 1")
  err <- expect_error(x[4], class = "index_error")
  expect_match(conditionMessage(err), "index 4 is out of bounds for dimension 1 with size 3",
               fixed = TRUE)
  expect_error(torch_randn(2, 2)[1, 1, 1], "too many indices")
  expect_error(x[1.5], class = "value_error")
  # an index of no supported kind: an index_error, as PyTorch's IndexError
  expect_error(x["a"], "Unsupported index", class = "index_error")
  expect_error(x[integer(0)], "Unsupported index: an integer vector of length 0",
               class = "index_error")
  expect_error(x[NA], class = "value_error")
})

test_that("assignment through every kind of index", {
  skip_if_no_ampkit()
  x <- torch_randn(2, 2)
  x[1, 1] <- torch_tensor(0)
  expect_equal(as_array(x[1, 1]), 0)
  x[1, 2] <- 0
  expect_equal(as_array(x[1, 2]), 0)
  x[1, 2] <- 1L
  expect_equal(as_array(x[1, 2]), 1)
  b <- torch_tensor(c(TRUE, FALSE))
  b[2] <- TRUE
  expect_true(as_array(b[2]))
  m <- torch_tensor(rbind(c(-1, -2, 0, 1, 2), c(2, 1, 0, -1, -2)))
  m[m <= 0] <- 1
  expect_true(as_array(torch_all(m > 0)))
  v <- torch_tensor(c(1, 2, 3, 4, 5))
  v[1:2] <- c(0, 0)
  expect_equal(as_array(v), c(0, 0, 3, 4, 5))
  v[-1] <- 9
  expect_equal(as_array(v), c(0, 0, 3, 4, 9))
  y <- torch_randn(3, 2)
  r <- as_array(y)
  y[torch_tensor(c(TRUE, FALSE, TRUE)), 1] <- torch_tensor(c(1, 2))
  r[c(TRUE, FALSE, TRUE), 1] <- c(1, 2)
  expect_equal(as_array(y), r)
  z <- torch_randn(2, 3)
  r <- as_array(z)
  z[1, torch_tensor(c(TRUE, FALSE, TRUE))] <- torch_tensor(c(1, 2))
  r[1, c(TRUE, FALSE, TRUE)] <- c(1, 2)
  expect_equal(as_array(z), r)
  w <- torch_zeros(3, 4)
  r <- as_array(w)
  w[c(1, 3), c(2, 4)] <- torch_tensor(matrix(c(1, 2, 3, 4), 2))
  r[c(1, 3), c(2, 4)] <- matrix(c(1, 2, 3, 4), 2)
  expect_equal(as_array(w), r)
  w[.., 1] <- 7
  r[, 1] <- 7
  expect_equal(as_array(w), r)
  # long tensors take assigned doubles as PyTorch casts them
  l <- torch_tensor(1:3)
  l[2] <- 5
  expect_identical(as_array(l), c(1L, 5L, 3L))
  # a view: assignment reaches every R reference
  u <- torch_zeros(2)
  u2 <- u
  u[1] <- 3
  expect_equal(as_array(u2), c(3, 0))
  expect_error({
    u[1] <- "a"
  }, class = "value_error")
})

test_that("assignment keeps autograd's rules", {
  skip_if_no_ampkit()
  w <- torch_zeros(3, requires_grad = TRUE)
  expect_error({
    w[1] <- 1
  }, class = "runtime_error")
  with_no_grad({
    w[1] <- 1
  })
  expect_equal(as_array(w), c(1, 0, 0))
})

test_that("head and tail take rows, as R torch's", {
  skip_if_no_ampkit()
  x <- torch_tensor(1:10)
  expect_identical(as_array(head(x)), 1:6)
  expect_identical(as_array(tail(x)), 5:10)
  m <- torch_stack(list(x, x), dim = 2)
  expect_identical(as_array(head(m, n = 3)), cbind(1:3, 1:3))
  expect_identical(as_array(tail(m, n = 4)), cbind(7:10, 7:10))
  expect_identical(as_array(head(x, 20)), 1:10)
})

test_that("index arguments are read where they were written: through ..., from compiled code", {
  # src/indexing.cpp reads the `[` method's `...` itself: written values, names, and the index
  # mask's expressions (`a:b`, N), in the frame each was written in.
  x <- torch_tensor(matrix(1:12, 3))
  pass <- function(...) x[...]
  expect_equal(as_array(pass(2, 2:3)), c(5L, 8L))
  compiled <- compiler::cmpfun(function(k) x[k, 2:N])
  expect_equal(as_array(compiled(3)), c(6L, 9L, 12L))
  rows <- c(1, 3)
  expect_equal(as_array(x[rows, -1]), c(10L, 12L))
  missing_row <- function(j) x[j, ]
  expect_error(missing_row(), "missing")
  x[rows, 4] <- 0L
  expect_equal(as_array(x[, 4]), c(0L, 11L, 0L))
})

test_that("a:b in the brackets is the slice the index mask makes, without the mask", {
  # src/indexing.cpp makes `a:b` and `a:b:s` of numbers, names and `-` of them itself; `(a:b)` is
  # evaluated in R's index mask (R/indexing.R). The two must agree.
  index_args <- function(...) .Call(ampkit:::C_index_args, environment())
  i <- 2
  j <- 4L
  k <- 2
  s <- slc(2, 5)
  expect_identical(index_args(1:2, i:j, -3:-1, 1:5:k, -i:j, 2:-1, s:2, 1:3:2:k),
                   index_args((1:2), (i:j), (-3:-1), (1:5:k), (-i:j), (2:-1), (s:2), (1:3:2:k)))
  x <- torch_tensor(array(1:60, c(5, 4, 3)))
  expect_equal(as_array(x[i:j, -2:-1, 1]), as_array(x[(i:j), (-2:-1), 1]))
  expect_equal(as_array(x[i:j, -2:-1, 1]), array(1:60, c(5, 4, 3))[2:4, 3:4, 1])
  expect_equal(as_array(x[1:5:k, 1, 1]), as_array(x[slc(1, 5, 2), 1, 1]))
  # A slice is a view (libtorch's), as the mask's is.
  y <- x[1:2, 1, 1]
  y$zero_()
  expect_equal(as_array(x[1:3, 1, 1]), c(0L, 0L, 3L))
  z <- torch_zeros(5)
  z[i:j] <- 1
  expect_equal(as_array(z), c(0, 1, 1, 1, 0))
  # Names the mask defines (N) and names that do not exist take R's path and words.
  expect_equal(as_array(x[4:N, 1, 1]), c(4L, 5L))
  expect_error(x[no_such_name:2, 1, 1], "no_such_name")
  # Each operand is evaluated once, in the caller's frame, whichever path reads it.
  count <- 0
  makeActiveBinding("counted", function() {
    count <<- count + 1
    2
  }, environment())
  v <- torch_tensor(1:5)
  expect_equal(as_array(v[counted:3]), c(2L, 3L))
  expect_equal(as_array(v[counted:N]), 2:5)
  expect_identical(count, 2)
})

test_that("a 0-dim position drops its dimension, as a number does, with vectors after it", {
  a <- array(as.numeric(1:360), c(3, 4, 5, 6))
  x <- torch_tensor(a)
  at2 <- torch_scalar_tensor(2L, dtype = torch_long()) # a position from argmax(), say
  expect_equal(as_array(x[at2, c(1, 2), 1:2]), a[2, 1:2, 1:2, ])
  expect_equal(dim(x[at2, c(1, 2), 1:2, drop = FALSE]), c(1, 2, 2, 6))
  z <- torch_zeros(3, 4, 5)
  z[at2, c(1, 2), c(1, 3)] <- 1
  expect_equal(as_array(z$sum(dim = c(2, 3))), c(0, 4, 0))
})

test_that("`..` before a vector index counts only the dimensions the indices after it use", {
  z <- torch_zeros(3, 4, 5)
  py <- py_of(z)
  expect_equal(dim(z[.., c(1, 2), NULL]), c(3, 4, 2, 1))
  expect_equal(dim(z[1, .., c(1, 2), NULL]), c(4, 2, 1))
  reference <- reticulate::py_eval("lambda t: t[..., [1, 2], None]")
  expect_same_tensor(z[.., c(2, 3), NULL] + 0, reference(py))
})

test_that("an assignment's mask must have its dimension's length; slices are whole numbers", {
  y <- torch_zeros(4, 4)
  expect_error(y[c(TRUE, FALSE), c(1, 2)] <- 1, "The mask of dimension 1 has 2 values",
               class = "index_error")
  expect_equal(as_array(y$sum()), 0) # nothing written
  y[c(TRUE, FALSE, TRUE, FALSE), c(1, 2)] <- 1
  expect_equal(as_array(y[, 1]), c(1, 0, 1, 0))
  v <- torch_tensor(c(10, 20, 30, 40, 50))
  missing_end <- NA_integer_
  expect_error(v[missing_end:3], "`start` of a slice must be a whole number, got NA",
               class = "value_error")
  expect_error(v[1:5:1.5], "`step` of a slice must be a whole number", class = "value_error")
  expect_error(v[slc(1, "a")], "`end` of a slice", class = "value_error")
  three <- torch_scalar_tensor(3L, dtype = torch_long())
  expect_equal(as_array(v[1:three]), c(10, 20, 30))
  expect_equal(as_array(v[slc(bit64::as.integer64(2), 3)]), c(20, 30))
  expect_equal(as_array(v[bit64::as.integer64(c(2, 5))]), c(20, 50))
  expect_equal(as_array(v[bit64::as.integer64(4)]), 40)
})

test_that("head() and tail() keep the first dimension, as R torch's index_select()", {
  m <- torch_tensor(matrix(1:12, 3))
  expect_equal(dim(head(m, 1)), c(1, 4))
  expect_equal(as_array(tail(m, 1)), matrix(c(3L, 6L, 9L, 12L), 1))
  expect_equal(dim(head(m, 0)), c(0, 4))
  expect_equal(dim(tail(m, 0)), c(0, 4))
  expect_equal(as_array(tail(m, 2)), matrix(1:12, 3)[2:3, ])
  expect_equal(as_array(head(m, -1)), matrix(1:12, 3)[1:2, ]) # R's: all but the last
  expect_equal(dim(head(torch_tensor(5), 1)), 1)
  expect_error(head(m, NA), "`n`", class = "value_error")
})

test_that("`[[<-` takes a field's name only; R values take a floating tensor's dtype", {
  y <- torch_zeros(3)
  expect_error(y[[1]] <- TRUE, "`\\[<-`, not `\\[\\[<-`", class = "value_error")
  expect_false(y$requires_grad)
  y[2] <- NA_real_ # R torch's NaN
  expect_true(is.nan(as_array(y)[[2]]))
  d <- torch_zeros(3, dtype = torch_float64())
  d[1:2] <- c(1.123456789, 2)
  expect_identical(as_array(d)[[1]], 1.123456789)
  d[c(1, 3)] <- c(1.5, 2.5)
  expect_equal(as_array(d), c(1.5, 2, 2.5))
  h <- torch_zeros(3, dtype = torch_float16())
  h[c(1, 3)] <- c(1L, 2L)
  expect_equal(as_array(h), c(1, 0, 2))
})

test_that("a vector index out of bounds names its own dimension", {
  # libtorch's index kernel says dimension 0 of any (it indexes the flattened dimensions)
  expect_error(torch_zeros(3, 4)[, c(1, 5)],
               "index 5 is out of bounds for dimension 2 with size 4", class = "index_error")
  expect_error(torch_zeros(3, 4, 5)[1, .., c(1, 6)],
               "index 6 is out of bounds for dimension 3 with size 5", class = "index_error")
  expect_error(torch_zeros(3, 4)[c(1, 4), ],
               "index 4 is out of bounds for dimension 1 with size 3", class = "index_error")
})
