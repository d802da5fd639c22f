#ifndef STRATA_CSTRATAHEIF_H
#define STRATA_CSTRATAHEIF_H

/// Registers Strata's HEVC decoder with libheif (once per process, after `heif_init`): libde265
/// behind libheif's decoder-plugin interface, with `threads` worker threads per decode (1 or
/// less: the decode runs on the calling thread), at a priority above libheif's own libde265
/// plugin, which starts a single worker thread. Returns 0, or libheif's error code.
int strata_heif_register_hevc_decoder(int threads);

/// Sets the worker threads per decode for decoders created from now on (1 or less: none).
void strata_heif_set_hevc_decoder_threads(int threads);

/// The worker threads per decode that the registered decoder starts (0: none).
int strata_heif_hevc_decoder_threads(void);

#endif
