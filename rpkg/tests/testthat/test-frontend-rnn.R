# The recurrent layers (nn_rnn, nn_lstm, nn_gru) and packed sequences (nn_utils_rnn_*), with
# PyTorch as the oracle: torch.nn.RNN/LSTM/GRU and torch.nn.utils.rnn on the same weights and
# inputs give the same outputs and gradients, bit for bit (the same libtorch kernels). R's names
# count layers from 1 (weight_ih_l1) and its sorted/unsorted indices from 1, as R torch's do;
# PyTorch's from 0.

# nolint start: object_usage_linter. (the oracle's helpers are helper-frontend.R's)
# A fresh leaf copy of an R tensor on the Python side (its own .grad).
py_leaf <- function(x) to_py(x)$detach()$clone()$requires_grad_(TRUE)
r_leaf <- function(x) x$detach()$clone()$requires_grad_(TRUE)

# PyTorch's twin of an R recurrent module; with the R module's weights (by name: l{k} is
# PyTorch's l{k-1}), or, given a `seed`, with the weights PyTorch draws from it.
py_rnn <- function(r, seed = NULL) {
  nn <- pt()$nn
  args <- list(as.integer(r$input_size), as.integer(r$hidden_size),
               num_layers = as.integer(r$num_layers), bias = r$bias,
               batch_first = r$batch_first, dropout = r$dropout,
               bidirectional = r$bidirectional)
  if (!is.null(seed)) pt()$manual_seed(as.integer(seed))
  m <- switch(r$mode,
    RNN_TANH = do.call(nn$RNN, c(args, nonlinearity = "tanh")),
    RNN_RELU = do.call(nn$RNN, c(args, nonlinearity = "relu")),
    LSTM = do.call(nn$LSTM, args),
    GRU = do.call(nn$GRU, args)
  )
  if (is.null(seed)) {
    params <- r$parameters
    m$to(to_py(params[[1]])$dtype)
    for (name in names(params)) {
      reticulate::py_get_attr(m, py_name(name))$data$copy_(to_py(params[[name]]))
    }
  }
  if (!r$training) m$eval()
  m
}
py_name <- function(r_name) {
  layer <- as.integer(sub(".*_l([0-9]+).*", "\\1", r_name))
  sub("_l[0-9]+", paste0("_l", layer - 1L), r_name)
}

# The hidden state(s) of a result as a flat list (LSTM: h and c).
states <- function(h) if (is.list(h)) h else list(h)
py_states <- function(h) {
  if (inherits(h, "python.builtin.tuple")) {
    list(reticulate::py_get_item(h, 0L), reticulate::py_get_item(h, 1L))
  } else {
    list(h)
  }
}
py_first <- function(x) reticulate::py_get_item(x, 0L)
py_second <- function(x) reticulate::py_get_item(x, 1L)

test_that("weights: PyTorch's draws for the same seed, R torch's names and shapes", {
  skip_if_no_ampkit()
  torch_manual_seed(11)
  r <- nn_lstm(3, 5, num_layers = 2, bidirectional = TRUE)
  expect_identical(class(r), c("nn_lstm", "nn_rnn_base", "nn_module"))
  expect_identical(r$mode, "LSTM")
  p <- py_rnn(r, seed = 11)
  expected <- c()
  for (l in 1:2) for (s in c("", "_reverse")) {
    expected <- c(expected, paste0(c("weight_ih_l", "weight_hh_l", "bias_ih_l", "bias_hh_l"),
                                   l, s))
  }
  expect_identical(names(r$parameters), expected)
  expect_identical(names(r$state_dict()), expected)
  for (name in expected) {
    expect_same_tensor(r$parameters[[name]], reticulate::py_get_attr(p, py_name(name)))
  }
  expect_identical(dim(r$weight_ih_l2), c(20L, 10L))
  expect_identical(dim(r$weight_hh_l1_reverse), c(20L, 5L))

  torch_manual_seed(3)
  g <- nn_gru(4, 6, bias = FALSE)
  pg <- py_rnn(g, seed = 3)
  expect_identical(names(g$parameters), c("weight_ih_l1", "weight_hh_l1"))
  expect_null(g$bias_ih_l1)
  expect_same_tensor(g$weight_hh_l1, pg$weight_hh_l0)
  torch_manual_seed(5)
  rr <- nn_rnn(2, 3, nonlinearity = "relu")
  expect_identical(rr$nonlinearity, "relu")
  expect_same_tensor(rr$weight_ih_l1, py_rnn(rr, seed = 5)$weight_ih_l0)
  expect_identical(nn_rnn(2, 3)$nonlinearity, "tanh")
})

