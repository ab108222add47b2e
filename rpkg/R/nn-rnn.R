#' @include nn-layers.R
NULL

# R torch's recurrent layers (nn_rnn, nn_lstm, nn_gru) and packed sequences, over libtorch's own
# kernels (the generated internal torch_rnn_tanh, torch_lstm, torch__pack_padded_sequence, ...):
# the numbers are PyTorch's. Parameters are made and drawn in PyTorch's order, so
# torch_manual_seed() gives PyTorch's weights; their names count layers from 1 (weight_ih_l1),
# as R torch's do.

# ---- packed sequences ---------------------------------------------------------------------------

# A PackedSequence holds PyTorch's four tensors; the permutations are kept 0-based (as libtorch
# and Python have them) and shown 1-based, as R torch shows them.
# nolint start: object_name_linter. (R torch's class name)
PackedSequence <- R6::R6Class(
  classname = "PackedSequence",
  lock_objects = FALSE,
  public = list(
    initialize = function(data, batch_sizes, sorted_indices = NULL, unsorted_indices = NULL) {
      if (is.null(unsorted_indices) && !is.null(sorted_indices)) {
        unsorted_indices <- rnn_invert_permutation(sorted_indices)
      }
      private$data_ <- data
      private$batch_sizes_ <- batch_sizes
      private$sorted_ <- sorted_indices
      private$unsorted_ <- unsorted_indices
    },
    # Moves the data (and the permutations with it); batch_sizes stay on the CPU, as libtorch's
    # kernels want them.
    to = function(...) {
      data <- private$data_$to(...)
      move <- function(i) if (is.null(i)) NULL else i$to(device = data$device)
      PackedSequence$new(data, private$batch_sizes_, move(private$sorted_), move(private$unsorted_))
    },
    cuda = function() self$to(device = "cuda"),
    cpu = function() self$to(device = "cpu"),
    print = function(...) {
      cat("PackedSequence of ", length(private$batch_sizes_), " time steps, batch size ",
          private$batch_sizes_[1]$item(), "\n", sep = "")
      cat("data: ", format_tensor_type(private$data_), "\n", sep = "")
      cat("batch_sizes: ", paste(as_array(private$batch_sizes_), collapse = " "), "\n", sep = "")
      if (!is.null(private$sorted_)) {
        cat("sorted_indices: ", paste(as_array(self$sorted_indices$cpu()), collapse = " "), "\n",
            sep = "")
      }
      invisible(self)
    }
  ),
  private = list(data_ = NULL, batch_sizes_ = NULL, sorted_ = NULL, unsorted_ = NULL),
  active = list(
    data = function() private$data_,
    batch_sizes = function() private$batch_sizes_,
    sorted_indices = function() rnn_one_based(private$sorted_),
    unsorted_indices = function() rnn_one_based(private$unsorted_),
    is_cuda = function() private$data_$is_cuda
  )
)
# nolint end

rnn_one_based <- function(index) if (is.null(index)) NULL else index + 1L

is_packed_sequence <- function(x) inherits(x, "PackedSequence")

# The four tensors as PyTorch has them (permutations 0-based, or NULL).
rnn_packed_parts <- function(x) {
  p <- .subset2(x, ".__enclos_env__")$private
  list(data = p$data_, batch_sizes = p$batch_sizes_, sorted = p$sorted_, unsorted = p$unsorted_)
}

# The inverse of a 0-based permutation (PyTorch's rnn_invert_permutation): sorting a permutation
# sorts positions by where they go.
rnn_invert_permutation <- function(permutation) .torch_sort(permutation, dim = 1L)[[2L]]

# Reorders the batch dimension (1-based `dim`) by a 0-based permutation.
rnn_permute <- function(x, permutation, dim = 2L) {
  if (is.null(permutation)) x else x$index_select(dim, permutation + 1L)
}

