#' @include nn-layers.R
NULL

# R torch's multi-head attention (nn_multihead_attention, nnf_multi_head_attention_forward) and
# its contrib sparsemax, composed from the generated ops. The computation follows PyTorch's
# torch.nn.functional.multi_head_attention_forward step for step (same projections, same mask
# merging, baddbmm when the weights are returned and scaled_dot_product_attention when they are
# not), so that the same weights and inputs give PyTorch's numbers; dims and shapes are R torch's
# (1-based).

# A mask as PyTorch's _canonical_mask makes it: an additive float mask of `dtype` (-Inf where a
# logical mask is TRUE). R torch also documents byte masks (non-zero: masked): any integer mask is
# read as logical.
attention_mask <- function(mask, name, dtype) {
  if (is.null(mask)) {
    return(NULL)
  }
  if (!is_torch_tensor(mask)) {
    abort(sprintf("`%s` must be a tensor or NULL, got %s.", name, describe(mask)),
          class = "value_error")
  }
  if (mask$is_floating_point()) {
    return(mask)
  }
  if (mask$is_complex()) {
    abort(sprintf("`%s` must be a logical or floating point tensor, got a %s one.", name,
                  as.character(mask$dtype)), class = "value_error")
  }
  logical_mask <- if (mask$dtype == torch_bool()) mask else mask != 0
  torch_zeros_like(mask, dtype = dtype)$masked_fill_(logical_mask, -Inf)
}

shape_text <- function(x) paste0("(", paste(x, collapse = ", "), ")")

check_mha_tensor <- function(x, name, null_ok = FALSE) {
  if (null_ok && is.null(x)) {
    return(invisible(NULL))
  }
  if (!is_torch_tensor(x)) {
    rule <- if (null_ok) "a tensor or NULL" else "a tensor"
    abort(sprintf("`%s` must be %s, got %s.", name, rule, describe(x)), class = "value_error")
  }
}

check_dropout_p <- function(p, name) {
  if (!is.numeric(p) || length(p) != 1L || is.na(p) || p < 0 || p > 1) {
    abort(sprintf("`%s` must be a probability (a number between 0 and 1), got %s.", name,
                  describe(p)), class = "value_error")
  }
  as.double(p)
}

# The query, key and value projections (PyTorch's _in_projection_packed and _in_projection). A
# key that is the value (and a query that is the key) is projected in one matrix product, as
# PyTorch does for `key is value`; the results are the same numbers either way.
mha_in_projection <- function(query, key, value, e, same_qk, same_kv, in_proj_weight,
                              in_proj_bias, separate) {
  if (!is.null(separate)) {
    b <- if (is.null(in_proj_bias)) list(NULL, NULL, NULL) else in_proj_bias$chunk(3L)
    return(list(nnf_linear(query, separate[[1L]], b[[1L]]),
                nnf_linear(key, separate[[2L]], b[[2L]]),
                nnf_linear(value, separate[[3L]], b[[3L]])))
  }
  if (same_kv && same_qk) {
    return(nnf_linear(query, in_proj_weight, in_proj_bias)$chunk(3L, dim = -1L))
  }
  if (same_kv) {
    w_q <- in_proj_weight[1:e, ]
    w_kv <- in_proj_weight[(e + 1L):(3L * e), ]
    b_q <- if (!is.null(in_proj_bias)) in_proj_bias[1:e]
    b_kv <- if (!is.null(in_proj_bias)) in_proj_bias[(e + 1L):(3L * e)]
    kv <- nnf_linear(key, w_kv, b_kv)$chunk(2L, dim = -1L)
    return(list(nnf_linear(query, w_q, b_q), kv[[1L]], kv[[2L]]))
  }
  w <- in_proj_weight$chunk(3L)
  b <- if (is.null(in_proj_bias)) list(NULL, NULL, NULL) else in_proj_bias$chunk(3L)
  list(nnf_linear(query, w[[1L]], b[[1L]]), nnf_linear(key, w[[2L]], b[[2L]]),
       nnf_linear(value, w[[3L]], b[[3L]]))
}

