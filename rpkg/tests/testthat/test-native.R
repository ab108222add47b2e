# The native layer's own promises: memory R cannot see, modules freed when dropped, R callbacks
# on R's thread, tensors shared with Python without a copy, errors in R's words, R torch's
# 1-based rules in the generated surface.

resident <- function(field) {
  line <- grep(paste0("^", field, ":"), readLines("/proc/self/status"), value = TRUE)
  as.numeric(sub("^[^0-9]*([0-9]+) kB$", "\\1", line)) * 1024
}

# Runs `setup`, resets the process's peak memory (VmHWM), runs `loop`, and returns the resident
# memory before the loop, the peak during it and the numbers `loop` leaves in `result`: in a
# fresh R process, as a user's script runs (the test process's own heap, every test file's
# objects and reticulate's namespaces, would make each of R's collections slower, not the memory
# different).
memory_of_loop <- function(setup, loop) {
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script))
  writeLines(c(
    "suppressPackageStartupMessages(library(ampkit))",
    paste("resident <-", paste(deparse(resident), collapse = "\n")),
    setup,
    "gc()",
    "writeLines('5', '/proc/self/clear_refs')  # resets the peak (VmHWM)",
    "baseline <- resident('VmRSS')",
    loop,
    "cat(baseline, resident('VmHWM'), result, '\\n')"
  ), script)
  out <- system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE)
  values <- as.numeric(strsplit(trimws(utils::tail(out, 1L)), " ")[[1L]])
  list(baseline = values[[1L]], peak = values[[2L]], result = values[-(1:2)])
}

test_that("a loop of large temporaries keeps peak memory within 2x of its working set", {
  skip_if_not(file.exists("/proc/self/clear_refs"), "needs Linux's /proc")
  temporary <- 64 * 2^20 # bytes: 16M float32
  m <- memory_of_loop(
    "invisible(torch_ones(16 * 2^20)$sum())  # libtorch's first allocation of this size",
    c("# R holds each step's 64 MiB tensor through `x` until the next step: R's collector sees",
      "# a few dozen bytes of it.",
      "for (i in 1:1000) x <- torch_empty(16 * 2^20)$fill_(i)",
      "result <- as_array(x[1])")
  )
  expect_lte(m$peak, 2 * (m$baseline + temporary))
  # and what the loop added beyond its own tensor is a few temporaries, not a thousand
  expect_lte(m$peak - m$baseline, 4 * temporary)
  expect_equal(m$result, 1000)
})

test_that("gradients dropped by zero_grad(set_to_none = TRUE) are freed at once", {
  skip_if_not(file.exists("/proc/self/clear_refs"), "needs Linux's /proc")
  # An optimizer's step reads the gradients through R objects of its own; after the step they
  # let go of them, else each step's dropped gradient (32 MiB here) would live on until R's next
  # collection, which the collection rule does not hasten: a gradient is not a fresh result.
  gradient <- 32 * 2^20
  m <- memory_of_loop(
    c("p <- nn_parameter(torch_zeros(8 * 2^20))",
      "opt <- optim_sgd(list(p), lr = 0.1)",
      "step <- function() {",
      "  p$sum()$backward()",
      "  opt$step()",
      "  opt$zero_grad(set_to_none = TRUE)",
      "}",
      "step()"),
    c("for (i in 1:40) step()", "result <- as_array(p[1])")
  )
  expect_lte(m$peak - m$baseline, 4 * gradient)
  expect_equal(m$result, -0.1 * 41, tolerance = 1e-5)
})

