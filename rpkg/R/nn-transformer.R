#' @include nn-attention.R
NULL

# R torch's transformer encoder (nn_transformer_encoder_layer, nn_transformer_encoder), composed
# from nn_multihead_attention, nn_linear, nn_layer_norm and nn_dropout as PyTorch's
# torch.nn.TransformerEncoderLayer / TransformerEncoder are: the same submodules, created in the
# same order (so the same seed gives the same weights) and applied in the same order.

check_encoder_layer_args <- function(d_model, nhead, layer_norm_eps) {
  nhead <- whole_number(nhead, "nhead")
  if (nhead < 1L || d_model %% nhead != 0L) {
    abort(sprintf("`nhead` must be a positive divisor of `d_model` (%d), got %d.", d_model,
                  nhead), class = "value_error")
  }
  eps <- layer_norm_eps
  if (!is.numeric(eps) || length(eps) != 1L || is.na(eps) || eps < 0) {
    abort(sprintf("`layer_norm_eps` must be a non-negative number, got %s.", describe(eps)),
          class = "value_error")
  }
}

# is_causal's mask: TRUE above the diagonal (a position may not attend to later ones), on the
# device of `src` (not the default device), for `src`'s sequence length.
causal_mask_for <- function(src, src_mask, batch_first) {
  if (!is.null(src_mask)) {
    abort(paste0("`src_mask` and `is_causal = TRUE` cannot be given together: is_causal ",
                 "builds the causal mask itself."), class = "value_error")
  }
  n <- src$size(if (src$dim() == 3L && batch_first) 2L else 1L)
  torch_ones(c(n, n), dtype = torch_bool(), device = src$device)$triu(diagonal = 1L)
}

transformer_activation <- function(activation) {
  if (is.character(activation) && length(activation) == 1L && !is.na(activation)) {
    name <- tolower(activation)
    if (name == "relu") {
      return(list(fn = function(x) nnf_relu(x), code = 1L))
    }
    if (name == "gelu") {
      return(list(fn = function(x) nnf_gelu(x), code = 2L))
    }
  } else if (is.function(activation)) {
    return(list(fn = activation, code = 0L))
  }
  abort(sprintf(paste0("`activation` must be \"relu\", \"gelu\" or a function (or module) ",
                       "mapping a tensor to a tensor, got %s."), describe(activation)),
        class = "value_error")
}

#' Transformer encoder
#'
#' `nn_transformer_encoder_layer()` is R torch's transformer encoder layer
#' (PyTorch's `torch.nn.TransformerEncoderLayer`): multi-head self-attention
#' (`self_attn`, an [nn_multihead_attention()]) and a feed-forward network
#' (`linear1`, the activation, `linear2`), each with dropout, a residual
#' connection and layer normalization (`norm1`, `norm2`; after each block, or
#' before it with `norm_first = TRUE`). `nn_transformer_encoder()` stacks
#' `num_layers` independent copies of an encoder layer (`layers`, an
#' [nn_module_list()]), optionally followed by `norm`.
#'
#' The layer's `forward(src, src_mask = NULL, src_key_padding_mask = NULL,
#' is_causal = FALSE)` takes `src` as \eqn{(S, N, E)} (\eqn{(N, S, E)} with
#' `batch_first = TRUE`), an attention mask \eqn{(S, S)} or \eqn{(N \cdot
#' nhead, S, S)} and a key padding mask \eqn{(N, S)} (logical: `TRUE` is
#' masked; float: added). `is_causal = TRUE` masks each position's future (the
#' mask is built on `src`'s device) and cannot be combined with `src_mask`.
#' The encoder's `forward(src, mask = NULL, src_key_padding_mask = NULL,
#' is_causal = FALSE)` passes them to each layer.
#'
#' @param d_model The number of features of the input (E).
#' @param nhead The number of attention heads (it must divide `d_model`).
#' @param dim_feedforward The feed-forward network's hidden size.
#' @param dropout The dropout probability (attention weights, after the
#'   attention, in and after the feed-forward network).
#' @param activation The feed-forward network's activation: `"relu"`,
#'   `"gelu"`, or a function or module mapping a tensor to a tensor.
#' @param layer_norm_eps The layer normalizations' epsilon.
#' @param batch_first Whether the input and output are \eqn{(N, S, E)}.
#' @param norm_first Whether the layer normalizations come before the
#'   attention and feed-forward blocks (pre-norm) instead of after them.
#' @param bias Whether the linear layers have biases (and, as in R torch, the
#'   layer normalizations their affine weights).
#' @param encoder_layer An encoder layer (`nn_transformer_encoder_layer()` or a
#'   module with its forward arguments), copied `num_layers` times.
#' @param num_layers The number of layers.
#' @param norm A module applied to the last layer's output (e.g. an
#'   [nn_layer_norm()]), or NULL.
#' @return A module; calling it returns a tensor of the shape of `src`.
#' @name nn_transformer_encoder
#' @examples
#' torch_manual_seed(1)
#' layer <- nn_transformer_encoder_layer(d_model = 16, nhead = 4, dim_feedforward = 32)
#' x <- torch_randn(10, 2, 16) # (S, N, E)
#' dim(layer(x))
#' encoder <- nn_transformer_encoder(layer, num_layers = 2)
#' encoder$eval()
#' dim(encoder(x, is_causal = TRUE))
NULL

