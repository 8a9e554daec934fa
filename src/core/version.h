/* version.h - what libwcodec runs with, for --version output and bug
 * reports. */
#ifndef WC_VERSION_H
#define WC_VERSION_H

/* The libraries libwcodec is linked with, their versions as they report
 * them at run time: "zstd 1.5.4, jansson 2.14, libxxhash 0.8.1". A static
 * string. */
const char *wc_library_versions(void);

/* The instruction sets the CPU offers the decoders, as chosen at run time
 * (cpu.h): "AVX-512 VBMI", "AVX-512", "AVX2" or "none (scalar code)". */
const char *wc_cpu_level(void);

#endif /* WC_VERSION_H */
