# Multi-head attention, the transformer encoder and sparsemax, with PyTorch as the oracle: the same
# seed gives PyTorch's weights (torch.nn.MultiheadAttention, TransformerEncoderLayer,
# TransformerEncoder), and the same weights and inputs give PyTorch's outputs and gradients
# (dropout 0). R tensors reach PyTorch as the same tensors (helper-frontend.R: py_of()).

# nolint start: object_usage_linter. (the oracle's helpers are helper-frontend.R's)
py_item <- function(x, i) reticulate::py_get_item(x, if (is.numeric(i)) as.integer(i) else i)
py_none <- function(x) reticulate::py_is_null_xptr(x) || identical(reticulate::py_str(x), "None")

# The largest absolute difference between two tensors (R's or Python's) of the same shape.
max_diff <- function(a, b) {
  a <- pt()$as_tensor(to_py(a))$detach()$double()
  b <- pt()$as_tensor(to_py(b))$detach()$double()
  shape_a <- reticulate::py_str(a$shape)
  shape_b <- reticulate::py_str(b$shape)
  if (!identical(shape_a, shape_b)) stop("shapes differ: ", shape_a, " and ", shape_b)
  reticulate::py_to_r(pt()$max(pt()$abs(pt()$sub(a, b)))$item())
}

expect_close <- function(a, b, tol = 1e-6) testthat::expect_lt(max_diff(a, b), tol)

# Every entry of the R module's state dict equals the PyTorch module's under the same name, and
# both have the same names.
expect_same_state <- function(r_module, py_module, tol = 0) {
  sd <- r_module$state_dict()
  py_sd <- py_module$state_dict()
  py_names <- reticulate::py_to_r(reticulate::import_builtins(convert = FALSE)$list(py_sd$keys()))
  testthat::expect_setequal(names(sd), unlist(py_names))
  for (name in names(sd)) {
    testthat::expect_lte(max_diff(sd[[name]], py_item(py_sd, name)), tol)
  }
}

py_mha <- function(...) pt()$nn$MultiheadAttention(...)

test_that("nn_multihead_attention: torch_manual_seed gives torch.nn.MultiheadAttention's weights", {
  skip_if_no_ampkit()
  cases <- list(
    list(e = 8, h = 2),
    list(e = 8, h = 4, bias = FALSE),
    list(e = 6, h = 3, add_bias_kv = TRUE),
    list(e = 8, h = 2, kdim = 5, vdim = 3)
  )
  for (args in cases) {
    torch_manual_seed(3)
    m <- do.call(nn_multihead_attention, c(list(args$e, args$h), args[-(1:2)]))
    py_args <- c(list(as.integer(args$e), as.integer(args$h)), lapply(args[-(1:2)], function(x) {
      if (is.numeric(x)) as.integer(x) else x
    }))
    pt()$manual_seed(3L)
    ref <- do.call(py_mha, py_args)
    expect_same_state(m, ref)
  }
  m <- nn_multihead_attention(8, 2, kdim = 5)
  expect_null(m$in_proj_weight)
  expect_identical(sort(names(m$parameters)),
                   sort(c("out_proj.weight", "out_proj.bias", "q_proj_weight", "k_proj_weight",
                          "v_proj_weight", "in_proj_bias")))
  # The two projections are initialized the PyTorch way: in_proj Xavier, biases zero.
  m <- nn_multihead_attention(16, 4)
  expect_equal(as.numeric(m$in_proj_bias$abs()$sum()$item()), 0)
  expect_equal(as.numeric(m$out_proj$bias$abs()$sum()$item()), 0)
})