rnn_tensor_list <- function(x, name) {
  if (!is.list(x) || length(x) == 0L || !all(vapply(x, is_torch_tensor, TRUE))) {
    abort(sprintf("`%s` must be a non-empty list of tensors, got %s.", name, describe(x)),
          class = "value_error")
  }
  x
}

rnn_flag <- function(x, name) {
  if (!is.logical(x) || length(x) != 1L || is.na(x)) {
    abort(sprintf("`%s` must be TRUE or FALSE, got %s.", name, describe(x)),
          class = "value_error")
  }
  x
}

#' Packed sequences
#'
#' R torch's packed sequences: a batch of sequences of different lengths, stored
#' time step by time step without padding, which the recurrent layers
#' ([nn_rnn()], [nn_lstm()], [nn_gru()]) take in place of a padded tensor.
#'
#' - `nn_utils_rnn_pack_padded_sequence()` packs a padded tensor of size
#'   `T x B x *` (`B x T x *` with `batch_first = TRUE`), given each sequence's
#'   length.
#' - `nn_utils_rnn_pack_sequence()` packs a list of tensors of size `L x *`.
#' - `nn_utils_rnn_pad_packed_sequence()` is the inverse: the padded tensor and
#'   the lengths, in the batch's original order.
#' - `nn_utils_rnn_pad_sequence()` pads a list of tensors of size `L x *` to the
#'   longest, stacking them into `T x B x *` (or `B x T x *`).
#'
#' A `PackedSequence` has PyTorch's fields `$data`, `$batch_sizes` (an int64
#' CPU tensor: the batch size at each time step), `$sorted_indices` and
#' `$unsorted_indices` (the permutation that sorted the batch by decreasing
#' length and its inverse, 1-based as R torch shows them; `NULL` when the batch
#' came sorted), and a `$to()` method.
#'
#' @param input A padded tensor of variable length sequences.
#' @param lengths The length of each sequence (a vector or a tensor), each at
#'   least 1.
#' @param batch_first Whether the batch is the first dimension (`B x T x *`)
#'   rather than the second (`T x B x *`).
#' @param enforce_sorted If `TRUE`, the sequences must come sorted by
#'   decreasing length (an error otherwise); if `FALSE`, they are sorted here and
#'   the permutation is recorded, so that unpacking restores the order.
#' @param sequences A list of tensors of size `L x *` (the same `*` for all).
#' @param sequence A `PackedSequence`.
#' @param padding_value The value padded elements take.
#' @param total_length If not `NULL`, the length the output is padded to (at
#'   least the longest sequence's).
#' @param padding_side `"right"` (PyTorch's default) or `"left"`: where the
#'   padding goes.
#' @return `nn_utils_rnn_pack_padded_sequence()`, `nn_utils_rnn_pack_sequence()`:
#'   a `PackedSequence`. `nn_utils_rnn_pad_packed_sequence()`: a list of the
#'   padded tensor and an int64 tensor of the lengths. `nn_utils_rnn_pad_sequence()`:
#'   a tensor.
#' @name nn_utils_rnn
#' @examples
#' x <- torch_tensor(rbind(c(1, 2, 0), c(3, 0, 0), c(4, 5, 6)))
#' p <- nn_utils_rnn_pack_padded_sequence(x, c(2, 1, 3), batch_first = TRUE,
#'                                        enforce_sorted = FALSE)
#' p$data
#' p$batch_sizes
#' p$sorted_indices
#' nn_utils_rnn_pad_packed_sequence(p, batch_first = TRUE)
#' nn_utils_rnn_pack_sequence(list(torch_tensor(1:3), torch_tensor(4:5)))
#' dim(nn_utils_rnn_pad_sequence(list(torch_ones(5, 2), torch_ones(3, 2))))
NULL

