#ifndef STRATA_CPNG_SHIM_H
#define STRATA_CPNG_SHIM_H
#include <png.h>
#endif
