/* cmd_unpack.c - `wcodec unpack`: restore the original file byte-identical. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "config.h"
#include "container/container.h"
#include "core/fileio.h"

static void usage(FILE *out)
{
	fprintf(out, "Usage: wcodec unpack [OPTIONS] IN [OUT | -]\n"
		     "       wcodec unpack [OPTIONS] DIR OUTDIR\n\n"
		     "Restore the file IN was packed from (IN.wcodec -> OUT.safetensors), byte-identical;\n"
		     "OUT - writes it to standard output.\n"
		     "Without OUT, X.wcodec unpacks to X.safetensors and Y.qvq to directory Y; an OUT\n"
		     "that is a directory receives X.safetensors. A directory DIR is mirrored into OUTDIR\n"
		     "as wcodecfs shows it: containers unpacked, other files copied, symlinks kept.\n"
		     "Tiles are decoded in parallel and checked against their checksums; OUT is written\n"
		     "to a temporary file, fsynced and renamed into place only if every tile decodes.\n\n" CLI_DECODE_HELP
		     "  -f, --force           overwrite an existing OUT (or write into a non-empty one)\n"
		     "  -q, --quiet           no progress bar\n"
		     "  -h, --help            this help\n"
		     "  -V, --version         the version\n");
}

typedef struct unpack_ctx {
	wc_container *c;
	int fd;
	const char *path;
	wc_err err;
	char why[512];
} unpack_ctx;

static int write_tile(void *arg, uint32_t tile, const uint8_t *data, uint32_t size, wc_err status, const char *why)
{
	unpack_ctx *u = arg;
	if (status) {
		u->err = status;
		snprintf(u->why, sizeof u->why, "%s", why);
		return 1;
	}
	uint64_t off = wc_container_tile(u->c, tile)->voff;
	while (size) {
		ssize_t n = pwrite(u->fd, data, size, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			u->err = WC_E_IO;
			snprintf(u->why, sizeof u->why, "writing %s: %s", u->path, strerror(errno));
			return 1;
		}
		data += n;
		size -= (uint32_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int wcodec_unpack(const char *in, const char *out, const cli_decode_opts *o)
{
	wc_container *c;
	wc_err e = wc_check_output_not_input(in, out);
	if (e)
		return cli_error(e, "unpack");
	if ((e = wc_container_open(in, &c)))
		return cli_error(e, "unpack");
	cli_tmpfile tf;
	if ((e = cli_tmp_create(&tf, out))) {
		wc_container_release(c);
		return cli_error(e, "unpack");
	}
	unpack_ctx u = {.c = c, .fd = tf.fd, .path = tf.tmp};
	size_t plen;
	const uint8_t *prefix = wc_container_prefix(c, &plen);
	if (pwrite(tf.fd, prefix, plen, 0) != (ssize_t)plen) {
		e = wc_fail(WC_E_IO, "writing %s: %s", tf.tmp, strerror(errno));
		goto fail;
	}
	cli_progress prog;
	cli_progress_init(&prog, "unpacking", o->quiet);
	prog.bytes = 1;
	e = cli_decode_tiles(c, o, write_tile, &u, &prog, NULL);
	cli_progress_done(&prog);
	if (!e && u.err)
		e = wc_fail(u.err, "%s", u.why);
	if (!e && ftruncate(tf.fd, (off_t)wc_container_virtual_size(c)) != 0)
		e = wc_fail(WC_E_IO, "truncating %s: %s", tf.tmp, strerror(errno));
	if (e)
		goto fail;
	if ((e = cli_tmp_commit(&tf))) {
		wc_container_release(c);
		return cli_error(e, "unpack");
	}
	wc_container_release(c);
	return CLI_OK;
fail:
	cli_tmp_abort(&tf);
	wc_container_release(c);
	return cli_error(e, "unpack");
}

int cmd_unpack(int argc, char **argv)
{
	cli_decode_opts o = {.backend = "auto"};
	int st = cli_parse_decode_cmd("unpack", argc, argv, 1, 2, CLI_OPT_QUIET | CLI_OPT_FORCE, usage, &o);
	if (st >= 0)
		return st;
	const char *in = argv[optind], *out = optind + 1 < argc ? argv[optind + 1] : NULL;
	if (cli_is_dir(in)) {
		if (!out)
			return cli_usage_error("unpack", "unpacking directory %s needs OUTDIR", in);
		st = cli_check_overwrite("unpack", out, 1, o.force);
		return st >= 0 ? st : cli_unpack_tree(in, out, &o);
	}
	const cli_format *f = cli_format_of(in);
	if (!f)
		return CLI_FAIL;
	if (!f->unpack) {
		fprintf(stderr, "wcodec: unpack: %s files cannot be unpacked\n", f->name);
		return CLI_FAIL;
	}
	/* OUT "-": standard output, as zstd -dc does (a .wcodec file). */
	if (out && strcmp(out, "-") == 0) {
		if (f->unpacks_to_dir)
			return cli_usage_error("unpack", "a %s archive unpacks to a directory, not to standard output",
					       f->name);
		return cli_cat(in, &o);
	}
	/* No OUT: beside IN, as gzip and zstd do. A file's OUT that is a
	 * directory: into it, as cp does. (A .qvq's OUT is a directory.) */
	char *derived = NULL;
	if (!out || (!f->unpacks_to_dir && cli_is_dir(out))) {
		derived = cli_derive_output(in, f->suffix, f->unpacked_suffix, out);
		if (!derived)
			return cli_usage_error("unpack", "%s does not end in %s: name the output", in, f->suffix);
		out = derived;
	}
	wc_err same = wc_check_output_not_input(in, out);
	st = same ? cli_error(same, "unpack") : cli_check_overwrite("unpack", out, f->unpacks_to_dir, o.force);
	if (st < 0)
		st = f->unpack(in, out, &o);
	free(derived);
	return st;
}