check_static_kv <- function(x, name, rows, head_dim) {
  check_mha_tensor(x, name)
  if (x$dim() != 3L || x$size(1) != rows || x$size(3) != head_dim) {
    abort(sprintf("`%s` must have shape (N * num_heads, S, head_dim) = (%d, S, %d), got %s.",
                  name, rows, head_dim, shape_text(dim(x))), class = "value_error")
  }
}

# The attention mask as a 3-d (batch * heads or 1, L, S) additive mask, its shape checked.
mha_attn_mask_3d <- function(attn_mask, tgt_len, src_len, rows) {
  if (is.null(attn_mask)) {
    return(NULL)
  }
  if (attn_mask$dim() == 2L) {
    if (!identical(as.numeric(dim(attn_mask)), as.numeric(c(tgt_len, src_len)))) {
      abort(sprintf("The 2-d `attn_mask` must have shape (L, S) = %s, got %s.",
                    shape_text(c(tgt_len, src_len)), shape_text(dim(attn_mask))),
            class = "value_error")
    }
    return(attn_mask$unsqueeze(1L))
  }
  if (attn_mask$dim() == 3L) {
    if (!identical(as.numeric(dim(attn_mask)), as.numeric(c(rows, tgt_len, src_len)))) {
      abort(sprintf(paste0("The 3-d `attn_mask` must have shape (N * num_heads, L, S) = %s, ",
                           "got %s."), shape_text(c(rows, tgt_len, src_len)),
                    shape_text(dim(attn_mask))), class = "value_error")
    }
    return(attn_mask)
  }
  abort(sprintf("`attn_mask` must have 2 or 3 dimensions, got %d.", attn_mask$dim()),
        class = "value_error")
}

