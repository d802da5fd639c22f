#ifndef STRATA_CXXHASH_SHIM_H
#define STRATA_CXXHASH_SHIM_H
#include <xxhash.h>
#endif
