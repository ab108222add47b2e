# R torch's 3d and transposed convolutions, pooling, upsampling, padding, fold/unfold and the
# normalization layers (nn-conv.R, nn-pooling-upsample.R, nn-normalization.R), with PyTorch as
# the oracle: the same seed gives the same weights, and the same call on the same tensors the
# same numbers, with R torch's 1-based dims and indices converted at the border.

# nolint start: object_usage_linter. (the oracle's helpers are helper-frontend.R's)
ptf <- function() py_torch()$nn$functional

# TRUE when two tensors (R's or Python's) are equal in shape, dtype and every element (NaN
# where the other has NaN: Lp pooling of negative numbers), or within `tolerance`.
same_tensor <- function(a, b, tolerance = 0) {
  a <- to_py(a)
  b <- to_py(b)
  builtins <- reticulate::import_builtins(convert = FALSE)
  shape <- function(x) reticulate::py_to_r(builtins$list(x$shape))
  identical(reticulate::py_str(a$dtype), reticulate::py_str(b$dtype)) &&
    identical(shape(a), shape(b)) &&
    reticulate::py_to_r(pt()$allclose(a, b, atol = tolerance, rtol = tolerance,
                                      equal_nan = TRUE))
}
expect_same_tensor <- function(a, b, tolerance = 0) {
  testthat::expect_true(same_tensor(a, b, tolerance))
}

# An element of a Python tuple or list (0-based, as Python's).
py_item <- function(x, i) reticulate::py_get_item(x, as.integer(i))

test_that("nn_conv3d is torch.nn.Conv3d: seeded weights, forward, groups, dilation, padding", {
  skip_if_no_ampkit()
  torch_manual_seed(3)
  conv <- nn_conv3d(4, 6, kernel_size = c(3, 2, 3), stride = c(2, 1, 1), padding = c(1, 0, 2),
                    dilation = c(1, 2, 1), groups = 2)
  pt()$manual_seed(3L)
  ref <- pt()$nn$Conv3d(4L, 6L, kernel_size = ints(3, 2, 3), stride = ints(2, 1, 1),
                        padding = ints(1, 0, 2), dilation = ints(1, 2, 1), groups = 2L)
  expect_same_tensor(conv$weight, ref$weight)
  expect_same_tensor(conv$bias, ref$bias)
  x <- torch_randn(2, 4, 5, 6, 7)
  expect_same_tensor(conv(x), pycall(ref, py_of(x)))
  expect_same_tensor(nnf_conv3d(x, conv$weight, conv$bias, c(2, 1, 1), c(1, 0, 2), c(1, 2, 1), 2),
                     pycall(ref, py_of(x)))
  expect_identical(class(conv), c("nn_conv3d", "nn_module"))
  # A padding mode other than zeros pads first, as PyTorch's module does.
  torch_manual_seed(4)
  conv <- nn_conv3d(2, 3, 3, padding = 1, padding_mode = "circular")
  pt()$manual_seed(4L)
  ref <- pt()$nn$Conv3d(2L, 3L, 3L, padding = 1L, padding_mode = "circular")
  x <- torch_randn(1, 2, 4, 4, 4)
  expect_same_tensor(conv(x), pycall(ref, py_of(x)))
})

