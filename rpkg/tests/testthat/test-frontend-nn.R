# The front end's modules (nn_module, the built-in layers and losses, nnf_*), with PyTorch as the
# oracle: the same seed gives the same weights, the same call on the same weights the same
# numbers (bit for bit), with R torch's 1-based conventions converted at the border. R tensors
# reach PyTorch as the same tensors (helper-frontend.R: py_of()); weights are copied from the R
# module into its PyTorch twin through them.

# The R error message carries no Python traceback and no Python private names.
expect_r_words <- function(cnd) {
  testthat::expect_false(grepl("Traceback|Detailed traceback|File \"", conditionMessage(cnd)))
}

test_that("nn_linear is torch.nn.Linear: class, seeded weights, forward, sizes as doubles", {
  skip_if_no_ampkit()
  torch_manual_seed(7)
  fc <- nn_linear(10, 32)
  expect_identical(class(fc), c("nn_linear", "nn_module"))
  expect_true(is_nn_module(fc))
  expect_false(is_nn_module(nn_linear))
  expect_true(inherits(nn_linear, "nn_module_generator"))
  pt()$manual_seed(7L)
  ref <- pt()$nn$Linear(10L, 32L)
  expect_same_tensor(fc$weight, ref$weight)
  expect_same_tensor(fc$bias, ref$bias)
  expect_identical(names(fc$parameters), c("weight", "bias"))
  x <- torch_randn(4, 10)
  expect_same_tensor(fc(x), pycall(ref, py_of(x)))
  # The module behind the callable is an R6 nn_Module (R torch's), not a Python object.
  expect_identical(class(attr(fc, "module")), c("nn_linear", "nn_Module", "R6"))
  expect_null(nn_linear(3, 2, bias = FALSE)$bias)
})

test_that("bad sizes and arguments are errors in R's words naming the argument", {
  skip_if_no_ampkit()
  e <- expect_error(nn_linear(10.5, 2), class = "value_error")
  expect_match(conditionMessage(e), "`in_features` must be a whole number, got 10.5")
  expect_s3_class(e, "ampkit_error")
  e <- expect_error(nn_linear("a", 2), "`in_features`", class = "value_error")
  expect_r_words(e)
  expect_error(nn_conv2d(1, 2, kernel_size = c(1.5, 2)), "`kernel_size`", class = "value_error")
  expect_error(nn_mse_loss(reduction = "avg"), "`reduction` must be one of", class = "value_error")
  expect_error(nn_dropout(p = "x"), "`p` must be a number")
  expect_error(nn_sequential(nn_linear), "must be initialized", class = "value_error")
  expect_error(nn_sequential(1), "must be an nn_module", class = "value_error")
  # An error from PyTorch (a shape mismatch) is an R condition with R torch's class.
  e <- expect_error(nn_linear(3, 2)(torch_randn(2, 4)), class = "runtime_error")
  expect_r_words(e)
})

net_gen <- nn_module(
  "net",
  initialize = function(n_in, n_hidden) {
    self$fc1 <- nn_linear(n_in, n_hidden)
    self$block <- nn_sequential(nn_linear(n_hidden, n_hidden), nn_relu())
    self$fc2 <- nn_linear(n_hidden, 1)
    self$scale <- nn_parameter(torch_ones(1))
    self$calls <- nn_buffer(torch_zeros(1))
    self$scratch <- nn_buffer(torch_zeros(2), persistent = FALSE)
    self$note <- "plain field"
  },
  forward = function(x) {
    x <- nnf_relu(self$fc1(x))
    x <- self$block(x)
    self$fc2(x) * self$scale
  },
  n_hidden_layers = function() length(self$block)
)