#' Multi-head attention forward
#'
#' The computation of [nn_multihead_attention()] on given weights (R torch's
#' `nnf_multi_head_attention_forward()`, PyTorch's
#' `torch.nn.functional.multi_head_attention_forward()`): the query, key and
#' value are projected, split into `num_heads` heads, attended (scaled dot
#' products, masked, softmax, dropout) and projected back.
#'
#' @param query \eqn{(L, N, E)}: L the target sequence length, N the batch
#'   size, E the embedding dimension (\eqn{(N, L, E)} with `batch_first =
#'   TRUE`; \eqn{(L, E)} for one unbatched sequence).
#' @param key,value \eqn{(S, N, E_k)} and \eqn{(S, N, E_v)}: S the source
#'   sequence length.
#' @param embed_dim_to_check The embedding dimension E (`query`'s last
#'   dimension must be it).
#' @param num_heads The number of heads (it must divide E).
#' @param in_proj_weight,in_proj_bias The packed input projection: a \eqn{(3E,
#'   E)} weight (NULL with `use_separate_proj_weight = TRUE`) and a \eqn{(3E)}
#'   bias (or NULL).
#' @param bias_k,bias_v \eqn{(1, 1, E)} biases appended to the key and value
#'   sequences (or NULL).
#' @param add_zero_attn Whether to append a zero to the key and value
#'   sequences (after the projection).
#' @param dropout_p The dropout probability of the attention weights.
#' @param out_proj_weight,out_proj_bias The output projection (bias or NULL).
#' @param training Whether dropout is applied.
#' @param key_padding_mask \eqn{(N, S)}: positions of the key to ignore
#'   (logical: `TRUE` is ignored; float: added to the attention scores).
#' @param need_weights Whether to return the attention weights.
#' @param attn_mask \eqn{(L, S)} or \eqn{(N \cdot num\_heads, L, S)}: logical
#'   (`TRUE`: may not attend) or float (added to the attention scores).
#' @param avg_weights Whether the returned weights are averaged over the heads
#'   (\eqn{(N, L, S)}) or not (\eqn{(N, num\_heads, L, S)}).
#' @param use_separate_proj_weight Whether the query, key and value have their
#'   own projection weights (`q_proj_weight`, `k_proj_weight`,
#'   `v_proj_weight`) instead of `in_proj_weight`.
#' @param q_proj_weight,k_proj_weight,v_proj_weight The separate projection
#'   weights: \eqn{(E, E)}, \eqn{(E, E_k)}, \eqn{(E, E_v)}.
#' @param static_k,static_v Keys and values used as they are, instead of the
#'   projected ones: \eqn{(N \cdot num\_heads, S, E / num\_heads)}.
#' @param batch_first Whether the batch is the first dimension of `query`,
#'   `key`, `value` and of the output.
#' @return A list: the attention output (the shape of `query`) and the
#'   attention weights (NULL when `need_weights = FALSE`).
#' @export
#' @examples
#' torch_manual_seed(1)
#' e <- 4
#' x <- torch_randn(3, 2, e)
#' out <- nnf_multi_head_attention_forward(
#'   x, x, x, embed_dim_to_check = e, num_heads = 2,
#'   in_proj_weight = torch_randn(3 * e, e), in_proj_bias = torch_zeros(3 * e),
#'   bias_k = NULL, bias_v = NULL, add_zero_attn = FALSE, dropout_p = 0,
#'   out_proj_weight = torch_randn(e, e), out_proj_bias = torch_zeros(e)
#' )
#' dim(out[[1]])
#' dim(out[[2]])
nnf_multi_head_attention_forward <- function(query, key, value, embed_dim_to_check, num_heads,
                                             in_proj_weight, in_proj_bias, bias_k, bias_v,
                                             add_zero_attn, dropout_p, out_proj_weight,
                                             out_proj_bias, training = TRUE,
                                             key_padding_mask = NULL, need_weights = TRUE,
                                             attn_mask = NULL, avg_weights = TRUE,
                                             use_separate_proj_weight = FALSE,
                                             q_proj_weight = NULL, k_proj_weight = NULL,
                                             v_proj_weight = NULL, static_k = NULL,
                                             static_v = NULL, batch_first = FALSE) {
  # PyTorch projects the key and value (and query) together when they are the same tensor
  # object; R's identical() on two tensors is that test (the same external pointer).
  same_kv <- identical(key, value)
  same_qk <- identical(query, key)
  for (name in c("query", "key", "value")) check_mha_tensor(get(name), name)
  check_mha_tensor(bias_k, "bias_k", null_ok = TRUE)
  check_mha_tensor(bias_v, "bias_v", null_ok = TRUE)
  embed_dim_to_check <- whole_number(embed_dim_to_check, "embed_dim_to_check")
  num_heads <- whole_number(num_heads, "num_heads")
  add_zero_attn <- arg_flag(add_zero_attn, "add_zero_attn")
  dropout_p <- check_dropout_p(dropout_p, "dropout_p")
  training <- arg_flag(training, "training")
  need_weights <- arg_flag(need_weights, "need_weights")
  avg_weights <- arg_flag(avg_weights, "avg_weights")
  use_separate_proj_weight <- arg_flag(use_separate_proj_weight, "use_separate_proj_weight")
  batch_first <- arg_flag(batch_first, "batch_first")

  io <- mha_batch_inputs(query, key, value, key_padding_mask, same_qk, same_kv, batch_first)
  query <- io$query
  key <- io$key
  value <- io$value
  tgt_len <- query$size(1)
  bsz <- query$size(2)
  embed_dim <- query$size(3)
  head_dim <- mha_check_sizes(query, key, value, embed_dim_to_check, num_heads,
                              use_separate_proj_weight)
  key_padding_mask <- attention_mask(io$key_padding_mask, "key_padding_mask", query$dtype)
  attn_mask <- attention_mask(attn_mask, "attn_mask", query$dtype)

  separate <- NULL
  if (use_separate_proj_weight) {
    separate <- list(q_proj_weight, k_proj_weight, v_proj_weight)
    for (i in 1:3) {
      check_mha_tensor(separate[[i]], c("q_proj_weight", "k_proj_weight", "v_proj_weight")[[i]])
    }
  } else {
    check_mha_tensor(in_proj_weight, "in_proj_weight")
  }
  qkv <- mha_in_projection(query, key, value, embed_dim, same_qk, same_kv, in_proj_weight,
                           in_proj_bias, separate)
  rows <- bsz * num_heads
  masks <- list(attn = mha_attn_mask_3d(attn_mask, tgt_len, key$size(1), rows),
                padding = key_padding_mask)
  kv <- mha_add_bias_kv(qkv[[2L]], qkv[[3L]], bias_k, bias_v, static_k, static_v, masks)

  # Heads become part of the batch: (N * num_heads, length, head_dim).
  q <- qkv[[1L]]$reshape(c(tgt_len, rows, head_dim))$transpose(1L, 2L)
  k <- mha_heads(kv$k, static_k, "static_k", rows, head_dim)
  v <- mha_heads(kv$v, static_v, "static_v", rows, head_dim)
  masks <- kv$masks
  if (add_zero_attn) {
    zeros_shape <- c(rows, 1L, head_dim)
    k <- torch_cat(list(k, torch_zeros(zeros_shape, dtype = k$dtype, device = k$device)), dim = 2L)
    v <- torch_cat(list(v, torch_zeros(zeros_shape, dtype = v$dtype, device = v$device)), dim = 2L)
    masks <- lapply(masks, pad_key_mask)
  }
  attn_mask <- mha_merge_masks(masks$attn, masks$padding, bsz, num_heads, k$size(2))

  if (!training) dropout_p <- 0
  res <- if (need_weights) {
    mha_attend_weights(q, k, v, attn_mask, dropout_p, bsz, num_heads, avg_weights)
  } else {
    list(out = mha_attend_sdpa(q, k, v, attn_mask, dropout_p, bsz, num_heads), weights = NULL)
  }
  out <- nnf_linear(res$out, out_proj_weight, out_proj_bias)
  out <- out$view(c(tgt_len, bsz, out$size(2)))
  weights <- res$weights
  if (!io$batched) {
    out <- out$squeeze(2L)
    if (!is.null(weights)) weights <- weights$squeeze(1L)
  } else if (batch_first) {
    out <- out$transpose(1L, 2L)
  }
  list(out, weights)
}