# Runs the R module and its PyTorch twin on the same input and state, compares the outputs, then
# backpropagates the same weighted sum through both and compares every gradient.
# Leaf copies of an initial state (a tensor, or LSTM's list of two) for R and for PyTorch.
r_state <- function(hx) if (is.list(hx)) lapply(hx, r_leaf) else r_leaf(hx)
py_state <- function(hx) {
  if (is.list(hx)) reticulate::tuple(lapply(hx, py_leaf)) else py_leaf(hx)
}

# The same weighted sum of an output and its states, in R and in PyTorch, backpropagated.
backward_both <- function(out_r, out_p, hs_r, hs_p) {
  w <- torch_randn_like(out_r)
  loss_r <- (out_r * w)$sum()
  loss_p <- out_p$mul(to_py(w))$sum()
  for (i in seq_along(hs_r)) {
    v <- torch_randn_like(hs_r[[i]])
    loss_r <- loss_r + (hs_r[[i]] * v)$sum()
    loss_p <- loss_p$add(hs_p[[i]]$mul(to_py(v))$sum())
  }
  loss_r$backward()
  loss_p$backward()
}

# Runs the R module and its PyTorch twin on the same input and state, compares the outputs, then
# backpropagates the same weighted sum through both and compares every gradient.
expect_like_torch <- function(r, input, hx = NULL) {
  p <- py_rnn(r)
  x_r <- r_leaf(input)
  x_p <- py_leaf(input)
  h_r <- if (is.null(hx)) NULL else r_state(hx)
  h_p <- if (is.null(hx)) NULL else py_state(hx)
  out_r <- r(x_r, h_r)
  out_p <- if (is.null(hx)) pycall(p, x_p) else pycall(p, x_p, h_p)
  expect_same_tensor(out_r[[1]], py_first(out_p))
  hs_r <- states(out_r[[2]])
  hs_p <- py_states(py_second(out_p))
  testthat::expect_length(hs_r, length(hs_p))
  for (i in seq_along(hs_r)) expect_same_tensor(hs_r[[i]], hs_p[[i]])

  backward_both(out_r[[1]], py_first(out_p), hs_r, hs_p)
  expect_same_tensor(x_r$grad, x_p$grad)
  if (!is.null(hx)) {
    hl_p <- if (is.list(hx)) py_states(h_p) else list(h_p)
    for (i in seq_along(hl_p)) expect_same_tensor(states(h_r)[[i]]$grad, hl_p[[i]]$grad)
  }
  params <- r$parameters
  for (name in names(params)) {
    expect_same_tensor(params[[name]]$grad, reticulate::py_get_attr(p, py_name(name))$grad)
  }
  invisible(out_r)
}

test_that("nn_rnn (tanh, relu) is torch.nn.RNN: outputs, states and gradients", {
  skip_if_no_ampkit()
  torch_manual_seed(1)
  expect_like_torch(nn_rnn(4, 6), torch_randn(5, 3, 4))
  expect_like_torch(nn_rnn(4, 6, num_layers = 2, nonlinearity = "relu", bidirectional = TRUE),
                    torch_randn(5, 3, 4), torch_randn(4, 3, 6))
  expect_like_torch(nn_rnn(4, 6, bias = FALSE, batch_first = TRUE), torch_randn(3, 5, 4))
})

