# R torch's margin losses, embedding bags, weight normalization and the activation/dropout
# details of nn-layers.R and nnf.R, with PyTorch's module of the same name as the oracle: the same
# inputs (the same tensors, shared with Python) give the same values and gradients, bit for bit.
# R torch's classes are 1-based; PyTorch's 0-based, converted here at the border.

# A leaf copy of `x` for PyTorch's side of a gradient comparison (R's stays R's own leaf).
py_leaf <- function(x) py_of(x)$detach()$clone()$requires_grad_(TRUE)
leaf <- function(x) x$detach()$clone()$requires_grad_(TRUE)

# 1-based R classes as PyTorch's 0-based ones (negative entries, the -1 ends, stay).
zero_based <- function(target) {
  py_of(target)$sub(py_of((target >= 1L)$to(dtype = torch_long()))) # nolint: object_usage_linter.
}

test_that("nn_multilabel_margin_loss is torch.nn.MultiLabelMarginLoss, with 1-based targets", {
  skip_if_no_ampkit()
  x <- torch_tensor(matrix(c(0.1, 0.2, 0.4, 0.8), nrow = 1))
  y <- torch_tensor(matrix(c(4, 1, -1, 2), nrow = 1), dtype = torch_long())
  # PyTorch's documented example: classes 3 and 0 (here 4 and 1), the rest after -1 ignored.
  expect_equal(nn_multilabel_margin_loss()(x, y)$item(), 0.85, tolerance = 1e-6)
  expect_true(inherits(nn_multilabel_margin_loss(), "nn_loss"))
  torch_manual_seed(1)
  input <- torch_randn(5, 6)
  target <- torch_tensor(rbind(c(2, 6, -1, 1, 1, 1), c(1, -1, 2, 2, 2, 2), c(3, 4, 5, 6, 1, 2),
                               c(6, 5, -1, 1, 1, 1), c(-1, 1, 1, 1, 1, 1)), dtype = torch_long())
  for (reduction in c("mean", "sum", "none")) {
    a <- leaf(input)
    b <- py_leaf(input)
    out <- nn_multilabel_margin_loss(reduction = reduction)(a, target)
    ref <- pycall(pt()$nn$MultiLabelMarginLoss(reduction = reduction), b, zero_based(target))
    expect_same_tensor(out, ref)
    out$sum()$backward()
    ref$sum()$backward()
    expect_same_tensor(a$grad, b$grad)
  }
  expect_same_tensor(nnf_multilabel_margin_loss(input[1, ], target[1, ]),
                     pt()$nn$functional$multilabel_margin_loss(py_of(input[1, ]),
                                                               zero_based(target[1, ])))
  # A 0 is no class in R torch's numbering.
  expect_error(nn_multilabel_margin_loss()(x, torch_tensor(matrix(c(4L, 0L, -1L, 2L), 1))))
  expect_error(nn_multilabel_margin_loss(reduction = "avg"), "`reduction` must be one of",
               class = "value_error")
})

test_that("nn_cosine_embedding_loss is torch.nn.CosineEmbeddingLoss", {
  skip_if_no_ampkit()
  torch_manual_seed(2)
  x1 <- torch_randn(6, 4)
  x2 <- torch_randn(6, 4)
  y <- torch_tensor(c(1, -1, 1, -1, -1, 1))
  for (reduction in c("mean", "sum", "none")) {
    a1 <- leaf(x1)
    a2 <- leaf(x2)
    b1 <- py_leaf(x1)
    b2 <- py_leaf(x2)
    out <- nn_cosine_embedding_loss(margin = 0.2, reduction = reduction)(a1, a2, y)
    ref <- pycall(pt()$nn$CosineEmbeddingLoss(margin = 0.2, reduction = reduction), b1, b2,
                  py_of(y))
    expect_same_tensor(out, ref)
    out$sum()$backward()
    ref$sum()$backward()
    expect_same_tensor(a1$grad, b1$grad)
    expect_same_tensor(a2$grad, b2$grad)
  }
  expect_same_tensor(nnf_cosine_embedding_loss(x1, x2, y),
                     pt()$nn$functional$cosine_embedding_loss(py_of(x1), py_of(x2), py_of(y)))
  expect_identical(nn_cosine_embedding_loss()(x1, x2, y)$shape, integer(0))
  expect_error(nn_cosine_embedding_loss(margin = "a"), "`margin`", class = "value_error")
})