# query, key and value as (length, N, E) (batch_first transposed, one sequence given a batch
# dimension of 1); the same tensor stays the same object, for the packed projection.
mha_batch_inputs <- function(query, key, value, key_padding_mask, same_qk, same_kv,
                             batch_first) {
  n <- query$dim()
  if (!n %in% c(2L, 3L)) {
    abort(sprintf("`query` must have 3 dimensions (batched) or 2 (one sequence), got %d.", n),
          class = "value_error")
  }
  if (key$dim() != n || value$dim() != n) {
    abort(sprintf(paste0("`key` and `value` must have as many dimensions as `query` (%d), got ",
                         "%d and %d."), n, key$dim(), value$dim()), class = "value_error")
  }
  batched <- n == 3L
  reshape <- NULL
  if (batched && batch_first) reshape <- function(x) x$transpose(1L, 2L)
  if (!batched) {
    if (!is.null(key_padding_mask)) {
      if (key_padding_mask$dim() != 1L) {
        abort(sprintf(paste0("For an unbatched `query`, `key_padding_mask` must have 1 ",
                             "dimension, got %d."), key_padding_mask$dim()),
              class = "value_error")
      }
      key_padding_mask <- key_padding_mask$unsqueeze(1L)
    }
    reshape <- function(x) x$unsqueeze(2L)
  }
  if (!is.null(reshape)) {
    query <- reshape(query)
    key <- if (same_qk) query else reshape(key)
    value <- if (same_kv) key else reshape(value)
  }
  list(query = query, key = key, value = value, key_padding_mask = key_padding_mask,
       batched = batched)
}

