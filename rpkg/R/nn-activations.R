#' @include nn-layers.R
NULL

# R torch's remaining activations, functional (nnf_*) and as modules (nn_*), over the generated
# ops: PyTorch's torch.nn.functional and torch.nn definitions, R torch's names and defaults, dims
# counted from 1. Where R torch's differs from PyTorch's on purpose-less points (its
# nnf_hardswish() is not implemented, its nnf_rrelu_() always trains), PyTorch's is kept.

#' @rdname nnf
#' @param lambd The threshold of `nnf_hardshrink()` and `nnf_softshrink()`.
#' @param lower,upper `nnf_rrelu()`: the bounds of the negative slope drawn in
#'   training (their mean is the slope otherwise).
#' @param value `nnf_threshold()`: what replaces the entries not above
#'   `threshold`.
#' @param x1,x2 `nnf_cosine_similarity()`, `nnf_pairwise_distance()`: the two
#'   batches of vectors.
#' @param keepdim `nnf_pairwise_distance()`: keep the reduced dimension.
#' @param upscale_factor `nnf_pixel_shuffle()`: the factor of each spatial size.
#' @export
nnf_relu_ <- function(input) nnf_relu(input, inplace = TRUE)

#' @rdname nnf
#' @export
nnf_elu_ <- function(input, alpha = 1) nnf_elu(input, alpha, inplace = TRUE)

#' @rdname nnf
#' @export
nnf_celu_ <- function(input, alpha = 1) nnf_celu(input, alpha, inplace = TRUE)

#' @rdname nnf
#' @export
nnf_hardtanh_ <- function(input, min_val = -1, max_val = 1) {
  nnf_hardtanh(input, min_val, max_val, inplace = TRUE)
}

#' @rdname nnf
#' @export
nnf_selu <- function(input, inplace = FALSE) {
  check_tensor(input, "input")
  if (arg_flag(inplace, "inplace")) torch_selu_(input) else torch_selu(input)
}

#' @rdname nnf
#' @export
nnf_selu_ <- function(input) nnf_selu(input, inplace = TRUE)

#' @rdname nnf
#' @export
nnf_hardsigmoid <- function(input, inplace = FALSE) {
  check_tensor(input, "input")
  if (arg_flag(inplace, "inplace")) torch_hardsigmoid_(input) else torch_hardsigmoid(input)
}

#' @rdname nnf
#' @export
nnf_hardswish <- function(input, inplace = FALSE) {
  check_tensor(input, "input")
  if (arg_flag(inplace, "inplace")) torch_hardswish_(input) else torch_hardswish(input)
}

#' @rdname nnf
#' @export
nnf_hardshrink <- function(input, lambd = 0.5) {
  check_tensor(input, "input")
  torch_hardshrink(input, arg_number(lambd, "lambd"))
}

#' @rdname nnf
#' @export
nnf_softshrink <- function(input, lambd = 0.5) {
  check_tensor(input, "input")
  torch_softshrink(input, arg_number(lambd, "lambd"))
}

#' @rdname nnf
#' @export
nnf_tanhshrink <- function(input) {
  check_tensor(input, "input")
  input - torch_tanh(input)
}

#' @rdname nnf
#' @export
nnf_softsign <- function(input) {
  check_tensor(input, "input")
  input / (torch_abs(input) + 1)
}

#' @rdname nnf
#' @export
nnf_logsigmoid <- function(input) {
  check_tensor(input, "input")
  torch_log_sigmoid(input)
}

#' @rdname nnf
#' @export
nnf_rrelu <- function(input, lower = 1 / 8, upper = 1 / 3, training = FALSE, inplace = FALSE) {
  check_tensor(input, "input")
  training <- arg_flag(training, "training")
  if (arg_flag(inplace, "inplace")) {
    torch_rrelu_(input, lower, upper, training)
  } else {
    torch_rrelu(input, lower, upper, training)
  }
}