test_that("nn_lstm is torch.nn.LSTM: outputs, (h_n, c_n) and gradients", {
  skip_if_no_ampkit()
  torch_manual_seed(2)
  out <- expect_like_torch(nn_lstm(4, 6), torch_randn(5, 3, 4))
  expect_length(out[[2]], 2L)
  expect_like_torch(nn_lstm(4, 6, num_layers = 3, bidirectional = TRUE, batch_first = TRUE),
                    torch_randn(3, 5, 4), list(torch_randn(6, 3, 6), torch_randn(6, 3, 6)))
  expect_like_torch(nn_lstm(4, 6, bias = FALSE), torch_randn(2, 1, 4))
})

test_that("nn_gru is torch.nn.GRU: outputs, states and gradients", {
  skip_if_no_ampkit()
  torch_manual_seed(3)
  expect_like_torch(nn_gru(4, 6), torch_randn(5, 3, 4))
  expect_like_torch(nn_gru(4, 6, num_layers = 2, bidirectional = TRUE),
                    torch_randn(5, 3, 4), torch_randn(4, 3, 6))
  expect_like_torch(nn_gru(4, 6, batch_first = TRUE, bias = FALSE), torch_randn(3, 5, 4))
})

test_that("an unbatched 2-D input and state, as PyTorch's", {
  skip_if_no_ampkit()
  torch_manual_seed(4)
  out <- expect_like_torch(nn_gru(4, 6, num_layers = 2), torch_randn(5, 4), torch_randn(2, 6))
  expect_identical(dim(out[[1]]), c(5L, 6L))
  expect_identical(dim(out[[2]]), c(2L, 6L))
  out <- expect_like_torch(nn_lstm(4, 6, batch_first = TRUE), torch_randn(5, 4),
                           list(torch_randn(1, 6), torch_randn(1, 6)))
  expect_identical(dim(out[[2]][[2]]), c(1L, 6L))
})

test_that("dropout between layers in training draws what PyTorch draws from the same seed", {
  skip_if_no_ampkit()
  torch_manual_seed(5)
  r <- nn_lstm(4, 8, num_layers = 3, dropout = 0.4)
  p <- py_rnn(r)
  x <- torch_randn(6, 2, 4)
  torch_manual_seed(99)
  out_r <- r(x)
  pt()$manual_seed(99L)
  out_p <- pycall(p, to_py(x))
  expect_same_tensor(out_r[[1]], py_first(out_p))
  # In eval mode there is no dropout: two calls agree.
  r$eval()
  expect_same_tensor(r(x)[[1]], r(x)[[1]])
  expect_warning(nn_gru(2, 3, dropout = 0.5), "num_layers greater than 1")
})