test_that("nn_ctc_loss is torch.nn.CTCLoss (classes as R torch's: PyTorch's, 0 the blank)", {
  skip_if_no_ampkit()
  torch_manual_seed(3)
  lp <- torch_randn(12, 3, 6)$log_softmax(3)
  padded <- torch_randint(1, 6, c(3, 4), dtype = torch_long())
  lengths_in <- c(12L, 10L, 7L)
  lengths_tg <- c(4L, 2L, 3L)
  concatenated <- torch_cat(list(padded[1, 1:4], padded[2, 1:2], padded[3, 1:3]))
  for (reduction in c("mean", "sum", "none")) {
    for (targets in list(padded, concatenated)) {
      a <- leaf(lp)
      b <- py_leaf(lp)
      out <- nn_ctc_loss(reduction = reduction)(a, targets, lengths_in, lengths_tg)
      ref <- pycall(pt()$nn$CTCLoss(reduction = reduction), b, py_of(targets),
                    py_of(torch_tensor(lengths_in)), py_of(torch_tensor(lengths_tg)))
      expect_same_tensor(out, ref)
      out$sum()$backward()
      ref$sum()$backward()
      expect_same_tensor(a$grad, b$grad)
    }
  }
  # Another blank, and an input too short for its target: infinite, or zero with zero_infinity.
  expect_same_tensor(nnf_ctc_loss(lp, padded - 1L, torch_tensor(lengths_in),
                                  torch_tensor(lengths_tg), blank = 5, reduction = "none"),
                     pt()$nn$functional$ctc_loss(py_of(lp), py_of(padded - 1L),
                                                 py_of(torch_tensor(lengths_in)),
                                                 py_of(torch_tensor(lengths_tg)), blank = 5L,
                                                 reduction = "none"))
  short <- nnf_ctc_loss(lp, padded, c(2L, 10L, 7L), lengths_tg, reduction = "none")
  expect_true(is.infinite(as.numeric(short[1])))
  expect_equal(as.numeric(nnf_ctc_loss(lp, padded, c(2L, 10L, 7L), lengths_tg,
                                       reduction = "none", zero_infinity = TRUE)[1]), 0)
  expect_error(nnf_ctc_loss(lp, padded, c(12.5, 10, 7), lengths_tg), "`input_lengths` must be",
               class = "value_error")
  expect_error(nn_ctc_loss(blank = -0.5), "`blank` must be a whole number", class = "value_error")
})