#' @rdname nn_utils_rnn
#' @export
nn_utils_rnn_pack_padded_sequence <- function(input, lengths, batch_first = FALSE,
                                              enforce_sorted = TRUE) {
  check_tensor(input, "input")
  batch_first <- rnn_flag(batch_first, "batch_first")
  enforce_sorted <- rnn_flag(enforce_sorted, "enforce_sorted")
  if (input$dim() < 2L) {
    abort(sprintf("`input` must have at least 2 dimensions (time and batch), got %d.",
                  input$dim()), class = "value_error")
  }
  lengths <- if (is_torch_tensor(lengths)) {
    lengths$to(dtype = torch_long(), device = "cpu")
  } else {
    torch_tensor(whole_numbers(lengths, "lengths"), dtype = torch_long())
  }
  rnn_check_lengths(as_array(lengths), input, batch_first, enforce_sorted)
  batch_dim <- if (batch_first) 1L else 2L
  sorted <- NULL
  if (!enforce_sorted) {
    ordered <- .torch_sort(lengths, dim = 1L, descending = TRUE)
    lengths <- ordered[[1L]]
    sorted <- ordered[[2L]]$to(device = input$device)
    input <- rnn_permute(input, sorted, batch_dim)
  }
  packed <- torch__pack_padded_sequence(input, lengths, batch_first)
  PackedSequence$new(packed[[1L]], packed[[2L]], sorted)
}

# libtorch's rules for lengths, checked here to say them in R's words.
rnn_check_lengths <- function(lens, input, batch_first, enforce_sorted) {
  batch <- input$size(if (batch_first) 1L else 2L)
  steps <- input$size(if (batch_first) 2L else 1L)
  if (length(dim(lens)) > 1L || length(lens) != batch) {
    abort(sprintf(paste0("`lengths` must have one length per sequence: %d (the batch size), ",
                         "got %d."), batch, length(lens)), class = "value_error")
  }
  if (any(lens < 1L) || any(lens > steps)) {
    abort(sprintf(paste0("`lengths` must be between 1 and %d (the number of time steps), ",
                         "got %s."), steps, paste(lens, collapse = ", ")), class = "value_error")
  }
  if (enforce_sorted && is.unsorted(rev(lens))) {
    abort(paste0("`lengths` must be sorted in decreasing order when `enforce_sorted = TRUE`; ",
                 "pass `enforce_sorted = FALSE` to pack unsorted sequences."),
          class = "value_error")
  }
}

#' @rdname nn_utils_rnn
#' @export
nn_utils_rnn_pack_sequence <- function(sequences, enforce_sorted = TRUE) {
  rnn_tensor_list(sequences, "sequences")
  lengths <- vapply(sequences, function(s) if (s$dim() == 0L) 0 else s$size(1L), 0)
  nn_utils_rnn_pack_padded_sequence(nn_utils_rnn_pad_sequence(sequences), lengths,
                                    enforce_sorted = enforce_sorted)
}

#' @rdname nn_utils_rnn
#' @export
nn_utils_rnn_pad_packed_sequence <- function(sequence, batch_first = FALSE, padding_value = 0,
                                             total_length = NULL) {
  if (!is_packed_sequence(sequence)) {
    abort(sprintf("`sequence` must be a PackedSequence, got %s.", describe(sequence)),
          class = "value_error")
  }
  batch_first <- rnn_flag(batch_first, "batch_first")
  padding_value <- arg_number(padding_value, "padding_value")
  parts <- rnn_packed_parts(sequence)
  max_length <- length(parts$batch_sizes)
  if (!is.null(total_length)) {
    total_length <- whole_number(total_length, "total_length")
    if (total_length < max_length) {
      abort(sprintf(paste0("`total_length` must be at least the length of the longest ",
                           "sequence (%d), got %d."), max_length, total_length),
            class = "value_error")
    }
    max_length <- total_length
  }
  out <- torch__pad_packed_sequence(parts$data, parts$batch_sizes, batch_first, padding_value,
                                    max_length)
  if (!is.null(parts$unsorted)) {
    out <- list(rnn_permute(out[[1L]], parts$unsorted, if (batch_first) 1L else 2L),
                rnn_permute(out[[2L]], parts$unsorted$cpu(), 1L))
  }
  out
}

