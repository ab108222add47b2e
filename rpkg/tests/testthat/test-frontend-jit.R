# TorchScript from R (R/jit.R, src/jit.cpp): traced and compiled functions give the R function's
# results; saved modules are PyTorch's files (Python's torch.jit.load reads them, and jit_load
# reads Python's torch.jit.save).

test_that("a traced function gives the R function's results on new inputs of other shapes", {
  skip_if_no_ampkit()
  fn <- function(x, y) torch_relu(x) * y + torch_sum(x, dim = 1)
  tr <- jit_trace(fn, torch_randn(3, 2), torch_randn(3, 2))
  expect_s3_class(tr, "script_function")
  for (n in c(3, 5)) {
    x <- torch_randn(n, 4)
    y <- torch_randn(n, 4)
    expect_same_tensor(tr(x, y), fn(x, y))
  }
  expect_output(print(tr$graph), "aten::relu")
  expect_output(print(tr), "<script_function>")
})

test_that("lists, dicts and tuples in and out", {
  skip_if_no_ampkit()
  x <- torch_randn(2)
  y <- torch_randn(2)
  stack2 <- jit_trace(function(l) torch_stack(l), list(x, y))
  expect_same_tensor(stack2(list(y, x)), torch_stack(list(y, x)))

  named <- function(d) list(sum = d$a + d$b, diff = d$a - d$b)
  expect_error(jit_trace(named, list(a = x, b = y)), "list|dict|[Dd]ictionar")
  tr <- jit_trace(named, list(a = x, b = y), strict = FALSE)
  out <- tr(list(a = y, b = x))
  expect_named(out, c("sum", "diff"))
  expect_same_tensor(out$sum, y + x)
  expect_same_tensor(out$diff, y - x)

  swap <- function(t) jit_tuple(list(t[[2]], t[[1]]))
  tr <- jit_trace(swap, jit_tuple(list(x, y)))
  out <- tr(jit_tuple(list(y, x)))
  expect_same_tensor(out[[1]], x)
  # A traced tuple takes a tuple, not a list.
  expect_error(tr(list(y, x)), "Tuple")

  # A list whose elements have no type in common is a tuple, as R torch passes it, in and out
  nested <- jit_trace(function(z) z[[1]][[1]] + z[[2]], list(list(x), y))
  expect_same_tensor(nested(list(list(y), y)), y + y)
  out <- jit_trace(function(z) list(z, list(z, z)), x, strict = FALSE)(y)
  expect_same_tensor(out[[2]][[2]], y)
  pair <- jit_compile("def second(x: Tuple[Tensor, int]) -> int:\n    return x[1]\n")
  expect_identical(pair$second(list(x, 2L)), 2L)
  # vectors of numbers, flags or strings are TorchScript's typed lists
  lists <- jit_compile(paste0(
    "def total(x: List[int]) -> int:\n    return sum(x)\n",
    "def count(x: List[bool]) -> int:\n    return len(x)\n",
    "def join(x: List[str]) -> str:\n    return ''.join(x)\n",
    "def fsum(x: List[float]) -> float:\n    return sum(x)\n"))
  expect_identical(lists$total(1:3), 6L)
  expect_identical(lists$count(c(TRUE, FALSE)), 2L)
  expect_identical(lists$join(c("a", "b")), "ab")
  expect_identical(lists$fsum(c(0.5, 0.25)), 0.75)
  expect_error(lists$total(c(1L, NA)), "no NA", class = "value_error")
  expect_same_tensor(jit_ops$aten$view(torch_arange(1, 4), c(2L, 2L)),
                     torch_arange(1, 4)$view(c(2, 2)))
})