test_that("the transposed convolutions are torch.nn.ConvTranspose1d/2d/3d", {
  skip_if_no_ampkit()
  cases <- list(
    list(r = nn_conv_transpose1d, py = "ConvTranspose1d", x = c(2, 4, 7)),
    list(r = nn_conv_transpose2d, py = "ConvTranspose2d", x = c(2, 4, 5, 6)),
    list(r = nn_conv_transpose3d, py = "ConvTranspose3d", x = c(2, 4, 3, 4, 5))
  )
  for (case in cases) {
    torch_manual_seed(11)
    m <- case$r(4, 6, kernel_size = 3, stride = 2, padding = 1, output_padding = 1, groups = 2,
                dilation = 2)
    pt()$manual_seed(11L)
    ref <- pt()$nn[[case$py]](4L, 6L, kernel_size = 3L, stride = 2L, padding = 1L,
                              output_padding = 1L, groups = 2L, dilation = 2L)
    expect_same_tensor(m$weight, ref$weight)
    expect_same_tensor(m$bias, ref$bias)
    expect_equal(dim(m$weight), c(4L, 3L, rep(3L, length(case$x) - 2L)))
    x <- torch_randn(case$x)
    expect_same_tensor(m(x), pycall(ref, py_of(x)))
  }
  # The functional, without bias.
  x <- torch_randn(1, 3, 5, 5)
  w <- torch_randn(3, 2, 3, 3)
  expect_same_tensor(nnf_conv_transpose2d(x, w, stride = 2, padding = 1, output_padding = 1),
                     ptf()$conv_transpose2d(py_of(x), py_of(w), stride = 2L, padding = 1L,
                                            output_padding = 1L))
  expect_null(nn_conv_transpose2d(2, 2, 3, bias = FALSE)$bias)
})

test_that("a transposed convolution's output_size picks PyTorch's output padding", {
  skip_if_no_ampkit()
  torch_manual_seed(5)
  up <- nn_conv_transpose2d(3, 2, kernel_size = 3, stride = 3, padding = 1, dilation = 2)
  pt()$manual_seed(5L)
  ref <- pt()$nn$ConvTranspose2d(3L, 2L, kernel_size = 3L, stride = 3L, padding = 1L,
                                 dilation = 2L)
  x <- torch_randn(1, 3, 4, 5)
  for (size in list(c(12, 15), c(14, 17), c(1, 2, 13, 16))) {
    out <- up(x, output_size = size)
    expect_same_tensor(out, pycall(ref, py_of(x), output_size = ints(size)))
    expect_equal(utils::tail(dim(out), 2), utils::tail(size, 2))
  }
  expect_error(up(x, output_size = c(11, 15)),
               "valid sizes range from \\(12, 15\\) to \\(14, 17\\)", class = "value_error")
  expect_error(up(x, output_size = c(1, 12, 15)), "`output_size` must have 2 or 4",
               class = "value_error")
  expect_error(nn_conv_transpose2d(3, 2, 3, padding_mode = "reflect"), "zeros",
               class = "value_error")
  expect_error(nn_conv_transpose2d(3, 2, 3, groups = 2), "divisible", class = "value_error")
  expect_error(nn_conv_transpose3d(3, 2, c(3, 3)), "`kernel_size`", class = "value_error")
})

test_that("nn_batch_norm3d is torch.nn.BatchNorm3d, in training and eval", {
  skip_if_no_ampkit()
  bn <- nn_batch_norm3d(3, momentum = 0.2)
  ref <- pt()$nn$BatchNorm3d(3L, momentum = 0.2)
  x <- torch_randn(2, 3, 2, 3, 4)
  expect_same_tensor(bn(x), pycall(ref, py_of(x)))
  expect_same_tensor(bn$running_mean, ref$running_mean)
  expect_same_tensor(bn$running_var, ref$running_var)
  bn$eval()
  ref$eval()
  expect_same_tensor(bn(x), pycall(ref, py_of(x)))
  expect_error(bn(torch_randn(2, 3, 4, 4)), "expected 5D input", class = "value_error")
})

test_that("nn_group_norm and nnf_group_norm are torch.nn.GroupNorm and F.group_norm", {
  skip_if_no_ampkit()
  gn <- nn_group_norm(2, 6)
  with_no_grad({
    gn$weight$copy_(torch_randn(6))
    gn$bias$copy_(torch_randn(6))
  })
  ref <- load_into_torch(pt()$nn$GroupNorm(2L, 6L), gn)
  x <- torch_randn(3, 6, 4, 5)
  expect_same_tensor(gn(x), pycall(ref, py_of(x)))
  expect_same_tensor(nnf_group_norm(x, 3, eps = 1e-3),
                     ptf()$group_norm(py_of(x), 3L, eps = 1e-3))
  expect_same_tensor(nn_group_norm(3, 6, affine = FALSE)(x),
                     pycall(pt()$nn$GroupNorm(3L, 6L, affine = FALSE), py_of(x)))
  expect_null(nn_group_norm(3, 6, affine = FALSE)$weight)
  expect_error(nn_group_norm(4, 6), "divisible by `num_groups`", class = "value_error")
  expect_error(nnf_group_norm(torch_randn(1, 2), 2), "more than 1 value",
               class = "value_error")
})