# Checks the sizes (PyTorch's asserts, as value errors); returns the head dimension.
mha_check_sizes <- function(query, key, value, embed_dim_to_check, num_heads, separate) {
  embed_dim <- query$size(3)
  if (embed_dim != embed_dim_to_check) {
    abort(sprintf("`query`'s last dimension must be `embed_dim_to_check` (%d), got %d.",
                  embed_dim_to_check, embed_dim), class = "value_error")
  }
  head_dim <- embed_dim %/% num_heads
  if (num_heads < 1L || head_dim * num_heads != embed_dim) {
    abort(sprintf("embed_dim (%d) must be divisible by num_heads (%s).", embed_dim,
                  describe(num_heads)), class = "value_error")
  }
  same_rows <- key$size(1) == value$size(1) && key$size(2) == value$size(2)
  if (!same_rows || (!separate && key$size(3) != value$size(3))) {
    what <- if (separate) "sequence length and batch size" else "shape"
    abort(sprintf("`key` %s and `value` %s must have the same %s.", shape_text(dim(key)),
                  shape_text(dim(value)), what), class = "value_error")
  }
  head_dim
}

# One more key position (a bias or a zero): the masks get a column that masks nothing.
pad_key_mask <- function(mask) if (is.null(mask)) NULL else torch_constant_pad_nd(mask, c(0L, 1L))

mha_add_bias_kv <- function(k, v, bias_k, bias_v, static_k, static_v, masks) {
  if (is.null(bias_k) && is.null(bias_v)) {
    return(list(k = k, v = v, masks = masks))
  }
  if (is.null(bias_k) || is.null(bias_v)) {
    abort("`bias_k` and `bias_v` must be given together (or both NULL).", class = "value_error")
  }
  if (!is.null(static_k) || !is.null(static_v)) {
    abort("`bias_k` and `bias_v` cannot be added to `static_k` and `static_v`.",
          class = "value_error")
  }
  bsz <- k$size(2)
  list(k = torch_cat(list(k, bias_k$`repeat`(c(1L, bsz, 1L))), dim = 1L),
       v = torch_cat(list(v, bias_v$`repeat`(c(1L, bsz, 1L))), dim = 1L),
       masks = lapply(masks, pad_key_mask))
}

# Projected keys or values as (N * num_heads, S, head_dim), or the static ones given.
mha_heads <- function(x, static, name, rows, head_dim) {
  if (!is.null(static)) {
    check_static_kv(static, name, rows, head_dim)
    return(static)
  }
  x$reshape(c(x$size(1), rows, head_dim))$transpose(1L, 2L)
}

# The key padding mask joins the attention mask: one additive (N * num_heads, L or 1, S) mask.
mha_merge_masks <- function(attn_mask, key_padding_mask, bsz, num_heads, src_len) {
  if (is.null(key_padding_mask)) {
    return(attn_mask)
  }
  if (!identical(as.numeric(dim(key_padding_mask)), as.numeric(c(bsz, src_len)))) {
    abort(sprintf("`key_padding_mask` must have shape (N, S) = %s, got %s.",
                  shape_text(c(bsz, src_len)), shape_text(dim(key_padding_mask))),
          class = "value_error")
  }
  key_padding_mask <- key_padding_mask$view(c(bsz, 1L, 1L, src_len))$
    expand(c(-1L, num_heads, -1L, -1L))$reshape(c(bsz * num_heads, 1L, src_len))
  if (is.null(attn_mask)) key_padding_mask else attn_mask + key_padding_mask
}