#' @rdname nn_utils_rnn
#' @export
nn_utils_rnn_pad_sequence <- function(sequences, batch_first = FALSE, padding_value = 0,
                                      padding_side = "right") {
  rnn_tensor_list(sequences, "sequences")
  torch_pad_sequence(unname(sequences), rnn_flag(batch_first, "batch_first"),
                     arg_number(padding_value, "padding_value"),
                     arg_choice(padding_side, "padding_side", c("right", "left")))
}

# ---- the layers ---------------------------------------------------------------------------------

rnn_gate_multiplier <- c(RNN_TANH = 1L, RNN_RELU = 1L, LSTM = 4L, GRU = 3L)

# libtorch's kernel for each mode (functions, so that the generated bindings are looked up when
# called).
rnn_kernel <- function(mode) {
  switch(mode,
    RNN_TANH = function(...) torch_rnn_tanh(...),
    RNN_RELU = function(...) torch_rnn_relu(...),
    LSTM = function(...) torch_lstm(...),
    GRU = function(...) torch_gru(...)
  )
}

rnn_positive_size <- function(x, name) {
  x <- whole_number(x, name)
  if (x < 1) {
    abort(sprintf("`%s` must be greater than zero, got %s.", name, describe(x)),
          class = "value_error")
  }
  x
}