test_that("arguments by name reach a compiled function's parameters of those names", {
  skip_if_no_ampkit()
  a <- torch_tensor(10)
  b <- torch_tensor(1)
  cu <- jit_compile("def f(a: Tensor, b: Tensor):\n    return a - b\n")
  expect_same_tensor(cu$f(b = b, a = a), a - b)
  expect_same_tensor(cu$f(b = b, a), a - b)
  err <- expect_error(cu$f(a, zzz = b), class = "value_error")
  expect_match(conditionMessage(err), "`zzz` is not an argument of f()", fixed = TRUE)
  # a traced function's inputs have no names: they are read in order, as R torch reads them
  tw <- jit_trace(function(z, w) z - w, a, b)
  expect_same_tensor(tw(w = a, z = b), a - b)
})

test_that("a script module's constants are its fields, as R torch reads them", {
  skip_if_no_ampkit()
  # TorchScript reads the class's source: from a file
  source <- tempfile(fileext = ".py")
  path <- tempfile(fileext = ".pt")
  on.exit(unlink(c(source, path)))
  writeLines(c(
    "import torch",
    "class WithConstant(torch.nn.Module):",
    "    __constants__ = ['k']",
    "    def __init__(self):",
    "        super().__init__()",
    "        self.k = 3",
    "    def forward(self, x):",
    "        return x * self.k",
    sprintf("torch.jit.script(WithConstant()).save(%s)", encodeString(path, quote = "'"))
  ), source)
  reticulate::py_run_file(source)
  m <- jit_load(path)
  expect_identical(m$k, 3L)
  expect_same_tensor(m(torch_ones(2)), torch_full(2, 3))
  m$add_constant("scale", 2.5)
  expect_identical(m$scale, 2.5)
})

test_that("values TorchScript cannot take are errors that leave the tracer usable", {
  skip_if_no_ampkit()
  x <- torch_ones(2)
  for (bad in list(function(z) new.env(), function(z) sum, function(z) quote(a + b))) {
    expect_error(jit_trace(bad, x), "TorchScript takes tensors", class = "value_error")
    expect_same_tensor(jit_trace(function(z) z + 1, x)(x), x + 1)
  }
  tr <- jit_trace(function(z) z * 2, x)
  expect_error(tr(new.env()), "got an environment", class = "value_error")
  # an operator that runs only as a node of a graph is refused, not run
  expect_error(jit_ops$prim$ChunkSizes(), "only as a node of a TorchScript graph",
               class = "value_error")
})

test_that("tracing takes tensors only, and says so in R's words", {
  skip_if_no_ampkit()
  fn <- function(x) torch_relu(x)
  err <- expect_error(jit_trace(fn, "a"), class = "value_error")
  expect_match(conditionMessage(err), "input 1 of `...` is \"a\"", fixed = TRUE)
  expect_error(jit_trace(fn, x = torch_ones(1)), "must not be named", class = "value_error")
  expect_error(jit_trace(1, torch_ones(1)), "jit_trace needs a function or nn_module")
  expect_error(jit_trace(nn_linear, torch_ones(1)), "initialize the nn_module")
  # An R error inside the traced function comes back unchanged.
  expect_error(jit_trace(function(x) stop("my own error"), torch_ones(1)), "my own error")
  # So does the tracer's own refusal of a non-tensor output.
  expect_error(jit_trace(function(x) 1, torch_ones(1)), "Only tensors, lists, tuples")
})

test_that("a traced module shares the module's tensors and respects its mode", {
  skip_if_no_ampkit()
  torch_manual_seed(1)
  net <- nn_module(
    initialize = function() {
      self$fc <- nn_linear(4, 3)
      self$bn <- nn_batch_norm1d(3)
      self$drop <- nn_dropout(0.5)
    },
    forward = function(x) self$drop(self$bn(self$fc(x)))
  )()
  x <- torch_randn(8, 4)
  tr <- jit_trace(net, x)
  expect_s3_class(tr, "script_module")
  expect_equal(names(tr$parameters), names(net$parameters))
  expect_length(tr$buffers, 3)
  expect_true(tr$training)
  tr$eval()
  net$eval()
  expect_false(tr$training)
  expect_same_tensor(tr(x), net(x))
  expect_output(print(tr$graph), "graph")
  # The same tensors: changing the module's weight changes the traced module's results.
  with_no_grad(net$fc$weight$mul_(2))
  expect_same_tensor(tr(x), net(x))
  # Gradients reach the shared parameters.
  tr(x)$sum()$backward()
  expect_false(is_undefined_tensor(net$fc$weight$grad))
})