test_that("tensors freed by R's own collections bring no collection of the package's", {
  # Each 16 MiB tensor is dropped and freed by a collection of R's own: what R holds stays one
  # tensor, and the bytes freed are taken off those made since the package's last collection, so
  # it runs none (it ran one every 5 tensors; and once, judging by what its own young collection
  # gave back, a full one, tens of milliseconds, at every one of them).
  gc()
  before <- ampkit:::tensor_memory_stats()
  for (i in 1:100) {
    x <- torch_empty(4 * 2^20)$fill_(i)
    x <- NULL
    invisible(gc(full = FALSE))
  }
  after <- ampkit:::tensor_memory_stats()
  expect_lte(after$collections - before$collections, 1)
  expect_lte(after$full - before$full, 1)
  expect_lte(after$live - before$live, 16 * 2^20)
})

test_that("the package's full collection on demand counts as one and frees what R dropped", {
  gc()
  kept <- torch_ones(2^20) # 4 MiB that stay
  dropped <- torch_ones(2^20)
  dropped <- NULL
  before <- ampkit:::tensor_memory_stats()
  ampkit:::tensor_memory_collect()
  after <- ampkit:::tensor_memory_stats()
  expect_equal(after$full - before$full, 1)
  expect_equal(before$live - after$live, 4 * 2^20)
  expect_equal(after$live_after, after$live)
  expect_equal(as_array(kept[1]), 1)
})

test_that("freed CPU memory is kept up to the configured size, and flushed on demand", {
  # In a fresh R process (the test process's heap holds every earlier test's memory): 160 MiB of
  # tensors of 4 MiB made and dropped, then the resident memory after the collection. R torch's
  # options set before library() are the settings at load.
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script))
  writeLines(c(
    "options(torch.threshold_call_gc = 100, torch.cpu_cache_max_size_mb = 200)",
    "suppressPackageStartupMessages(library(ampkit))",
    "floor <- ampkit:::tensor_memory_stats()$floor / 2^20",
    paste("resident <-", paste(deparse(resident), collapse = "\n")),
    "held <- list()",
    "churn <- function() {",
    "  xs <- lapply(1:40, function(i) torch_ones(2^20))",
    # R memory that stays, made after the tensors: above them in the heap, so that the heap's
    # top (which glibc's trim threshold alone gives back) is not where they were
    "  held[[length(held) + 1L]] <<- numeric(2^18)",
    "  rm(xs)",
    "  ampkit:::tensor_memory_collect()",
    "  resident('VmRSS') / 2^20",
    "}",
    "base <- resident('VmRSS') / 2^20",
    "kept <- churn()",
    "cpu_cache_flush()",
    "flushed <- resident('VmRSS') / 2^20",
    "set_cpu_allocator_config(cache_max_size_mb = 64)",
    "capped <- churn()",
    "set_cpu_allocator_config(cache_enabled = FALSE)",
    "off <- churn()",
    "cat(base, kept, flushed, capped, off, floor, '\\n')"
  ), script)
  out <- system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE)
  mib <- as.numeric(strsplit(trimws(utils::tail(out, 1L)), " ")[[1L]])
  names(mib) <- c("base", "kept", "flushed", "capped", "off", "floor")
  expect_equal(mib[["floor"]], 100)
  expect_gt(mib[["kept"]] - mib[["base"]], 120) # 200 MiB kept: all of it
  expect_gt(mib[["kept"]] - mib[["flushed"]], 120)
  expect_lt(mib[["capped"]] - mib[["base"]], 40) # 160 MiB freed > 64: handed back
  expect_lt(mib[["off"]] - mib[["base"]], 40)
})