test_that("nn_multihead_attention's forward is PyTorch's: self, cross and separate attention", {
  skip_if_no_ampkit()
  torch_manual_seed(11)
  m <- nn_multihead_attention(8, 2)
  ref <- load_into_torch(py_mha(8L, 2L), m)
  x <- torch_randn(5, 3, 8)
  mem <- torch_randn(7, 3, 8)
  v <- torch_randn(7, 3, 8)
  for (inputs in list(list(x, x, x), list(x, mem, mem), list(x, mem, v))) {
    for (need in c(TRUE, FALSE)) {
      for (avg in c(TRUE, FALSE)) {
        out <- m(inputs[[1]], inputs[[2]], inputs[[3]], need_weights = need, avg_weights = avg)
        py_out <- pycall(ref, to_py(inputs[[1]]), to_py(inputs[[2]]), to_py(inputs[[3]]),
                         need_weights = need, average_attn_weights = avg)
        expect_close(out[[1]], py_item(py_out, 0))
        if (need) {
          expect_close(out[[2]], py_item(py_out, 1))
        } else {
          expect_length(out, 2)
          expect_null(out[[2]])
        }
      }
    }
  }
  out <- m(x, mem, mem)
  expect_equal(dim(out[[1]]), c(5, 3, 8))
  expect_equal(dim(out[[2]]), c(3, 5, 7))
  expect_equal(dim(m(x, mem, mem, avg_weights = FALSE)[[2]]), c(3, 2, 5, 7))
  # The weights are a distribution over the source positions.
  expect_close(out[[2]]$sum(dim = 3), torch_ones(3, 5))
})

test_that("attention masks: logical and float attn_mask, key_padding_mask, as PyTorch", {
  skip_if_no_ampkit()
  torch_manual_seed(5)
  m <- nn_multihead_attention(6, 3)
  ref <- load_into_torch(py_mha(6L, 3L), m)
  x <- torch_randn(4, 2, 6)
  causal <- torch_ones(4, 4, dtype = torch_bool())$triu(diagonal = 1)
  float_3d <- torch_randn(6, 4, 4)
  padding <- torch_tensor(rbind(c(FALSE, FALSE, FALSE, TRUE), c(FALSE, TRUE, FALSE, FALSE)))
  float_padding <- torch_zeros(2, 4)$masked_fill(padding, -1e9)
  cases <- list(
    list(attn_mask = causal), list(attn_mask = float_3d), list(key_padding_mask = padding),
    list(attn_mask = causal, key_padding_mask = padding),
    list(attn_mask = causal$to(dtype = torch_float())$masked_fill(causal, -Inf),
         key_padding_mask = float_padding)
  )
  for (masks in cases) {
    for (need in c(TRUE, FALSE)) {
      out <- do.call(m, c(list(x, x, x, need_weights = need), masks))
      py_out <- do.call(pycall, c(list(ref, to_py(x), to_py(x), to_py(x), need_weights = need),
                                  lapply(masks, to_py)))
      expect_close(out[[1]], py_item(py_out, 0))
      if (need) expect_close(out[[2]], py_item(py_out, 1))
    }
  }
  # A causal mask: the first query attends to the first key only, and padded keys get no weight.
  w <- m(x, x, x, attn_mask = causal, key_padding_mask = padding)[[2]]
  expect_equal(as.numeric(w[1, 1, ]$cpu()), c(1, 0, 0, 0))
  expect_equal(as.numeric(w[1, , 4]$sum()$item()), 0)
  expect_equal(as.numeric(w[2, , 2]$sum()$item()), 0)
})