test_that("nn_adaptive_log_softmax_with_loss is torch.nn.AdaptiveLogSoftmaxWithLoss, 1-based", {
  skip_if_no_ampkit()
  torch_manual_seed(7)
  asm <- nn_adaptive_log_softmax_with_loss(16, 30, cutoffs = c(4, 10, 20), div_value = 2,
                                           head_bias = TRUE)
  py <- pt()$nn$AdaptiveLogSoftmaxWithLoss(16L, 30L, cutoffs = list(4L, 10L, 20L),
                                           div_value = 2, head_bias = TRUE)
  sd <- asm$state_dict()
  expect_setequal(names(sd), names(reticulate::py_to_r(py$state_dict())))
  py$load_state_dict(reticulate::py_dict(names(sd), unname(lapply(sd, to_py)), convert = FALSE))
  x <- torch_randn(9, 16)
  target <- torch_tensor(c(1L, 4L, 5L, 10L, 11L, 20L, 21L, 30L, 2L))
  a <- leaf(x)
  b <- py_leaf(x)
  out <- asm(a, target)
  ref <- pycall(py, b, zero_based(target))
  expect_named(out, c("output", "loss"))
  expect_same_tensor(out$output, ref$output)
  expect_same_tensor(out$loss, ref$loss)
  out$loss$backward()
  ref$loss$backward()
  expect_same_tensor(a$grad, b$grad)
  expect_same_tensor(asm$head$weight$grad, py$head$weight$grad)
  expect_same_tensor(asm$log_prob(x), py$log_prob(py_of(x)))
  expect_same_tensor(asm$predict(x) - 1L, py$predict(py_of(x)))
  # One example (a 0-d target), and a row whose prediction is outside the shortlist.
  one <- asm(x[3, ], target[3])
  expect_equal(one$output$dim(), 0)
  expect_equal(one$output$item(), out$output[3]$item(), tolerance = 1e-6)
  # Rows predicted inside and outside the shortlist, then all outside (PyTorch's three paths).
  reload <- function() {
    sd <- asm$state_dict()
    py$load_state_dict(reticulate::py_dict(names(sd), unname(lapply(sd, to_py)), convert = FALSE))
  }
  with_no_grad(asm$head$weight[5, 1]$fill_(50)) # the first cluster wins where x[, 1] > 0
  reload()
  predicted <- asm$predict(x)
  expect_true(as.logical((predicted > 4)$any()) && as.logical((predicted <= 4)$any()))
  expect_same_tensor(predicted - 1L, py$predict(py_of(x)))
  with_no_grad(asm$head$bias[5]$fill_(1000))
  reload()
  expect_true(as.logical((asm$predict(x) > 4)$all()))
  expect_same_tensor(asm$predict(x) - 1L, py$predict(py_of(x)))
  expect_error(asm(x, target + 1L), "Target values should be in \\[1, 30\\]",
               class = "runtime_error")
  expect_error(asm(x[1:2, ], target), "same size in the batch", class = "runtime_error")
  expect_error(nn_adaptive_log_softmax_with_loss(16, 30, cutoffs = c(10, 4)), "sorted",
               class = "value_error")
  expect_error(nn_adaptive_log_softmax_with_loss(16, 30, cutoffs = 30), "between 1 and",
               class = "value_error")
})

test_that("nn_multi_margin_loss is torch.nn.MultiMarginLoss, with 1-based classes", {
  skip_if_no_ampkit()
  torch_manual_seed(3)
  input <- torch_randn(8, 5)
  target <- torch_tensor(c(1L, 5L, 2L, 3L, 4L, 5L, 1L, 2L))
  w <- torch_rand(5)
  for (p in c(1, 2)) {
    for (reduction in c("mean", "sum", "none")) {
      a <- leaf(input)
      b <- py_leaf(input)
      loss <- nn_multi_margin_loss(p = p, margin = 0.7, weight = w, reduction = reduction)
      out <- loss(a, target)
      ref <- pycall(pt()$nn$MultiMarginLoss(p = as.integer(p), margin = 0.7, weight = py_of(w),
                                            reduction = reduction), b, zero_based(target))
      expect_same_tensor(out, ref)
      out$sum()$backward()
      ref$sum()$backward()
      expect_same_tensor(a$grad, b$grad)
    }
  }
  expect_same_tensor(nnf_multi_margin_loss(input, target),
                     pt()$nn$functional$multi_margin_loss(py_of(input), zero_based(target)))
  # The weight is a buffer, as in R torch's weighted losses: it follows the state dict.
  expect_identical(names(nn_multi_margin_loss(weight = w)$state_dict()), "weight")
  expect_error(nn_multi_margin_loss(p = 3), "`p` must be 1 or 2", class = "value_error")
  expect_error(nn_multi_margin_loss(weight = torch_ones(2, 2)), "1-D", class = "value_error")
  expect_error(nn_multi_margin_loss()(input, torch_zeros(8, dtype = torch_long())))
})