test_that("jit_trace_module traces several methods", {
  skip_if_no_ampkit()
  m <- nn_module(
    initialize = function() self$fc <- nn_linear(2, 2),
    forward = function(x) self$fc(x),
    double = function(x) self$fc(x) * 2
  )()
  x <- torch_randn(3, 2)
  tr <- jit_trace_module(m, forward = x, double = list(x))
  expect_same_tensor(tr$double(x), m$double(x))
  expect_error(jit_trace_module(m, x), "must be named", class = "value_error")
  expect_error(jit_trace_module(m, nothing = x), "does not exist", class = "value_error")
})

test_that("jit_compile's functions compute what R computes", {
  skip_if_no_ampkit()
  comp <- jit_compile("
    def affine(x, w: float, b: int):
        return x * w + b

    def norm2(x):
        return torch.sqrt(torch.sum(x * x))
  ")
  x <- torch_randn(5)
  expect_same_tensor(comp$affine(x, 2.5, 3L), x * 2.5 + 3L)
  expect_equal(as.numeric(comp$norm2(x)), as.numeric(torch_sqrt(torch_sum(x * x))),
               tolerance = 1e-6)
  expect_setequal(names(comp), c("affine", "norm2"))
  expect_null(comp$missing)
  expect_error(jit_compile("def f(x):\n  return undefined_name(x)"), "undefined_name")
  # No final newline, and the indentation R code gives it.
  expect_same_tensor(jit_compile("  def f(x):\n    return x + 1")$f(x), x + 1)
})

test_that("saved traced functions and modules are PyTorch's files, both ways", {
  skip_if_no_ampkit()
  skip_if_not_installed("reticulate")
  path <- tempfile(fileext = ".pt")
  on.exit(unlink(path))

  fn <- function(x) torch_tanh(x) * 3
  jit_save(jit_trace(fn, torch_randn(2)), path)
  x <- torch_randn(4)
  py_fn <- pt()$jit$load(path)
  expect_same_tensor(reticulate::py_call(py_fn, to_py(x)), fn(x))
  expect_same_tensor(jit_load(path)(x), fn(x))

  torch_manual_seed(2)
  lin <- nn_linear(3, 2)
  x <- torch_randn(5, 3)
  # Traced in the module's mode only: the file's `forward` is the traced graph.
  jit_save(jit_trace(lin, torch_randn(1, 3), respect_mode = FALSE), path)
  py_mod <- pt()$jit$load(path)
  expect_same_tensor(reticulate::py_call(py_mod, to_py(x)), lin(x))
  # Traced in both modes (R torch's default): the methods `trainforward` and `evalforward`, which
  # jit_load() puts back together.
  jit_save(jit_trace(lin, torch_randn(1, 3)), path)
  py_mod <- pt()$jit$load(path)
  expect_same_tensor(py_mod$evalforward(to_py(x)), lin(x))
  expect_same_tensor(jit_load(path)(x), lin(x))

  # A module Python traced and saved: R loads it, with its parameters and methods.
  py_lin <- pt()$nn$Linear(3L, 2L)
  pt()$jit$save(pt()$jit$trace(py_lin, pt()$randn(1L, 3L)), path)
  loaded <- jit_load(path)
  expect_equal(names(loaded$parameters), c("weight", "bias"))
  expect_same_tensor(loaded(x), reticulate::py_call(py_lin, to_py(x)))
  expect_same_tensor(loaded$forward(x), loaded(x))

  # Bytes in memory.
  again <- jit_unserialize(jit_serialize(loaded))
  expect_same_tensor(again(x), loaded(x))
  expect_error(jit_save(fn, path), class = "value_error")
  expect_error(jit_unserialize("x"), class = "value_error")
})