test_that("add_bias_kv, add_zero_attn, kdim/vdim and bias = FALSE are PyTorch's", {
  skip_if_no_ampkit()
  x <- torch_randn(3, 2, 8)
  k <- torch_randn(5, 2, 4)
  v <- torch_randn(5, 2, 6)
  padding <- torch_tensor(rbind(c(FALSE, FALSE, TRUE), c(FALSE, FALSE, FALSE)))
  causal <- torch_ones(3, 3, dtype = torch_bool())$triu(diagonal = 1)
  torch_manual_seed(2)
  m <- nn_multihead_attention(8, 2, add_bias_kv = TRUE, add_zero_attn = TRUE, bias = FALSE)
  pt()$manual_seed(2L)
  ref <- py_mha(8L, 2L, add_bias_kv = TRUE, add_zero_attn = TRUE, bias = FALSE)
  expect_same_state(m, ref)
  for (need in c(TRUE, FALSE)) {
    out <- m(x, x, x, key_padding_mask = padding, attn_mask = causal, need_weights = need)
    py_out <- pycall(ref, to_py(x), to_py(x), to_py(x), key_padding_mask = to_py(padding),
                     attn_mask = to_py(causal), need_weights = need)
    expect_close(out[[1]], py_item(py_out, 0))
    if (need) {
      # The key grows by the bias and the zero: S + 2 positions.
      expect_equal(dim(out[[2]]), c(2, 3, 5))
      expect_close(out[[2]], py_item(py_out, 1))
    }
  }
  torch_manual_seed(4)
  m <- nn_multihead_attention(8, 4, kdim = 4, vdim = 6)
  ref <- load_into_torch(py_mha(8L, 4L, kdim = 4L, vdim = 6L), m)
  for (avg in c(TRUE, FALSE)) {
    out <- m(x, k, v, avg_weights = avg)
    py_out <- pycall(ref, to_py(x), to_py(k), to_py(v), average_attn_weights = avg)
    expect_close(out[[1]], py_item(py_out, 0))
    expect_close(out[[2]], py_item(py_out, 1))
  }
})

test_that("batch_first and unbatched inputs are PyTorch's; batch_first transposes only", {
  skip_if_no_ampkit()
  torch_manual_seed(9)
  m <- nn_multihead_attention(8, 2, batch_first = TRUE)
  ref <- load_into_torch(py_mha(8L, 2L, batch_first = TRUE), m)
  x <- torch_randn(3, 5, 8) # (N, L, E)
  mem <- torch_randn(3, 6, 8)
  for (inputs in list(list(x, x, x), list(x, mem, mem))) {
    out <- m(inputs[[1]], inputs[[2]], inputs[[3]])
    py_out <- pycall(ref, to_py(inputs[[1]]), to_py(inputs[[2]]), to_py(inputs[[3]]))
    expect_close(out[[1]], py_item(py_out, 0))
    expect_close(out[[2]], py_item(py_out, 1))
  }
  seq_first <- nn_multihead_attention(8, 2)
  seq_first$load_state_dict(m$state_dict())
  out_sf <- seq_first(x$transpose(1, 2), mem$transpose(1, 2), mem$transpose(1, 2))
  expect_close(m(x, mem, mem)[[1]], out_sf[[1]]$transpose(1, 2))
  # One sequence without a batch dimension: (L, E).
  s <- torch_randn(4, 8)
  out <- m(s, s, s)
  py_out <- pycall(ref, to_py(s), to_py(s), to_py(s))
  expect_equal(dim(out[[1]]), c(4, 8))
  expect_equal(dim(out[[2]]), c(4, 4))
  expect_close(out[[1]], py_item(py_out, 0))
})

test_that("gradients through nn_multihead_attention are PyTorch's", {
  skip_if_no_ampkit()
  torch_manual_seed(21)
  m <- nn_multihead_attention(6, 2, add_bias_kv = TRUE)
  ref <- load_into_torch(py_mha(6L, 2L, add_bias_kv = TRUE), m)
  x <- torch_randn(4, 3, 6)
  mem <- torch_randn(5, 3, 6)
  for (need in c(TRUE, FALSE)) {
    m$zero_grad()
    ref$zero_grad()
    out <- m(x, mem, mem, need_weights = need)[[1]]
    (out^2)$sum()$backward()
    py_out <- py_item(pycall(ref, to_py(x), to_py(mem), to_py(mem), need_weights = need), 0)
    pt()$sum(pt()$pow(py_out, 2L))$backward()
    named <- reticulate::import_builtins(convert = FALSE)$dict(ref$named_parameters())
    for (name in names(m$parameters)) {
      expect_close(m$parameters[[name]]$grad, py_item(named, name)$grad, tol = 1e-5)
    }
  }
})

