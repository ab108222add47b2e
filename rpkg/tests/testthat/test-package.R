# Finding Python and the module ampkit, each in a fresh R so that Python starts (or not) there.

# Runs `code` in a fresh R (Rscript) with RETICULATE_PYTHON = `python` and PYTHONPATH =
# `pythonpath`; returns its output as one string. R_ENVIRON_USER: no ~/.Renviron, which may set
# RETICULATE_PYTHON itself.
run_r <- function(code, python, pythonpath = "") {
  rscript <- file.path(R.home("bin"), "Rscript")
  env <- c(paste0("RETICULATE_PYTHON=", python),
           paste0("PYTHONPATH=", pythonpath),
           paste0("R_ENVIRON_USER=", tempfile("no-renviron")),
           paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep)))
  out <- suppressWarnings(system2(rscript, c("-e", shQuote(paste(code, collapse = "; "))),
                                  env = env, stdout = TRUE, stderr = TRUE))
  paste(out, collapse = "\n")
}

# A Python for the fresh R: the one RETICULATE_PYTHON names, else python3 on the PATH.
some_python <- function() {
  candidates <- c(Sys.getenv("RETICULATE_PYTHON"), Sys.which("python3"), "/usr/bin/python3")
  candidates <- candidates[nzchar(candidates) & file.exists(candidates)]
  if (length(candidates) == 0L) testthat::skip("no Python on this machine")
  candidates[[1L]]
}

# A folder with a stand-in for the Python package ampkit, to put first on PYTHONPATH (it shadows
# an installed ampkit): it has what the R side looks up (its glue's presets give a scaler whose
# scale, 1234, shows that the stand-in was called), reports whether torch was imported before
# it, and fails to import while the file `broken` is in the folder. With `extension = FALSE` it
# lacks ampkit._C, as a package whose extension was never built.
fake_ampkit <- function(extension = TRUE) {
  dir <- tempfile("fake-ampkit-")
  pkg <- file.path(dir, "ampkit")
  dir.create(pkg, recursive = TRUE)
  writeLines(c(
    "import os, sys",
    "torch_first = 'torch' in sys.modules",
    "if os.path.exists(os.path.join(os.path.dirname(__file__), os.pardir, 'broken')):",
    "    raise ImportError(f'the fake ampkit is broken (torch imported first: {torch_first})')",
    "import ampkit._C"
  ), file.path(pkg, "__init__.py"))
  if (extension) writeLines("# the stand-in's extension: importable", file.path(pkg, "_C.py"))
  writeLines(c("def new_sharded_scaler(device, options, process_group):", "    return None",
               "def deepspeed_options(config):", "    return {'init_scale': 1234.0}",
               "def megatron_options(**arguments):", "    return {'init_scale': 1234.0}"),
             file.path(pkg, "r_glue.py"))
  dir
}

test_that("library(ampkit) starts no Python", {
  out <- run_r(c("library(ampkit)", "cat('started:', reticulate::py_available())"),
               some_python())
  expect_match(out, "started: FALSE$")
})

test_that("the AMP path (autocast, the scaler, R's modules and optimizers) starts no Python", {
  out <- run_r(c(
    "library(ampkit)",
    "torch_manual_seed(1)",
    "model <- nn_linear(3, 1)",
    "opt <- optim_sgd(model$parameters, lr = 0.1)",
    "scaler <- amp_grad_scaler('cpu', init_scale = 256)",
    paste("loss <- with_autocast(device_type = 'cpu', dtype = 'bfloat16',",
          "nnf_mse_loss(model(torch_randn(4, 3)), torch_zeros(4, 1)))"),
    "scaler$scale(loss)$backward()",
    "scaler$step(opt)",
    "scaler$update()",
    "cat('scale:', scaler$get_scale(), 'steps:', scaler$stats()$steps, '\\n')",
    "cat('started:', reticulate::py_available())"
  ), some_python())
  expect_match(out, "scale: 256 steps: 1", fixed = TRUE)
  expect_match(out, "started: FALSE$")
})

test_that("ampkit_available() follows the import of ampkit, and a failure is not remembered", {
  python <- some_python()
  fake <- fake_ampkit()
  broken <- file.path(fake, "broken")
  file.create(broken)
  # A feature of ampkit's Python side (the Megatron preset) needs the module; autocast does not.
  out <- run_r(c(
    "library(ampkit)",
    "cat('broken:', ampkit_available(), '\\n')",
    "cat('autocast needs no Python:', is_autocast_enabled('cpu'), '\\n')",
    "e <- tryCatch(amp_grad_scaler_from_megatron(device = 'cpu'), error = function(e) e)",
    "cat('class:', class(e), '\\n')",
    "cat('message:', conditionMessage(e), '\\n')",
    sprintf("invisible(file.remove(%s))", deparse(broken)),
    "cat('repaired:', ampkit_available(), '\\n')",
    "cat('calls the module:', amp_grad_scaler_from_megatron(device = 'cpu')$get_scale(), '\\n')"
  ), python, pythonpath = fake)
  expect_match(out, "broken: FALSE", fixed = TRUE)
  expect_match(out, "autocast needs no Python: FALSE", fixed = TRUE)
  expect_match(out, "class: ampkit_unavailable ampkit_error rlang_error error condition",
               fixed = TRUE)
  expect_match(out, "Python said: ImportError: the fake ampkit is broken", fixed = TRUE)
  expect_match(out, "repaired: TRUE", fixed = TRUE)
  expect_match(out, "calls the module: 1234", fixed = TRUE)
})

