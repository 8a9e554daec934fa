/* fileio.c - whole positioned reads and writes (fileio.h). */
#include "core/fileio.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

wc_err wc_pread_full(int fd, void *buf, size_t len, uint64_t off, const char *what)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return wc_fail(WC_E_IO, "reading %s at offset %llu: %s", what, (unsigned long long)off,
				       strerror(errno));
		}
		if (n == 0)
			return wc_fail(WC_E_IO, "reading %s at offset %llu: unexpected end of file", what,
				       (unsigned long long)off);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return WC_OK;
}

wc_err wc_check_output_not_input(const char *in_path, const char *out_path)
{
	struct stat in, out;
	if (stat(in_path, &in) == 0 && stat(out_path, &out) == 0 && in.st_dev == out.st_dev &&
	    in.st_ino == out.st_ino)
		return wc_fail(WC_E_INVAL, "%s is the input file %s: writing it would replace the "
			       "input; choose another output name", out_path, in_path);
	return WC_OK;
}

wc_err wc_pwrite_full(int fd, const void *buf, size_t len, uint64_t off, const char *what)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return wc_fail(WC_E_IO, "writing %s: %s", what, strerror(errno));
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return WC_OK;
}
