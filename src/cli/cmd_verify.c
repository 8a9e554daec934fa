/* cmd_verify.c - `wcodec verify`: decode every tile, check every checksum. */
#include <getopt.h>
#include <string.h>

#include "cli/cli.h"
#include "config.h"
#include "container/container.h"

static void usage(FILE *out)
{
	fprintf(out, "Usage: wcodec verify [OPTIONS] FILE\n\n"
		     "Check FILE's header/index checksum, then read and decode every tile and check its\n"
		     "payload and decoded checksums. Each damaged tile is reported; the exit status is 1\n"
		     "if any is damaged.\n\n" CLI_DECODE_HELP
		     "  -q, --quiet           report damaged tiles only\n"
		     "  -h, --help            this help\n"
		     "  -V, --version         the version\n");
}

typedef struct verify_ctx {
	wc_container *c;
	const char *path;
	uint32_t damaged;
} verify_ctx;

static int check_tile(void *arg, uint32_t tile, const uint8_t *data, uint32_t size, wc_err status, const char *why)
{
	(void)data;
	(void)size;
	verify_ctx *v = arg;
	if (status) {
		const wc_tile_info *t = wc_container_tile(v->c, tile);
		const wc_tensor_info *ti = wc_container_tensor(v->c, t->tensor);
		fprintf(stderr, "%s: damaged tile %u (tensor \"%s\", bytes [%llu, %llu)): %s: %s\n", v->path, tile,
			ti->name, (unsigned long long)t->voff, (unsigned long long)(t->voff + t->dsize),
			wc_strerror(status), why);
		v->damaged++;
	}
	return 0;
}

int wcodec_verify(const char *path, const cli_decode_opts *o)
{
	wc_container *c;
	wc_err e = wc_container_open(path, &c);
	if (e)
		return cli_error(e, "verify");
	verify_ctx v = {.c = c, .path = path};
	cli_progress prog;
	cli_progress_init(&prog, "verifying", o->quiet);
	e = cli_decode_tiles(c, o, check_tile, &v, &prog);
	cli_progress_done(&prog);
	uint32_t n = wc_container_ntiles(c);
	wc_container_release(c);
	if (e)
		return cli_error(e, "verify");
	if (v.damaged) {
		fprintf(stderr, "%s: %u of %u tiles damaged\n", path, v.damaged, n);
		return CLI_FAIL;
	}
	if (!o->quiet)
		printf("%s: OK (%u tiles)\n", path, n);
	return CLI_OK;
}

int cmd_verify(int argc, char **argv)
{
	cli_decode_opts o = {.backend = "auto"};
	int st = cli_parse_decode_cmd("verify", argc, argv, 1, 1, usage, &o);
	if (st >= 0)
		return st;
	const cli_format *f = cli_format_of(argv[optind]);
	if (!f)
		return CLI_FAIL;
	return f->verify(argv[optind], &o);
}
