#ifndef STRATA_CHEIF_SHIM_H
#define STRATA_CHEIF_SHIM_H
#include <libheif/heif.h>
#endif