test_that("torch_multi_margin_loss, torch_multilabel_margin_loss, torch_one_hot are 1-based", {
  skip_if_no_ampkit()
  torch_manual_seed(4)
  x <- torch_randn(3, 3)
  y <- torch_tensor(c(1L, 2L, 3L))
  expect_same_tensor(torch_multi_margin_loss(x, y),
                     pt()$nn$functional$multi_margin_loss(py_of(x), zero_based(y)))
  expect_same_tensor(torch_multi_margin_loss(x, y, 2L, 0.5, NULL, torch_reduction_sum()),
                     pt()$nn$functional$multi_margin_loss(py_of(x), zero_based(y), 2L, 0.5,
                                                          reduction = "sum"))
  expect_error(torch_multi_margin_loss(torch_randn(3, 2), y)) # class 3 of 2
  labels <- torch_tensor(rbind(c(3L, -1L, -1L), c(1L, 2L, -1L), c(2L, 3L, 1L)))
  expect_same_tensor(torch_multilabel_margin_loss(x, labels),
                     pt()$nn$functional$multilabel_margin_loss(py_of(x), zero_based(labels)))
  expect_same_tensor(torch_one_hot(torch_tensor(c(1L, 3L))),
                     pt()$nn$functional$one_hot(pt()$tensor(ints(0, 2))))
  expect_identical(torch_one_hot(torch_tensor(2L), 4)$shape, c(1L, 4L))
  expect_error(torch_one_hot(torch_tensor(0L)), "1")
})

test_that("torch_broadcast_shapes is torch.broadcast_shapes", {
  skip_if_no_ampkit()
  builtins <- reticulate::import_builtins(convert = FALSE)
  cases <- list(list(c(2, 2), c(2, 2)), list(c(2, 1), c(2, 2)), list(c(3, 1, 4), c(5, 1)),
                list(1, c(0, 2)), list(integer(0), c(2, 3)), list(c(4, 1)))
  for (shapes in cases) {
    ref <- do.call(pt()$broadcast_shapes, lapply(shapes, function(s) as.list(as.integer(s))))
    expect_identical(torch_broadcast_shapes(!!!shapes),
                     as.integer(unlist(reticulate::py_to_r(builtins$list(ref)))))
  }
  expect_error(torch_broadcast_shapes(c(2, 3), c(2, 2)), "cannot be broadcast",
               class = "runtime_error")
  expect_error(torch_broadcast_shapes(c(2, -1)), "sizes >= 0", class = "value_error")
})

test_that("nn_embedding_bag is torch.nn.EmbeddingBag: seeded weights, modes, offsets", {
  skip_if_no_ampkit()
  torch_manual_seed(1)
  bag <- nn_embedding_bag(10, 3)
  pt()$manual_seed(1L)
  ref <- pt()$nn$EmbeddingBag(10L, 3L)
  expect_same_tensor(bag$weight, ref$weight)
  expect_true(inherits(bag, "nn_embedding_bag"))
  input <- torch_tensor(rbind(c(1, 2, 4, 5), c(4, 3, 2, 9)), dtype = torch_long())
  for (mode in c("sum", "mean", "max")) {
    torch_manual_seed(5)
    m <- nn_embedding_bag(10, 3, mode = mode)
    pt()$manual_seed(5L)
    r <- pt()$nn$EmbeddingBag(10L, 3L, mode = mode)
    out <- m(input)
    py_out <- pycall(r, zero_based(input))
    expect_same_tensor(out, py_out)
    out$pow(2)$sum()$backward()
    py_out$pow(2L)$sum()$backward()
    expect_same_tensor(m$weight$grad, r$weight$grad)
  }
  # A 1-D input with offsets: where each bag starts in `input`, counted from 0 (R torch's).
  flat <- torch_tensor(c(1L, 2L, 4L, 5L, 4L, 3L, 2L, 9L, 10L))
  offsets <- torch_tensor(c(0L, 3L, 5L))
  expect_same_tensor(bag(flat, offsets), pycall(ref, zero_based(flat), py_of(offsets)))
  psw <- torch_rand(9)
  summed <- nn_embedding_bag(10, 3, mode = "sum", include_last_offset = TRUE)
  py_summed <- pt()$nn$EmbeddingBag(10L, 3L, mode = "sum", include_last_offset = TRUE)
  py_summed$weight$data$copy_(py_of(summed$weight))
  last <- torch_tensor(c(0L, 3L, 5L, 9L))
  expect_same_tensor(summed(flat, last, per_sample_weights = psw),
                     pycall(py_summed, zero_based(flat), py_of(last),
                            per_sample_weights = py_of(psw)))
  # padding_idx (1-based) is left out of the sums and of the means' counts, as in PyTorch.
  torch_manual_seed(6)
  padded <- nn_embedding_bag(10, 3, padding_idx = 2)
  pt()$manual_seed(6L)
  py_padded <- pt()$nn$EmbeddingBag(10L, 3L, padding_idx = 1L)
  expect_same_tensor(padded$weight, py_padded$weight)
  expect_same_tensor(padded(input), pycall(py_padded, zero_based(input)))
  expect_identical(nn_embedding_bag(10, 3, padding_idx = -1)$padding_idx, 10L)
})