test_that("nnf_multi_head_attention_forward is F.multi_head_attention_forward", {
  skip_if_no_ampkit()
  torch_manual_seed(1)
  e <- 6
  q <- torch_randn(4, 2, e)
  kv <- torch_randn(3, 2, e)
  w_in <- torch_randn(3 * e, e)
  b_in <- torch_randn(3 * e)
  w_out <- torch_randn(e, e)
  b_out <- torch_randn(e)
  bias_k <- torch_randn(1, 1, e)
  bias_v <- torch_randn(1, 1, e)
  static <- torch_randn(2 * 3, 5, 2)
  out <- nnf_multi_head_attention_forward(q, kv, kv, e, 3, w_in, b_in, bias_k, bias_v, TRUE, 0,
                                          w_out, b_out, training = FALSE)
  py_out <- pt()$nn$functional$multi_head_attention_forward(
    to_py(q), to_py(kv), to_py(kv), as.integer(e), 3L, to_py(w_in), to_py(b_in), to_py(bias_k),
    to_py(bias_v), TRUE, 0, to_py(w_out), to_py(b_out), training = FALSE
  )
  expect_close(out[[1]], py_item(py_out, 0), tol = 1e-5)
  expect_close(out[[2]], py_item(py_out, 1))
  # Separate projection weights and static keys and values.
  wq <- torch_randn(e, e)
  wk <- torch_randn(e, 4)
  wv <- torch_randn(e, 5)
  k <- torch_randn(5, 2, 4)
  v <- torch_randn(5, 2, 5)
  out <- nnf_multi_head_attention_forward(q, k, v, e, 3, NULL, b_in, NULL, NULL, FALSE, 0, w_out,
                                          b_out, use_separate_proj_weight = TRUE,
                                          q_proj_weight = wq, k_proj_weight = wk,
                                          v_proj_weight = wv, static_k = static,
                                          static_v = static)
  py_out <- pt()$nn$functional$multi_head_attention_forward(
    to_py(q), to_py(k), to_py(v), as.integer(e), 3L, NULL, to_py(b_in), NULL, NULL, FALSE, 0,
    to_py(w_out), to_py(b_out), use_separate_proj_weight = TRUE, q_proj_weight = to_py(wq),
    k_proj_weight = to_py(wk), v_proj_weight = to_py(wv), static_k = to_py(static),
    static_v = to_py(static)
  )
  expect_close(out[[1]], py_item(py_out, 0), tol = 1e-5)
  expect_close(out[[2]], py_item(py_out, 1))
  # batch_first (R torch's argument of the function) transposes input and output.
  out_bf <- nnf_multi_head_attention_forward(q$transpose(1, 2), kv$transpose(1, 2),
                                             kv$transpose(1, 2), e, 3, w_in, b_in, NULL, NULL,
                                             FALSE, 0, w_out, b_out, batch_first = TRUE)
  out_sf <- nnf_multi_head_attention_forward(q, kv, kv, e, 3, w_in, b_in, NULL, NULL, FALSE, 0,
                                             w_out, b_out)
  expect_close(out_bf[[1]]$transpose(1, 2), out_sf[[1]], tol = 1e-5)
  expect_close(out_bf[[2]], out_sf[[2]])
})

test_that("nn_multihead_attention's bad arguments are value errors naming the argument", {
  skip_if_no_ampkit()
  expect_error(nn_multihead_attention(512, 10), "divisible", class = "value_error")
  expect_error(nn_multihead_attention(8.5, 2), "`embed_dim` must be a whole number",
               class = "value_error")
  expect_error(nn_multihead_attention(8, 2, dropout = 2), "`dropout` must be a probability",
               class = "value_error")
  expect_error(nn_multihead_attention(8, 2, bias = NA), "`bias`", class = "value_error")
  m <- nn_multihead_attention(8, 2)
  x <- torch_randn(3, 2, 8)
  expect_error(m(x, x, x, attn_mask = torch_ones(3, 4, dtype = torch_bool())),
               "2-d `attn_mask` must have shape \\(L, S\\) = \\(3, 3\\)", class = "value_error")
  expect_error(m(x, x, x, attn_mask = torch_zeros(3, 3, 3)), "3-d `attn_mask`",
               class = "value_error")
  expect_error(m(x, x, x, key_padding_mask = torch_zeros(3, 3, dtype = torch_bool())),
               "`key_padding_mask` must have shape \\(N, S\\) = \\(2, 3\\)",
               class = "value_error")
  expect_error(m(torch_randn(3, 2, 6), x, x), "`embed_dim_to_check` \\(8\\), got 6",
               class = "value_error")
  expect_error(m(x, x, torch_randn(4, 2, 8)), "must have the same shape", class = "value_error")
  expect_error(m(x, x, x, attn_mask = "a"), "`attn_mask` must be a tensor or NULL",
               class = "value_error")
})

