/* fileio.c - whole positioned reads and writes (fileio.h). */
#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
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

wc_err wc_open_regular(const char *path, int *fd)
{
	*fd = -1;
	int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (f < 0)
		return wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(f, &st) != 0) {
		wc_err e = wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
		close(f);
		return e;
	}
	if (!S_ISREG(st.st_mode)) {
		const char *kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a fifo"
				   : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
		close(f);
		return wc_fail(WC_E_FORMAT, "%s: not a regular file (%s)", path, kind);
	}
	int fl = fcntl(f, F_GETFL);
	if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		wc_err e = wc_fail(WC_E_IO, "%s: %s", path, strerror(errno));
		close(f);
		return e;
	}
	*fd = f;
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
