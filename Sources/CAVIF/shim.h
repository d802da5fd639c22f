#ifndef STRATA_CAVIF_SHIM_H
#define STRATA_CAVIF_SHIM_H
#include <avif/avif.h>
#endif
