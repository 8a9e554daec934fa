/*
 * qvq_names.h - image names of .qvq archives: validation and the names the
 * mount and `wcodec unpack` show (docs/FORMAT.md 6.4).
 *
 * A name is a relative path of 1..WC_QVQ_MAX_NAME bytes: components
 * separated by single '/', none empty, none "." or "..", no leading '/', no
 * byte below 0x20 (NUL, newline...), and a first component other than the
 * archive directory's own files "images.npy" and "labels.txt". Such a name
 * cannot escape the directory it is shown in.
 */
#ifndef WC_QVQ_NAMES_H
#define WC_QVQ_NAMES_H

#include <stddef.h>

#include "core/wc_error.h"

/* Check name (len bytes, not necessarily NUL-terminated) against the rules
 * above. Errors: WC_E_FORMAT with the reason (the name quoted, escaped). */
wc_err wc_qvq_name_check(const char *name, size_t len);

/* The shown name: the last component's extension (from its last '.', if
 * that '.' is not its first byte) replaced by ".ppm"; "a/b.png" ->
 * "a/b.ppm", "c" -> "c.ppm". Returns a malloc()ed string or NULL (no memory). */
char *wc_qvq_ppm_name(const char *name);

/* Check that n shown names (each valid) are distinct and that no name is a
 * directory of another ("a.ppm" and "a.ppm/b.ppm"). Errors: WC_E_FORMAT
 * naming the clash; WC_E_NOMEM. */
wc_err wc_qvq_names_unique(const char *const *names, size_t n);

#endif /* WC_QVQ_NAMES_H */