test_that("nn_unflatten is torch.nn.Unflatten, with a 1-based dim", {
  skip_if_no_ampkit()
  x <- torch_randn(4, 30, 2)
  expect_same_tensor(nn_unflatten(2, c(5, 3, 2))(x),
                     pycall(pt()$nn$Unflatten(1L, ints(5, 3, 2)), py_of(x)))
  expect_same_tensor(nn_unflatten(-1, c(1, 2))(x),
                     pycall(pt()$nn$Unflatten(-1L, ints(1, 2)), py_of(x)))
  expect_error(nn_unflatten(0, c(5, 6)), "1-based", class = "value_error")
})

test_that("nnf_interpolate is F.interpolate in every mode", {
  skip_if_no_ampkit()
  x3 <- torch_randn(2, 3, 5)
  x4 <- torch_randn(2, 3, 5, 4)
  x5 <- torch_randn(1, 2, 3, 4, 5)
  cases <- list(
    list(x3, "nearest", NULL), list(x3, "nearest-exact", NULL), list(x3, "linear", FALSE),
    list(x3, "linear", TRUE), list(x3, "area", NULL),
    list(x4, "nearest", NULL), list(x4, "bilinear", FALSE), list(x4, "bilinear", TRUE),
    list(x4, "bicubic", FALSE), list(x4, "bicubic", TRUE), list(x4, "area", NULL),
    list(x5, "nearest", NULL), list(x5, "trilinear", FALSE), list(x5, "trilinear", TRUE)
  )
  for (case in cases) {
    x <- case[[1]]
    mode <- case[[2]]
    ac <- case[[3]]
    nd <- x$dim() - 2L
    size <- seq(7, length.out = nd)
    expect_same_tensor(nnf_interpolate(x, size = size, mode = mode, align_corners = ac),
                       ptf()$interpolate(py_of(x), size = ints(size), mode = mode,
                                         align_corners = ac))
    for (scale in list(2, 1.7, c(0.5, 2.5, 1.5)[seq_len(nd)])) {
      expect_same_tensor(nnf_interpolate(x, scale_factor = scale, mode = mode,
                                         align_corners = ac),
                         ptf()$interpolate(py_of(x), scale_factor = scale, mode = mode,
                                           align_corners = ac))
      expect_same_tensor(nnf_interpolate(x, scale_factor = scale, mode = mode,
                                         align_corners = ac, recompute_scale_factor = TRUE),
                         ptf()$interpolate(py_of(x), scale_factor = scale, mode = mode,
                                           align_corners = ac, recompute_scale_factor = TRUE))
    }
  }
  expect_same_tensor(nnf_interpolate(x4, size = c(3, 2), mode = "bilinear", antialias = TRUE),
                     ptf()$interpolate(py_of(x4), size = ints(3, 2), mode = "bilinear",
                                       antialias = TRUE))
  # A single size applies to every spatial dimension.
  expect_equal(dim(nnf_interpolate(x4, size = 6)), c(2L, 3L, 6L, 6L))
})

test_that("nnf_interpolate's bad combinations are value errors in R's words", {
  skip_if_no_ampkit()
  x <- torch_randn(1, 1, 2, 2)
  expect_error(nnf_interpolate(x, size = 4, scale_factor = 2), "Only one of `size`",
               class = "value_error")
  expect_error(nnf_interpolate(x), "Either `size` or `scale_factor`", class = "value_error")
  expect_error(nnf_interpolate(x, scale_factor = c(2, 2, 2)), "`scale_factor` must have one",
               class = "value_error")
  expect_error(nnf_interpolate(x, size = c(2, 3, 4)), "`size` must have one",
               class = "value_error")
  expect_error(nnf_interpolate(x, size = 4, align_corners = TRUE), "`align_corners`",
               class = "value_error")
  expect_error(nnf_interpolate(x, size = 4, mode = "cubic"), "`mode` must be one of",
               class = "value_error")
  expect_error(nnf_interpolate(x, size = 4, recompute_scale_factor = TRUE),
               "not meaningful", class = "value_error")
  expect_error(nnf_interpolate(x, size = 4, mode = "linear"), "needs a 3D input",
               class = "not_implemented_error")
  expect_error(nnf_interpolate(x, size = 4, mode = "nearest", antialias = TRUE), "antialias",
               class = "value_error")
})

