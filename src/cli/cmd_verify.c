/* cmd_verify.c - `wcodec verify`: decode every tile, check every checksum. */
#include <getopt.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "config.h"
#include "container/container.h"

static void usage(FILE *out)
{
	fprintf(out, "Usage: wcodec verify [OPTIONS] FILE|DIR...\n\n"
		     "Check each FILE's header/index checksum, then read and decode every tile and check\n"
		     "its payload and decoded checksums. A DIR is searched recursively for *.wcodec and\n"
		     "*.qvq files (symlinks are not followed), in name order. Each damaged tile is\n"
		     "reported; the exit status is 1 if any file is damaged or unreadable, or a DIR holds\n"
		     "none.\n\n" CLI_DECODE_HELP
		     "  -q, --quiet           report damaged tiles only\n"
		     "  -J, --json            a JSON report on standard output (wcodec(1), JSON OUTPUT)\n"
		     "  -h, --help            this help\n"
		     "  -V, --version         the version\n");
}

typedef struct verify_ctx {
	wc_container *c;
	const char *path;
	uint32_t damaged;
} verify_ctx;

static int check_tile(void *arg, uint32_t tile, const uint8_t *data, uint32_t size, wc_err status,
		      const char *why)
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

void cli_verify_report(const cli_decode_opts *o, const char *path, const char *format, uint64_t decoded,
		       uint64_t stored, uint32_t tiles, uint32_t damaged, uint32_t decoded_tiles)
{
	if (!o->json)
		return;
	json_t *r = cli_json_file(path, format, decoded, stored);
	if (r && !json_object_set_new(r, "tiles", json_integer(tiles)) &&
	    !json_object_set_new(r, "decoded_tiles", json_integer(decoded_tiles)) &&
	    !json_object_set_new(r, "damaged_tiles", json_integer(damaged)) &&
	    !json_object_set_new(r, "ok", json_boolean(damaged == 0)))
		json_array_append_new(o->json, r);
	else
		json_decref(r);
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
	prog.bytes = 1;
	/* Every payload is read and checked; a tile the same as the one before
	 * it is not decoded again (a file claiming terabytes of one constant
	 * tile verifies in seconds). */
	cli_decode_opts vo = *o;
	vo.skip_repeats = 1;
	uint32_t decoded;
	e = cli_decode_tiles(c, &vo, check_tile, &v, &prog, &decoded);
	cli_progress_done(&prog);
	uint32_t n = wc_container_ntiles(c);
	uint64_t decoded_bytes = wc_container_virtual_size(c), stored = wc_container_file_size(c);
	wc_container_release(c);
	if (e)
		return cli_error(e, "verify");
	cli_verify_report(o, path, "wcodec", decoded_bytes, stored, n, v.damaged, decoded);
	if (v.damaged) {
		fprintf(stderr, "%s: %u of %u tiles damaged\n", path, v.damaged, n);
		return CLI_FAIL;
	}
	if (!o->quiet && decoded < n)
		printf("%s: OK (%u tiles; %u decoded, the others the same as the tile before them)\n", path, n,
		       decoded);
	else if (!o->quiet)
		printf("%s: OK (%u tiles)\n", path, n);
	return CLI_OK;
}

typedef struct verify_run {
	const cli_decode_opts *o;
	unsigned files, bad; /* files tried; of them damaged or unreadable */
	unsigned other;      /* other failures: unreadable or empty directories */
} verify_run;

static void verify_file(void *ctx, const char *path)
{
	verify_run *r = ctx;
	r->files++;
	const cli_format *f = cli_format_of(path);
	if (!f || f->verify(path, r->o) != CLI_OK)
		r->bad++;
}

int cmd_verify(int argc, char **argv)
{
	cli_decode_opts o = {.backend = "auto"};
	int st = cli_parse_decode_cmd("verify", argc, argv, 1, -1, CLI_OPT_QUIET | CLI_OPT_JSON, usage, &o);
	if (st >= 0) {
		json_decref(o.json);
		return st;
	}
	verify_run r = {.o = &o};
	const int nargs = argc - optind;
	r.other = cli_for_each_container("verify", argv + optind, nargs, verify_file, &r);
	const int failed = r.bad || r.other;
	if (o.json) {
		json_t *doc = json_pack("{s:o, s:i, s:i, s:i}", "files", o.json, "verified", (int)r.files, "ok",
					(int)(r.files - r.bad), "damaged_or_unreadable", (int)r.bad);
		int prc = cli_json_print(doc);
		json_decref(doc);
		return failed || prc ? CLI_FAIL : CLI_OK;
	}
	if (nargs > 1 || r.files > 1) {
		if (failed || !o.quiet)
			fprintf(failed ? stderr : stdout, "verified %u file%s: %u OK, %u damaged or unreadable\n",
				r.files, r.files == 1 ? "" : "s", r.files - r.bad, r.bad);
	}
	return failed ? CLI_FAIL : CLI_OK;
}
