/* fileio.h - whole positioned reads and writes of a file descriptor, for
 * the container and archive readers and writers, and the writers' check
 * that an output does not replace its input. */
#ifndef WC_FILEIO_H
#define WC_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "core/wc_error.h"

/* Read exactly len bytes at byte offset off of fd into buf, retrying short
 * reads and EINTR. what names the part being read for the reason.
 * Errors: WC_E_IO ("reading <what> at offset N: <strerror>", or
 * "... unexpected end of file" when the file ends first). */
wc_err wc_pread_full(int fd, void *buf, size_t len, uint64_t off, const char *what);

/* Write exactly len bytes of buf at byte offset off of fd, retrying short
 * writes and EINTR. what names the file for the reason.
 * Errors: WC_E_IO ("writing <what>: <strerror>"). */
wc_err wc_pwrite_full(int fd, const void *buf, size_t len, uint64_t off, const char *what);

/* Open the file at path for reading, as a regular file only: *fd gets a
 * descriptor (O_CLOEXEC; the caller closes it). The open does not block
 * (O_NONBLOCK, cleared again once the file is known to be regular), so a
 * FIFO or a device given by mistake is an error rather than a hang.
 * Errors: WC_E_IO ("<path>: <strerror>"), WC_E_FORMAT ("<path>: not a
 * regular file (a fifo)", "... (a directory)", "... (a device)", ...). */
wc_err wc_open_regular(const char *path, int *fd);

/* Refuse to write out_path over in_path: an output that is the input file
 * itself (the same name, a hard link or a symlink to it), which the
 * writers' rename would replace before the user had a copy. out_path need
 * not exist. Errors: WC_E_INVAL ("<out> is the input file <in>"). */
wc_err wc_check_output_not_input(const char *in_path, const char *out_path);

#endif /* WC_FILEIO_H */