test_that("set_cpu_allocator_config() sets the collection threshold and checks its arguments", {
  old <- set_cpu_allocator_config(threshold_call_gc = 32)
  on.exit(do.call(set_cpu_allocator_config, old))
  expect_identical(old, list(threshold_call_gc = 64, cache_enabled = TRUE, cache_max_size_mb = 256))
  expect_equal(ampkit:::tensor_memory_stats()$floor, 32 * 2^20)
  expect_error(set_cpu_allocator_config(threshold_call_gc = 0),
               "`threshold_call_gc` must be a finite number of MiB > 0, got 0.", fixed = TRUE,
               class = "value_error")
  expect_error(set_cpu_allocator_config(cache_max_size_mb = -1), "`cache_max_size_mb` must be",
               class = "value_error")
  expect_error(set_cpu_allocator_config(cache_enabled = NA), "`cache_enabled` must be TRUE or",
               class = "value_error")
  expect_equal(ampkit:::tensor_memory_stats()$floor, 32 * 2^20) # errors changed nothing
  expect_warning(set_cpu_allocator_config(threshold_call_gc = 32, cache_min_block_size = 4096),
                 "`cache_min_block_size` has no effect")
  expect_identical(set_cpu_allocator_config(cache_max_size_mb = Inf)$cache_max_size_mb, 256)
  expect_identical(set_cpu_allocator_config()$cache_max_size_mb, Inf)
  # R torch's options at load, read as R torch reads them; one refused is warned about, left out
  saved <- options(torch.threshold_call_gc = "100", torch.cpu_cache_enabled = "maybe")
  on.exit(options(saved), add = TRUE)
  expect_warning(ampkit:::cpu_allocator_at_load(), "torch.cpu_cache_enabled")
  expect_equal(ampkit:::tensor_memory_stats()$floor, 100 * 2^20)
  expect_error(set_cpu_allocator_config(cache_min_block_size = -1), "`cache_min_block_size`",
               class = "value_error")
})

test_that("a collection due in a forward pass waits for the end of its backward pass", {
  # On CUDA (the rule's devices, switched on here for CPU tensors) a young collection costs the
  # host milliseconds while the GPU runs what is queued: little during a forward pass, the whole
  # backward pass at its end.
  ampkit:::tensor_memory_stats(defer_cpu = TRUE)
  on.exit(ampkit:::tensor_memory_stats(defer_cpu = FALSE))
  w <- torch_randn(2^20, requires_grad = TRUE) # 4 MiB
  forward <- function(n) {
    outs <- list()
    s <- ampkit:::tensor_memory_stats()
    while (length(outs) < n && !s$pending) {
      outs[[length(outs) + 1]] <- w * 2
      s <- ampkit:::tensor_memory_stats()
    }
    outs
  }
  gc()
  ampkit:::tensor_memory_collect()
  before <- ampkit:::tensor_memory_stats()
  due <- max(before$floor, before$live_after / 2)
  outs <- forward(100)
  during <- ampkit:::tensor_memory_stats()
  expect_true(during$pending)
  expect_equal(during$collections, before$collections)
  expect_gt(during$since_collection, due)
  outs[[1]]$sum()$backward()
  after <- ampkit:::tensor_memory_stats()
  expect_false(after$pending)
  expect_equal(after$collections - before$collections, 1)
  expect_equal(as_array(w$grad[1:2]), c(2, 2))
  # Never past twice the bytes that made it due: without a backward pass it runs then.
  more <- forward(100)
  expect_true(ampkit:::tensor_memory_stats()$pending)
  while (ampkit:::tensor_memory_stats()$pending) more[[length(more) + 1]] <- w * 2
  last <- ampkit:::tensor_memory_stats()
  expect_equal(last$collections - after$collections, 1)
  due <- max(last$floor, after$live_after / 2)
  expect_gt(length(more) * 4 * 2^20, 2 * due)
  expect_lte(length(more) * 4 * 2^20, 2 * due + 4 * 2^20)
  # Outside a graph (no grad) and on the CPU by default, a collection runs when due.
  rm(outs, more)
  gc()
  ampkit:::tensor_memory_collect()
  start <- ampkit:::tensor_memory_stats()
  kept <- with_no_grad(lapply(1:20, function(i) w * 2)) # 80 MiB
  no_grad <- ampkit:::tensor_memory_stats(defer_cpu = FALSE)
  expect_false(no_grad$pending)
  expect_gte(no_grad$collections - start$collections, 1)
  rm(kept)
  kept <- lapply(1:40, function(i) w * 2)
  end <- ampkit:::tensor_memory_stats()
  expect_false(end$pending)
  expect_gte(end$collections - no_grad$collections, 1)
})