# Attention with its weights (PyTorch's need_weights path): baddbmm of the mask and the scaled
# products, softmax, dropout. Returns the heads' outputs as (L * N, E) and the weights.
mha_attend_weights <- function(q, k, v, attn_mask, dropout_p, bsz, num_heads, avg_weights) {
  tgt_len <- q$size(2)
  q_scaled <- q * sqrt(1 / q$size(3))
  weights <- if (is.null(attn_mask)) {
    torch_bmm(q_scaled, k$transpose(-2L, -1L))
  } else {
    torch_baddbmm(attn_mask, q_scaled, k$transpose(-2L, -1L))
  }
  weights <- nnf_softmax(weights, dim = -1L)
  if (dropout_p > 0) weights <- nnf_dropout(weights, p = dropout_p)
  out <- torch_bmm(weights, v)$transpose(1L, 2L)$reshape(c(tgt_len * bsz, -1L))
  weights <- weights$view(c(bsz, num_heads, tgt_len, k$size(2)))
  if (avg_weights) weights <- weights$mean(dim = 2L)
  list(out = out, weights = weights)
}

# Attention without its weights (PyTorch's path): scaled_dot_product_attention on
# (N, num_heads, length, head_dim). Returns the heads' outputs as (L * N, E).
mha_attend_sdpa <- function(q, k, v, attn_mask, dropout_p, bsz, num_heads) {
  tgt_len <- q$size(2)
  src_len <- k$size(2)
  head_dim <- q$size(3)
  if (!is.null(attn_mask)) {
    attn_mask <- if (attn_mask$size(1) == 1L) {
      attn_mask$unsqueeze(1L)
    } else {
      attn_mask$view(c(bsz, num_heads, -1L, src_len))
    }
  }
  q <- q$view(c(bsz, num_heads, tgt_len, head_dim))
  k <- k$view(c(bsz, num_heads, src_len, head_dim))
  v <- v$view(c(bsz, num_heads, src_len, head_dim))
  out <- torch_scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, FALSE)
  out$permute(c(3L, 1L, 2L, 4L))$reshape(c(bsz * tgt_len, num_heads * head_dim))
}

