# R torch's remaining activations (nn-activations.R), functional and as modules, against
# PyTorch's torch.nn.functional and torch.nn, bit for bit on the same tensors.

test_that("the functional activations are torch.nn.functional's", {
  skip_if_no_ampkit()
  fnl <- pt()$nn$functional
  torch_manual_seed(5)
  x <- torch_randn(4, 6) * 4
  p <- py_of(x)
  expect_same_tensor(nnf_selu(x), fnl$selu(p))
  expect_same_tensor(nnf_hardsigmoid(x), fnl$hardsigmoid(p))
  expect_same_tensor(nnf_hardswish(x), fnl$hardswish(p))
  expect_same_tensor(nnf_hardshrink(x, 1.5), fnl$hardshrink(p, 1.5))
  expect_same_tensor(nnf_softshrink(x), fnl$softshrink(p))
  expect_same_tensor(nnf_tanhshrink(x), fnl$tanhshrink(p))
  expect_same_tensor(nnf_softsign(x), fnl$softsign(p))
  expect_same_tensor(nnf_logsigmoid(x), fnl$logsigmoid(p))
  expect_same_tensor(nnf_threshold(x, 0.5, -2), fnl$threshold(p, 0.5, -2))
  expect_same_tensor(nnf_rrelu(x), fnl$rrelu(p))  # not training: the bounds' mean
  torch_manual_seed(9)
  r <- nnf_rrelu(x, training = TRUE)
  pt()$manual_seed(9L)
  expect_same_tensor(r, fnl$rrelu(p, training = TRUE))
  # dims count from 1: R torch's glu(dim = 1) is PyTorch's dim 0; softmin's too
  expect_same_tensor(nnf_glu(x), fnl$glu(p))
  expect_same_tensor(nnf_glu(x, dim = 1), fnl$glu(p, dim = 0L))
  expect_same_tensor(nnf_softmin(x, dim = 2), fnl$softmin(p, dim = 1L))
  expect_error(nnf_softmin(x), "`dim` must be given", class = "value_error")
  w <- torch_tensor(c(0.1, 0.2, 0.3, 0.4, 0.5, 0.6))
  expect_same_tensor(nnf_prelu(x, w), fnl$prelu(p, py_of(w)))
  y <- torch_randn(4, 6)
  expect_same_tensor(nnf_cosine_similarity(x, y), fnl$cosine_similarity(p, py_of(y), dim = 1L))
  expect_same_tensor(nnf_cosine_similarity(x, y, dim = 1),
                     fnl$cosine_similarity(p, py_of(y), dim = 0L))
  expect_same_tensor(nnf_pairwise_distance(x, y, p = 1, keepdim = TRUE),
                     fnl$pairwise_distance(p, py_of(y), p = 1, keepdim = TRUE))
  expect_same_tensor(nnf_pdist(x), fnl$pdist(p))
  z <- torch_randn(1, 8, 2, 3)
  expect_same_tensor(nnf_pixel_shuffle(z, 2), fnl$pixel_shuffle(py_of(z), 2L))
  expect_error(nnf_hardshrink(x, "a"), "`lambd` must be a number", class = "value_error")
  expect_error(nnf_selu(1), "`input` must be a tensor", class = "value_error")
  expect_error(nnf_threshold(x, 1), "argument \"value\" is missing")
})

test_that("the in-place variants write into their input, as PyTorch's", {
  skip_if_no_ampkit()
  fnl <- pt()$nn$functional
  for (case in list(
    list(nnf_relu_, function(p) fnl$relu_(p)),
    list(function(x) nnf_elu_(x, 0.5), function(p) fnl$elu_(p, 0.5)),
    list(nnf_celu_, function(p) pt()$celu_(p)),
    list(nnf_selu_, function(p) pt()$selu_(p)),
    list(function(x) nnf_hardtanh_(x, -0.5, 0.5), function(p) fnl$hardtanh_(p, -0.5, 0.5)),
    list(function(x) nnf_threshold_(x, 0, 7), function(p) fnl$threshold_(p, 0, 7)),
    list(function(x) nnf_hardswish(x, inplace = TRUE),
         function(p) fnl$hardswish(p, inplace = TRUE))
  )) {
    torch_manual_seed(2)
    x <- torch_randn(3, 4)
    expected <- case[[2]](py_of(x$clone()))
    out <- case[[1]](x)
    expect_same_tensor(x, expected)
    expect_identical(out$data_ptr(), x$data_ptr())
  }
})