# nolint start: object_usage_linter. (R6 methods: `self`, `super`)
nn_rnn_base <- nn_module(
  "nn_rnn_base",
  initialize = function(mode, input_size, hidden_size, num_layers = 1, bias = TRUE,
                        batch_first = FALSE, dropout = 0, bidirectional = FALSE) {
    self$mode <- mode
    self$input_size <- rnn_positive_size(input_size, "input_size")
    self$hidden_size <- rnn_positive_size(hidden_size, "hidden_size")
    self$num_layers <- rnn_positive_size(num_layers, "num_layers")
    self$bias <- rnn_flag(bias, "bias")
    self$batch_first <- rnn_flag(batch_first, "batch_first")
    if (!is.numeric(dropout) || length(dropout) != 1L || is.na(dropout) || dropout < 0 ||
        dropout > 1) {
      abort(sprintf(paste0("`dropout` must be a number between 0 and 1 (the probability of an ",
                           "element being zeroed), got %s."), describe(dropout)),
            class = "value_error")
    }
    self$dropout <- as.double(dropout)
    self$bidirectional <- rnn_flag(bidirectional, "bidirectional")
    self$proj_size <- 0L
    if (dropout > 0 && self$num_layers == 1L) {
      rlang::warn(paste0(
        "dropout option adds dropout after all but last recurrent layer, so non-zero dropout ",
        "expects num_layers greater than 1, but got dropout=", dropout, " and num_layers=1"
      ), class = "ampkit_warning")
    }
    gate_size <- rnn_gate_multiplier[[mode]] * self$hidden_size
    directions <- if (self$bidirectional) 2L else 1L
    # PyTorch's order (layer, then direction; w_ih, w_hh, b_ih, b_hh), which is the order
    # reset_parameters() draws them in.
    names <- character()
    for (layer in seq_len(self$num_layers)) {
      layer_input <- if (layer == 1L) self$input_size else self$hidden_size * directions
      for (direction in seq_len(directions)) {
        suffix <- paste0("_l", layer, if (direction == 2L) "_reverse" else "")
        shapes <- list(weight_ih = c(gate_size, layer_input),
                       weight_hh = c(gate_size, self$hidden_size))
        if (self$bias) shapes <- c(shapes, list(bias_ih = gate_size, bias_hh = gate_size))
        for (kind in names(shapes)) {
          self[[paste0(kind, suffix)]] <- nn_parameter(torch_empty(shapes[[kind]]))
        }
        names <- c(names, paste0(names(shapes), suffix))
      }
    }
    self$flat_weight_names_ <- names
    self$flatten_parameters()
    self$reset_parameters()
  },
  reset_parameters = function() {
    stdv <- 1 / sqrt(self$hidden_size)
    for (weight in self$parameters) nn_init_uniform_(weight, -stdv, stdv)
  },
  # The weights in the order libtorch's kernels take them, read by name at each call (so that a
  # parameter replaced by assignment or moved by $to() is the one used).
  flat_weights = function() {
    lapply(self$flat_weight_names_, function(name) self[[name]])
  },
  # On CUDA, PyTorch makes the weights views of one buffer, the layout cuDNN takes without a
  # copy at each call; elsewhere nothing to do.
  flatten_parameters = function() {
    weights <- self$flat_weights()
    if (!all(vapply(weights, is_torch_tensor, TRUE))) {
      return(invisible(NULL))
    }
    dtype <- weights[[1L]]$dtype
    for (w in weights) {
      if (!w$is_cuda || w$dtype != dtype || !torch_cudnn_is_acceptable(w)) {
        return(invisible(NULL))
      }
    }
    with_no_grad(torch__cudnn_rnn_flatten_weight(
      weights, if (self$bias) 4L else 2L, self$input_size,
      match(self$mode, c("RNN_RELU", "RNN_TANH", "LSTM", "GRU")) - 1L, self$hidden_size,
      self$proj_size, self$num_layers, self$batch_first, self$bidirectional
    ))
    invisible(NULL)
  },
  .apply = function(fn) {
    out <- super$.apply(fn)
    self$flatten_parameters()
    out
  },
  permute_hidden = function(hx, permutation) rnn_permute(hx, permutation),
  # The hidden state's expected shape, checked before the kernel sees it.
  check_hidden = function(hx, batch, name = "hx") {
    directions <- if (self$bidirectional) 2L else 1L
    expected <- c(self$num_layers * directions, batch, self$hidden_size)
    if (!is_torch_tensor(hx) || !identical(as.integer(dim(hx)), as.integer(expected))) {
      got <- if (is_torch_tensor(hx)) paste0("(", paste(dim(hx), collapse = ", "), ")") else
        describe(hx)
      abort(sprintf(paste0("`%s` must be of size (%s) (num_layers * num_directions, batch, ",
                           "hidden_size), got %s."), name, paste(expected, collapse = ", "), got),
            class = "value_error")
    }
  },
  check_input = function(input, packed, weights) {
    expected_dim <- if (packed) 2L else 3L
    if (input$dim() != expected_dim) {
      abort(sprintf("`input` must have %d dimensions, got %d.", expected_dim, input$dim()),
            class = "value_error")
    }
    if (input$size(-1L) != self$input_size) {
      abort(sprintf("`input`'s last dimension must be input_size (%d), got %d.",
                    self$input_size, input$size(-1L)), class = "value_error")
    }
    weight_dtype <- weights[[1L]]$dtype
    if (input$dtype != weight_dtype && !is_autocast_enabled(input$device$type)) {
      abort(sprintf(paste0("`input`'s dtype (%s) must be the weights' dtype (%s): convert the ",
                           "input with $to(dtype = ...) or the module with $to(dtype = ...)."),
                    as.character(input$dtype), as.character(weight_dtype)),
            class = "value_error")
    }
  },
  forward = function(input, hx = NULL) {
    lstm <- self$mode == "LSTM"
    packed <- is_packed_sequence(input)
    unbatched <- FALSE
    if (packed) {
      parts <- rnn_packed_parts(input)
      input <- parts$data
      batch <- parts$batch_sizes[1]$item()
    } else {
      check_tensor(input, "input")
      if (!input$dim() %in% c(2L, 3L)) {
        abort(sprintf("`input` must be a 2-D (unbatched) or 3-D tensor, got %d-D.",
                      input$dim()), class = "value_error")
      }
      parts <- list()
      unbatched <- input$dim() == 2L
      batch_dim <- if (self$batch_first) 1L else 2L
      if (unbatched) input <- input$unsqueeze(batch_dim)
      batch <- input$size(batch_dim)
    }
    weights <- self$flat_weights()
    self$check_input(input, packed, weights)
    if (is.null(hx)) {
      zeros <- torch_zeros(self$num_layers * if (self$bidirectional) 2L else 1L, batch,
                           self$hidden_size, dtype = input$dtype, device = input$device)
      hx <- if (lstm) list(zeros, zeros) else zeros
    } else {
      if (lstm && (!is.list(hx) || length(hx) != 2L)) {
        abort(sprintf("`hx` must be a list of two tensors (h_0, c_0), got %s.", describe(hx)),
              class = "value_error")
      }
      states <- if (lstm) hx else list(hx)
      if (unbatched) {
        states <- lapply(states, function(h) {
          if (!is_torch_tensor(h) || h$dim() != 2L) {
            abort(sprintf("For an unbatched 2-D `input`, `hx` must be 2-D too, got %s.",
                          if (is_torch_tensor(h)) paste0(h$dim(), "-D") else describe(h)),
                  class = "value_error")
          }
          h$unsqueeze(2L)
        })
      }
      for (h in states) self$check_hidden(h, batch)
      hx <- self$permute_hidden(if (lstm) states else states[[1L]], parts$sorted)
    }
    kernel <- rnn_kernel(self$mode)
    result <- if (packed) {
      kernel(data = input, batch_sizes = parts$batch_sizes, hx = hx,
             params = weights, has_biases = self$bias, num_layers = self$num_layers,
             dropout = self$dropout, train = self$training, bidirectional = self$bidirectional)
    } else {
      kernel(input = input, hx = hx, params = weights, has_biases = self$bias,
             num_layers = self$num_layers, dropout = self$dropout, train = self$training,
             bidirectional = self$bidirectional, batch_first = self$batch_first)
    }
    output <- result[[1L]]
    hidden <- if (lstm) result[2:3] else result[[2L]]
    if (packed) {
      output <- PackedSequence$new(output, parts$batch_sizes, parts$sorted, parts$unsorted)
      hidden <- self$permute_hidden(hidden, parts$unsorted)
    } else if (unbatched) {
      output <- output$squeeze(batch_dim)
      hidden <- if (lstm) lapply(hidden, function(h) h$squeeze(2L)) else hidden$squeeze(2L)
    }
    list(output, hidden)
  }
)
# nolint end

