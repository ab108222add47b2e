# The R package on a GPU: R torch's article loop (float16 autocast, the CUDA scaler, an Inf
# gradient on one step) against PyTorch's modules with torch.amp on the same GPU, bit for bit,
# with the scale kept on the device; R callbacks called by the autograd engine's CUDA thread run
# on R's thread; a loop of large CUDA temporaries stays within 2x of its allocated memory; a
# collection due in a forward pass waits for the end of its backward pass.
# Skipped where libtorch sees no CUDA device (tools/gpu_proof.sh runs it there).

skip_if_no_cuda <- function() if (!cuda_is_available()) skip("CUDA is not available")

test_that("cuda_amp_grad_scaler trains as torch.amp does, a skipped step included", {
  skip_if_no_cuda()
  skip_if_no_ampkit()
  torch <- import_torch_py()
  torch_manual_seed(1)
  ours <- nn_sequential(nn_linear(6, 5), nn_relu(), nn_linear(5, 3))$cuda()
  ours_opt <- optim_sgd(ours$parameters, lr = 0.1)
  torch$manual_seed(1L)  # the same weights: libtorch's generator, the same layers in order
  theirs <- torch$nn$Sequential(torch$nn$Linear(6L, 5L), torch$nn$ReLU(),
                                torch$nn$Linear(5L, 3L))$cuda()
  theirs_opt <- torch$optim$SGD(theirs$parameters(), lr = 0.1)
  scaler <- cuda_amp_grad_scaler(init_scale = 256, growth_interval = 2)
  reference <- torch$amp$GradScaler("cuda", init_scale = 256, growth_interval = 2L)
  torch_manual_seed(2)
  for (i in 1:5) {
    x <- torch_randn(4, 6)$cuda()
    y <- torch_randn(4, 3)$cuda()
    with_autocast(device_type = "cuda", {
      loss <- nnf_mse_loss(ours(x)$float(), y)
    })
    scaler$scale(loss)$backward()
    if (i == 3L) ours$parameters[[1]]$grad[1, 1] <- Inf
    scaler$step(ours_opt)
    scaler$update()
    ours_opt$zero_grad()

    with_autocast(device_type = "cuda", {
      their_loss <- torch$nn$functional$mse_loss(theirs(reticulate::r_to_py(x))$float(),
                                                 reticulate::r_to_py(y))
    })
    reference$scale(their_loss)$backward()
    if (i == 3L) {
      first <- reticulate::import_builtins(convert = FALSE)$`next`(theirs$parameters())
      first$grad$view(-1L)$`__setitem__`(0L, Inf)
    }
    reference$step(theirs_opt)
    reference$update()
    theirs_opt$zero_grad()
    expect_identical(scaler$get_scale(), reference$get_scale())
  }
  mine <- unname(ours$parameters)
  their <- reticulate::import_builtins()$list(theirs$parameters())
  for (k in seq_along(mine)) {
    expect_true(torch_equal(mine[[k]], as_r_tensor(their[[k]])))
  }
  expect_identical(scaler$.scale$device$type, "cuda")
  expect_identical(scaler$state_dict()$scale, reference$state_dict()$scale)
})

test_that("R callbacks of a CUDA backward run on R's thread", {
  skip_if_no_cuda()
  on_r <- logical()
  x <- torch_randn(64, device = "cuda", requires_grad = TRUE)
  y <- x * 2
  y$register_hook(function(grad) {
    on_r[[length(on_r) + 1L]] <<- ampkit:::on_r_thread()
    grad
  })
  twice <- autograd_function(
    forward = function(ctx, a) a * 2,
    backward = function(ctx, g) {
      on_r[[length(on_r) + 1L]] <<- ampkit:::on_r_thread()
      list(a = g * 2)
    }
  )
  for (i in 1:5) twice(y)$sum()$backward(retain_graph = TRUE)
  expect_length(on_r, 10)
  expect_true(all(on_r))
})

test_that("a loop of large CUDA temporaries stays within 2x of its allocated memory", {
  skip_if_no_cuda()
  gc()
  cuda_empty_cache()
  ampkit:::cuda_reset_peak_memory()
  before <- cuda_memory_stats()$allocated_bytes$all$current
  temporary <- 64 * 2^20
  for (i in 1:1000) x <- torch_empty(16 * 2^20, device = "cuda")$fill_(i)
  peak <- cuda_memory_stats()$allocated_bytes$all$peak
  # The loop's working set is two temporaries: the last x while the next one is made.
  expect_lte(peak - before, 2 * (2 * temporary))
})

test_that("on CUDA a collection due in a forward pass waits for the end of its backward pass", {
  skip_if_no_cuda()
  w <- torch_randn(2^20, device = "cuda", requires_grad = TRUE) # 4 MiB
  gc()
  ampkit:::tensor_memory_collect()
  before <- ampkit:::tensor_memory_stats()
  outs <- list()
  while (!ampkit:::tensor_memory_stats()$pending && length(outs) < 100) {
    outs[[length(outs) + 1]] <- w * 2
  }
  during <- ampkit:::tensor_memory_stats()
  expect_true(during$pending)
  expect_equal(during$collections, before$collections)
  outs[[1]]$sum()$backward()
  after <- ampkit:::tensor_memory_stats()
  expect_false(after$pending)
  expect_equal(after$collections - before$collections, 1)
})