py_layer <- function(d_model, nhead, ...) {
  pt()$nn$TransformerEncoderLayer(as.integer(d_model), as.integer(nhead), ...)
}

test_that("nn_transformer_encoder_layer: seeded weights, forward: TransformerEncoderLayer's", {
  skip_if_no_ampkit()
  x <- torch_randn(5, 3, 8)
  padding <- torch_zeros(3, 5, dtype = torch_bool())
  padding[2, 5] <- TRUE
  causal <- torch_ones(5, 5, dtype = torch_bool())$triu(diagonal = 1)
  for (norm_first in c(FALSE, TRUE)) {
    for (activation in c("relu", "gelu")) {
      torch_manual_seed(123)
      layer <- nn_transformer_encoder_layer(8, 2, dim_feedforward = 16, dropout = 0,
                                            activation = activation, norm_first = norm_first)
      pt()$manual_seed(123L)
      ref <- py_layer(8, 2, dim_feedforward = 16L, dropout = 0, activation = activation,
                      norm_first = norm_first)
      expect_same_state(layer, ref)
      expect_close(layer(x), pycall(ref, to_py(x)), tol = 1e-5)
      expect_close(layer(x, src_mask = causal, src_key_padding_mask = padding),
                   pycall(ref, to_py(x), src_mask = to_py(causal),
                          src_key_padding_mask = to_py(padding)), tol = 1e-5)
      # is_causal builds the causal mask: PyTorch's result with that mask.
      expect_close(layer(x, is_causal = TRUE),
                   pycall(ref, to_py(x), src_mask = to_py(causal), is_causal = TRUE), tol = 1e-5)
    }
  }
  # batch_first, and an activation given as a function.
  torch_manual_seed(7)
  layer <- nn_transformer_encoder_layer(8, 4, dim_feedforward = 12, dropout = 0,
                                        activation = function(x) torch_tanh(x),
                                        batch_first = TRUE)
  ref <- load_into_torch(py_layer(8, 4, dim_feedforward = 12L, dropout = 0,
                                  activation = pt()$tanh, batch_first = TRUE), layer)
  xb <- torch_randn(2, 6, 8)
  expect_close(layer(xb), pycall(ref, to_py(xb)), tol = 1e-5)
  expect_equal(dim(layer(xb, is_causal = TRUE)), c(2, 6, 8))
  # The submodules under PyTorch's names.
  expect_true(all(c("self_attn", "linear1", "linear2", "norm1", "norm2", "dropout", "dropout1",
                    "dropout2") %in% names(layer$children)))
})

test_that("nn_transformer_encoder_layer: bias = FALSE and dropout in training", {
  skip_if_no_ampkit()
  torch_manual_seed(3)
  layer <- nn_transformer_encoder_layer(6, 2, dim_feedforward = 10, dropout = 0, bias = FALSE)
  # R torch's layer norms have no affine parameters then (PyTorch's keep their weight, ones).
  expect_null(layer$norm1$weight)
  expect_null(layer$linear1$bias)
  ref <- load_into_torch(py_layer(6, 2, dim_feedforward = 10L, dropout = 0, bias = FALSE), layer,
                         strict = FALSE)
  x <- torch_randn(4, 2, 6)
  expect_close(layer(x), pycall(ref, to_py(x)), tol = 1e-5)
  # With dropout, training differs from evaluation, and evaluation is deterministic.
  layer <- nn_transformer_encoder_layer(6, 2, dim_feedforward = 10, dropout = 0.5)
  a <- layer(x)
  layer$eval()
  b <- layer(x)
  expect_gt(max_diff(a, b), 0)
  expect_equal(max_diff(b, layer(x)), 0)
})

