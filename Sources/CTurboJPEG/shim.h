#ifndef STRATA_CTURBOJPEG_SHIM_H
#define STRATA_CTURBOJPEG_SHIM_H
#include <stddef.h>
#include <turbojpeg.h>
#endif
