# The one helper added to R torch's tests/testthat: its files run against ampkit. `torch::x` and
# `torch:::x` in them resolve in ampkit's namespace (R torch itself is not installed).
suppressPackageStartupMessages(library(ampkit))
if (!isNamespaceLoaded("torch")) {
  .Internal(registerNamespace("torch", asNamespace("ampkit")))
}