test_that("nn_sequential() lets go of its layers' outputs as soon as the next layer has run", {
  torch_manual_seed(1)
  l1 <- nn_linear(256, 256)
  l2 <- nn_linear(256, 256)
  net <- nn_sequential(l1, nn_relu(), l2, nn_tanh())
  x <- torch_randn(128, 256)
  x0 <- as_array(x)
  gc()
  before <- ampkit:::tensor_memory_stats()
  y <- with_no_grad(net(x))  # (no graph: a tensor autograd saves is not counted as R's)
  after <- ampkit:::tensor_memory_stats()
  # Of its four outputs (128 KiB each) R holds only the last: the other three were let go of.
  expect_equal(after$live - before$live, 128 * 256 * 4)
  expect_equal(after$since_collection - before$since_collection, 128 * 256 * 4)
  # The same numbers and the same gradients as the layers called one by one.
  y <- net(x)
  manual <- torch_tanh(l2(torch_relu(l1(x))))
  expect_equal(as_array(y), as_array(manual))
  y$sum()$backward()
  g1 <- as_array(l1$weight$grad)
  l1$weight$grad <- NULL
  manual$sum()$backward()
  expect_equal(g1, as_array(l1$weight$grad))
  expect_equal(as_array(x), x0)  # the caller's input is the caller's, untouched
})

test_that("nn_sequential() runs nn_linear and nn_relu without R, as their R forwards would", {
  torch_manual_seed(3)
  l1 <- nn_linear(16, 8)
  l2 <- nn_linear(8, 4, bias = FALSE)
  net <- nn_sequential(l1, nn_relu(), l2)
  x <- torch_randn(5, 16)
  before <- ampkit:::native_layer_calls()
  y <- net(x)
  expect_equal(ampkit:::native_layer_calls() - before, 3)
  manual <- l2(torch_relu(l1(x)))
  expect_identical(as_array(y), as_array(manual))
  y$sum()$backward()
  g <- list(as_array(l1$weight$grad), as_array(l2$weight$grad))
  l1$weight$grad <- NULL
  l2$weight$grad <- NULL
  manual$sum()$backward()
  expect_identical(g, list(as_array(l1$weight$grad), as_array(l2$weight$grad)))
  # Under autocast, the same casts (bfloat16 on the CPU) as the layers called one by one.
  with_autocast(device_type = "cpu", {
    a <- net(x)
    b <- l2(torch_relu(l1(x)))
  })
  expect_equal(a$dtype, torch_bfloat16())
  expect_identical(as_array(a$float()), as_array(b$float()))
})

test_that("nn_sequential() leaves to R the layers it cannot run as the package made them", {
  torch_manual_seed(4)
  x <- torch_randn(2, 4)
  calls <- function(net, input = x) {
    before <- ampkit:::native_layer_calls()
    out <- net(input)
    list(native = ampkit:::native_layer_calls() - before, out = out)
  }
  # A forward hook wraps the instance's forward: the hook runs.
  l <- nn_linear(4, 4)
  seen <- 0
  l$register_forward_hook(function(module, input, output) {
    seen <<- seen + 1
    NULL
  })
  expect_equal(calls(nn_sequential(l, nn_relu()))$native, 1) # the ReLU only
  expect_equal(seen, 1)
  # A subclass with a forward of its own, and an in-place ReLU, run their R forwards.
  doubled <- nn_module("doubled", inherit = nn_linear,
                       forward = function(input) 2 * super$forward(input))
  d <- doubled(4, 4)
  r <- calls(nn_sequential(d, nn_relu(inplace = TRUE)))
  expect_equal(r$native, 0)
  expect_equal(as_array(r$out), as_array(torch_relu(d(x))))
  # A subclass that keeps nn_linear's forward runs it without R.
  kept <- nn_module("kept", inherit = nn_linear)
  expect_equal(calls(nn_sequential(kept(4, 4)))$native, 1)
  # Bad input: the R forward runs, and its error is the layer's own.
  net <- nn_sequential(nn_linear(4, 4))
  wrong <- torch_randn(2, 3)
  expect_error(calls(net, wrong), class = "runtime_error")
  direct <- tryCatch(net[[1]](wrong), error = conditionMessage)
  expect_identical(tryCatch(net(wrong), error = conditionMessage), direct)
  expect_identical(tryCatch(net(1:4), error = conditionMessage),
                   tryCatch(net[[1]](1:4), error = conditionMessage))
})