test_that("nn_embedding_bag$from_pretrained is EmbeddingBag.from_pretrained", {
  skip_if_no_ampkit()
  table <- torch_randn(10, 3)
  flat <- torch_tensor(c(2L, 2L, 2L, 2L, 4L, 3L, 2L, 9L))
  offsets <- torch_tensor(c(0L, 4L))
  for (freeze in c(TRUE, FALSE)) {
    bag <- nn_embedding_bag$from_pretrained(table, freeze = freeze, mode = "sum",
                                            padding_idx = 2)
    ref <- pt()$nn$EmbeddingBag$from_pretrained(py_of(table), freeze = freeze, mode = "sum",
                                                 padding_idx = 1L)
    expect_true(inherits(bag, "nn_embedding_bag"))
    expect_identical(bag$weight$requires_grad, reticulate::py_to_r(ref$weight$requires_grad))
    expect_identical(bag$weight$requires_grad, !freeze)
    expect_same_tensor(bag(flat, offsets), pycall(ref, zero_based(flat), py_of(offsets)))
  }
  # The table keeps its own flag (a tensor of its own over the same memory, as PyTorch's), so
  # R torch's example, a bag over an embedding's weight, leaves the embedding trainable.
  embedding <- nn_embedding(10, 3, padding_idx = 2)
  bag <- nn_embedding_bag$from_pretrained(embedding$weight, padding_idx = 2, mode = "sum")
  expect_true(embedding$weight$requires_grad)
  expect_false(bag$weight$requires_grad)
  expect_identical(bag$weight$data_ptr(), embedding$weight$data_ptr())
  trained <- nn_embedding_bag$from_pretrained(table, freeze = FALSE)$weight
  expect_true(trained$is_leaf && trained$requires_grad)
  expect_false(table$requires_grad)
  # a table computed from parameters: the bag's weight is a leaf, no gradient goes back
  source <- torch_randn(10, 3, requires_grad = TRUE)
  frozen <- nn_embedding_bag$from_pretrained(source * 2)
  expect_true(frozen$weight$is_leaf)
  expect_false(frozen$weight$requires_grad)
  expect_error(nn_embedding_bag$from_pretrained(torch_randn(10)), "`embeddings` must be a 2-dim",
               class = "value_error")
  expect_error(nn_embedding_bag$from_pretrained(table, freeze = NA), "freeze",
               class = "value_error")
})

test_that("nnf_embedding_bag: R torch's arguments, errors in R's words", {
  skip_if_no_ampkit()
  input <- torch_tensor(rbind(c(1, 2, 4, 5), c(4, 3, 2, 9)), dtype = torch_long())
  weight <- torch_randn(10, 3)
  out <- nnf_embedding_bag(input, weight)
  expect_equal(as_array(out[1, ]), as_array((weight[1, ] + weight[2, ] + weight[4, ] +
                                               weight[5, ]) / 4), tolerance = 1e-6)
  expect_same_tensor(nnf_embedding_bag(input, weight, mode = "max", padding_idx = 4),
                     pt()$nn$functional$embedding_bag(zero_based(input), py_of(weight),
                                                      mode = "max", padding_idx = 3L))
  expect_error(nnf_embedding_bag(input, weight, offsets = torch_tensor(c(1, 2))),
               "`offsets` must be NULL", class = "value_error")
  expect_error(nnf_embedding_bag(input[1, ], weight), "`offsets` must be a 1-D tensor",
               class = "value_error")
  expect_error(nnf_embedding_bag(input, weight, mode = "median"), "`mode` must be one of",
               class = "value_error")
  expect_error(nnf_embedding_bag(input, weight, per_sample_weights = torch_ones(2, 4)),
               "only supported with mode \"sum\"", class = "value_error")
  expect_error(nnf_embedding_bag(input, weight, per_sample_weights = torch_ones(3)),
               "must have the shape of `input`", class = "value_error")
  expect_error(nnf_embedding_bag(input, weight, mode = "max", sparse = TRUE),
               "mode \"max\" supports neither", class = "value_error")
  expect_error(nnf_embedding_bag(input, weight, padding_idx = 11), "`padding_idx`",
               class = "value_error")
})