#' @rdname nnf
#' @export
nnf_rrelu_ <- function(input, lower = 1 / 8, upper = 1 / 3, training = FALSE) {
  nnf_rrelu(input, lower, upper, training, inplace = TRUE)
}

#' @rdname nnf
#' @export
nnf_threshold <- function(input, threshold, value, inplace = FALSE) {
  check_tensor(input, "input")
  threshold <- arg_number(threshold, "threshold")
  value <- arg_number(value, "value")
  if (arg_flag(inplace, "inplace")) {
    torch_threshold_(input, threshold, value)
  } else {
    torch_threshold(input, threshold, value)
  }
}

#' @rdname nnf
#' @export
nnf_threshold_ <- function(input, threshold, value) {
  nnf_threshold(input, threshold, value, inplace = TRUE)
}

#' @rdname nnf
#' @export
nnf_glu <- function(input, dim = -1) {
  check_tensor(input, "input")
  torch_glu(input, dim)
}

#' @rdname nnf
#' @export
nnf_softmin <- function(input, dim, dtype = NULL) {
  check_tensor(input, "input")
  check_softmax_dim(if (missing(dim)) NULL else dim)
  torch_softmax(-input, dim, as_torch_dtype(dtype))
}

#' @rdname nnf
#' @export
nnf_prelu <- function(input, weight) {
  check_tensor(input, "input")
  check_tensor(weight, "weight")
  torch_prelu(input, weight)
}

#' @rdname nnf
#' @export
nnf_cosine_similarity <- function(x1, x2, dim = 2, eps = 1e-8) {
  check_tensor(x1, "x1")
  check_tensor(x2, "x2")
  torch_cosine_similarity(x1, x2, dim, arg_number(eps, "eps"))
}

#' @rdname nnf
#' @export
nnf_pairwise_distance <- function(x1, x2, p = 2, eps = 1e-6, keepdim = FALSE) {
  check_tensor(x1, "x1")
  check_tensor(x2, "x2")
  torch_pairwise_distance(x1, x2, arg_number(p, "p"), arg_number(eps, "eps"),
                          arg_flag(keepdim, "keepdim"))
}

#' @rdname nnf
#' @export
nnf_pdist <- function(input, p = 2) {
  check_tensor(input, "input")
  torch_pdist(input, arg_number(p, "p"))
}

#' @rdname nnf
#' @export
nnf_pixel_shuffle <- function(input, upscale_factor) {
  check_tensor(input, "input")
  torch_pixel_shuffle(input, whole_number(upscale_factor, "upscale_factor"))
}

#' @rdname nn_layers
#' @param lambd,lower,upper,value,min_val,max_val Activations' parameters (see
#'   [nnf_hardshrink()], [nnf_rrelu()], [nnf_threshold()], [nnf_hardtanh()]).
#' @param num_parameters,init `nn_prelu()`: how many slopes it learns (1, or one
#'   per channel: the input's second dimension) and their initial value.
#' @param keepdim `nn_pairwise_distance()`: keep the reduced dimension.
#' @export
nn_selu <- activation_module("nn_selu", function(input, inplace) nnf_selu(input, inplace))
#' @rdname nn_layers
#' @export
nn_hardsigmoid <- activation_module("nn_hardsigmoid",
                                    function(input, inplace) nnf_hardsigmoid(input, inplace))
#' @rdname nn_layers
#' @export
nn_hardswish <- activation_module("nn_hardswish",
                                  function(input, inplace) nnf_hardswish(input, inplace))
#' @rdname nn_layers
#' @export
nn_hardtanh <- activation_module(
  "nn_hardtanh", function(input, lo, hi, inplace) nnf_hardtanh(input, lo, hi, inplace),
  list(min_val = -1, max_val = 1)
)
#' @rdname nn_layers
#' @export
nn_hardshrink <- activation_module("nn_hardshrink", function(input, l) nnf_hardshrink(input, l),
                                   list(lambd = 0.5))
#' @rdname nn_layers
#' @export
nn_softshrink <- activation_module("nn_softshrink", function(input, l) nnf_softshrink(input, l),
                                   list(lambd = 0.5))