#' Recurrent layers
#'
#' R torch's recurrent layers: a multi-layer Elman RNN (`nn_rnn()`, with a tanh
#' or ReLU nonlinearity), a long short-term memory (`nn_lstm()`) and a gated
#' recurrent unit (`nn_gru()`), as PyTorch's `torch.nn.RNN`, `LSTM` and `GRU`
#' (libtorch's kernels: the same numbers, and cuDNN's on CUDA).
#'
#' Calling the module as `module(input, hx)`: `input` is `(L, N, input_size)`
#' (`(N, L, input_size)` with `batch_first = TRUE`), `(L, input_size)` for one
#' unbatched sequence, or a `PackedSequence` (see
#' [nn_utils_rnn_pack_padded_sequence()]). `hx`, the initial state (zeros when
#' `NULL`), is `(num_layers * num_directions, N, hidden_size)`; for `nn_lstm()`
#' a list of two such tensors, `h_0` and `c_0`.
#'
#' The result is `list(output, h_n)` (`nn_rnn()`, `nn_gru()`) or
#' `list(output, list(h_n, c_n))` (`nn_lstm()`): `output` holds the last
#' layer's hidden state at each time step, `(L, N, num_directions *
#' hidden_size)` (a `PackedSequence` if the input was one), and `h_n` (and
#' `c_n`) the state of every layer and direction after the last step.
#'
#' The parameters are named `weight_ih_l{k}`, `weight_hh_l{k}`, `bias_ih_l{k}`,
#' `bias_hh_l{k}` with layers counted from 1 (R torch's names; PyTorch counts
#' from 0), and `_reverse` for the second direction. The gates are stacked in
#' PyTorch's order (LSTM: input, forget, cell, output; GRU: reset, update,
#' new). All are drawn from \eqn{U(-1/\sqrt{hidden\_size}, 1/\sqrt{hidden\_size})}
#' in PyTorch's order, so [torch_manual_seed()] gives PyTorch's weights.
#'
#' @param input_size The number of features of the input.
#' @param hidden_size The number of features of the hidden state.
#' @param num_layers The number of stacked recurrent layers.
#' @param nonlinearity `"tanh"` (the default, also for `NULL`) or `"relu"`.
#' @param bias Whether the layers have the biases `b_ih` and `b_hh`.
#' @param batch_first If `TRUE`, the input and output are `(batch, seq,
#'   feature)` (the hidden state is not affected).
#' @param dropout The probability of dropout on the outputs of each layer but
#'   the last (in training mode).
#' @param bidirectional If `TRUE`, each layer runs in both directions.
#' @param ... Unused (R torch's).
#' @return A module.
#' @name nn_rnn
#' @examples
#' torch_manual_seed(1)
#' rnn <- nn_rnn(10, 20, num_layers = 2)
#' out <- rnn(torch_randn(5, 3, 10), torch_randn(2, 3, 20))
#' dim(out[[1]])
#' dim(out[[2]])
#' lstm <- nn_lstm(10, 20, batch_first = TRUE)
#' out <- lstm(torch_randn(3, 5, 10))
#' dim(out[[2]][[2]])
#' gru <- nn_gru(10, 20, bidirectional = TRUE)
#' dim(gru(torch_randn(5, 3, 10))[[1]])
NULL

