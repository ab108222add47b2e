# Out-of-process R runner (see runner.R); each form runs all its work in this one R process:
#   Rscript run_rscript.R <out_dir> <scenario.json>...   every scenario, <out_dir>/<name>.json
#   Rscript run_rscript.R --jobs <jobs.json>             a JSON list of run_segment() arguments
#   Rscript run_rscript.R --misuse <out.json>            the error-parity cases
args <- commandArgs(trailingOnly = TRUE)
script <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
Sys.setenv(AMPKIT_PARITY_DIR = normalizePath(dirname(script)))
source(file.path(dirname(script), "runner.R"))
if (identical(args[[1]], "--jobs")) {
  jobs <- parity_modules()$pm$load_json(args[[2]])
  for (job in jobs) do.call(run_segment, job)
} else if (identical(args[[1]], "--misuse")) {
  parity_modules()$pm$save_json(args[[2]], run_misuse())
} else {
  run_all(args[-1], args[[1]])
}
