# The calls of count.sh, from R: each timed as `number` calls in a byte-compiled loop, between two
# calls of the marker (C_on_r_thread) at which callgrind starts a new count. The names and the
# order are calls.py's.
suppressMessages(library(ampkit))
args <- commandArgs(trailingOnly = TRUE)
number <- as.integer(args[[1L]])
torch_manual_seed(0)
x2 <- torch_randn(2, 2)
y2 <- torch_randn(2, 2)
a64 <- torch_randn(64, 64)
linear <- nn_linear(10, 32)
input <- torch_randn(32, 10)
device <- "cpu"
calls <- alist(
  "torch_add(x, y), 2x2" = torch_add(x2, y2),
  "x + y, 2x2" = x2 + y2,
  "x$sum(dim = 1), 64x64" = a64$sum(dim = 1),
  "x$view(-1, 64), 64x64" = a64$view(-1, 64),
  "x$t(), 64x64" = a64$t(),
  "x$unsqueeze(1), 64x64" = a64$unsqueeze(1),
  "x$shape, 64x64" = a64$shape,
  "x[1, ], 64x64" = a64[1, ],
  "torch_zeros(32, 10)" = torch_zeros(32, 10),
  "torch_zeros(32, 10, device = \"cpu\")" = torch_zeros(32, 10, device = device),
  "x$to(device = \"cpu\"), 64x64" = a64$to(device = device),
  "nn_linear(10, 32) forward, batch 32" = linear(input)
)
marker <- function() .Call(ampkit:::C_on_r_thread)
loops <- lapply(calls, function(expr) {
  loop <- compiler::cmpfun(eval(bquote(function(n) {
    for (i in seq_len(n)) .(expr)
    NULL
  })))
  loop(200)
  loop
})
for (name in names(loops)) {
  invisible(gc())
  marker()
  loops[[name]](number)
  marker()
}
writeLines(names(loops), args[[2L]])