test_that("a loss does not keep its elementwise buffer", {
  skip_if_no_ampkit()
  # libtorch's mse_loss, smooth_l1_loss, binary_cross_entropy and soft_margin_loss reduce into
  # their elementwise buffer and return a 0-dim view of it. A loss kept in R (until the next
  # step's rebinds it) would keep that buffer until R's next collection: the R object gets a
  # storage of its own size, and stays the same autograd node. Python's torch is the oracle.
  torch_manual_seed(2)
  a <- torch_randn(256, 1024, requires_grad = TRUE) # 1 MiB
  p <- torch_rand(256, 1024)
  losses <- list(
    list(nnf_mse_loss, "mse_loss", "MseLossBackward0"),
    list(nnf_smooth_l1_loss, "smooth_l1_loss", "SmoothL1LossBackward0"),
    list(function(x, y) nnf_binary_cross_entropy(torch_sigmoid(x), y), "binary_cross_entropy",
         "BinaryCrossEntropyBackward0"),
    list(nnf_soft_margin_loss, "soft_margin_loss", "SoftMarginLossBackward0")
  )
  torch <- reticulate::import("torch", convert = FALSE)
  py_a <- reticulate::r_to_py(a)
  py_p <- reticulate::r_to_py(p)
  for (loss in losses) {
    before <- ampkit:::tensor_memory_stats()
    value <- loss[[1]](a, p)
    expect_equal(ampkit:::tensor_memory_stats()$live - before$live, 4, label = loss[[2]])
    expect_output(print(value$grad_fn), loss[[3]], fixed = TRUE)
    value$backward()
    grad <- as_array(a$grad)
    a$grad <- NULL
    input <- if (loss[[2]] == "binary_cross_entropy") torch$sigmoid(py_a) else py_a
    oracle <- torch$nn$functional[[loss[[2]]]](input, py_p)
    oracle$backward()
    expect_identical(as_array(value), reticulate::py_to_r(oracle$item()), label = loss[[2]])
    expect_identical(grad, as_array(reticulate::py_to_r(py_a$grad)), label = loss[[2]])
    py_a$grad <- NULL
  }
  # A scalar view of a tensor R holds shares its storage: it stays a view.
  x <- torch_zeros(2^19)
  v <- x[2]
  v$add_(1)
  expect_equal(as_array(x[1:3]), c(0, 1, 0))
})