test_that("packing: nn_utils_rnn_* are torch.nn.utils.rnn's, permutations 1-based", {
  skip_if_no_ampkit()
  rnn_utils <- reticulate::import("torch.nn.utils.rnn", convert = FALSE)
  x <- torch_randn(4, 5, 3)
  lens <- c(2, 4, 1, 4, 3)
  p <- nn_utils_rnn_pack_padded_sequence(x, lens, enforce_sorted = FALSE)
  q <- rnn_utils$pack_padded_sequence(to_py(x), reticulate::r_to_py(as.integer(lens)),
                                      enforce_sorted = FALSE)
  expect_s3_class(p, "PackedSequence")
  expect_same_tensor(p$data, q$data)
  expect_same_tensor(p$batch_sizes, q$batch_sizes)
  expect_same_tensor(p$sorted_indices, q$sorted_indices$add(1L))
  expect_same_tensor(p$unsorted_indices, q$unsorted_indices$add(1L))
  expect_equal(as_array(p$unsorted_indices[p$sorted_indices]), 1:5)

  # Lengths as a tensor, batch first, total_length and a padding value.
  xb <- x$transpose(1, 2)
  p2 <- nn_utils_rnn_pack_padded_sequence(xb, torch_tensor(lens), batch_first = TRUE,
                                          enforce_sorted = FALSE)
  expect_same_tensor(p2$data, q$data)
  un <- nn_utils_rnn_pad_packed_sequence(p2, batch_first = TRUE, padding_value = -1,
                                         total_length = 6)
  un_p <- rnn_utils$pad_packed_sequence(q, batch_first = TRUE, padding_value = -1,
                                        total_length = 6L)
  expect_same_tensor(un[[1]], py_first(un_p))
  expect_same_tensor(un[[2]], py_second(un_p))
  expect_equal(as_array(un[[2]]), lens)

  # Sorted input: no permutation.
  s <- nn_utils_rnn_pack_padded_sequence(x, c(4, 4, 3, 2, 1))
  expect_null(s$sorted_indices)
  expect_null(s$unsorted_indices)
  expect_same_tensor(nn_utils_rnn_pad_packed_sequence(s)[[1]],
                     py_first(rnn_utils$pad_packed_sequence(
                       rnn_utils$pack_padded_sequence(to_py(x), ints(4, 4, 3, 2, 1)))))

  seqs <- list(torch_randn(2, 3), torch_randn(5, 3), torch_randn(1, 3))
  py_seqs <- unname(lapply(seqs, to_py))
  expect_same_tensor(nn_utils_rnn_pad_sequence(seqs),
                     rnn_utils$pad_sequence(py_seqs))
  expect_same_tensor(nn_utils_rnn_pad_sequence(seqs, batch_first = TRUE, padding_value = 7,
                                               padding_side = "left"),
                     rnn_utils$pad_sequence(py_seqs, batch_first = TRUE, padding_value = 7,
                                            padding_side = "left"))
  ps <- nn_utils_rnn_pack_sequence(seqs, enforce_sorted = FALSE)
  ps_p <- rnn_utils$pack_sequence(py_seqs, enforce_sorted = FALSE)
  expect_same_tensor(ps$data, ps_p$data)
  expect_same_tensor(ps$sorted_indices, ps_p$sorted_indices$add(1L))
})

test_that("recurrent layers over packed sequences are PyTorch's, state in the batch's order", {
  skip_if_no_ampkit()
  rnn_utils <- reticulate::import("torch.nn.utils.rnn", convert = FALSE)
  torch_manual_seed(6)
  x <- torch_randn(3, 4, 2) # batch first
  lens <- c(2, 3, 1, 3)
  for (r in list(nn_lstm(2, 5, batch_first = TRUE, bidirectional = TRUE),
                 nn_gru(2, 5, num_layers = 2, batch_first = TRUE),
                 nn_rnn(2, 5, batch_first = TRUE, nonlinearity = "relu"))) {
    p <- py_rnn(r)
    x_r <- r_leaf(x$transpose(1, 2))
    x_p <- py_leaf(x$transpose(1, 2))
    directions <- if (r$bidirectional) 2L else 1L
    h0 <- torch_randn(r$num_layers * directions, 4, 5)
    hx_r <- if (r$mode == "LSTM") list(h0, h0 * 2) else h0
    hx_p <- if (r$mode == "LSTM") reticulate::tuple(to_py(h0), to_py(h0 * 2)) else to_py(h0)
    packed_r <- nn_utils_rnn_pack_padded_sequence(x_r, lens, batch_first = TRUE,
                                                  enforce_sorted = FALSE)
    packed_p <- rnn_utils$pack_padded_sequence(x_p, ints(lens), batch_first = TRUE,
                                               enforce_sorted = FALSE)
    out_r <- r(packed_r, hx_r)
    out_p <- pycall(p, packed_p, hx_p)
    expect_s3_class(out_r[[1]], "PackedSequence")
    expect_same_tensor(out_r[[1]]$data, py_first(out_p)$data)
    expect_same_tensor(out_r[[1]]$sorted_indices, packed_r$sorted_indices)
    hs_r <- states(out_r[[2]])
    hs_p <- py_states(py_second(out_p))
    for (i in seq_along(hs_r)) expect_same_tensor(hs_r[[i]], hs_p[[i]])
    pad_r <- nn_utils_rnn_pad_packed_sequence(out_r[[1]], batch_first = TRUE)
    pad_p <- rnn_utils$pad_packed_sequence(py_first(out_p), batch_first = TRUE)
    expect_same_tensor(pad_r[[1]], py_first(pad_p))
    pad_r[[1]]$sum()$backward()
    py_first(pad_p)$sum()$backward()
    expect_same_tensor(x_r$grad, x_p$grad)
  }
})