# The area under min(FPR, FNR) by its definition: for each interval between consecutive distinct
# thresholds t = -prediction, the rates of the classifier "positive when -prediction < t" there.
aum_reference <- function(pred, positive) {
  thresholds <- sort(unique(-pred))
  area <- 0
  for (i in seq_len(length(thresholds) - 1L)) {
    t <- (thresholds[[i]] + thresholds[[i + 1L]]) / 2
    fpr <- sum(-pred[!positive] < t) / sum(!positive)
    fnr <- sum(-pred[positive] > t) / sum(positive)
    area <- area + min(fpr, fnr) * (thresholds[[i + 1L]] - thresholds[[i]])
  }
  area
}

test_that("nn_aum_loss is the area under min(FPR, FNR), with gradients", {
  skip_if_no_ampkit()
  torch_manual_seed(7)
  aum <- nn_aum_loss()
  expect_true(all(c("nn_aum_loss", "nn_loss", "nn_module") %in% class(aum)))
  input <- torch_randn(50, requires_grad = TRUE)
  target <- torch_randint(1, 3, 50, dtype = torch_long())
  out <- aum(input, target)
  expect_identical(out$shape, integer(0))
  expect_equal(out$item(), aum_reference(as_array(input), as_array(target) == 2),
               tolerance = 1e-5)
  out$backward()
  expect_identical(input$grad$shape, 50L)
  # Ties are one point of the curve; a logical target (TRUE positive) and a matrix input work.
  pred <- torch_tensor(matrix(c(0.5, 0.5, -1, 2, 0.5, 0.1), 2))
  labels <- torch_tensor(matrix(c(TRUE, FALSE, FALSE, TRUE, TRUE, FALSE), 2))
  expect_equal(nnf_area_under_min_fpr_fnr(pred, labels)$item(),
               aum_reference(as.vector(as_array(pred)), as.vector(as_array(labels))),
               tolerance = 1e-6)
  # One class only: no curve, a zero loss that still backpropagates.
  one <- torch_randn(4, requires_grad = TRUE)
  zero <- aum(one, torch_ones(4, dtype = torch_long()))
  expect_equal(zero$item(), 0)
  zero$backward()
  expect_equal(as_array(one$grad), rep(0, 4))
  expect_error(aum(torch_randn(4), torch_ones(3)), "as many elements", class = "value_error")
})

test_that("nn_kl_div_loss: R torch's warning for \"mean\", PyTorch's batchmean", {
  skip_if_no_ampkit()
  torch_manual_seed(8)
  log_p <- nnf_log_softmax(torch_randn(4, 3), dim = 2)
  p <- nnf_softmax(torch_randn(4, 3), dim = 2)
  expect_warning(out <- nn_kl_div_loss()(log_p, p), "'batchmean' divides only by the batch size")
  suppressWarnings(ref <- pycall(pt()$nn$KLDivLoss(), py_of(log_p), py_of(p)))
  expect_same_tensor(out, ref)
  expect_no_warning(batch <- nn_kl_div_loss(reduction = "batchmean")(log_p, p))
  expect_same_tensor(batch, pycall(pt()$nn$KLDivLoss(reduction = "batchmean"), py_of(log_p),
                                   py_of(p)))
  expect_same_tensor(nnf_kl_div(log_p, p, reduction = "none"),
                     pt()$nn$functional$kl_div(py_of(log_p), py_of(p), reduction = "none"))
  expect_error(nn_kl_div_loss(reduction = "avg"), "`reduction` must be one of",
               class = "value_error")
  expect_true(inherits(nn_kl_div_loss(), "nn_loss"))
  expect_true(inherits(nn_mse_loss(), "nn_loss"))
})

