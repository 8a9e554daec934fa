/* fileio.c - whole positioned reads and writes (fileio.h). */
#include "core/fileio.h"

#include <errno.h>
#include <string.h>
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