#' @rdname nn_transformer_encoder
#' @export
nn_transformer_encoder_layer <- nn_module(
  "nn_transformer_encoder_layer",
  initialize = function(d_model, nhead, dim_feedforward = 2048, dropout = 0.1,
                        activation = "relu", layer_norm_eps = 1e-5, batch_first = FALSE,
                        norm_first = FALSE, bias = TRUE) {
    d_model <- whole_number(d_model, "d_model")
    check_encoder_layer_args(d_model, nhead, layer_norm_eps)
    dim_feedforward <- whole_number(dim_feedforward, "dim_feedforward")
    dropout <- check_dropout_p(dropout, "dropout")
    bias <- arg_flag(bias, "bias")
    batch_first <- arg_flag(batch_first, "batch_first")
    act <- transformer_activation(activation)
    # PyTorch's order of creation (the order of the random draws): self_attn, linear1, linear2.
    self$self_attn <- nn_multihead_attention(d_model, nhead, dropout = dropout, bias = bias,
                                             batch_first = batch_first)
    self$linear1 <- nn_linear(d_model, dim_feedforward, bias = bias)
    self$dropout <- nn_dropout(dropout)
    self$linear2 <- nn_linear(dim_feedforward, d_model, bias = bias)
    self$norm_first <- arg_flag(norm_first, "norm_first")
    self$norm1 <- nn_layer_norm(d_model, eps = layer_norm_eps, elementwise_affine = bias)
    self$norm2 <- nn_layer_norm(d_model, eps = layer_norm_eps, elementwise_affine = bias)
    self$dropout1 <- nn_dropout(dropout)
    self$dropout2 <- nn_dropout(dropout)
    self$activation_relu_or_gelu <- act$code
    self$activation <- act$fn
  },
  forward = function(src, src_mask = NULL, src_key_padding_mask = NULL, is_causal = FALSE) {
    check_mha_tensor(src, "src")
    is_causal <- arg_flag(is_causal, "is_causal")
    if (is_causal) src_mask <- causal_mask_for(src, src_mask, self$self_attn$batch_first)
    x <- src
    if (self$norm_first) {
      x <- x + self$sa_block(self$norm1(x), src_mask, src_key_padding_mask)
      x <- x + self$ff_block(self$norm2(x))
    } else {
      x <- self$norm1(x + self$sa_block(x, src_mask, src_key_padding_mask))
      x <- self$norm2(x + self$ff_block(x))
    }
    x
  },
  sa_block = function(x, attn_mask, key_padding_mask) {
    out <- self$self_attn(x, x, x, attn_mask = attn_mask, key_padding_mask = key_padding_mask,
                          need_weights = FALSE)[[1L]]
    self$dropout1(out)
  },
  ff_block = function(x) {
    self$dropout2(self$linear2(self$dropout(self$activation(self$linear1(x)))))
  }
)

#' @rdname nn_transformer_encoder
#' @export
nn_transformer_encoder <- nn_module(
  "nn_transformer_encoder",
  initialize = function(encoder_layer, num_layers, norm = NULL) {
    if (!is_nn_module(encoder_layer)) {
      abort(sprintf("`encoder_layer` must be an nn_module (an encoder layer), got %s.",
                    describe(encoder_layer)), class = "value_error")
    }
    num_layers <- whole_number(num_layers, "num_layers")
    if (num_layers < 1L) {
      abort(sprintf("`num_layers` must be at least 1, got %d.", num_layers),
            class = "value_error")
    }
    if (!is.null(norm) && !is_nn_module(norm)) {
      abort(sprintf("`norm` must be an nn_module or NULL, got %s.", describe(norm)),
            class = "value_error")
    }
    self$num_layers <- num_layers
    # Independent copies (PyTorch's copy.deepcopy of the layer, R torch's deep clone_module()).
    self$layers <- nn_module_list(lapply(seq_len(num_layers), function(i) {
      clone_module(encoder_layer, deep = TRUE)
    }))
    self$norm <- norm
  },
  forward = function(src, mask = NULL, src_key_padding_mask = NULL, is_causal = FALSE) {
    out <- src
    for (layer in as.list(self$layers)) {
      out <- layer(out, src_mask = mask, src_key_padding_mask = src_key_padding_mask,
                   is_causal = is_causal)
    }
    if (!is.null(self$norm)) out <- self$norm(out)
    out
  }
)