test_that("nnf_dropout2d warns for inputs other than 4-D (and 3-D) as PyTorch does", {
  skip_if_no_ampkit()
  expect_warning(nnf_dropout2d(torch_randn(3, 10)), "Received a 2-D input to dropout2d")
  expect_warning(nnf_dropout2d(torch_randn(3, 10, 10)), "Received a 3D input to dropout2d")
  expect_no_warning(x <- nnf_dropout2d(torch_randn(1, 2, 10, 10), p = 1))
  expect_true(torch_allclose(x, torch_zeros_like(x)))
  expect_error(nnf_dropout2d(1), "`input` must be a tensor", class = "value_error")
})

test_that("activation modules pass inplace on: nn_silu(inplace = TRUE) writes its input", {
  skip_if_no_ampkit()
  x <- torch_tensor(c(-1, 0, 1))
  expect_same_tensor(nn_silu()(x), pt()$nn$functional$silu(py_of(x)))
  expect_equal(as_array(x), c(-1, 0, 1))
  modules <- list(silu = nn_silu, relu = nn_relu, relu6 = nn_relu6, leaky_relu = nn_leaky_relu,
                  elu = nn_elu, celu = nn_celu)
  for (name in names(modules)) {
    x <- torch_randn(5) * 4
    expected <- pt()$nn$functional[[name]](py_of(x$clone()))
    out <- modules[[name]](inplace = TRUE)(x)
    expect_same_tensor(x, expected) # written in place
    expect_same_tensor(out, expected)
    y <- torch_randn(5) * 4
    before <- y$clone()
    modules[[name]]()(y)
    expect_same_tensor(y, before) # untouched without inplace
  }
  expect_error(nn_relu(inplace = "yes"), "`inplace`", class = "value_error")
})

test_that("nn_utils_weight_norm is torch.nn.utils.weight_norm (R torch's class)", {
  skip_if_no_ampkit()
  for (dim in list(1, 2, NULL)) {
    torch_manual_seed(9)
    lin <- nn_linear(4, 3)
    ref <- pt()$nn$Linear(4L, 3L)
    ref$load_state_dict(reticulate::py_dict(c("weight", "bias"),
                                            list(py_of(lin$weight), py_of(lin$bias))))
    before <- lin$weight$detach()$clone()
    wn <- nn_utils_weight_norm$new("weight", dim)
    wn$apply(lin)
    py_dim <- if (is.null(dim)) NULL else as.integer(dim - 1)
    suppressWarnings(pt()$nn$utils$weight_norm(ref, "weight", dim = py_dim))
    expect_same_tensor(lin$weight_g, ref$weight_g)
    expect_same_tensor(lin$weight_v, ref$weight_v)
    expect_same_tensor(lin$weight, ref$weight)
    expect_setequal(names(lin$parameters), c("bias", "weight_g", "weight_v"))
    x <- torch_randn(2, 4)
    wn$recompute(lin)
    lin(x)$pow(2)$sum()$backward()
    pycall(ref, py_of(x))$pow(2L)$sum()$backward()
    expect_same_tensor(lin$weight_g$grad, ref$weight_g$grad)
    expect_same_tensor(lin$weight_v$grad, ref$weight_v$grad)
    wn$remove(lin)
    expect_equal(as_array(lin$weight), as_array(before), tolerance = 1e-6)
    expect_setequal(names(lin$parameters), c("weight", "bias"))
    expect_true(lin$weight$requires_grad)
  }
  expect_identical(nn_utils_weight_norm$new("weight", 1)$apply(nn_linear(4, 3))$weight_g$shape,
                   c(3L, 1L))
  expect_error(nn_utils_weight_norm$new("weight", 0), "1-based", class = "value_error")
  expect_error(nn_utils_weight_norm$new(1, 1), "`name`", class = "value_error")
  expect_error(nn_utils_weight_norm$new("w", 1)$apply(nn_linear(2, 2)), "no parameter `w`",
               class = "value_error")
})

