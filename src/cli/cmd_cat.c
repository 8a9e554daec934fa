/* cmd_cat.c - `wcodec cat`: the original file's bytes on standard output. */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "cli/cli.h"
#include "config.h"
#include "container/container.h"

static void usage(FILE *out)
{
	fprintf(out, "Usage: wcodec cat [OPTIONS] FILE.wcodec\n\n"
		     "Write the file FILE was packed from to standard output, decoding tiles in parallel.\n"
		     "Stops with status 1 at the first damaged tile.\n\n" CLI_DECODE_HELP
		     "  -h, --help            this help\n"
		     "  -V, --version         the version\n");
}

typedef struct cat_ctx {
	wc_err err;
	char why[512];
} cat_ctx;

static int put_tile(void *arg, uint32_t tile, const uint8_t *data, uint32_t size, wc_err status, const char *why)
{
	(void)tile;
	cat_ctx *k = arg;
	if (status) {
		k->err = status;
		snprintf(k->why, sizeof k->why, "%s", why);
		return 1;
	}
	if (fwrite(data, 1, size, stdout) != size) {
		k->err = WC_E_IO;
		snprintf(k->why, sizeof k->why, "writing standard output: %s", strerror(errno));
		return 1;
	}
	return 0;
}

int cli_cat(const char *in, const cli_decode_opts *o)
{
	wc_container *ct;
	wc_err e = wc_container_open_tiles(in, &ct);
	if (e)
		return cli_error(e, "cat");
	size_t plen;
	const uint8_t *prefix = wc_container_prefix(ct, &plen);
	cat_ctx k = {0};
	if (fwrite(prefix, 1, plen, stdout) != plen)
		e = wc_fail(WC_E_IO, "writing standard output: %s", strerror(errno));
	if (!e)
		e = cli_decode_tiles(ct, o, put_tile, &k, NULL, NULL);
	if (!e && k.err)
		e = wc_fail(k.err, "%s", k.why);
	if (!e && fflush(stdout) != 0)
		e = wc_fail(WC_E_IO, "writing standard output: %s", strerror(errno));
	wc_container_release(ct);
	return e ? cli_error(e, "cat") : CLI_OK;
}

int cmd_cat(int argc, char **argv)
{
	cli_decode_opts o = {.backend = "auto", .quiet = 1};
	int st = cli_parse_decode_cmd("cat", argc, argv, 1, 1, 0, usage, &o);
	if (st >= 0)
		return st;
	return cli_cat(argv[optind], &o);
}