test_that("an output a layer keeps hold of stays alive", {
  kept <- new.env()
  keeper <- nn_module(forward = function(x) {
    self$last <- x  # a field
    x * 2
  })()
  lister <- nn_module(forward = function(x) {
    kept$all <- c(kept$all, list(x))  # a list elsewhere
    x + 1
  })()
  closer <- nn_module(forward = function(x) {
    force(x)
    kept$f <- function() x  # a closure over its environment
    x - 1
  })()
  tagger <- nn_module(forward = function(x) {
    out <- x$relu()
    attr(out, "from") <- x  # an attribute of its output
    out
  })()
  weight <- nn_module(initialize = function() self$w <- nn_parameter(torch_ones(2, 3)),
                      forward = function(x) self$w)()  # a parameter, not a layer's output
  net <- nn_sequential(nn_linear(3, 3), keeper, lister, nn_identity(), closer, nn_linear(3, 3),
                       weight, nn_linear(3, 3))
  x <- torch_randn(2, 3)
  for (i in 1:2) y <- net(x)
  # What each layer kept is still a tensor with its values (a tensor let go of says it was freed):
  # the keeper's input k, the lister's 2k, the closure's 2k + 1.
  expect_equal(as_array(kept$all[[2]]), as_array(keeper$last * 2))
  expect_equal(as_array(kept$f()), as_array(kept$all[[2]] + 1))
  expect_equal(as_array(weight$w), matrix(1, 2, 3))
  expect_equal(y$shape, c(2, 3))
  expect_length(kept$all, 2)
  expect_equal(as_array(kept$all[[1]]), as_array(kept$all[[2]]))  # the same x, the same weights
  lin <- nn_linear(3, 3)
  y <- nn_sequential(lin, tagger)(x)
  expect_equal(as_array(attr(y, "from")), as_array(lin(x)))
})

test_that("an error in a layer of nn_sequential() is the layer's, and leaves the input alone", {
  broken <- nn_module(forward = function(x) stop("this layer is broken"))()
  net <- nn_sequential(nn_linear(3, 3), nn_relu(), broken)
  x <- torch_randn(2, 3)
  expect_error(net(x), "this layer is broken")
  expect_equal(x$shape, c(2, 3))
  expect_equal(net[[1]](x)$shape, c(2, 3))
})

test_that("a module defined in R is freed when dropped", {
  block <- nn_module(
    initialize = function() {
      self$fc <- nn_linear(4, 4)
      self$act <- nn_relu()
    },
    forward = function(x) self$act(self$fc(x))
  )
  freed <- new.env()
  freed$n <- 0
  for (i in 1:5) {
    m <- block()
    m(torch_randn(2, 4))$sum()$backward()  # a graph and gradients, too
    reg.finalizer(attr(m, "module"), function(e) freed$n <- freed$n + 1)
  }
  rm(m)
  gc()
  gc()
  expect_equal(freed$n, 5)
  # also one that an autograd function defined beside it has seen (the node holds its R
  # functions from C++, where R's collector cannot look)
  train_once <- function() {
    m <- block()
    reg.finalizer(attr(m, "module"), function(e) freed$n <- freed$n + 1)
    twice <- autograd_function(forward = function(ctx, x) x * 2,
                               backward = function(ctx, grad) list(x = grad * 2))
    twice(m(torch_randn(2, 4)))$sum()$backward()
    invisible()
  }
  train_once()
  gc()
  gc()
  expect_equal(freed$n, 6)
})

test_that("R callbacks run on R's thread while the engine runs elsewhere", {
  threads <- logical()
  x <- torch_randn(8, requires_grad = TRUE)
  y <- x * 2
  y$register_hook(function(grad) {
    threads[[length(threads) + 1L]] <<- ampkit:::on_r_thread()
    grad * 3
  })
  double_it <- autograd_function(
    forward = function(ctx, a) a * 2,
    backward = function(ctx, g) {
      threads[[length(threads) + 1L]] <<- ampkit:::on_r_thread()
      invisible(lapply(1:200, function(i) numeric(1000)))  # R allocates: gc may run here
      list(a = g * 2)
    }
  )
  for (i in 1:20) double_it(y)$sum()$backward(retain_graph = TRUE)
  expect_length(threads, 40)
  expect_true(all(threads))
  expect_equal(as_array(x$grad), rep(20 * 2 * 3 * 2, 8))
})