#' @rdname nn_layers
#' @export
nn_tanhshrink <- activation_module("nn_tanhshrink", function(input) nnf_tanhshrink(input))
#' @rdname nn_layers
#' @export
nn_softsign <- activation_module("nn_softsign", function(input) nnf_softsign(input))
#' @rdname nn_layers
#' @export
nn_log_sigmoid <- activation_module("nn_log_sigmoid", function(input) nnf_logsigmoid(input))
#' @rdname nn_layers
#' @export
nn_threshold <- activation_module(
  "nn_threshold", function(input, t, v, inplace) nnf_threshold(input, t, v, inplace),
  formals(function(threshold, value) NULL)
)
#' @rdname nn_layers
#' @export
nn_glu <- activation_module("nn_glu", function(input, dim) nnf_glu(input, dim), list(dim = -1))
#' @rdname nn_layers
#' @export
nn_softmin <- activation_module("nn_softmin", function(input, dim) nnf_softmin(input, dim),
                                formals(function(dim) NULL))
#' @rdname nn_layers
#' @export
nn_softmax2d <- activation_module("nn_softmax2d", function(input) softmax2d(input))

# Softmax over the channels of a (C, H, W) or (N, C, H, W) input (PyTorch's Softmax2d).
softmax2d <- function(input) {
  check_tensor(input, "input")
  if (!input$ndim %in% c(3L, 4L)) {
    abort(sprintf("nn_softmax2d() takes a 3-D or 4-D input, got %d dimensions.", input$ndim),
          class = "value_error")
  }
  nnf_softmax(input, -3L)
}

#' @rdname nn_layers
#' @export
nn_rrelu <- nn_module(
  "nn_rrelu",
  initialize = function(lower = 1 / 8, upper = 1 / 3, inplace = FALSE) {
    self$lower <- arg_number(lower, "lower")
    self$upper <- arg_number(upper, "upper")
    self$inplace <- arg_flag(inplace, "inplace")
  },
  forward = function(input) nnf_rrelu(input, self$lower, self$upper, self$training, self$inplace)
)

#' @rdname nn_layers
#' @export
nn_prelu <- nn_module(
  "nn_prelu",
  initialize = function(num_parameters = 1, init = 0.25) {
    self$num_parameters <- whole_number(num_parameters, "num_parameters")
    self$weight <- nn_parameter(torch_full(self$num_parameters, arg_number(init, "init")))
  },
  forward = function(input) nnf_prelu(input, self$weight)
)

#' @rdname nn_layers
#' @export
nn_pairwise_distance <- nn_module(
  "nn_pairwise_distance",
  initialize = function(p = 2, eps = 1e-6, keepdim = FALSE) {
    self$norm <- arg_number(p, "p")
    self$eps <- arg_number(eps, "eps")
    self$keepdim <- arg_flag(keepdim, "keepdim")
  },
  forward = function(x1, x2) nnf_pairwise_distance(x1, x2, self$norm, self$eps, self$keepdim)
)

#' @rdname nnf
#' @param logits,tau,hard `nnf_gumbel_softmax()`: unnormalized log
#'   probabilities, the temperature, and whether to return one-hot samples
#'   (differentiated as the soft ones).
#' @export
nnf_gumbel_softmax <- function(logits, tau = 1, hard = FALSE, dim = -1) {
  check_tensor(logits, "logits")
  # PyTorch's draw: Gumbel noise as -log of an exponential draw, then a softmax.
  contiguous <- torch_contiguous_format()
  gumbels <- -torch_empty_like(logits, memory_format = contiguous)$exponential_()$log()
  soft <- torch_softmax((logits + gumbels) / arg_number(tau, "tau"), dim)
  if (!arg_flag(hard, "hard")) return(soft)
  index <- soft$max(dim = dim, keepdim = TRUE)[[2L]]
  one_hot <- torch_zeros_like(logits, memory_format = contiguous)$scatter_(dim, index, 1)
  one_hot - soft$detach() + soft
}