test_that("nn_upsample is torch.nn.Upsample", {
  skip_if_no_ampkit()
  x <- torch_randn(2, 3, 4, 5)
  expect_same_tensor(nn_upsample(scale_factor = 2)(x),
                     pycall(pt()$nn$Upsample(scale_factor = 2), py_of(x)))
  expect_same_tensor(nn_upsample(size = c(7, 3), mode = "bicubic", align_corners = TRUE)(x),
                     pycall(pt()$nn$Upsample(size = ints(7, 3), mode = "bicubic",
                                             align_corners = TRUE), py_of(x)))
  expect_same_tensor(nn_upsample(scale_factor = c(1.5, 2), mode = "bilinear")(x),
                     pycall(pt()$nn$Upsample(scale_factor = reticulate::tuple(1.5, 2),
                                             mode = "bilinear"),
                            py_of(x)))
  expect_error(nn_upsample(mode = "bogus"), "`mode`", class = "value_error")
})

test_that("nnf_pad is F.pad in every mode", {
  skip_if_no_ampkit()
  x <- torch_randn(2, 3, 4, 5, 6)
  for (mode in c("constant", "reflect", "replicate", "circular")) {
    for (pad in list(c(1, 2), c(2, 1, 0, 3), c(1, 1, 2, 0, 3, 2))) {
      # The other modes pad the dims after (N, C): one, two or three of them.
      input <- if (mode == "constant") x else torch_randn(c(2, 3, 4, 5, 6)[1:(2 + length(pad) / 2)])
      expect_same_tensor(nnf_pad(input, pad, mode = mode),
                         ptf()$pad(py_of(input), ints(pad), mode = mode))
    }
  }
  expect_same_tensor(nnf_pad(x, c(1, -2), value = 2.5),
                     ptf()$pad(py_of(x), ints(1, -2), value = 2.5))
  expect_error(nnf_pad(x, c(1, 2, 3)), "even number", class = "value_error")
  expect_error(nnf_pad(x, c(1, 1), mode = "mirror"), "`mode` must be one of",
               class = "value_error")
  expect_error(nnf_pad(x, c(1, 1), mode = "reflect", value = 1), "`value`",
               class = "value_error")
  expect_error(nnf_pad(x, 1.5), "`pad` must be whole numbers", class = "value_error")
})

test_that("nnf_unfold and nnf_fold are F.unfold and F.fold", {
  skip_if_no_ampkit()
  x <- torch_randn(2, 3, 6, 7)
  cols <- nnf_unfold(x, kernel_size = c(2, 3), dilation = c(2, 1), padding = 1, stride = c(1, 2))
  expect_same_tensor(cols, ptf()$unfold(py_of(x), kernel_size = ints(2, 3),
                                        dilation = ints(2, 1), padding = 1L,
                                        stride = ints(1, 2)))
  folded <- nnf_fold(cols, output_size = c(6, 7), kernel_size = c(2, 3), dilation = c(2, 1),
                     padding = 1, stride = c(1, 2))
  expect_same_tensor(folded, ptf()$fold(py_of(cols), output_size = ints(6, 7),
                                        kernel_size = ints(2, 3), dilation = ints(2, 1),
                                        padding = 1L, stride = ints(1, 2)))
  expect_error(nnf_unfold(x, kernel_size = c(1, 2, 3)), "`kernel_size`", class = "value_error")
  expect_error(nnf_unfold(torch_randn(1, 2, 3, 4, 5), 2), "Expected 3D or 4D")
})