test_that("the activation modules are torch.nn's, with R torch's arguments", {
  skip_if_no_ampkit()
  nn <- pt()$nn
  torch_manual_seed(6)
  x <- torch_randn(2, 4, 3, 3)
  p <- py_of(x)
  cases <- list(
    list(nn_selu(), nn$SELU()),
    list(nn_hardsigmoid(), nn$Hardsigmoid()),
    list(nn_hardswish(), nn$Hardswish()),
    list(nn_hardtanh(-2, 2), nn$Hardtanh(-2, 2)),
    list(nn_hardshrink(0.3), nn$Hardshrink(0.3)),
    list(nn_softshrink(), nn$Softshrink()),
    list(nn_tanhshrink(), nn$Tanhshrink()),
    list(nn_softsign(), nn$Softsign()),
    list(nn_log_sigmoid(), nn$LogSigmoid()),
    list(nn_threshold(0.1, 20), nn$Threshold(0.1, 20)),
    list(nn_glu(dim = 2), nn$GLU(dim = 1L)),
    list(nn_softmin(dim = 2), nn$Softmin(dim = 1L)),
    list(nn_softmax2d(), nn$Softmax2d())
  )
  for (case in cases) expect_same_tensor(case[[1]](x), pycall(case[[2]], p))
  for (module in list(nn_hardswish(inplace = TRUE), nn_hardsigmoid(inplace = TRUE))) {
    y <- x$clone()
    expected <- pycall(if (inherits(module, "nn_hardswish")) nn$Hardswish() else nn$Hardsigmoid(),
                       py_of(x$clone()))
    module(y)
    expect_same_tensor(y, expected) # written into its input
  }
  rrelu <- nn_rrelu()
  rrelu$eval()
  expect_same_tensor(rrelu(x), pycall(nn$RReLU()$eval(), p))
  prelu <- nn_prelu(num_parameters = 4, init = 0.1)
  expect_identical(prelu$weight$shape, 4L)
  expect_true(prelu$weight$requires_grad)
  expect_same_tensor(prelu(x), pycall(load_into_torch(nn$PReLU(4L, 0.1), prelu), p))
  prelu(x)$sum()$backward()
  expect_identical(prelu$weight$grad$shape, 4L)
  y <- torch_randn(5, 3)
  expect_same_tensor(nn_pairwise_distance(p = 3)(y, y * 2),
                     pycall(nn$PairwiseDistance(p = 3), py_of(y), py_of(y * 2)))
  expect_error(nn_softmax2d()(torch_randn(3, 4)), "3-D or 4-D input", class = "value_error")
  expect_error(nn_threshold(0.1), "argument \"value\" is missing")
  expect_error(nn_hardtanh(inplace = "yes"), "`inplace` must be TRUE or FALSE")
})