test_that("nn_transformer_encoder: copies of the layer, PyTorch's TransformerEncoder", {
  skip_if_no_ampkit()
  torch_manual_seed(42)
  layer <- nn_transformer_encoder_layer(8, 2, dim_feedforward = 16, dropout = 0)
  model <- nn_transformer_encoder(layer, num_layers = 3, norm = nn_layer_norm(8))
  pt()$manual_seed(42L)
  py_base <- py_layer(8, 2, dim_feedforward = 16L, dropout = 0)
  ref <- pt()$nn$TransformerEncoder(py_base, 3L, norm = pt()$nn$LayerNorm(8L),
                                    enable_nested_tensor = FALSE)
  expect_same_state(model, ref)
  expect_length(model$layers, 3)
  x <- torch_randn(4, 2, 8)
  padding <- torch_zeros(2, 4, dtype = torch_bool())
  padding[1, 4] <- TRUE
  causal <- torch_ones(4, 4, dtype = torch_bool())$triu(diagonal = 1)
  expect_close(model(x), pycall(ref, to_py(x)), tol = 1e-5)
  expect_close(model(x, mask = causal, src_key_padding_mask = padding),
               pycall(ref, to_py(x), mask = to_py(causal), src_key_padding_mask = to_py(padding)),
               tol = 1e-5)
  expect_close(model(x, is_causal = TRUE), model(x, mask = causal))
  # The layers are independent copies: changing one changes neither the others nor the original.
  with_no_grad(model$layers[[1]]$linear1$weight$add_(1))
  expect_gt(max_diff(model$layers[[1]]$linear1$weight, model$layers[[2]]$linear1$weight), 0.5)
  expect_equal(max_diff(model$layers[[2]]$linear1$weight, layer$linear1$weight), 0)
  # Gradients reach every layer.
  model$zero_grad()
  model(x)$sum()$backward()
  expect_false(is_undefined_tensor(model$layers[[3]]$self_attn$in_proj_weight$grad))
  expect_false(is_undefined_tensor(model$layers[[1]]$linear2$weight$grad))
})

test_that("in training, with dropout, the same seed gives PyTorch's numbers (the same draws)", {
  skip_if_no_ampkit()
  # R torch's reference values (its tests skip them on Linux) are PyTorch's with seed 123.
  torch_manual_seed(123)
  layer <- nn_transformer_encoder_layer(d_model = 8, nhead = 2, dim_feedforward = 16)
  out <- layer(torch_randn(5, 3, 8))
  pt()$manual_seed(123L)
  ref <- py_layer(8, 2, dim_feedforward = 16L)
  expect_close(out, pycall(ref, pt()$randn(5L, 3L, 8L)), tol = 1e-5)
  expect_equal(as_array(out[1, , ])[1, 1:4], c(2.0008, -0.7164, 1.0093, 0.3160), tolerance = 1e-4)
  torch_manual_seed(123)
  model <- nn_transformer_encoder(
    nn_transformer_encoder_layer(d_model = 8, nhead = 2, dim_feedforward = 16), num_layers = 3)
  out <- model(torch_randn(4, 2, 8))
  pt()$manual_seed(123L)
  ref <- pt()$nn$TransformerEncoder(py_layer(8, 2, dim_feedforward = 16L), 3L,
                                    enable_nested_tensor = FALSE)
  expect_close(out, pycall(ref, pt()$randn(4L, 2L, 8L)), tol = 1e-5)
})

