# This file is part of the standard setup for testthat.
# It is recommended that you do not modify it.
#
# Where should you do additional testing?
# Please refer to testthat.R's documentation.

library(testthat)
library(ampkit)

test_check("ampkit")