test_that("R callbacks run under the autograd pass's grad mode, as on the engine's thread", {
  skip_if_no_ampkit()
  modes <- logical()
  exp2 <- autograd_function(
    forward = function(ctx, i) {
      r <- i$exp()
      ctx$save_for_backward(result = r)
      r
    },
    backward = function(ctx, g) {
      modes[[length(modes) + 1L]] <<- (torch_ones(1, requires_grad = TRUE) * 2)$requires_grad
      list(i = g * ctx$saved_variables$result)
    }
  )
  x <- torch_randn(3, requires_grad = TRUE)
  g <- autograd_grad(exp2(x)$sum(), x)[[1]]
  y <- exp2(x)$sum()
  g2 <- with_no_grad(autograd_grad(y, x, create_graph = TRUE))[[1]]
  # PyTorch's: no grad in a backward without create_graph, grad with it, whatever the caller's
  expect_identical(modes, c(FALSE, TRUE))
  expect_false(g$requires_grad)
  expect_true(g2$requires_grad)
})

test_that("an assigned gradient is checked as PyTorch's Tensor.grad setter checks it", {
  y <- torch_zeros(2, requires_grad = TRUE)
  expect_error(y$grad <- torch_ones(3), "gradient of size '\\[3\\]' to a tensor of size '\\[2\\]'",
               class = "value_error")
  expect_error(y$grad <- torch_ones(2, dtype = torch_float64()), "with dtype 'Double'",
               class = "value_error")
  expect_error(y$grad <- 5, "`grad` must be a tensor or NULL", class = "value_error")
  expect_true(is_undefined_tensor(y$grad)) # none of them set it
  y$grad <- torch_ones(2)
  expect_equal(as_array(y$grad), c(1, 1))
  y$grad <- NULL
  expect_true(is_undefined_tensor(y$grad))
})

test_that("a tensor passed to Python is the same tensor, both ways", {
  skip_if_no_ampkit()
  x <- torch_zeros(3)
  p <- reticulate::r_to_py(x)
  p$add_(1)  # in Python, in place
  expect_equal(as_array(x), c(1, 1, 1))
  torch <- reticulate::import("torch", convert = FALSE)
  q <- torch$arange(4L)$float()
  r <- reticulate::py_to_r(q)
  expect_true(inherits(r, "torch_tensor"))
  r$mul_(10)  # in R, in place
  expect_equal(unlist(reticulate::py_to_r(q$tolist())), c(0, 10, 20, 30))
  # (as text: reticulate reads a Python int beyond 2^31 as a 32-bit one)
  expect_identical(sprintf("%.0f", r$data_ptr()), reticulate::py_str(q$data_ptr()))
})

test_that("libtorch's errors reach R in R's words, and bad input never aborts", {
  expect_error(torch_mm(torch_ones(2, 3), torch_ones(2, 3)), "shapes cannot be multiplied",
               class = "runtime_error")
  err <- tryCatch(torch_mm(torch_ones(2, 3), torch_ones(2, 3)), error = identity)
  expect_false(grepl("Exception raised from|C\\+\\+|frame #", conditionMessage(err)))
  expect_error(torch_ones(2)$to(device = "cuda:0") + 1, class = "error")
  expect_error(torch_ones(2)$to(dtype = "float99"), "dtype", class = "value_error")
  expect_error(torch_zeros(2^40, 2^40, 2^40), class = "error")  # the size overflows int64
  expect_error(torch_add(torch_ones(2), torch_ones(3)), class = "runtime_error")
  expect_error(torch_ones(2, 2)$sum(dim = 3), "\\[-2, 2\\].*got 3", class = "index_error")
  expect_error(nnf_cross_entropy(torch_randn(2, 3), torch_tensor(c(1L, 4L))),
               "Target 4 is out of bounds", class = "error")
  expect_error(nnf_cross_entropy(torch_randn(2, 3), torch_tensor(c(1L, 0L))),
               "Indexing starts at 1 but found a 0. `target` is 1-based", fixed = TRUE,
               class = "value_error")
  # Class targets become 0-based in one pass; ignore_index's negative classes stay as they are.
  input <- torch_randn(3, 3)
  expect_equal(as_array(nnf_cross_entropy(input, torch_tensor(c(3L, -100L, 1L)))),
               as_array(nnf_cross_entropy(input[c(1, 3), ], torch_tensor(c(3L, 1L)))),
               tolerance = 1e-6)
  freed <- unserialize(serialize(torch_ones(2), NULL))  # a saved R session's tensor
  expect_error(freed + 1, "no longer exists", class = "value_error")
})