test_that("nnf_normalize and nnf_local_response_norm are PyTorch's, dims 1-based", {
  skip_if_no_ampkit()
  x <- torch_randn(3, 4, 5)
  expect_same_tensor(nnf_normalize(x), ptf()$normalize(py_of(x)))
  expect_same_tensor(nnf_normalize(x, p = 1, dim = 3),
                     ptf()$normalize(py_of(x), p = 1, dim = 2L))
  expect_same_tensor(nnf_normalize(x, p = 3, dim = -1, eps = 0.5),
                     ptf()$normalize(py_of(x), p = 3, dim = -1L, eps = 0.5))
  out <- torch_empty(3, 4, 5)
  nnf_normalize(x, dim = 1, out = out)
  expect_same_tensor(out, ptf()$normalize(py_of(x), dim = 0L))
  expect_error(nnf_normalize(x, dim = 0), "1-based", class = "value_error")
  for (shape in list(c(2, 7, 5), c(2, 6, 4, 5), c(1, 5, 2, 3, 4))) {
    x <- torch_randn(shape)
    for (size in c(1, 2, 3)) {
      expect_same_tensor(nnf_local_response_norm(x, size, alpha = 0.1, beta = 0.5, k = 2),
                         ptf()$local_response_norm(py_of(x), as.integer(size), alpha = 0.1,
                                                   beta = 0.5, k = 2))
    }
  }
  expect_error(nnf_local_response_norm(torch_randn(2, 3), 2), "3 or more dimensions",
               class = "value_error")
})

test_that("max and average pooling in 1d and 3d are PyTorch's, with 1-based indices", {
  skip_if_no_ampkit()
  x1 <- torch_randn(2, 3, 9)
  x3 <- torch_randn(2, 3, 5, 6, 7)
  expect_same_tensor(nnf_max_pool1d(x1, 3, stride = 2, padding = 1, dilation = 2),
                     ptf()$max_pool1d(py_of(x1), 3L, stride = 2L, padding = 1L, dilation = 2L))
  out <- nnf_max_pool1d(x1, 2, return_indices = TRUE, ceil_mode = TRUE)
  ref <- ptf()$max_pool1d(py_of(x1), 2L, return_indices = TRUE, ceil_mode = TRUE)
  expect_same_tensor(out[[1]], py_item(ref, 0))
  expect_same_tensor(out[[2]] - 1L, py_item(ref, 1))
  out <- nnf_max_pool3d(x3, c(2, 3, 2), stride = c(1, 2, 2), return_indices = TRUE)
  ref <- ptf()$max_pool3d(py_of(x3), ints(2, 3, 2), stride = ints(1, 2, 2),
                          return_indices = TRUE)
  expect_same_tensor(out[[1]], py_item(ref, 0))
  expect_same_tensor(out[[2]] - 1L, py_item(ref, 1))
  expect_same_tensor(nnf_avg_pool1d(x1, 4, stride = 2, padding = 2, count_include_pad = FALSE),
                     ptf()$avg_pool1d(py_of(x1), 4L, stride = 2L, padding = 2L,
                                      count_include_pad = FALSE))
  expect_same_tensor(nnf_avg_pool3d(x3, 2, padding = 1, ceil_mode = TRUE, divisor_override = 3),
                     ptf()$avg_pool3d(py_of(x3), 2L, padding = 1L, ceil_mode = TRUE,
                                      divisor_override = 3L))
  # The modules: stride defaults to the kernel size.
  expect_same_tensor(nn_max_pool1d(3)(x1), pycall(pt()$nn$MaxPool1d(3L), py_of(x1)))
  expect_same_tensor(nn_max_pool3d(2, stride = 1)(x3),
                     pycall(pt()$nn$MaxPool3d(2L, stride = 1L), py_of(x3)))
  expect_same_tensor(nn_avg_pool1d(3, padding = 1)(x1),
                     pycall(pt()$nn$AvgPool1d(3L, padding = 1L), py_of(x1)))
  expect_same_tensor(nn_avg_pool3d(c(1, 2, 3))(x3),
                     pycall(pt()$nn$AvgPool3d(ints(1, 2, 3)), py_of(x3)))
  expect_error(nnf_max_pool1d(x1, 1.5), "`kernel_size` must be whole numbers",
               class = "value_error")
})