#' Multi-head attention
#'
#' R torch's `nn_multihead_attention()` (PyTorch's
#' `torch.nn.MultiheadAttention`): attention over `num_heads` subspaces of the
#' embedding, as in "Attention Is All You Need". Its parameters are initialized
#' as PyTorch's (`in_proj_weight` Xavier uniform, biases zero, `bias_k` and
#' `bias_v` Xavier normal), so [torch_manual_seed()] gives PyTorch's weights.
#'
#' Calling the module, `forward(query, key, value, key_padding_mask = NULL,
#' need_weights = TRUE, attn_mask = NULL, avg_weights = TRUE)`, returns
#' `list(output, weights)`; see [nnf_multi_head_attention_forward()] for the
#' shapes (\eqn{(L, N, E)} for the query, \eqn{(N, L, E)} with `batch_first =
#' TRUE`) and the masks.
#'
#' @param embed_dim The embedding dimension E.
#' @param num_heads The number of heads; it must divide `embed_dim`.
#' @param dropout The dropout probability of the attention weights (in
#'   training).
#' @param bias Whether the input and output projections have biases.
#' @param add_bias_kv Whether learnt biases are appended to the key and value
#'   sequences.
#' @param add_zero_attn Whether a zero is appended to the key and value
#'   sequences.
#' @param kdim,vdim The key's and value's feature sizes (NULL: `embed_dim`).
#'   When either differs from `embed_dim`, the projections are separate
#'   parameters (`q_proj_weight`, `k_proj_weight`, `v_proj_weight`) instead of
#'   `in_proj_weight`.
#' @param batch_first Whether inputs and output are \eqn{(N, L, E)} (batch
#'   first) rather than \eqn{(L, N, E)}.
#' @return A module. Calling it returns a list: the attention output and the
#'   attention weights (averaged over the heads, \eqn{(N, L, S)}, unless
#'   `avg_weights = FALSE`: \eqn{(N, num\_heads, L, S)}; NULL when
#'   `need_weights = FALSE`).
#' @export
#' @examples
#' torch_manual_seed(1)
#' attn <- nn_multihead_attention(embed_dim = 16, num_heads = 4)
#' query <- torch_randn(5, 2, 16) # (L, N, E)
#' kv <- torch_randn(7, 2, 16) # (S, N, E)
#' out <- attn(query, kv, kv)
#' dim(out[[1]]) # (L, N, E)
#' dim(out[[2]]) # (N, L, S)
#' causal <- torch_ones(5, 5, dtype = torch_bool())$triu(diagonal = 1)
#' dim(attn(query, query, query, attn_mask = causal)[[1]])
nn_multihead_attention <- nn_module(
  "nn_multihead_attention",
  initialize = function(embed_dim, num_heads, dropout = 0, bias = TRUE, add_bias_kv = FALSE,
                        add_zero_attn = FALSE, kdim = NULL, vdim = NULL,
                        batch_first = FALSE) {
    self$embed_dim <- whole_number(embed_dim, "embed_dim")
    self$num_heads <- whole_number(num_heads, "num_heads")
    self$kdim <- if (is.null(kdim)) self$embed_dim else whole_number(kdim, "kdim")
    self$vdim <- if (is.null(vdim)) self$embed_dim else whole_number(vdim, "vdim")
    self$dropout <- check_dropout_p(dropout, "dropout")
    bias <- arg_flag(bias, "bias")
    add_bias_kv <- arg_flag(add_bias_kv, "add_bias_kv")
    self$add_zero_attn <- arg_flag(add_zero_attn, "add_zero_attn")
    self$batch_first <- arg_flag(batch_first, "batch_first")
    if (self$num_heads < 1L) {
      abort(sprintf("`num_heads` must be positive, got %d.", self$num_heads),
            class = "value_error")
    }
    self$head_dim <- self$embed_dim %/% self$num_heads
    if (self$head_dim * self$num_heads != self$embed_dim) {
      abort(sprintf("embed_dim must be divisible by num_heads: %d is not divisible by %d.",
                    self$embed_dim, self$num_heads), class = "value_error")
    }
    self$qkv_same_embed_dim_ <- self$kdim == self$embed_dim && self$vdim == self$embed_dim

    e <- self$embed_dim
    if (self$qkv_same_embed_dim_) {
      self$in_proj_weight <- nn_parameter(torch_empty(3L * e, e))
      # Absent parameters are NULL fields (PyTorch registers them as None): not in the state dict.
      self$q_proj_weight <- NULL
      self$k_proj_weight <- NULL
      self$v_proj_weight <- NULL
    } else {
      self$q_proj_weight <- nn_parameter(torch_empty(e, e))
      self$k_proj_weight <- nn_parameter(torch_empty(e, self$kdim))
      self$v_proj_weight <- nn_parameter(torch_empty(e, self$vdim))
      self$in_proj_weight <- NULL
    }
    if (bias) {
      self$in_proj_bias <- nn_parameter(torch_empty(3L * e))
    } else {
      self$in_proj_bias <- NULL
    }
    # Created (and initialized by nn_linear) before reset_parameters(), as PyTorch does: the same
    # random draws in the same order.
    self$out_proj <- nn_linear(e, e, bias = bias)
    if (add_bias_kv) {
      self$bias_k <- nn_parameter(torch_empty(1L, 1L, e))
      self$bias_v <- nn_parameter(torch_empty(1L, 1L, e))
    } else {
      self$bias_k <- NULL
      self$bias_v <- NULL
    }
    self$reset_parameters()
  },
  reset_parameters = function() {
    if (self$qkv_same_embed_dim_) {
      nn_init_xavier_uniform_(self$in_proj_weight)
    } else {
      nn_init_xavier_uniform_(self$q_proj_weight)
      nn_init_xavier_uniform_(self$k_proj_weight)
      nn_init_xavier_uniform_(self$v_proj_weight)
    }
    if (!is.null(self$in_proj_bias)) {
      nn_init_constant_(self$in_proj_bias, 0)
      nn_init_constant_(self$out_proj$bias, 0)
    }
    if (!is.null(self$bias_k)) nn_init_xavier_normal_(self$bias_k)
    if (!is.null(self$bias_v)) nn_init_xavier_normal_(self$bias_v)
    invisible(self)
  },
  forward = function(query, key, value, key_padding_mask = NULL, need_weights = TRUE,
                     attn_mask = NULL, avg_weights = TRUE) {
    separate <- !self$qkv_same_embed_dim_
    nnf_multi_head_attention_forward(
      query, key, value, self$embed_dim, self$num_heads,
      self$in_proj_weight, self$in_proj_bias, self$bias_k, self$bias_v, self$add_zero_attn,
      self$dropout, self$out_proj$weight, self$out_proj$bias,
      training = self$training, key_padding_mask = key_padding_mask,
      need_weights = need_weights, attn_mask = attn_mask, avg_weights = avg_weights,
      use_separate_proj_weight = separate, q_proj_weight = self$q_proj_weight,
      k_proj_weight = self$k_proj_weight, v_proj_weight = self$v_proj_weight,
      batch_first = self$batch_first
    )
  }
)