#' @rdname nn_rnn
#' @export
nn_rnn <- nn_module(
  "nn_rnn",
  inherit = nn_rnn_base,
  initialize = function(input_size, hidden_size, num_layers = 1, nonlinearity = NULL,
                        bias = TRUE, batch_first = FALSE, dropout = 0, bidirectional = FALSE,
                        ...) {
    self$nonlinearity <- arg_choice(nonlinearity %||% "tanh", "nonlinearity",
                                    c("tanh", "relu"))
    mode <- if (self$nonlinearity == "tanh") "RNN_TANH" else "RNN_RELU"
    super$initialize(mode, input_size, hidden_size, num_layers = num_layers, bias = bias,
                     batch_first = batch_first, dropout = dropout,
                     bidirectional = bidirectional, ...)
  }
)

#' @rdname nn_rnn
#' @export
nn_lstm <- nn_module(
  "nn_lstm",
  inherit = nn_rnn_base,
  initialize = function(input_size, hidden_size, num_layers = 1, bias = TRUE,
                        batch_first = FALSE, dropout = 0, bidirectional = FALSE, ...) {
    super$initialize("LSTM", input_size, hidden_size, num_layers = num_layers, bias = bias,
                     batch_first = batch_first, dropout = dropout,
                     bidirectional = bidirectional, ...)
  },
  permute_hidden = function(hx, permutation) lapply(hx, rnn_permute, permutation)
)

#' @rdname nn_rnn
#' @export
nn_gru <- nn_module(
  "nn_gru",
  inherit = nn_rnn_base,
  initialize = function(input_size, hidden_size, num_layers = 1, bias = TRUE,
                        batch_first = FALSE, dropout = 0, bidirectional = FALSE, ...) {
    super$initialize("GRU", input_size, hidden_size, num_layers = num_layers, bias = bias,
                     batch_first = batch_first, dropout = dropout,
                     bidirectional = bidirectional, ...)
  }
)
