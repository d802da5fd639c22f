#ifndef STRATA_CJXL_SHIM_H
#define STRATA_CJXL_SHIM_H
#include <jxl/decode.h>
#include <jxl/encode.h>
#include <jxl/thread_parallel_runner.h>
#endif