test_that("transformer bad arguments are value errors naming the argument", {
  skip_if_no_ampkit()
  expect_error(nn_transformer_encoder_layer(8, 3), "`nhead` must be a positive divisor",
               class = "value_error")
  expect_error(nn_transformer_encoder_layer(8, 2, activation = "tanh"), "`activation` must be",
               class = "value_error")
  expect_error(nn_transformer_encoder_layer(8, 2, dropout = -1), "`dropout`",
               class = "value_error")
  layer <- nn_transformer_encoder_layer(4, 1, dim_feedforward = 8)
  x <- torch_randn(3, 1, 4)
  expect_error(layer(x, src_mask = torch_zeros(3, 3), is_causal = TRUE),
               "`src_mask` and `is_causal = TRUE`", class = "value_error")
  expect_error(nn_transformer_encoder("layer", 2), "`encoder_layer` must be an nn_module",
               class = "value_error")
  expect_error(nn_transformer_encoder(layer, 0), "`num_layers` must be at least 1",
               class = "value_error")
  expect_error(nn_transformer_encoder(layer, 2, norm = 1), "`norm` must be an nn_module",
               class = "value_error")
})

# Sparsemax by its definition: the Euclidean projection onto the simplex, tau found by bisection.
sparsemax_ref <- function(z) {
  lo <- min(z) - 1
  hi <- max(z)
  for (i in 1:200) {
    tau <- (lo + hi) / 2
    if (sum(pmax(z - tau, 0)) > 1) lo <- tau else hi <- tau
  }
  pmax(z - (lo + hi) / 2, 0)
}

test_that("nnf_contrib_sparsemax is the projection onto the simplex, along `dim` (1-based)", {
  skip_if_no_ampkit()
  x <- torch_randn(3, 5, 4, dtype = torch_double()) * 2
  a <- as_array(x)
  out <- as_array(nnf_contrib_sparsemax(x, dim = 2))
  for (i in 1:3) {
    for (k in 1:4) expect_equal(out[i, , k], sparsemax_ref(a[i, , k]), tolerance = 1e-10)
  }
  out_last <- as_array(nn_contrib_sparsemax()(x))
  for (i in 1:3) {
    for (j in 1:5) expect_equal(out_last[i, j, ], sparsemax_ref(a[i, j, ]), tolerance = 1e-10)
  }
  expect_equal(as_array(nnf_contrib_sparsemax(x, dim = -2)), out)
  expect_equal(as_array(nnf_contrib_sparsemax(x, dim = 2)$sum(dim = 2)), matrix(1, 3, 4),
               tolerance = 1e-12)
  # Large inputs make it sparse: one-hot.
  expect_equal(as.numeric(nnf_contrib_sparsemax(torch_tensor(c(0.01, 0.01, 5)))), c(0, 0, 1))
  expect_error(nnf_contrib_sparsemax(x, dim = 4), "`dim` must be between 1 and 3",
               class = "value_error")
  expect_error(nnf_contrib_sparsemax(torch_tensor(1:3)), "floating point", class = "value_error")
  expect_error(nnf_contrib_sparsemax(1:3), "`input` must be a tensor", class = "value_error")
})

test_that("sparsemax's gradient is its Jacobian: diag(s) - s s' / |s| on the support s", {
  skip_if_no_ampkit()
  x <- torch_tensor(rbind(c(0.5, 0.4, -1, 0.3), c(2, 0.1, 0.2, -3)), dtype = torch_double(),
                    requires_grad = TRUE)
  g <- torch_tensor(rbind(c(1, -2, 3, 0.5), c(0.3, 1, -1, 2)), dtype = torch_double())
  out <- nnf_contrib_sparsemax(x)
  (out * g)$sum()$backward()
  o <- as_array(out$detach())
  gr <- as_array(g)
  expected <- t(vapply(1:2, function(i) {
    s <- o[i, ] > 0
    ifelse(s, gr[i, ] - mean(gr[i, s]), 0)
  }, numeric(4)))
  expect_equal(as_array(x$grad), expected, tolerance = 1e-12)
})
# nolint end