test_that("the CUDA queries: current device, runtime version, generator states, memory", {
  skip_if_no_cuda()
  torch <- reticulate::import("torch", convert = FALSE)
  expect_identical(cuda_current_device(),
                   as.integer(reticulate::py_to_r(torch$cuda$current_device())))
  expect_s3_class(cuda_runtime_version(), "numeric_version")
  # the CUDA torch was built with, as torch.version.cuda says it ("12.8")
  expect_identical(format(cuda_runtime_version()[, 1:2]),
                   reticulate::py_to_r(torch$version$cuda))
  # A saved state replays the same draws; R torch's list of every device's states too.
  state <- cuda_get_rng_state(0)
  expect_true(state$dtype == torch_uint8())
  a <- torch_randn(5, device = "cuda")
  cuda_set_rng_state(state, 0)
  expect_true(torch_equal(torch_randn(5, device = "cuda"), a))
  all <- cuda_get_rng_state()
  expect_length(all, cuda_device_count())
  b <- torch_randn(5, device = "cuda")
  cuda_set_rng_state(all)
  expect_true(torch_equal(torch_randn(5, device = "cuda"), b))
  # with_torch_manual_seed() restores the CUDA generator's state as well
  cuda_set_rng_state(all)
  with_torch_manual_seed(torch_randn(3, device = "cuda"), seed = 1)
  expect_true(torch_equal(torch_randn(5, device = "cuda"), b))
  expect_error(cuda_get_rng_state(cuda_device_count()), "between 0 and the number of devices",
               class = "value_error")
  expect_output(stats <- cuda_memory_summary(), "allocated_bytes")
  expect_named(stats, c("allocated_bytes", "reserved_bytes", "active_bytes"))
})

test_that("the compute capability and the allocator's memory history and snapshot", {
  skip_if_no_cuda()
  skip_if_no_ampkit()
  capability <- cuda_get_device_capability()
  expect_named(capability, c("Major", "Minor"))
  expect_type(capability, "integer")
  expect_true(capability[["Major"]] >= 3L)
  # one of the capabilities the driver's own tool reports, where it is here and reports them
  smi <- Sys.which("nvidia-smi")
  caps <- if (nzchar(smi)) {
    suppressWarnings(system2(smi, c("--query-gpu=compute_cap", "--format=csv,noheader"),
                             stdout = TRUE, stderr = FALSE))
  }
  if (is.null(attr(caps, "status")) && length(caps) > 0L) {
    expect_true(paste(capability, collapse = ".") %in% trimws(caps))
  }
  expect_identical(cuda_get_device_capability(0), cuda_get_device_capability(cuda_current_device()))
  cuda_record_memory_history("all", stacks = "python", max_entries = 1000)
  on.exit(cuda_record_memory_history(NULL))
  x <- torch_empty(3 * 2^20, device = "cuda") # 12 MiB
  snapshot <- cuda_memory_snapshot()
  expect_type(snapshot, "raw")
  # Python's pickle reads it: a segment holds x's memory (its address whole: 64 bits), and an
  # allocation of x's size is among the recorded events.
  holds <- reticulate::py_eval(paste(
    "lambda data, p: (lambda s: (",
    "  any(g['address'] <= p < g['address'] + g['total_size'] for g in s['segments']),",
    "  any(e['action'] == 'alloc' and e['size'] == 12 * 2**20",
    "      for t in s['device_traces'] for e in t)))(__import__('pickle').loads(bytes(data)))"))
  expect_identical(holds(snapshot, x$data_ptr()), list(TRUE, TRUE))
  path <- tempfile(fileext = ".pickle")
  on.exit(unlink(path), add = TRUE)
  cuda_dump_memory_snapshot(path)
  expect_identical(holds(readBin(path, "raw", file.size(path)), x$data_ptr()), list(TRUE, TRUE))
})

test_that("contrib_sort_vertices on CUDA tensors gives the CPU's result, on CUDA", {
  skip_if_no_cuda()
  torch_manual_seed(5)
  v <- torch_randn(8, 1024, 24, 2)  # R torch's test's sizes
  m <- torch_rand(8, 1024, 24) > 0.8
  m <- m & (torch_cumsum(m$to(dtype = torch_int()), dim = 3) <= 8)  # at most 8 vertices
  nv <- torch_sum(m$to(dtype = torch_int()), dim = -1)$to(dtype = torch_int())
  on_cuda <- contrib_sort_vertices(v$cuda(), m$cuda(), nv$cuda())
  expect_true(on_cuda$is_cuda)
  expect_identical(as_array(on_cuda$cpu()), as_array(contrib_sort_vertices(v, m, nv)))
  expect_error(contrib_sort_vertices(v$cuda(), m, nv), "must be on one device",
               class = "value_error")
})