test_that("the losses' weight and pos_weight are buffers: state dict, $to(), as R torch's", {
  skip_if_no_ampkit()
  torch_manual_seed(5)
  input <- torch_randn(6, 3, dtype = torch_float64())
  classes <- torch_tensor(c(1L, 3L, 2L, 2L, 1L, 3L))
  probs <- torch_rand(6, 3, dtype = torch_float64())
  labels <- (torch_rand(6, 3) > 0.5)$to(dtype = torch_float64())
  w <- torch_tensor(c(1, 2, 3))
  cases <- list(
    list(nn_cross_entropy_loss(weight = w), pt()$nn$CrossEntropyLoss(weight = py_of(w)),
         input, classes, zero_based(classes)),
    list(nn_nll_loss(weight = w), pt()$nn$NLLLoss(weight = py_of(w)), input, classes,
         zero_based(classes)),
    list(nn_bce_loss(weight = w), pt()$nn$BCELoss(weight = py_of(w)), probs, labels,
         py_of(labels)),
    list(nn_multilabel_soft_margin_loss(weight = w),
         pt()$nn$MultiLabelSoftMarginLoss(weight = py_of(w)), input, labels, py_of(labels))
  )
  for (case in cases) {
    loss <- case[[1]]
    expect_identical(names(loss$state_dict()), "weight")
    # A float weight with a double input fails: $to() must convert the buffer.
    loss$to(dtype = torch_float64())
    expect_identical(loss$weight$dtype$.type(), "Double")
    ref <- case[[2]]$to(dtype = pt()$float64)
    expect_same_tensor(loss(case[[3]], case[[4]]), pycall(ref, py_of(case[[3]]), case[[5]]))
  }
  pw <- torch_tensor(c(0.5, 1, 2))
  logits <- nn_bce_with_logits_loss(weight = w, pos_weight = pw)
  expect_setequal(names(logits$state_dict()), c("weight", "pos_weight"))
  logits$to(dtype = torch_float64())
  expect_identical(logits$pos_weight$dtype$.type(), "Double")
  ref <- pt()$nn$BCEWithLogitsLoss(weight = py_of(w), pos_weight = py_of(pw))
  expect_same_tensor(logits(input, labels),
                     pycall(ref$to(dtype = pt()$float64), py_of(input), py_of(labels)))
  # NULL stays NULL (no buffer); numbers become a tensor, as nn_multi_margin_loss's weight.
  expect_length(nn_cross_entropy_loss()$state_dict(), 0L)
  expect_null(nn_bce_with_logits_loss(weight = w)$pos_weight)
  expect_identical(as_array(nn_nll_loss(weight = c(1, 2, 3))$weight), c(1, 2, 3))
  expect_error(nn_bce_loss(weight = "a"), "`weight` must be NULL or a tensor",
               class = "value_error")
})

test_that("the losses take R torch's positional arguments", {
  skip_if_no_ampkit()
  args_of <- function(loss) names(formals(loss$public_methods$initialize))
  expect_identical(args_of(nn_bce_with_logits_loss), c("weight", "reduction", "pos_weight"))
  expect_identical(args_of(nn_cross_entropy_loss),
                   c("weight", "ignore_index", "reduction", "label_smoothing"))
  expect_identical(args_of(nn_nll_loss), c("weight", "ignore_index", "reduction"))
  expect_identical(args_of(nn_bce_loss), c("weight", "reduction"))
  expect_identical(args_of(nn_multilabel_soft_margin_loss), c("weight", "reduction"))
  expect_identical(args_of(nn_hinge_embedding_loss), c("margin", "reduction"))
  torch_manual_seed(6)
  input <- torch_randn(5, 3)
  target <- torch_tensor(c(1L, 2L, 3L, 2L, 2L))
  labels <- torch_rand(5, 3)
  w <- torch_rand(3)
  pw <- torch_rand(3)
  expect_same_tensor(nn_bce_with_logits_loss(w, "sum", pw)(input, labels),
                     pycall(pt()$nn$BCEWithLogitsLoss(weight = py_of(w), reduction = "sum",
                                                      pos_weight = py_of(pw)),
                            py_of(input), py_of(labels)))
  expect_same_tensor(nn_cross_entropy_loss(w, 2, "sum", 0.1)(input, target),
                     pycall(pt()$nn$CrossEntropyLoss(weight = py_of(w), ignore_index = 1L,
                                                     reduction = "sum", label_smoothing = 0.1),
                            py_of(input), zero_based(target)))
})