test_that("ampkit without its extension gives one clear error saying how to install it", {
  python <- some_python()
  out <- run_r(c(
    "library(ampkit)",
    "cat('available:', ampkit_available(), '\\n')",
    "e <- tryCatch(amp_grad_scaler_from_megatron(device = 'cpu'), error = function(e) e)",
    "cat('class:', class(e), '\\n')",
    "cat(conditionMessage(e), '\\n')"
  ), python, pythonpath = fake_ampkit(extension = FALSE))
  expect_match(out, "available: FALSE", fixed = TRUE)
  expect_match(out, "class: ampkit_unavailable ampkit_error rlang_error error condition",
               fixed = TRUE)
  expect_match(out, "needs the Python module `ampkit`", fixed = TRUE)
  expect_match(out, "No module named 'ampkit._C'", fixed = TRUE)
  expect_match(out, "make setup", fixed = TRUE)
  expect_match(out, "pip install --no-build-isolation", fixed = TRUE)
  expect_match(out, paste0("RETICULATE_PYTHON=", python), fixed = TRUE)
  expect_no_match(out, "Detailed traceback", fixed = TRUE)
})

# The bits of a float32 matrix product in a fresh R that runs `setup` first (which loads ampkit
# and imports torch, in some order): "hash <sha256 of torch$mm(a, a)>". On R's reference BLAS
# they differ from Python's (and the product is 15-40x slower: the benchmark's matmul table).
# torch is imported with convert = FALSE: its tensors stay Python's (numpy() is Python's).
float32_products <- function(setup) {
  run_r(c(
    setup,
    "invisible(torch$manual_seed(0L))",
    "a <- torch$randn(512L, 512L)",
    "h <- reticulate::import('hashlib')$sha256(torch$mm(a, a)$numpy()$tobytes())$hexdigest()",
    "cat('hash', h, '\\n')"
  ), some_python())
}

python_float32_hash <- function(python) {
  code <- paste(
    "import hashlib, torch",
    "torch.manual_seed(0)",
    "a = torch.randn(512, 512)",
    "print(hashlib.sha256(torch.mm(a, a).numpy().tobytes()).hexdigest())", sep = "\n")
  out <- system2(python, c("-c", shQuote(code)), stdout = TRUE, stderr = TRUE)
  out[[length(out)]]
}

test_that("torch imported after library(ampkit), in any order, keeps its own BLAS: Python's bits", {
  skip_if_no_ampkit()
  expected <- python_float32_hash(some_python())
  import_torch <- "torch <- reticulate::import('torch', convert = FALSE)"
  first_call <- "stopifnot(ampkit_available())"
  orders <- list(
    "torch first" = c("library(ampkit)", import_torch, first_call),
    "ampkit's call first" = c("library(ampkit)", first_call, import_torch),
    "Python already running" = c("reticulate::py_run_string('x = 1')", "library(ampkit)",
                                 import_torch, first_call)
  )
  for (order in names(orders)) {
    out <- float32_products(orders[[order]])
    expect_match(out, paste("hash", expected), fixed = TRUE, label = order)
    expect_no_match(out, "warning", ignore.case = TRUE, label = order)
  }
})

test_that("a torch imported before library(ampkit) on R's BLAS: one warning with the fix", {
  skip_if_no_ampkit()
  out <- run_r(c(
    "torch <- reticulate::import('torch', convert = FALSE)",
    "library(ampkit)",
    "w <- tryCatch(ampkit_available(), warning = function(w) w)",
    "cat('class:', class(w), '\\n')",
    "cat(conditionMessage(w), '\\n')",
    "again <- tryCatch(ampkit_available(), warning = function(w) 'warned again')",
    "cat('second call:', again, '\\n')",
    "invisible(torch$manual_seed(0L))",
    "a <- torch$randn(512L, 512L)",
    "h <- reticulate::import('hashlib')$sha256(torch$mm(a, a)$numpy()$tobytes())$hexdigest()",
    "cat('hash', h, '\\n')"
  ), some_python())
  expect_match(out, "class: ampkit_warning rlang_warning warning condition", fixed = TRUE)
  expect_match(out, "torch was imported before library(ampkit)", fixed = TRUE)
  expect_match(out, "libblas", fixed = TRUE)
  expect_match(out, "restart R and call library(ampkit) before reticulate::import(\"torch\")",
               fixed = TRUE)
  expect_match(out, "second call: TRUE", fixed = TRUE)
  # what the warning is about: not Python's bits (R's reference BLAS)
  expect_match(out, "hash [0-9a-f]{64}")
  expect_no_match(out, python_float32_hash(some_python()), fixed = TRUE)
})

test_that("library(ampkit) sets the reticulate.onPyInit hook once, and unloading removes it", {
  out <- run_r(c(
    "library(ampkit)",
    "n <- length(getHook('reticulate.onPyInit'))",
    "unloadNamespace('ampkit')",
    "cat('hooks:', n, length(getHook('reticulate.onPyInit')), '\\n')"
  ), some_python())
  expect_match(out, "hooks: 1 0", fixed = TRUE)
})

test_that("the package knows the Python it was installed against, and says when it is gone", {
  recorded <- ampkit:::installed_python
  skip_if(!nzchar(recorded), "installed without AMPKIT_PYTHON (R CMD check's own install)")
  expect_true(file.exists(recorded))
  out <- run_r(c(
    "library(ampkit)",
    "assignInNamespace('installed_python', '/gone/bin/python', 'ampkit')",
    "cat(ampkit:::installed_python_note())"
  ), some_python())
  expect_match(out, "installed against /gone/bin/python, which no longer exists", fixed = TRUE)
})