test_that("the ranking, triplet and Poisson losses and alpha dropout are PyTorch's", {
  skip_if_no_ampkit()
  fnl <- pt()$nn$functional
  nn <- pt()$nn
  torch_manual_seed(12)
  a <- torch_randn(5, 3)
  b <- torch_randn(5, 3)
  c <- torch_randn(5, 3)
  s1 <- torch_randn(5)
  s2 <- torch_randn(5)
  sign <- torch_tensor(c(1, -1, 1, 1, -1))
  expect_same_tensor(nnf_margin_ranking_loss(s1, s2, sign, 0.2),
                     fnl$margin_ranking_loss(py_of(s1), py_of(s2), py_of(sign), 0.2))
  expect_same_tensor(nn_margin_ranking_loss(0.2, reduction = "none")(s1, s2, sign),
                     pycall(nn$MarginRankingLoss(0.2, reduction = "none"), py_of(s1), py_of(s2),
                            py_of(sign)))
  expect_same_tensor(nnf_triplet_margin_loss(a, b, c, swap = TRUE),
                     fnl$triplet_margin_loss(py_of(a), py_of(b), py_of(c), swap = TRUE))
  expect_same_tensor(nn_triplet_margin_loss(margin = 2, p = 1, reduction = "sum")(a, b, c),
                     pycall(nn$TripletMarginLoss(margin = 2, p = 1, reduction = "sum"),
                            py_of(a), py_of(b), py_of(c)))
  counts <- torch_tensor(c(0, 2, 5, 1, 3))
  expect_same_tensor(nnf_poisson_nll_loss(s1, counts),
                     fnl$poisson_nll_loss(py_of(s1), py_of(counts)))
  rate <- torch_exp(s1)
  expect_same_tensor(nn_poisson_nll_loss(log_input = FALSE, full = TRUE)(rate, counts),
                     pycall(nn$PoissonNLLLoss(log_input = FALSE, full = TRUE), py_of(rate),
                            py_of(counts)))
  expect_error(nnf_margin_ranking_loss(s1, s2, sign, reduction = "avg"),
               "`reduction` must be one of", class = "value_error")
  torch_manual_seed(4)
  d <- nnf_alpha_dropout(a, 0.3, training = TRUE)
  pt()$manual_seed(4L)
  expect_same_tensor(d, fnl$alpha_dropout(py_of(a), 0.3, training = TRUE))
  expect_same_tensor(nnf_alpha_dropout(a, 0.3), a)  # not training: the identity
  expect_error(nnf_alpha_dropout(a, 1.5), "probability", class = "value_error")
})

test_that("calculate_gain, is_torch_layout/memory_format, local_torch_manual_seed as R torch's", {
  skip_if_no_ampkit()
  init <- pt()$nn$init
  for (f in c("linear", "conv_transpose2d", "sigmoid", "tanh", "relu", "selu")) {
    expect_equal(nn_init_calculate_gain(f), reticulate::py_to_r(init$calculate_gain(f)),
                 label = f)
  }
  expect_equal(nn_init_calculate_gain("leaky_relu", 0.2),
               reticulate::py_to_r(init$calculate_gain("leaky_relu", 0.2)))
  expect_error(nn_init_calculate_gain("swish"), "Unsupported nonlinearity", class = "value_error")
  expect_error(nn_init_calculate_gain(1), "`nonlinearity` must be a string")
  expect_true(is_torch_layout(torch_strided()))
  expect_false(is_torch_layout(torch_contiguous_format()))
  expect_true(is_torch_memory_format(torch_channels_last_format()))
  expect_false(is_torch_memory_format(1L))
  torch_manual_seed(1)
  draw <- function() {
    local_torch_manual_seed(7)
    as_array(torch_randn(3))
  }
  inside <- draw()
  after <- as_array(torch_randn(3))  # the stream continues where seed 1 left it
  torch_manual_seed(7)
  expect_identical(inside, as_array(torch_randn(3)))
  torch_manual_seed(1)
  expect_identical(after, as_array(torch_randn(3)))
})