#' Sparsemax
#'
#' R torch's contrib sparsemax activation: the Euclidean projection of the
#' input onto the probability simplex along `dim`, from "From Softmax to
#' Sparsemax: A Sparse Model of Attention and Multi-Label Classification"
#' (Martins and Astudillo, 2016). Like softmax its values are non-negative and
#' sum to one along `dim`, but small inputs get exactly zero.
#' `nnf_contrib_sparsemax()` is the function, `nn_contrib_sparsemax()` the
#' module. Gradients flow (the sparsemax Jacobian).
#'
#' @param input A floating point tensor.
#' @param dim The dimension (1-based; negative counts from the end: -1 is the
#'   last).
#' @return `nnf_contrib_sparsemax()`: a tensor of the shape of `input`.
#'   `nn_contrib_sparsemax()`: a module.
#' @export
#' @examples
#' x <- torch_tensor(rbind(c(0.1, 0.2, 0.9), c(1, 1, 5)))
#' nnf_contrib_sparsemax(x, dim = -1)
#' m <- nn_contrib_sparsemax(dim = 2)
#' m(x)$sum(dim = 2)
nnf_contrib_sparsemax <- function(input, dim = -1) {
  if (!is_torch_tensor(input)) {
    abort(sprintf("`input` must be a tensor, got %s.", describe(input)), class = "value_error")
  }
  if (!input$is_floating_point()) {
    abort(sprintf("`input` must be a floating point tensor, got a %s one.",
                  as.character(input$dtype)), class = "value_error")
  }
  dim <- whole_number(dim, "dim")
  n <- input$dim()
  if (n == 0L || dim == 0L || abs(dim) > n) {
    abort(sprintf("`dim` must be between 1 and %d (or -%d and -1), got %d.", max(n, 1L),
                  max(n, 1L), dim), class = "value_error")
  }
  z <- input$transpose(dim, -1L)
  # tau is the threshold that makes the positive parts of z - tau sum to 1: with z sorted
  # descending, the support is the k largest where 1 + k * z_(k) > cumsum_k, and tau =
  # (cumsum_K - 1) / K. Autograd through sort and gather gives sparsemax's Jacobian.
  sorted <- torch_sort(z, dim = -1L, descending = TRUE)[[1L]]
  cums <- sorted$cumsum(dim = -1L)
  ks <- torch_ones_like(sorted)$cumsum(dim = -1L)
  support <- (ks * sorted + 1) > cums
  k <- support$sum(dim = -1L, keepdim = TRUE)
  tau <- (cums$gather(-1L, k) - 1) / k$to(dtype = z$dtype)
  torch_clamp(z - tau, min = 0)$transpose(dim, -1L)
}

#' @rdname nnf_contrib_sparsemax
#' @export
nn_contrib_sparsemax <- nn_module(
  "nn_contrib_sparsemax",
  initialize = function(dim = -1) {
    self$dim <- whole_number(dim, "dim")
  },
  forward = function(input) nnf_contrib_sparsemax(input, self$dim)
)