test_that("Lp and adaptive pooling are PyTorch's", {
  skip_if_no_ampkit()
  x1 <- torch_randn(2, 3, 9)
  x2 <- torch_randn(2, 3, 8, 7)
  x3 <- torch_randn(2, 3, 5, 6, 7)
  expect_same_tensor(nnf_lp_pool1d(x1, 2, 3), ptf()$lp_pool1d(py_of(x1), 2, 3L))
  expect_same_tensor(nnf_lp_pool1d(x1, 1.5, 3, stride = 2, ceil_mode = TRUE),
                     ptf()$lp_pool1d(py_of(x1), 1.5, 3L, stride = 2L, ceil_mode = TRUE))
  expect_same_tensor(nnf_lp_pool2d(x2, 3, c(2, 3), stride = 1),
                     ptf()$lp_pool2d(py_of(x2), 3, ints(2, 3), stride = 1L))
  expect_same_tensor(nnf_lp_pool2d(x2, Inf, 3, stride = 2),
                     ptf()$lp_pool2d(py_of(x2), Inf, 3L, stride = 2L))
  expect_same_tensor(nnf_lp_pool1d(x1, -Inf, 2), ptf()$lp_pool1d(py_of(x1), -Inf, 2L))
  expect_same_tensor(nn_lp_pool2d(2, 2)(x2), pycall(pt()$nn$LPPool2d(2, 2L), py_of(x2)))
  expect_same_tensor(nn_lp_pool1d(2, 2)(x1), pycall(pt()$nn$LPPool1d(2, 2L), py_of(x1)))
  expect_same_tensor(nnf_adaptive_avg_pool1d(x1, 4), ptf()$adaptive_avg_pool1d(py_of(x1), 4L))
  expect_same_tensor(nnf_adaptive_avg_pool3d(x3, c(2, 3, 4)),
                     ptf()$adaptive_avg_pool3d(py_of(x3), ints(2, 3, 4)))
  expect_same_tensor(nn_adaptive_avg_pool3d(c(2, NA, 3))(x3),
                     pycall(pt()$nn$AdaptiveAvgPool3d(list(2L, NULL, 3L)), py_of(x3)))
  expect_same_tensor(nn_adaptive_avg_pool1d(3)(x1),
                     pycall(pt()$nn$AdaptiveAvgPool1d(3L), py_of(x1)))
  cases <- list(list(x1, 4, "adaptive_max_pool1d", nn_adaptive_max_pool1d),
                list(x2, c(3, 5), "adaptive_max_pool2d", nn_adaptive_max_pool2d),
                list(x3, c(2, 3, 4), "adaptive_max_pool3d", nn_adaptive_max_pool3d))
  for (case in cases) {
    f <- get(paste0("nnf_", case[[3]]))
    x <- case[[1]]
    ref <- ptf()[[case[[3]]]](py_of(x), ints(case[[2]]), return_indices = TRUE)
    expect_same_tensor(f(x, case[[2]]), py_item(ref, 0))
    out <- case[[4]](case[[2]], return_indices = TRUE)(x)
    expect_same_tensor(out[[1]], py_item(ref, 0))
    expect_same_tensor(out[[2]] - 1L, py_item(ref, 1))
  }
})