test_that("an allocation that fails runs R's collector, retries, then errs in R's words", {
  # The CPU allocator's failure is a failed check in libtorch (not its OutOfMemoryError): it is
  # retried after a collection all the same, and its message is the sentence, not the C++ check.
  collected <- new.env()
  suppressMessages(trace(gc, print = FALSE, function() collected$yes <- TRUE, where = baseenv()))
  on.exit(suppressMessages(untrace(gc, where = baseenv())))
  err <- tryCatch(torch_randn(1e9, 1e9), error = identity)
  expect_s3_class(err, c("torch_out_of_memory", "runtime_error"))
  expect_match(conditionMessage(err), "^DefaultCPUAllocator: can't allocate memory")
  expect_true(isTRUE(collected$yes))
})

test_that("an op that writes to its arguments is not run again after a failed allocation", {
  skip_if_not(nzchar(Sys.which("prlimit")) && file.exists("/proc/self/status"),
              "needs util-linux's prlimit and Linux's /proc")
  # _foreach_add_() adds tensor by tensor: `small` has had its 1 added when the float64 sum for
  # `big` (2 GiB) fails, the process's address space capped 1 GiB above what it holds. Run again
  # after a collection, as a function that writes nothing is, it would add 1 to `small` twice.
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script))
  writeLines(c(
    "suppressPackageStartupMessages(library(ampkit))",
    "small <- torch_zeros(2)",
    "big <- torch_empty(2^28)  # 1 GiB of float32",
    "one <- torch_ones(1, dtype = torch_float64())",
    "status <- readLines('/proc/self/status')",
    "held <- as.numeric(gsub('[^0-9]', '', grep('^VmSize', status, value = TRUE)))  # KiB",
    "system(sprintf('prlimit --pid %d --as=%.0f', Sys.getpid(), (held + 2^20) * 1024))",
    "err <- tryCatch(ampkit:::torch__foreach_add_(list(small, big), list(one, one)),",
    "                error = identity)",
    "cat(class(err)[[1L]], as_array(small), '\\n')"
  ), script)
  out <- system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE)
  expect_equal(utils::tail(out, 1L), "torch_out_of_memory 1 1 ")
})

test_that("the generated surface is 1-based in its dims and returned indices", {
  x <- torch_tensor(matrix(c(3, 1, 2, 9, 7, 8), nrow = 2, byrow = TRUE))
  expect_equal(as_array(x$sum(dim = 1)), c(12, 8, 10))
  expect_equal(as_array(x$sum(dim = -1)), c(6, 24))
  expect_equal(as_array(torch_argmax(x, dim = 2)), c(1, 1))
  expect_equal(as_array(torch_argmin(x)), 2)
  sorted <- torch_sort(x, dim = 2)
  expect_equal(as_array(sorted[[2]]), matrix(c(2, 3, 1, 2, 3, 1), nrow = 2, byrow = TRUE))
  top <- torch_topk(x, 1, dim = 2)
  expect_equal(as_array(top[[2]]), matrix(c(1, 1), ncol = 1))
  m <- torch_max(x, dim = 1)
  expect_equal(as_array(m[[2]]), c(2, 2, 2))
  expect_equal(as_array(torch_cumsum(x, dim = 2)[, 3]), c(6, 24))
  expect_equal(torch_cat(list(x, x), dim = 1)$shape, c(4, 3))
  expect_equal(x$transpose(1, 2)$shape, c(3, 2))
  expect_equal(as_array(torch_index_select(x, 2, torch_tensor(c(3L, 1L)))),
               matrix(c(2, 3, 8, 9), nrow = 2, byrow = TRUE))
  expect_error(x$sum(dim = 0), class = "error")
})