test_that("dropout3d, bilinear, instance norm and gumbel softmax are PyTorch's", {
  skip_if_no_ampkit()
  fnl <- pt()$nn$functional
  nn <- pt()$nn
  x <- torch_randn(2, 3, 2, 2, 2)
  # batched and unbatched (4-D, taken as one batch of one), a copy and in place
  for (case in list(list(x, FALSE), list(x[1, ], FALSE), list(x$clone(), TRUE),
                    list(x[1, ]$clone(), TRUE))) {
    input <- case[[1]]
    shape <- dim(input)
    py_input <- py_of(input$clone())
    torch_manual_seed(21)
    d <- nnf_dropout3d(input, 0.5, inplace = case[[2]])
    pt()$manual_seed(21L)
    expect_same_tensor(d, fnl$dropout3d(py_input, 0.5, inplace = case[[2]]))
    expect_identical(dim(d), shape)
    expect_identical(dim(input), shape)
    if (case[[2]]) expect_same_tensor(input, d) else expect_same_tensor(x, x)
  }
  drop <- nn_dropout3d(0.2)
  drop$eval()
  expect_same_tensor(drop(x), x)
  expect_warning(nnf_dropout3d(torch_randn(2, 3)), "Received a 2-D input to dropout3d")
  torch_manual_seed(3)
  bil <- nn_bilinear(3, 4, 2)
  pt()$manual_seed(3L)
  ref <- nn$Bilinear(3L, 4L, 2L)
  expect_same_tensor(bil$weight, ref$weight)
  expect_same_tensor(bil$bias, ref$bias)
  u <- torch_randn(5, 3)
  v <- torch_randn(5, 4)
  expect_same_tensor(bil(u, v), pycall(ref, py_of(u), py_of(v)))
  expect_null(nn_bilinear(3, 4, 2, bias = FALSE)$bias)
  img <- torch_randn(2, 3, 4, 4)
  rm_ <- torch_zeros(3)
  rv <- torch_ones(3)
  py_rm <- py_of(rm_$clone())
  py_rv <- py_of(rv$clone())
  expect_same_tensor(nnf_instance_norm(img, rm_, rv, momentum = 0.3),
                     fnl$instance_norm(py_of(img), py_rm, py_rv, momentum = 0.3))
  expect_same_tensor(rm_, py_rm)  # the running statistics updated as PyTorch's
  expect_same_tensor(rv, py_rv)
  expect_error(nnf_instance_norm(torch_randn(2, 3, 1)), "more than 1 spatial element",
               class = "value_error")
  expect_same_tensor(nnf_instance_norm(img), fnl$instance_norm(py_of(img)))
  logits <- torch_randn(4, 5)
  for (hard in c(FALSE, TRUE)) {
    torch_manual_seed(8)
    g <- nnf_gumbel_softmax(logits, tau = 0.5, hard = hard)
    pt()$manual_seed(8L)
    expect_same_tensor(g, fnl$gumbel_softmax(py_of(logits), tau = 0.5, hard = hard))
  }
  torch_manual_seed(8)
  g1 <- nnf_gumbel_softmax(logits, dim = 1)
  pt()$manual_seed(8L)
  expect_same_tensor(g1, fnl$gumbel_softmax(py_of(logits), dim = 0L))
})

test_that("trunc_normal_, orthogonal_ and dirac_ initialize as torch.nn.init", {
  skip_if_no_ampkit()
  init <- pt()$nn$init
  for (shape in list(c(3, 5), c(6, 2), c(4, 2, 3))) {
    w <- torch_empty(shape)
    torch_manual_seed(5)
    nn_init_orthogonal_(w, gain = 2)
    ref <- py_of(torch_empty(shape))
    pt()$manual_seed(5L)
    init$orthogonal_(ref, gain = 2)
    expect_equal(as_array(w), as_array(as_fe(ref)), tolerance = 1e-6)
  }
  # both of PyTorch's samplers: most of the mass inside [a, b] (normal draws), and little of it
  for (bounds in list(c(-1, 4), c(5, 6))) {
    w <- torch_empty(1000)
    torch_manual_seed(6)
    nn_init_trunc_normal_(w, mean = 1, std = 2, a = bounds[[1]], b = bounds[[2]])
    ref <- py_of(torch_empty(1000))
    pt()$manual_seed(6L)
    init$trunc_normal_(ref, mean = 1, std = 2, a = bounds[[1]], b = bounds[[2]])
    expect_same_tensor(w, as_fe(ref))
    expect_true(all(as_array(w) >= bounds[[1]] & as_array(w) <= bounds[[2]]))
  }
  for (shape in list(c(4, 2, 3), c(6, 3, 3, 3))) {
    w <- torch_randn(shape)
    ref <- py_of(torch_randn(shape))
    nn_init_dirac_(w, groups = 2)
    init$dirac_(ref, groups = 2L)
    expect_same_tensor(w, as_fe(ref))
  }
  expect_error(nn_init_dirac_(torch_empty(2, 2)), "3, 4, or 5 dimensions", class = "value_error")
  expect_error(nn_init_dirac_(torch_empty(3, 2, 3), groups = 2), "divisible by groups")
})