# net_gen's PyTorch twin (the same registrations in the same order).
torch_net <- function(n_in, n_hidden) {
  main <- reticulate::py_run_string("
import torch
class Net(torch.nn.Module):
    def __init__(self, n_in, n_hidden):
        super().__init__()
        self.fc1 = torch.nn.Linear(n_in, n_hidden)
        self.block = torch.nn.Sequential(torch.nn.Linear(n_hidden, n_hidden), torch.nn.ReLU())
        self.fc2 = torch.nn.Linear(n_hidden, 1)
        self.scale = torch.nn.Parameter(torch.ones(1))
        self.register_buffer('calls', torch.zeros(1))
        self.register_buffer('scratch', torch.zeros(2), persistent=False)

    def forward(self, x):
        x = torch.nn.functional.relu(self.fc1(x))
        x = self.block(x)
        return self.fc2(x) * self.scale
", convert = FALSE)
  main$Net(n_in, n_hidden)
}

test_that("nn_module: classes, registered parameters, buffers and nested modules", {
  skip_if_no_ampkit()
  torch_manual_seed(1)
  m <- net_gen(4, 8)
  expect_identical(class(m), c("net", "nn_module"))
  expect_true(inherits(net_gen, "nn_module_generator"))
  # R torch's order: the submodules' parameters, then the module's own.
  expect_identical(names(m$parameters), c("fc1.weight", "fc1.bias", "block.0.weight",
                                          "block.0.bias", "fc2.weight", "fc2.bias", "scale"))
  expect_identical(names(m$named_parameters(recursive = FALSE)), "scale")
  expect_identical(names(m$buffers), c("calls", "scratch"))
  expect_identical(names(m$children), c("fc1", "block", "fc2"))
  expect_length(m$modules, 6L) # m, fc1, block, block.0, block.1, fc2
  expect_identical(class(m$modules[[1]]), c("net", "nn_module"))
  expect_identical(m$note, "plain field")
  expect_identical(m$n_hidden_layers(), 2L)
  expect_true(is_nn_parameter(m$scale))
  # Its PyTorch twin has the same state, in PyTorch's order.
  py <- torch_net(4L, 8L)
  py_names <- unlist(reticulate::import_builtins()$list(py$state_dict()$keys()))
  expect_identical(py_names, names(m$state_dict()))
  expect_identical(names(m$state_dict()), c("scale", "calls", "fc1.weight", "fc1.bias",
                                            "block.0.weight", "block.0.bias", "fc2.weight",
                                            "fc2.bias"))
  # The forward is the R one; on the same weights it gives PyTorch's numbers.
  x <- torch_randn(3, 4)
  y <- m(x)
  expect_identical(y$shape, c(3L, 1L))
  load_into_torch(py, m)
  expect_same_tensor(reticulate::py_call(py, py_of(x)), y)
  # Fields are read and assigned as fields.
  m$scale <- nn_parameter(torch_ones(1) * 2)
  expect_equal(m$scale$item(), 2)
  expect_error(m$scale <- torch_ones(1), "nn_parameter", class = "value_error")
  expect_error(m$parameters <- list(), class = "runtime_error")
})

test_that("a tied weight is one parameter, listed once, as in PyTorch", {
  skip_if_no_ampkit()
  tied <- nn_module(
    initialize = function() {
      self$enc <- nn_linear(3, 3)
      self$dec <- nn_linear(3, 3)
      self$dec$weight <- self$enc$weight
    },
    forward = function(x) self$dec(self$enc(x))
  )()
  expect_identical(names(tied$parameters), c("enc.weight", "enc.bias", "dec.bias"))
  expect_length(tied$parameters, 3L)
  opt <- optim_sgd(tied$parameters, lr = 0.1)
  tied(torch_randn(2, 3))$sum()$backward()
  opt$step()
  expect_same_tensor(tied$enc$weight, tied$dec$weight)
  # $to(dtype) and $double() keep it one parameter (PyTorch's `param.data = ...`), and the
  # optimizer made before trains the converted one, as torch.optim does after module.to()
  grad_before <- tied$enc$weight$grad
  tied$to(dtype = torch_float64())
  expect_length(tied$parameters, 3L)
  expect_same_tensor(tied$enc$weight, tied$dec$weight)
  expect_true(tied$enc$weight$dtype == torch_float64())
  expect_true(tied$enc$weight$grad$dtype == torch_float64())
  expect_same_tensor(tied$enc$weight$grad, grad_before) # the gradient converted in place too
  expect_same_tensor(opt$param_groups[[1]]$params[[1]], tied$enc$weight)
  before <- tied$enc$weight$detach()$clone()
  tied$zero_grad()
  tied(torch_randn(2, 3, dtype = torch_float64()))$sum()$backward()
  opt$step()
  expect_same_tensor(tied$enc$weight, tied$dec$weight)
  expect_false(torch_equal(tied$enc$weight, before))
})

test_that("a parameter changed in place under no_grad through a view prints as PyTorch's", {
  skip_if_no_ampkit()
  w <- nn_parameter(torch_zeros(2, 2))
  v <- with_no_grad(w[1, 1]$fill_(4))
  # reading its grad_fn is libtorch's error; PyTorch's printer says <Invalid>
  expect_error(v$grad_fn, class = "runtime_error")
  expect_output(print(v), "[ grad_fn = <Invalid> ]", fixed = TRUE)
})

test_that("layers with a zero size initialize as PyTorch's (a no-op warned, a zero bias)", {
  skip_if_no_ampkit()
  expect_warning(empty_in <- nn_linear(0, 3), "Initializing zero-element tensors is a no-op")
  expect_equal(empty_in$weight$shape, c(3L, 0L))
  expect_equal(as.numeric(empty_in$bias), c(0, 0, 0))
  py <- pt()$nn$Linear(0L, 3L)
  expect_same_tensor(empty_in$bias, py$bias$detach())
  expect_warning(nn_init_kaiming_normal_(torch_empty(2, 0)), "zero-element")
  expect_warning(empty_out <- nn_linear(4, 0), "zero-element")
  expect_equal(empty_out$weight$shape, c(0L, 4L))
})

test_that("clone_module() is $clone(): shallow, deep, and deep sharing the values", {
  torch_manual_seed(1)
  net <- nn_sequential(nn_linear(2, 3), nn_relu(), nn_linear(3, 1))
  net[[3]]$weight$requires_grad_(FALSE)
  deep <- clone_module(net, deep = TRUE)
  expect_true(torch_equal(deep[[1]]$weight, net[[1]]$weight))
  expect_false(deep[[3]]$weight$requires_grad)
  with_no_grad(deep[[1]]$weight$zero_())
  expect_false(torch_equal(deep[[1]]$weight, net[[1]]$weight))
  shared <- clone_module(net, deep = TRUE, replace_values = FALSE)
  with_no_grad(shared[[1]]$bias$fill_(7))
  expect_equal(as.numeric(net[[1]]$bias), rep(7, 3))
  expect_false(identical(shared[[1]], net[[1]])) # its own submodules
  shallow <- clone_module(net)
  expect_identical(shallow[[1]], net[[1]])
  expect_error(clone_module(net, deep = NA), "`deep`", class = "value_error")
})

test_that("train(), eval() and $training reach every submodule, as in PyTorch", {
  skip_if_no_ampkit()
  m <- net_gen(2, 3)
  expect_true(m$training)
  m$eval()
  expect_false(m$training)
  expect_false(m$block[[2]]$training)
  expect_false(m$block$training)
  m$train()
  expect_true(m$fc1$training)
  m$training <- FALSE
  expect_false(m$training)
  expect_error(m$training <- "yes", "logical flag", class = "value_error")
})

test_that("state_dict() and load_state_dict() round-trip, R torch's rules on keys", {
  skip_if_no_ampkit()
  torch_manual_seed(1)
  a <- net_gen(4, 8)
  torch_manual_seed(2)
  b <- net_gen(4, 8)
  expect_false(same_tensor(a$fc1$weight, b$fc1$weight))
  sd <- a$state_dict()
  expect_true(all(vapply(sd, inherits, logical(1), "torch_tensor")))
  # Detached: plain tensors outside the graph, sharing the parameters' storage, that keep the
  # parameters' requires_grad (R torch's rule).
  expect_true(sd$fc1.weight$requires_grad)
  expect_null(sd$fc1.weight$grad_fn)
  expect_identical(class(sd$fc1.weight), c("torch_tensor", "R7"))
  expect_false(is_nn_parameter(sd$fc1.weight) || is_nn_buffer(sd$calls))
  expect_true(sd$fc1.weight$is_leaf)
  expect_identical(sd$fc1.weight$data_ptr(), a$fc1$weight$data_ptr())
  b$load_state_dict(c(sd, list(extra = torch_ones(1)))) # extra keys are ignored (R torch)
  for (key in names(sd)) expect_same_tensor(a$state_dict()[[key]], b$state_dict()[[key]])
  x <- torch_randn(2, 4)
  expect_same_tensor(a(x), b(x))
  e <- expect_error(b$load_state_dict(sd[-1]), "Could not find scale in the state_dict",
                    class = "value_error")
  expect_error(b$load_state_dict(list(1, 2)), "named list of tensors", class = "value_error")
  bad <- sd
  bad$fc1.weight <- torch_ones(2, 2)
  e <- expect_error(b$load_state_dict(bad), class = "runtime_error")
  expect_r_words(e)
})

test_that("$to(), $cpu(), $zero_grad() and $apply() act on the whole tree", {
  skip_if_no_ampkit()
  m <- net_gen(2, 3)
  m$to(dtype = torch_float64())
  expect_true(m$fc1$weight$dtype == torch_float64())
  expect_true(m$calls$dtype == torch_float64())
  expect_true(m$block[[1]]$bias$dtype == torch_float64())
  m$to(device = "cpu", dtype = torch_float32())
  m$to("cpu")
  m$cpu()
  expect_true(m$scale$dtype == torch_float32())
  expect_error(m$to(dtype = torch_long()), "floating point", class = "value_error")
  out <- m(torch_randn(5, 2))$sum()
  out$backward()
  expect_false(is_undefined_tensor(m$fc1$weight$grad)) # R torch: no gradient is undefined
  m$zero_grad()
  expect_equal(m$fc1$weight$grad$abs()$sum()$item(), 0)
  seen <- character()
  m$apply(function(mod) seen <<- c(seen, class(mod)[[1]]))
  expect_identical(seen, c("nn_linear", "nn_linear", "nn_relu", "nn_sequential", "nn_linear",
                           "net"))
  expect_output(print(m), "An `nn_module` containing 26 parameters")
})

test_that("a module defined in R is freed when dropped: no cycle through C++ keeps it", {
  skip_if_no_ampkit()
  freed <- new.env()
  freed$n <- 0L
  train_and_drop <- function() {
    m <- net_gen(4, 8)
    for (inst in list(attr(m, "module"), attr(m$block[[1]], "module"))) {
      reg.finalizer(inst, function(e) freed$n <- freed$n + 1L)
    }
    hook <- m$register_forward_hook(function(module, input, output) NULL)
    opt <- optim_adam(m$parameters, fused = TRUE)
    scaler <- amp_grad_scaler("cpu")
    scaler$scale(m(torch_randn(2, 4))$sum())$backward()
    scaler$step(opt)
    scaler$update()
    invisible()
  }
  train_and_drop()
  invisible(gc())
  invisible(torch_randn(1)) # anything released on R's thread after the collection
  invisible(gc())
  expect_identical(freed$n, 2L)
})

test_that("nn_module inherits, and other methods see self and private", {
  skip_if_no_ampkit()
  base <- nn_module("base", initialize = function() self$fc <- nn_linear(2, 2),
                    forward = function(x) self$fc(x), private = list(k = 3),
                    times = function() private$k)
  child <- nn_module("child", inherit = base, forward = function(x) super$forward(x) * 2)
  m <- child()
  expect_identical(class(m), c("child", "base", "nn_module"))
  expect_identical(m$times(), 3)
  x <- torch_randn(1, 2)
  expect_same_tensor(m(x), m$fc(x) * 2)
  empty <- nn_module(forward = function(x) x)()
  expect_length(empty$parameters, 0L)
  expect_error(nn_module("nofwd")()(1), "not implemented", class = "not_implemented_error")
})

test_that("nn_sequential takes modules and !!! splicing; indexing is 1-based", {
  skip_if_no_ampkit()
  torch_manual_seed(3)
  a <- nn_sequential(nn_linear(4, 8), nn_relu(), nn_linear(8, 2))
  torch_manual_seed(3)
  layers <- list(nn_linear(4, 8), nn_relu(), nn_linear(8, 2))
  b <- nn_sequential(!!!layers)
  torch_manual_seed(3)
  c2 <- nn_sequential(nn_linear(4, 8), !!!list(nn_relu(), nn_linear(8, 2)))
  expect_identical(class(b), c("nn_sequential", "nn_module"))
  expect_identical(names(b$state_dict()), c("0.weight", "0.bias", "2.weight", "2.bias"))
  expect_identical(length(b), 3L)
  expect_identical(class(b[[2]]), c("nn_relu", "nn_module"))
  expect_identical(names(b$children), c("0", "1", "2"))
  x <- torch_randn(5, 4)
  expect_same_tensor(a(x), b(x))
  expect_same_tensor(b(x), c2(x))
  head <- b[1:2]
  expect_identical(length(head), 2L)
  expect_same_tensor(head(x), nnf_relu(b[[1]](x)))
  e <- expect_error(b[[4]], "out of range", class = "index_error")
  # Sequential of R-defined modules: PyTorch's Sequential calls back into R.
  s <- nn_sequential(net_gen(4, 3), nn_sigmoid())
  expect_identical(s(x)$shape, c(5L, 1L))
  ml <- nn_module_list(list(nn_linear(1, 1), nn_linear(1, 2)))
  ml$append(nn_relu())
  expect_identical(length(ml), 3L)
  expect_identical(class(ml[[3]])[[1]], "nn_relu")
  expect_identical(names(ml$parameters), c("0.weight", "0.bias", "1.weight", "1.bias"))
})

test_that("conv2d, max_pool2d, flatten: PyTorch's numbers, 1-based dims and indices", {
  skip_if_no_ampkit()
  torch_manual_seed(5)
  conv <- nn_conv2d(1, 3, kernel_size = 3, padding = 1)
  pt()$manual_seed(5L)
  ref <- pt()$nn$Conv2d(1L, 3L, kernel_size = 3L, padding = 1L)
  x <- torch_randn(2, 1, 6, 6)
  expect_same_tensor(conv(x), pycall(ref, py_of(x)))
  expect_identical(nn_conv2d(1, 2, c(3, 2), stride = 2, padding = "valid")(x)$shape,
                   c(2L, 2L, 2L, 3L))
  pool <- nn_max_pool2d(2)
  expect_identical(pool(x)$shape, c(2L, 1L, 3L, 3L))
  withi <- nn_max_pool2d(2, return_indices = TRUE)(x)
  ref_i <- pt()$nn$functional$max_pool2d(py_of(x), 2L, return_indices = TRUE)
  expect_same_tensor(withi[[2]], ref_i[1]$add(1L))
  expect_identical(nn_flatten()(x)$shape, c(2L, 36L))
  expect_identical(nn_flatten(start_dim = 3)(x)$shape, c(2L, 1L, 36L))
  expect_identical(nn_flatten(1, 2)(x)$shape, c(2L, 6L, 6L))
  expect_error(nn_flatten(start_dim = 0), "1-based", class = "value_error")
})

test_that("conv1d, avg_pool2d, adaptive_avg_pool2d, dropout2d agree with PyTorch", {
  skip_if_no_ampkit()
  fnl <- pt()$nn$functional
  torch_manual_seed(8)
  conv <- nn_conv1d(2, 3, kernel_size = 3, padding = "same")
  pt()$manual_seed(8L)
  ref <- pt()$nn$Conv1d(2L, 3L, kernel_size = 3L, padding = "same")
  x1 <- torch_randn(4, 2, 7)
  expect_same_tensor(conv(x1), pycall(ref, py_of(x1)))
  for (mode in c("reflect", "circular")) {
    padded <- nn_conv2d(2, 3, kernel_size = c(3, 2), padding = c(1, 2), padding_mode = mode)
    ref <- load_into_torch(pt()$nn$Conv2d(2L, 3L, kernel_size = ints(3, 2), padding = ints(1, 2),
                                          padding_mode = mode), padded)
    x2 <- torch_randn(1, 2, 5, 6)
    expect_same_tensor(padded(x2), pycall(ref, py_of(x2)))
  }
  expect_identical(padded$kernel_size, c(3L, 2L))
  x <- torch_randn(2, 3, 6, 6)
  expect_same_tensor(nn_avg_pool2d(2)(x), fnl$avg_pool2d(py_of(x), 2L))
  expect_same_tensor(nn_avg_pool2d(c(3, 2), stride = 1, padding = 1)(x),
                     fnl$avg_pool2d(py_of(x), list(3L, 2L), stride = 1L, padding = 1L))
  expect_same_tensor(nn_adaptive_avg_pool2d(c(1, 1))(x), fnl$adaptive_avg_pool2d(py_of(x), 1L))
  expect_identical(nn_adaptive_avg_pool2d(3)(x)$shape, c(2L, 3L, 3L, 3L))
  drop <- nn_dropout2d(0.5)
  torch_manual_seed(4)
  d <- drop(x)
  pt()$manual_seed(4L)
  expect_same_tensor(d, fnl$dropout2d(py_of(x), 0.5))
  drop$eval()
  expect_same_tensor(drop(x), x)
})

test_that("activations, dropout, normalization layers agree with PyTorch", {
  skip_if_no_ampkit()
  fnl <- pt()$nn$functional
  x <- torch_randn(6, 4)
  expect_same_tensor(nn_relu()(x), fnl$relu(py_of(x)))
  expect_same_tensor(nn_gelu()(x), fnl$gelu(py_of(x)))
  expect_same_tensor(nn_gelu(approximate = "tanh")(x), fnl$gelu(py_of(x), approximate = "tanh"))
  expect_same_tensor(nn_tanh()(x), pt()$tanh(py_of(x)))
  expect_same_tensor(nn_sigmoid()(x), pt()$sigmoid(py_of(x)))
  expect_same_tensor(nn_softmax(dim = 1)(x), fnl$softmax(py_of(x), dim = 0L))
  expect_same_tensor(nn_log_softmax(dim = -1)(x), fnl$log_softmax(py_of(x), dim = -1L))
  expect_same_tensor(nn_identity()(x), x)
  drop <- nn_dropout(p = 0.5)
  torch_manual_seed(9)
  d1 <- drop(x)
  pt()$manual_seed(9L)
  expect_same_tensor(d1, fnl$dropout(py_of(x), p = 0.5, training = TRUE))
  drop$eval()
  expect_same_tensor(drop(x), x)
  bn <- nn_batch_norm1d(4)
  expect_identical(names(bn$state_dict()), c("weight", "bias", "running_mean", "running_var",
                                             "num_batches_tracked"))
  ref <- pt()$nn$BatchNorm1d(4L)
  expect_same_tensor(bn(x), pycall(ref, py_of(x)))
  expect_same_tensor(bn$running_mean, ref$running_mean)
  bn$eval()
  ref$eval()
  expect_same_tensor(bn(x), pycall(ref, py_of(x)))
  bn2 <- nn_batch_norm2d(3)
  expect_identical(bn2(torch_randn(2, 3, 4, 4))$shape, c(2L, 3L, 4L, 4L))
  ln <- nn_layer_norm(4)
  expect_same_tensor(ln(x), fnl$layer_norm(py_of(x), list(4L)))
  expect_identical(names(nn_layer_norm(c(3, 4))$parameters), c("weight", "bias"))
})

test_that("nn_embedding takes 1-based indices and a 1-based padding_idx", {
  skip_if_no_ampkit()
  emb <- nn_embedding(5, 3, padding_idx = 2)
  w <- emb$weight
  idx <- torch_tensor(c(1L, 5L, 2L))
  out <- emb(idx)
  ref <- py_of(w)$index_select(0L, py_of(idx)$sub(1L))
  expect_same_tensor(out, ref$detach())
  row2 <- function(t) t[2, ]
  expect_equal(row2(emb$weight)$abs()$sum()$item(), 0) # padding row is zero
  expect_equal(emb$padding_idx, 2) # R torch keeps it 1-based; libtorch gets 1
  out$sum()$backward()
  expect_equal(row2(emb$weight$grad)$abs()$sum()$item(), 0)
  expect_error(nn_embedding(5, 3, padding_idx = 0), "`padding_idx`", class = "value_error")
  # An index past the table is PyTorch's IndexError; a 0 breaks the 1-based rule, a value_error
  # as for every 1-based index argument (index_select, gather).
  expect_error(nn_embedding(5, 3)(torch_tensor(6L)), class = "index_error")
  expect_error(nn_embedding(5, 3)(torch_tensor(0L)), "1-based", class = "value_error")
})

test_that("losses and nnf losses: 1-based class labels, PyTorch's numbers", {
  skip_if_no_ampkit()
  fnl <- pt()$nn$functional
  logits <- torch_randn(5, 3)
  y <- torch_tensor(c(1L, 3L, 2L, 3L, 1L))
  y0 <- py_of(y)$sub(1L)
  expect_same_tensor(nnf_cross_entropy(logits, y), fnl$cross_entropy(py_of(logits), y0))
  expect_same_tensor(nn_cross_entropy_loss()(logits, y), fnl$cross_entropy(py_of(logits), y0))
  lp <- nnf_log_softmax(logits, dim = 2)
  expect_same_tensor(nnf_nll_loss(lp, y), fnl$nll_loss(py_of(lp), y0))
  expect_same_tensor(nn_nll_loss()(lp, y), fnl$nll_loss(py_of(lp), y0))
  # ignore_index is a label in the same (1-based) terms.
  expect_same_tensor(nnf_cross_entropy(logits, y, ignore_index = 3),
                     fnl$cross_entropy(py_of(logits), y0, ignore_index = 2L))
  expect_same_tensor(nn_cross_entropy_loss(ignore_index = 3)(logits, y),
                     fnl$cross_entropy(py_of(logits), y0, ignore_index = 2L))
  # Class probabilities are taken as they are.
  probs <- nnf_softmax(torch_randn(5, 3), dim = 2)
  expect_same_tensor(nnf_cross_entropy(logits, probs),
                     fnl$cross_entropy(py_of(logits), py_of(probs)))
  expect_error(nnf_cross_entropy(logits, torch_tensor(c(1L, 4L, 1L, 1L, 1L))),
               class = "index_error")
  a <- torch_randn(4, 2)
  b <- torch_randn(4, 2)
  expect_same_tensor(nnf_mse_loss(a, b), fnl$mse_loss(py_of(a), py_of(b)))
  expect_same_tensor(nn_mse_loss(reduction = "sum")(a, b),
                     fnl$mse_loss(py_of(a), py_of(b), reduction = "sum"))
  expect_same_tensor(nn_l1_loss()(a, b), fnl$l1_loss(py_of(a), py_of(b)))
  expect_same_tensor(nnf_l1_loss(a, b, reduction = "none"),
                     fnl$l1_loss(py_of(a), py_of(b), reduction = "none"))
  t01 <- torch_rand(4, 2)
  expect_same_tensor(nn_bce_with_logits_loss()(a, t01),
                     fnl$binary_cross_entropy_with_logits(py_of(a), py_of(t01)))
  pw <- torch_ones(2) * 3
  expect_same_tensor(nn_bce_with_logits_loss(pos_weight = pw)(a, t01),
                     fnl$binary_cross_entropy_with_logits(py_of(a), py_of(t01),
                                                        pos_weight = py_of(pw)))
  expect_same_tensor(nnf_binary_cross_entropy_with_logits(a, t01),
                     fnl$binary_cross_entropy_with_logits(py_of(a), py_of(t01)))
  expect_same_tensor(nn_bce_loss()(nnf_sigmoid(a), t01),
                     fnl$binary_cross_entropy(pt()$sigmoid(py_of(a)), py_of(t01)))
})

test_that("nnf activations take 1-based dims", {
  skip_if_no_ampkit()
  fnl <- pt()$nn$functional
  x <- torch_randn(3, 4)
  expect_same_tensor(nnf_softmax(x, dim = 1), fnl$softmax(py_of(x), dim = 0L))
  expect_same_tensor(nnf_softmax(x, dim = 2), fnl$softmax(py_of(x), dim = 1L))
  expect_same_tensor(nnf_softmax(x, dim = -1), fnl$softmax(py_of(x), dim = -1L))
  expect_same_tensor(nnf_log_softmax(x, dim = 1), fnl$log_softmax(py_of(x), dim = 0L))
  expect_same_tensor(nnf_softmax(x, dim = 2, dtype = torch_float64()),
                     fnl$softmax(py_of(x), dim = 1L, dtype = pt()$float64))
  expect_same_tensor(nnf_relu(x), fnl$relu(py_of(x)))
  expect_same_tensor(nnf_gelu(x), fnl$gelu(py_of(x)))
  expect_same_tensor(nnf_tanh(x), pt()$tanh(py_of(x)))
  expect_same_tensor(nnf_sigmoid(x), pt()$sigmoid(py_of(x)))
  expect_same_tensor(nnf_dropout(x, training = FALSE), x)
  torch_manual_seed(4)
  d <- nnf_dropout(x, p = 0.3)
  pt()$manual_seed(4L)
  expect_same_tensor(d, fnl$dropout(py_of(x), p = 0.3))
  expect_same_tensor(nnf_one_hot(torch_tensor(c(1L, 3L, 2L))),
                     fnl$one_hot(pt()$tensor(ints(0, 2, 1))))
  expect_error(nnf_softmax(x), "`dim` must be given", class = "value_error")
  expect_error(nnf_softmax(x, dim = 0), "1-based", class = "value_error")
  expect_error(nnf_relu(1), "`input` must be a tensor", class = "value_error")
})

test_that("autocast sees the front end's modules: linear runs in bfloat16 inside", {
  skip_if_no_ampkit()
  fc <- nn_linear(4, 2)
  x <- torch_randn(3, 4)
  out <- with_autocast(device_type = "cpu", dtype = torch_bfloat16(), fc(x))
  expect_true(out$dtype == torch_bfloat16())
  expect_true(fc(x)$dtype == torch_float32())
})

test_that("nn_init_* fill in place from torch's generator, as torch.nn.init does", {
  skip_if_no_ampkit()
  init <- pt()$nn$init
  w <- torch_empty(3, 4)
  ref <- pt()$empty(3L, 4L)
  torch_manual_seed(2)
  expect_identical(nn_init_xavier_uniform_(w), w)
  pt()$manual_seed(2L)
  init$xavier_uniform_(ref)
  expect_same_tensor(w, ref)
  torch_manual_seed(2)
  nn_init_kaiming_normal_(w, mode = "fan_out", nonlinearity = "relu")
  pt()$manual_seed(2L)
  init$kaiming_normal_(ref, mode = "fan_out", nonlinearity = "relu")
  expect_same_tensor(w, ref)
  torch_manual_seed(2)
  nn_init_normal_(w, mean = 1, std = 2)
  pt()$manual_seed(2L)
  init$normal_(ref, mean = 1, std = 2)
  expect_same_tensor(w, ref)
  torch_manual_seed(2)
  nn_init_uniform_(w, -1, 1)
  pt()$manual_seed(2L)
  init$uniform_(ref, -1, 1)
  expect_same_tensor(w, ref)
  torch_manual_seed(2)
  nn_init_xavier_normal_(w)
  nn_init_kaiming_uniform_(w)
  nn_init_constant_(w, 3)
  expect_equal(w$sum()$item(), 36)
  fc <- nn_linear(4, 2)
  nn_init_zeros_(fc$bias)
  nn_init_ones_(fc$weight)
  expect_equal(fc(torch_ones(1, 4))$sum()$item(), 8) # the module's own parameters changed
  expect_error(nn_init_zeros_(1), "`tensor` must be a tensor", class = "value_error")
})

test_that("nn_utils_clip_grad_norm_ and _value_ clip as torch.nn.utils does", {
  skip_if_no_ampkit()
  torch_manual_seed(1)
  net <- nn_linear(3, 2)
  copy <- load_into_torch(pt()$nn$Linear(3L, 2L), net)
  x <- torch_randn(5, 3)
  nnf_mse_loss(net(x), torch_ones(5, 2) * 10)$backward()
  fnl <- pt()$nn$functional
  fnl$mse_loss(pycall(copy, py_of(x)), pt()$ones(5L, 2L)$mul(10L))$backward()
  total <- nn_utils_clip_grad_norm_(net$parameters, max_norm = 1)
  ref_total <- pt()$nn$utils$clip_grad_norm_(copy$parameters(), 1)
  expect_same_tensor(total, ref_total)
  expect_same_tensor(net$weight$grad, copy$weight$grad)
  nn_utils_clip_grad_value_(net$parameters, 0.05)
  pt()$nn$utils$clip_grad_value_(copy$parameters(), 0.05)
  expect_same_tensor(net$bias$grad, copy$bias$grad)
  expect_error(nn_utils_clip_grad_norm_(list(1), 1), "`parameters` must be a tensor",
               class = "value_error")
})

# ---- R torch's own nn tests (tests/testthat/test-nn.R of R torch), adapted ---------------------

test_that("R torch: nn_module with parameters, child modules, an inherited nn_sequential", {
  skip_if_no_ampkit()
  my_net <- nn_module(
    "my_net",
    initialize = function(n_inputs, n_outputs) {
      self$W <- nn_parameter(torch_randn(n_inputs, n_outputs))
      self$b <- nn_parameter(torch_zeros(n_outputs))
      self$linear <- nn_linear(n_inputs, n_outputs)
    },
    forward = function(x) torch_matmul(x, self$W) + self$b + self$linear(x)
  )
  model <- my_net(1, 2)
  expect_s3_class(model, "my_net")
  expect_length(model$parameters, 4L)
  expect_identical(model(torch_randn(1, 1))$dim(), 2L)
  my_sequential <- nn_module(inherit = nn_sequential, classname = "mynet")
  m <- my_sequential(nn_linear(10, 100), nn_relu(), nn_linear(100, 1))
  expect_identical(class(m), c("mynet", "nn_sequential", "nn_module"))
  expect_identical(m(torch_randn(1000, 10))$shape, c(1000L, 1L))
  expect_length(m$parameters, 4L)
})

test_that("R torch: nn_module_list append, extend, insert, as.list, inside a module", {
  skip_if_no_ampkit()
  x <- nn_module_list(list(nn_linear(10, 100), nn_relu(), nn_linear(100, 10)))
  x$append(nn_relu6())
  expect_s3_class(x[[4]], "nn_relu6")
  x$extend(list(nn_celu(), nn_gelu()))
  expect_s3_class(x[[5]], "nn_celu")
  x$insert(index = 1, nn_dropout())
  expect_s3_class(x[[1]], "nn_dropout")
  expect_s3_class(x[[2]], "nn_linear")
  expect_length(x, 7L)
  expect_identical(names(x$state_dict()), c("1.weight", "1.bias", "3.weight", "3.bias"))
  expect_length(as.list(x), 7L)
  expect_error(x$insert(9, nn_relu()), "`index` must be between 1 and 8", class = "index_error")
  my_module <- nn_module(
    initialize = function() {
      self$linears <- nn_module_list(lapply(1:10, function(x) nn_linear(10, 10)))
      self$k <- nn_module_list()
      self$k$append(nn_linear(10, 10))
      self$k$extend(list(nn_linear(10, 10)))
    },
    forward = function(x) {
      for (i in seq_len(length(self$linears))) x <- self$linears[[i]](x)
      x
    }
  )
  m <- my_module()
  expect_length(m$parameters, 24L)
  expect_identical(tail(names(m$state_dict()), 4), c("k.0.weight", "k.0.bias", "k.1.weight",
                                                    "k.1.bias"))
  expect_identical(m(torch_randn(5, 10))$shape, c(5L, 10L))
})

test_that("R torch: $to() casts parameters, buffers and gradients; keeps requires_grad", {
  skip_if_no_ampkit()
  net_gen2 <- nn_module(
    initialize = function() {
      self$linear <- nn_linear(10, 1)
      self$norm <- nn_batch_norm1d(1)
    },
    forward = function(x) self$norm(self$linear(x))
  )
  net <- net_gen2()
  torch_mean(net(torch_randn(10, 10)))$backward()
  y <- net$to(dtype = torch_double())
  expect_s3_class(y, "nn_module")
  expect_true(net$linear$weight$dtype == torch_double())
  expect_true(net$norm$running_var$dtype == torch_double())
  expect_true(net$linear$weight$grad$dtype == torch_double())
  x <- nn_linear(1, 1)
  x$weight$requires_grad_(FALSE)
  x$to(device = "cpu")
  expect_false(x$weight$requires_grad)
  # state_dict: 7 entries, loaded into a fresh module; a missing key is a value_error.
  s <- net$state_dict()
  expect_length(s, 7L)
  net2 <- net_gen2()$to(dtype = torch_double())
  net2$load_state_dict(s)
  expect_true(same_tensor(net2$state_dict()[[5]], net$norm$running_mean))
  expect_error(net2$load_state_dict(s[-6]), class = "value_error")
  # Integer indexing picks children; a module without any is out of bounds.
  expect_true(same_tensor(net[[1]]$weight, net$linear$weight))
  expect_error(nn_linear(10, 10)[[1]], "out of bounds")
})

test_that("R torch: $<- and [[<- on instances, deduplicated parameters and modules", {
  skip_if_no_ampkit()
  m <- nn_module(initialize = function() {
    self$mymodule <- nn_linear(10, 10)
    self$n <- nn_linear(15, 15)
  })
  model <- m()
  model$mymodule <- nn_linear(2, 2)
  expect_s3_class(model, "nn_module")
  expect_equal(model$mymodule$out_feature, 2) # the name older R torch versions used
  expect_identical(model$mymodule$out_features, 2L) # R torch's (and PyTorch's) field
  model[["new_module"]] <- nn_linear(5, 5)
  pars <- model$parameters
  expect_length(pars, 6L)
  expect_identical(pars$mymodule.weight$shape, c(2L, 2L))
  expect_identical(pars$new_module.weight$shape, c(5L, 5L))
  expect_error(model$parameters$weight <- torch_tensor(1), "not possible",
               class = "runtime_error")
  dup <- nn_module(initialize = function() {
    x <- nn_linear(10, 10)
    self$x <- x
    self$y <- x
  })
  expect_named(dup()$parameters, c("x.weight", "x.bias"))
  custom1 <- nn_module("myname", initialize = function() {
    self$x <- nn_linear(10, 10)
    self$y <- self$x
  })
  outer <- nn_module(initialize = function() {
    self$c1 <- custom1()
    self$fc <- nn_linear(5, 5)
  })()
  expect_length(outer$modules, 4L)
  expect_identical(attr(outer$modules[[2]], "module"), attr(outer$c1, "module"))
  expect_error(outer$modules <- list(nn_linear(10, 10)), class = "runtime_error")
})

test_that("R torch: private and active members, train/eval return the module, classes", {
  skip_if_no_ampkit()
  x <- nn_module(
    "my_module",
    initialize = function() {
      self$dense <- nn_linear(10, 1)
      private$dense2 <- nn_linear(10, 1)
    },
    forward = function(input) {
      list(self$dense(input) + private$constant(), private$dense2(input) + self$constant2)
    },
    private = list(constant = function() torch_tensor(10)),
    active = list(constant2 = function() torch_tensor(5))
  )
  o <- x()(torch_randn(100, 10))
  expect_identical(o[[2]]$shape, c(100L, 1L))
  mod <- nn_module(initialize = identity, forward = identity)
  m <- mod(1)
  expect_s3_class(m$eval(), "nn_module")
  expect_s3_class(m$train(), "nn_module")
  hello <- nn_module(classname = "hello", inherit = nn_linear)
  goodbye <- nn_module(classname = "goodbye", inherit = hello)
  expect_identical(class(goodbye), c("goodbye", "hello", "nn_linear", "nn_module",
                                     "nn_module_generator"))
  expect_identical(class(goodbye(10, 10)), c("goodbye", "hello", "nn_linear", "nn_module"))
  seq <- nn_sequential(nn_relu(), nn_tanh(), nn_relu6(), nn_relu(), nn_tanh())
  y <- seq[2:4]
  expect_s3_class(y, "nn_sequential")
  expect_s3_class(y[[2]], "nn_relu6")
  z <- nn_sequential(seq, nn_conv2d(2, 2, c(5, 5)))
  expect_length(z, 2L)
  for (act in list(nn_leaky_relu(0.2), nn_elu(), nn_silu(), nn_softplus())) {
    expect_identical(act(torch_randn(3))$shape, 3L)
  }
})

test_that("$cuda(), $cpu() and $to(device = \"cuda\") move the whole module (CUDA only)", {
  skip_if_no_ampkit()
  skip_if_not(cuda_is_available(), "CUDA is not available")
  m <- net_gen(4, 8)
  m$cuda()
  expect_identical(m$fc1$weight$device$type, "cuda")
  expect_identical(m$calls$device$type, "cuda")
  out <- with_autocast(device_type = "cuda", m(torch_randn(2, 4, device = "cuda")))
  expect_true(out$dtype == torch_float16())
  m$cpu()
  expect_identical(m$block[[1]]$weight$device$type, "cpu")
  m$to(device = "cuda")
  opt <- optim_adam(m$parameters, lr = 0.01)
  scaler <- cuda_amp_grad_scaler()
  loss <- with_autocast(device_type = "cuda", {
    nnf_mse_loss(m(torch_randn(8, 4, device = "cuda")), torch_zeros(8, 1, device = "cuda"))
  })
  scaler$scale(loss)$backward()
  scaler$step(opt)
  scaler$update()
  expect_true(scaler$get_scale() %in% c(65536, 32768)) # a float16 overflow backs off once
})

test_that("the examples of the nn help pages run", {
  skip_if_no_ampkit()
  # The native package documents layers, activations, normalization, losses and containers on
  # one page (nn_layers) and the functional ones on another (nnf); each topic must exist.
  for (topic in c("nn_module", "nn_parameter", "nn_layers", "nnf", "nn_init",
                  "nn_utils_clip_grad")) {
    expect_length(utils::help(topic, package = "ampkit"), 1L)
    expect_error(utils::capture.output(utils::example(topic, package = "ampkit",
                                                      character.only = TRUE, ask = FALSE,
                                                      echo = FALSE)),
                 NA, label = topic)
  }
})

test_that("the regression and margin losses match PyTorch's modules", {
  skip_if_no_ampkit()
  nn <- pt()$nn
  torch_manual_seed(3)
  a <- torch_randn(4, 3)
  b <- torch_randn(4, 3)
  signs <- torch_sign(torch_randn(4, 3))
  labels <- (torch_rand(4, 3) > 0.5)$to(dtype = torch_float())
  w <- torch_rand(3)
  log_p <- nnf_log_softmax(a, dim = 2)
  p <- nnf_softmax(b, dim = 2)
  expect_same_tensor(nn_smooth_l1_loss()(a, b),
                     nn$SmoothL1Loss()$forward(py_of(a), py_of(b)))
  expect_same_tensor(nn_huber_loss(delta = 0.5, reduction = "sum")(a, b),
                     nn$HuberLoss(delta = 0.5, reduction = "sum")$forward(py_of(a), py_of(b)))
  expect_same_tensor(nn_kl_div_loss(reduction = "sum")(log_p, p),
                     nn$KLDivLoss(reduction = "sum")$forward(py_of(log_p), py_of(p)))
  expect_same_tensor(nn_hinge_embedding_loss(margin = 0.5)(a, signs),
                     nn$HingeEmbeddingLoss(margin = 0.5)$forward(py_of(a), py_of(signs)))
  expect_same_tensor(nn_soft_margin_loss(reduction = "none")(a, signs),
                     nn$SoftMarginLoss(reduction = "none")$forward(py_of(a), py_of(signs)))
  expect_same_tensor(nn_multilabel_soft_margin_loss()(a, labels),
                     nn$MultiLabelSoftMarginLoss()$forward(py_of(a), py_of(labels)))
  expect_same_tensor(nn_multilabel_soft_margin_loss(weight = w, reduction = "none")(a, labels),
                     nn$MultiLabelSoftMarginLoss(weight = py_of(w), reduction = "none")$forward(
                       py_of(a), py_of(labels)))
  expect_error(nn_soft_margin_loss(reduction = "avg"), "`reduction` must be one of",
               class = "value_error")
  # gradients flow as in PyTorch's
  x <- torch_randn(4, 3, requires_grad = TRUE)
  nn_multilabel_soft_margin_loss()(x, labels)$backward()
  px <- py_of(x$detach())$requires_grad_(TRUE)
  nn$MultiLabelSoftMarginLoss()$forward(px, py_of(labels))$backward()
  expect_equal(as_array(x$grad), as_array(as_r_tensor(px$grad)), tolerance = 1e-6)
})

test_that("a forward's self$ reads go to the module lookup directly, with `$`'s meaning", {
  counter <- nn_module(
    "counter",
    initialize = function() {
      self$fc <- nn_linear(2, 2)
      self$calls <- 0
      self$scale <- nn_buffer(torch_tensor(2))
    },
    forward = function(x) {
      self$calls <- self$calls + 1 # the target stays an assignment
      twice <- function(self) self$value * 2 # a function's own `self` is left alone
      y <- self[["fc"]](x) * self$scale
      y + twice(list(value = self$calls)) + self$missing_field %||% 0
    }
  )
  m <- counter()
  code <- paste(deparse(body(attr(m, "module")$forward)), collapse = "\n")
  expect_match(code, "C_module_lookup, self, \"fc\"", fixed = TRUE)
  expect_match(code, "self$calls <- ", fixed = TRUE)
  expect_match(code, "self$value * 2", fixed = TRUE)
  x <- torch_ones(1, 2)
  expected <- (torch_linear(x, m$fc$weight, m$fc$bias) * 2 + 2)$detach()
  expect_equal(as_array(m(x)), as_array(expected))
  expect_equal(m$calls, 1)
  m$fc <- nn_linear(2, 2) # a replaced submodule is what the next call reads
  expect_equal(as_array(m(x)), as_array((m$fc(x) * 2 + 4)$detach()))

  # A class with its own `$` keeps R's dispatch to it.
  `$.own_dollar` <- function(x, name) if (name == "answer") 42 else `$.nn_Module`(x, name)
  registerS3method("$", "own_dollar", `$.own_dollar`)
  own <- nn_module("own_dollar", forward = function(x) x + self$answer)
  expect_equal(as_array(own()(torch_zeros(1))), 42)
  expect_match(paste(deparse(body(attr(own(), "module")$forward)), collapse = ""), "self$answer",
               fixed = TRUE)
})

test_that("$parameters and $buffers walk submodules in order, named by their paths", {
  # The walk is C's (C_module_tensors): submodules first (by name), then the module's own; NULL
  # entries left out; a tensor reached twice once, under its first name; none: list().
  expect_identical(nn_relu()$parameters, list())
  expect_identical(nn_sequential(nn_relu(), nn_relu())$buffers, list())
  inner <- nn_sequential(nn_linear(2, 3, bias = FALSE), nn_batch_norm1d(3))
  net <- nn_module(initialize = function() {
    self$body <- inner
    self$head <- nn_linear(3, 1)
    self$tied <- self$head
    self$scale <- nn_parameter(torch_ones(1))
  })()
  expect_identical(names(net$parameters), c("body.0.weight", "body.1.weight", "body.1.bias",
                                            "head.weight", "head.bias", "scale"))
  expect_identical(names(net$buffers), c("body.1.running_mean", "body.1.running_var",
                                         "body.1.num_batches_tracked"))
  # The entries are the parameters themselves, not copies.
  before <- as_array(net$head$weight)
  with_no_grad(net$parameters[["head.weight"]]$sub_(1))
  expect_equal(as_array(net$head$weight), before - 1, tolerance = 1e-6)
})

test_that("a $to() to where the module already is keeps its tensors, and optimizers train on", {
  torch_manual_seed(1)
  model <- nn_sequential(nn_batch_norm1d(2), nn_linear(2, 1))
  opt <- optim_sgd(model$parameters, lr = 0.1)
  model(torch_randn(4, 2))$pow(2)$sum()$backward()
  before <- lapply(c(model$parameters, model$buffers), xptr_address)
  grad <- xptr_address(model[[2]]$weight$grad)
  model$to(device = "cpu")
  model$to(dtype = torch_float())
  model$cpu()
  # the same tensors (one TensorImpl each), their gradients too, still marked as they were
  expect_identical(lapply(c(model$parameters, model$buffers), xptr_address), before)
  expect_identical(xptr_address(model[[2]]$weight$grad), grad)
  expect_true(is_nn_parameter(model[[2]]$weight))
  expect_true(is_nn_buffer(model[[1]]$running_mean))
  w0 <- as_array(model[[2]]$weight)
  opt$step()
  expect_false(isTRUE(all.equal(as_array(model[[2]]$weight), w0)))
  # a real conversion converts the same parameters (PyTorch's `param.data = ...`), their
  # gradients too; buffers are new tensors, as PyTorch's
  model$to(dtype = torch_double())
  expect_identical(xptr_address(model[[2]]$weight), before[["1.weight"]])
  expect_true(model[[2]]$weight$dtype == torch_float64())
  expect_true(model[[2]]$weight$grad$dtype == torch_float64())
  expect_true(model[[1]]$running_mean$dtype == torch_float64())
})

test_that("a clone's forward hooks run on the clone", {
  x <- torch_ones(1, 2)
  m <- nn_linear(2, 1)
  calls <- 0
  m$register_forward_hook(function(module, input, output) {
    calls <<- calls + 1
    output
  })
  for (deep in c(TRUE, FALSE)) {
    copy <- m$clone(deep = deep)
    copy$weight <- nn_parameter(torch_zeros(1, 2))
    copy$bias <- nn_parameter(torch_zeros(1))
    expect_equal(as_array(copy(x)), matrix(0))
    expect_false(isTRUE(all.equal(as_array(m(x)), matrix(0))))
  }
  expect_equal(calls, 4)
  # a hook on a submodule, which the deep clone copies
  s <- nn_sequential(nn_linear(2, 1))
  s[[1]]$register_forward_hook(function(module, input, output) output * 2)
  s2 <- s$clone(deep = TRUE)
  with_no_grad({
    s2[[1]]$weight$zero_()
    s2[[1]]$bias$fill_(1)
  })
  expect_equal(as_array(s2(x)), matrix(2))
  expect_equal(as_array(s(x)), as_array(2 * nnf_linear(x, s[[1]]$weight, s[[1]]$bias)),
               tolerance = 1e-6)
})

test_that("a parameter registered as NULL is skipped by load_state_dict()", {
  m <- nn_linear(3, 2)
  m$bias <- NULL
  expect_identical(names(m$state_dict()), "weight")
  expect_no_error(m$load_state_dict(m$state_dict()))
  own <- nn_module(initialize = function() {
    self$w <- nn_parameter(torch_ones(2))
    self$register_parameter("b", NULL)
    self$register_buffer("r", NULL)
  })()
  own$load_state_dict(list(w = torch_zeros(2)))
  expect_equal(as_array(own$w), c(0, 0))
  expect_error(own$load_state_dict(list()), "Could not find w in the state_dict",
               class = "value_error")
})

test_that("nn_sequential() numbers its modules as R torch does, whatever their argument names", {
  s <- nn_sequential(fc = nn_linear(2, 2), act = nn_relu(), nn_linear(2, 1))
  expect_identical(names(s$children), c("0", "1", "2"))
  expect_identical(names(s$state_dict()), c("0.weight", "0.bias", "2.weight", "2.bias"))
  # nn_prune_head() of a module that is not a sequence keeps its submodules' names (R torch's)
  net <- nn_module(initialize = function() {
    self$encoder <- nn_linear(4, 2)
    self$head <- nn_linear(2, 1)
  })()
  expect_identical(names(nn_prune_head(net, 1)$state_dict()), c("encoder.weight", "encoder.bias"))
})

test_that("nn_module_list() and $extend() take a module list as well as a list", {
  a <- nn_module_list(list(nn_linear(1, 1)))
  b <- nn_module_list(list(nn_linear(1, 2), nn_relu()))
  a$extend(b)
  expect_length(a, 3)
  expect_identical(xptr_address(a[[2]]$weight), xptr_address(b[[1]]$weight))
  c2 <- nn_module_list(b)
  expect_length(c2, 2)
  expect_s3_class(c2[[2]], "nn_relu")
  c2$extend(list(nn_tanh()))
  expect_identical(names(c2$children), c("0", "1", "2"))
})
