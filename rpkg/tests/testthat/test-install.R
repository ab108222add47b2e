# R torch's installer, where libtorch is PyTorch's: the torch wheel's version, as Python's torch
# gives it, is the one reported.

test_that("install_torch() downloads nothing and names the libtorch in use", {
  skip_if_no_ampkit()
  version <- reticulate::py_str(reticulate::import("torch", convert = FALSE)$`__version__`)
  expect_message(done <- install_torch(), paste0("torch ", version), fixed = TRUE)
  expect_true(done)
  expect_message(install_torch(reinstall = TRUE), "nothing to download")
  expect_error(install_torch(reinstall = NA), "`reinstall` must be TRUE or FALSE",
               class = "value_error")
})

test_that("install_torch_sitrep() reports libtorch, CUDA and Python as the process sees them", {
  skip_if_no_ampkit()
  torch <- reticulate::import("torch", convert = FALSE)
  report <- install_torch_sitrep(verbose = FALSE)
  expect_named(report, c("system", "package", "libtorch", "cuda", "python"))
  expect_identical(report$libtorch$version, reticulate::py_str(torch$`__version__`))
  expect_identical(report$libtorch$built_with_cuda,
                   reticulate::py_to_r(torch$version$cuda) %||% NA_character_)
  expect_identical(normalizePath(dirname(report$libtorch$path)),
                   normalizePath(reticulate::py_to_r(torch$`__path__`)[[1L]]))
  expect_identical(report$cuda$available, reticulate::py_to_r(torch$cuda$is_available()))
  expect_true(report$python$running)
  expect_output(install_torch_sitrep(), report$libtorch$version, fixed = TRUE)
})

test_that("R torch's download helpers are errors that say where libtorch is", {
  expect_error(get_install_libs_url(), "downloads no libraries", class = "runtime_error")
  expect_error(install_torch_from_file(), "installs nothing", class = "runtime_error")
})