test_that("affine grids, grid sampling, the triplet loss with a distance, sparse_ are PyTorch's", {
  skip_if_no_ampkit()
  fnl <- pt()$nn$functional
  nn <- pt()$nn
  torch_manual_seed(30)
  theta <- torch_randn(2, 2, 3)
  for (align in c(FALSE, TRUE)) {
    grid <- nnf_affine_grid(theta, c(2, 3, 5, 4), align_corners = align)
    expect_same_tensor(grid, fnl$affine_grid(py_of(theta), ints(2, 3, 5, 4), align_corners = align))
    x <- torch_randn(2, 3, 6, 6)
    for (mode in c("bilinear", "nearest", "bicubic")) {
      for (padding in c("zeros", "border", "reflection")) {
        expect_same_tensor(
          nnf_grid_sample(x, grid, mode = mode, padding_mode = padding, align_corners = align),
          fnl$grid_sample(py_of(x), py_of(grid), mode = mode, padding_mode = padding,
                          align_corners = align))
      }
    }
  }
  theta3 <- torch_randn(1, 3, 4)
  expect_same_tensor(nnf_affine_grid(theta3, c(1, 1, 2, 3, 4)),
                     fnl$affine_grid(py_of(theta3), ints(1, 1, 2, 3, 4), align_corners = FALSE))
  expect_error(nnf_affine_grid(theta, c(2, 3, 5)), "4 or 5 entries", class = "value_error")
  expect_error(nnf_affine_grid(theta3, c(2, 3, 5, 4)), "2x3 matrices", class = "value_error")
  expect_error(nnf_affine_grid(theta, c(2, 3, 0, 4), align_corners = TRUE), "must be positive")
  expect_warning(nnf_affine_grid(theta, c(2, 3, 1, 4), align_corners = TRUE), "unit-size grids")
  expect_error(nnf_grid_sample(x, grid, mode = "cubic"), "`mode` must be one of")
  a <- torch_randn(6, 4)
  p <- torch_randn(6, 4)
  n <- torch_randn(6, 4)
  expect_same_tensor(nnf_triplet_margin_with_distance_loss(a, p, n, swap = TRUE),
                     fnl$triplet_margin_with_distance_loss(py_of(a), py_of(p), py_of(n),
                                                           swap = TRUE))
  cosine <- function(x, y) 1 - nnf_cosine_similarity(x, y)
  py_cosine <- function(x, y) fnl$cosine_similarity(x, y)$neg()$add(1) # 1 - c, to the bit
  expect_same_tensor(
    nn_triplet_margin_with_distance_loss(cosine, margin = 0.5, reduction = "none")(a, p, n),
    pycall(nn$TripletMarginWithDistanceLoss(distance_function = py_cosine, margin = 0.5,
                                            reduction = "none"), py_of(a), py_of(p), py_of(n)))
  expect_equal(as_array(nnf_triplet_margin_with_distance_loss(a, p, n, reduction = "sum")),
               as_array(nnf_triplet_margin_loss(a, p, n, reduction = "sum")), tolerance = 1e-6)
  expect_error(nnf_triplet_margin_with_distance_loss(a, p, n, margin = 0), "greater than 0")
  expect_error(nn_triplet_margin_with_distance_loss(margin = -1), "greater than 0")
  expect_error(nnf_triplet_margin_with_distance_loss(a, p, n[1, ]), "same number of dimensions")
  expect_error(nnf_triplet_margin_with_distance_loss(a, p, n, distance_function = "l2"),
               "`distance_function` must be a function or NULL")
  w <- torch_empty(10, 4)
  torch_manual_seed(2)
  nn_init_sparse_(w, 0.3, std = 0.5)
  ref <- py_of(torch_empty(10, 4))
  pt()$manual_seed(2L)
  pt()$nn$init$sparse_(ref, 0.3, std = 0.5)
  expect_same_tensor(w, as_fe(ref))
  expect_identical(colSums(as_array(w) == 0), rep(3, 4))
  nn_init_sparse_(w, 1.5)  # more than all rows: every row, as PyTorch's slice
  expect_true(all(as_array(w) == 0))
  untouched <- torch_ones(3, 4)
  expect_error(nn_init_orthogonal_(untouched, gain = "a"), "`gain` must be a number")
  expect_true(all(as_array(untouched) == 1))
  expect_error(nn_init_dirac_(torch_empty(4, 2, 3), groups = 0), "`groups` must be at least 1")
  expect_true(autograd_set_grad_mode(FALSE)) # the mode it replaced
  on.exit(autograd_set_grad_mode(TRUE))
  expect_false((torch_ones(2, requires_grad = TRUE) * 2)$requires_grad)
  autograd_set_grad_mode(TRUE)
  expect_true((torch_ones(2, requires_grad = TRUE) * 2)$requires_grad)
})