test_that("max unpooling takes max pooling's 1-based indices, as PyTorch's", {
  skip_if_no_ampkit()
  x1 <- torch_randn(2, 3, 8)
  x2 <- torch_randn(2, 3, 6, 8)
  x3 <- torch_randn(1, 2, 4, 6, 4)
  pooled <- nn_max_pool1d(2, return_indices = TRUE)(x1)
  ref <- ptf()$max_pool1d(py_of(x1), 2L, return_indices = TRUE)
  expect_same_tensor(nn_max_unpool1d(2)(pooled[[1]], pooled[[2]]),
                     ptf()$max_unpool1d(py_item(ref, 0), py_item(ref, 1), 2L))
  expect_same_tensor(nnf_max_unpool1d(pooled[[1]], pooled[[2]], 2, output_size = 9),
                     ptf()$max_unpool1d(py_item(ref, 0), py_item(ref, 1), 2L,
                                        output_size = ints(9)))
  pooled <- nnf_max_pool2d(x2, 2, return_indices = TRUE)
  ref <- ptf()$max_pool2d(py_of(x2), 2L, return_indices = TRUE)
  expect_same_tensor(nn_max_unpool2d(2)(pooled[[1]], pooled[[2]], output_size = c(7, 9)),
                     ptf()$max_unpool2d(py_item(ref, 0), py_item(ref, 1), 2L,
                                        output_size = ints(7, 9)))
  pooled <- nnf_max_pool3d(x3, 2, return_indices = TRUE)
  ref <- ptf()$max_pool3d(py_of(x3), 2L, return_indices = TRUE)
  expect_same_tensor(nn_max_unpool3d(2)(pooled[[1]], pooled[[2]]),
                     ptf()$max_unpool3d(py_item(ref, 0), py_item(ref, 1), 2L))
  expect_error(nnf_max_unpool2d(pooled[[1]], pooled[[2]], 2, output_size = c(9, 9)),
               "`output_size`", class = "value_error")
})

test_that("fractional max pooling is PyTorch's on the same random samples", {
  skip_if_no_ampkit()
  x2 <- torch_randn(2, 3, 9, 8)
  x3 <- torch_randn(2, 3, 6, 7, 8)
  s2 <- torch_rand(2, 3, 2)
  s3 <- torch_rand(2, 3, 3)
  out <- nnf_fractional_max_pool2d(x2, 2, output_ratio = 0.5, return_indices = TRUE,
                                   random_samples = s2)
  ref <- ptf()$fractional_max_pool2d(py_of(x2), 2L, output_ratio = reticulate::tuple(0.5, 0.5),
                                     return_indices = TRUE, `_random_samples` = py_of(s2))
  expect_same_tensor(out[[1]], py_item(ref, 0))
  expect_same_tensor(out[[2]] - 1L, py_item(ref, 1))
  expect_same_tensor(nnf_fractional_max_pool3d(x3, c(2, 2, 3), output_size = c(3, 4, 5),
                                               random_samples = s3),
                     ptf()$fractional_max_pool3d(py_of(x3), ints(2, 2, 3),
                                                 output_size = ints(3, 4, 5),
                                                 `_random_samples` = py_of(s3)))
  expect_equal(dim(nn_fractional_max_pool2d(3, output_size = c(4, 5))(x2)), c(2L, 3L, 4L, 5L))
  expect_equal(dim(nn_fractional_max_pool3d(2, output_ratio = 0.5)(x3)), c(2L, 3L, 3L, 3L, 4L))
  expect_error(nn_fractional_max_pool2d(2), "Exactly one", class = "value_error")
  expect_error(nn_fractional_max_pool2d(2, output_ratio = 1.5), "between 0 and 1",
               class = "value_error")
})

test_that("the convolutions check groups and padding = \"same\" when made, as PyTorch", {
  skip_if_no_ampkit()
  expect_error(nn_conv2d(4, 6, 3, groups = 3), "`in_channels` must be divisible by groups",
               class = "value_error")
  expect_error(nn_conv1d(6, 4, 3, groups = 3), "`out_channels` must be divisible by groups",
               class = "value_error")
  expect_error(nn_conv3d(4, 6, 3, groups = 0), "`groups`", class = "value_error")
  # PyTorch refuses "same" with a stride in every padding mode, not only with zeros.
  for (mode in c("zeros", "reflect", "replicate", "circular")) {
    expect_error(nn_conv2d(4, 6, 3, padding = "same", stride = c(1, 2), padding_mode = mode),
                 "not supported for strided convolutions", class = "value_error")
  }
  expect_error(nn_conv1d(4, 6, 3, padding = "full"), "`padding`", class = "value_error")
  torch_manual_seed(7)
  conv <- nn_conv2d(4, 6, 3, groups = 2, padding = "same", padding_mode = "circular")
  ref <- load_into_torch(pt()$nn$Conv2d(4L, 6L, 3L, groups = 2L, padding = "same",
                                        padding_mode = "circular"), conv)
  x <- torch_randn(2, 4, 5, 6)
  expect_same_tensor(conv(x), pycall(ref, py_of(x)), tolerance = 1e-6)
})