test_that("$to() moves and converts the weights the kernels use", {
  skip_if_no_ampkit()
  torch_manual_seed(7)
  r <- nn_gru(3, 4)
  r$to(dtype = torch_float64())
  expect_identical(r$weight_ih_l1$dtype$.type(), "Double")
  out <- r(torch_randn(2, 1, 3, dtype = torch_float64()))
  expect_identical(out[[1]]$dtype$.type(), "Double")
  expect_error(r(torch_randn(2, 1, 3)), "dtype", class = "value_error")
  # A weight replaced by assignment is the one used.
  r$weight_hh_l1 <- nn_parameter(torch_zeros(12, 4, dtype = torch_float64()))
  expect_like_torch(r, torch_randn(2, 1, 3, dtype = torch_float64()))
})

test_that("bad arguments and inputs are value errors in R's words", {
  skip_if_no_ampkit()
  expect_error(nn_rnn(1, 10, nonlinearity = "garbage"), "`nonlinearity` must be one of",
               class = "value_error")
  expect_error(nn_lstm(1, 0), "`hidden_size` must be greater than zero", class = "value_error")
  expect_error(nn_gru(1.5, 2), "`input_size` must be a whole number", class = "value_error")
  expect_error(nn_gru(1, 2, dropout = 1.5), "`dropout` must be a number between 0 and 1",
               class = "value_error")
  expect_error(nn_gru(1, 2, bidirectional = NA), "`bidirectional` must be TRUE or FALSE",
               class = "value_error")
  g <- nn_gru(3, 4, num_layers = 2)
  expect_error(g(torch_randn(5, 2, 2)), "input_size \\(3\\), got 2", class = "value_error")
  expect_error(g(torch_randn(5, 2, 3, 1)), "`input` must be a 2-D", class = "value_error")
  expect_error(g(torch_randn(5, 2, 3), torch_zeros(1, 2, 4)), "`hx` must be of size \\(2, 2, 4\\)",
               class = "value_error")
  expect_error(g(torch_randn(5, 3), torch_zeros(2, 1, 4)), "`hx` must be 2-D too",
               class = "value_error")
  l <- nn_lstm(3, 4)
  expect_error(l(torch_randn(5, 2, 3), torch_zeros(1, 2, 4)), "list of two tensors",
               class = "value_error")
  x <- torch_randn(4, 3, 1)
  expect_error(nn_utils_rnn_pack_padded_sequence(x, c(1, 2, 3)), "sorted in decreasing order",
               class = "value_error")
  expect_error(nn_utils_rnn_pack_padded_sequence(x, c(3, 2)), "one length per sequence",
               class = "value_error")
  expect_error(nn_utils_rnn_pack_padded_sequence(x, c(5, 2, 1)), "between 1 and 4",
               class = "value_error")
  expect_error(nn_utils_rnn_pack_padded_sequence(x, c(3, 2, 0)), "between 1 and 4",
               class = "value_error")
  p <- nn_utils_rnn_pack_padded_sequence(x, c(3, 2, 1))
  expect_error(nn_utils_rnn_pad_packed_sequence(p, total_length = 2), "`total_length` must be",
               class = "value_error")
  expect_error(nn_utils_rnn_pad_packed_sequence(x), "`sequence` must be a PackedSequence",
               class = "value_error")
  expect_error(nn_utils_rnn_pad_sequence(x), "`sequences` must be a non-empty list",
               class = "value_error")
  expect_error(nn_utils_rnn_pad_sequence(list(x), padding_side = "up"), "`padding_side`",
               class = "value_error")
})
# nolint end
