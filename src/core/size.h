/*
 * size.h - byte sizes as people write them on command lines and in mount
 * options: "4096", "64K", "512M", "2G", "1T", case-insensitive, with an
 * optional "i" and an optional "B" after the unit ("64KiB", "64KB", "4096B").
 * Units are powers of 1024 (K = 2^10 ... T = 2^40), as in dd(1) and the
 * mount options of tmpfs(5).
 */
#ifndef WC_SIZE_H
#define WC_SIZE_H

#include <stdint.h>

/* Parse s into *out (bytes): digits then an optional unit, nothing else,
 * at most max. Returns 0, or -1 for anything else (empty, a sign, unknown
 * unit, trailing characters, overflow, above max); *out is then unchanged. */
int wc_parse_size(const char *s, uint64_t max, uint64_t *out);

#endif /* WC_SIZE_H */