test_that("batch and layer norm reset as PyTorch's, and check their flags", {
  skip_if_no_ampkit()
  x <- torch_randn(4, 3, 5) * 3 + 1
  cases <- list(list(nn_batch_norm1d(3), x), list(nn_batch_norm2d(3), x$unsqueeze(4)),
                list(nn_batch_norm3d(3), x$unsqueeze(4)$unsqueeze(5)))
  for (case in cases) {
    bn <- case[[1]]
    input <- case[[2]]
    bn(input)
    with_no_grad({
      bn$weight$mul_(2)
      bn$bias$add_(1)
    })
    mean <- bn$running_mean
    bn$reset_running_stats()
    # In place: the same tensors, back to PyTorch's initial values; the parameters kept.
    expect_same_tensor(mean, torch_zeros(3))
    expect_same_tensor(bn$running_var, torch_ones(3))
    expect_equal(as.numeric(as_array(bn$num_batches_tracked)), 0)
    expect_same_tensor(bn$weight$detach(), torch_full(3, 2))
    bn(input)
    weight <- bn$weight
    bn$reset_parameters()
    expect_same_tensor(bn$running_mean, torch_zeros(3))
    expect_equal(as.numeric(as_array(bn$num_batches_tracked)), 0)
    expect_same_tensor(weight$detach(), torch_ones(3))
    expect_same_tensor(bn$bias$detach(), torch_zeros(3))
  }
  # Without statistics or affine parameters there is nothing to reset.
  bare <- nn_batch_norm2d(3, affine = FALSE, track_running_stats = FALSE)
  expect_silent(bare$reset_parameters())
  expect_length(bare$state_dict(), 0L)
  ln <- nn_layer_norm(c(3, 5))
  with_no_grad({
    ln$weight$mul_(3)
    ln$bias$add_(2)
  })
  ln$reset_parameters()
  ref <- pt()$nn$LayerNorm(ints(3, 5))
  expect_same_tensor(ln(x), pycall(ref, py_of(x)))
  expect_silent(nn_layer_norm(5, elementwise_affine = FALSE)$reset_parameters())
  for (flag in list(NA, 1, "yes")) {
    expect_error(nn_batch_norm1d(3, affine = flag), "`affine`", class = "value_error")
    expect_error(nn_batch_norm2d(3, track_running_stats = flag), "`track_running_stats`",
                 class = "value_error")
    expect_error(nn_layer_norm(3, elementwise_affine = flag), "`elementwise_affine`",
                 class = "value_error")
  }
})

test_that("nnf_adaptive_avg_pool2d keeps the input's size where output_size is NA", {
  skip_if_no_ampkit()
  x <- torch_randn(2, 3, 7, 9)
  expect_same_tensor(nnf_adaptive_avg_pool2d(x, c(4, NA)),
                     ptf()$adaptive_avg_pool2d(py_of(x), list(4L, NULL)))
  expect_same_tensor(nn_adaptive_avg_pool2d(c(NA, 2))(x),
                     pycall(pt()$nn$AdaptiveAvgPool2d(list(NULL, 2L)), py_of(x)))
  expect_same_tensor(nn_adaptive_avg_pool2d(3)(x),
                     pycall(pt()$nn$AdaptiveAvgPool2d(3L), py_of(x)))
})
# nolint end

test_that("batch norm refuses one value per channel in training, as PyTorch's F.batch_norm", {
  m <- nn_batch_norm1d(3)
  expect_error(m(torch_randn(1, 3)),
               "Expected more than 1 value per channel when training, got input size \\[1, 3\\]",
               class = "value_error")
  expect_error(nnf_batch_norm(torch_randn(1, 2, 1), torch_zeros(2), torch_ones(2),
                              training = TRUE), "more than 1 value per channel")
  expect_equal(m(torch_randn(2, 3))$shape, c(2, 3))
  m$eval()
  expect_equal(m(torch_randn(1, 3))$shape, c(1, 3)) # running statistics: fine
})
