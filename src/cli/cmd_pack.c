/* cmd_pack.c - `wcodec pack`: safetensors -> .wcodec, or a directory of them (pack_tree.c). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/lossy_select.h"
#include "cli/pack_tree.h"
#include "config.h"
#include "container/container.h"
#include "container/format.h"
#include "core/fileio.h"

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: wcodec pack [OPTIONS] IN.safetensors [OUT.wcodec | OUTDIR]\n"
		"       wcodec pack [OPTIONS] - OUT.wcodec      (standard input)\n"
		"       wcodec pack [OPTIONS] DIR OUTDIR\n\n"
		"Compress a safetensors file, losslessly unless --lossy. Tiles are encoded in parallel; OUT is\n"
		"written to a temporary file, verified, fsynced and renamed into place. Without\n"
		"OUT, X.safetensors packs to X.wcodec beside it; into OUTDIR when that is a directory.\n"
		"With a directory, every X.safetensors under DIR (or symlink to one) is packed to\n"
		"OUTDIR/X.wcodec and every other file copied, so that wcodecfs OUTDIR shows DIR.\n\n"
		"  -t, --tile-size SIZE  decoded bytes per tile, a multiple of 8 from 4K to 64M\n"
		"                        (suffixes K, M; default 1M)\n"
		"  -c, --chunk N         rANS chunk in symbols, a multiple of 32 (default %u;\n"
		"                        16384 for weights decoded from GPU memory)\n"
		"  -j, --threads N       encoder threads (default: the usable CPUs)\n"
		"      --no-verify       skip decoding the written file against the input\n"
		"      --lossy int8|int4 store F32, BF16 and F16 tensors of 2 or more dimensions\n"
		"                        and at least 4096 elements, but not embeddings (names\n"
		"                        with \"embed\") nor tensors of at most 256 values (kept\n"
		"                        exact), as int8 codes with a scale per output channel,\n"
		"                        or int4 codes with a scale per group of a channel's\n"
		"                        weights; scales chosen for the least squared error\n"
		"                        (wcodec info shows each tensor's error)\n"
		"      --group N         lossy: a scale per N weights of a channel (default:\n"
		"                        int8 one per channel, int4 one per 128)\n"
		"      --lossy-include GLOB  lossy: exactly the tensors whose names match GLOB\n"
		"                        (fnmatch; repeatable) instead of the rule above\n"
		"      --lossy-exclude GLOB  lossy: never the tensors matching GLOB (repeatable)\n"
		"  -u, --update          with a directory: skip outputs newer than their inputs\n"
		"  -f, --force           overwrite an existing OUT (with a directory: write into\n"
		"                        a non-empty OUTDIR)\n"
		"  -q, --quiet           no progress bar and no summary\n"
		"  -J, --json            a JSON report on standard output (wcodec(1), JSON OUTPUT)\n"
		"  -h, --help            this help\n"
		"  -V, --version         the version\n",
		WC_PACK_CHUNK_DEFAULT);
}

static cli_progress progress;

/* Packs in to out; shown is how in is named in the report ("-" for standard
 * input). */
static int pack_one(const char *in, const char *shown, const char *out, const wc_pack_opts *po, int quiet,
		    int json);
static int pack_stdin(const char *out, const wc_pack_opts *po, int quiet, int json);

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
	(void)ctx;
	cli_progress_update(&progress, done, total);
}

int cmd_pack(int argc, char **argv)
{
	static const struct option opts[] = {
		{"tile-size", required_argument, NULL, 't'}, {"chunk", required_argument, NULL, 'c'},
		{"threads", required_argument, NULL, 'j'},   {"no-verify", no_argument, NULL, 'n'},
		{"quiet", no_argument, NULL, 'q'},           {"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},         {"update", no_argument, NULL, 'u'},
		{"json", no_argument, NULL, 'J'},            {"force", no_argument, NULL, 'f'},
		{"lossy", required_argument, NULL, 'L'},     {"lossy-include", required_argument, NULL, 'I'},
		{"lossy-exclude", required_argument, NULL, 'X'}, {"group", required_argument, NULL, 'G'},
		{NULL, 0, NULL, 0},
	};
	static cli_lossy lossy;
	wc_pack_opts po = {.verify = 1, .progress = on_progress, .temp_file = cli_tmp_watch_path};
	int quiet = 0, update = 0, json = 0, force = 0, c;
	uint64_t v;
	while ((c = getopt_long(argc, argv, "t:c:j:quJfhV", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (wc_parse_size(optarg, WC_TILE_SIZE_MAX, &v) || v < WC_TILE_SIZE_MIN || v % 8)
				return cli_usage_error("pack", "--tile-size '%s': want a multiple of 8 from 4K to 64M",
						       optarg);
			po.tile_size = (uint32_t)v;
			break;
		case 'c':
			if (wc_parse_size(optarg, WC_RANS_CHUNK_MAX, &v) || v < WC_RANS_CHUNK_MIN || v % 32)
				return cli_usage_error("pack", "--chunk '%s': want a multiple of 32 from %u to %u", optarg,
						       WC_RANS_CHUNK_MIN, WC_RANS_CHUNK_MAX);
			po.chunk_symbols = (uint32_t)v;
			break;
		case 'j':
			if (wc_parse_size(optarg, 1024, &v) || v == 0)
				return cli_usage_error("pack", "--threads '%s': want 1 to 1024", optarg);
			po.threads = (unsigned)v;
			break;
		case 'L':
			if (strcmp(optarg, "int8") && strcmp(optarg, "int4"))
				return cli_usage_error("pack", "--lossy '%s': int8 or int4", optarg);
			po.lossy_bits = optarg[3] == '8' ? 8 : 4;
			po.lossy_select = cli_lossy_select;
			po.lossy_ctx = &lossy;
			break;
		case 'I':
		case 'X':
			if ((c == 'I' ? lossy.ninclude : lossy.nexclude) == CLI_LOSSY_GLOBS)
				return cli_usage_error("pack", "at most %d --lossy-include and --lossy-exclude globs each",
						       CLI_LOSSY_GLOBS);
			if (c == 'I')
				lossy.include[lossy.ninclude++] = optarg;
			else
				lossy.exclude[lossy.nexclude++] = optarg;
			break;
		case 'G':
			if (wc_parse_size(optarg, WC_LOSSY_GROUP_MAX, &v) || v < 8)
				return cli_usage_error("pack", "--group '%s': want 8 to %u", optarg, WC_LOSSY_GROUP_MAX);
			po.lossy_group = (uint32_t)v;
			break;
		case 'n': po.verify = 0; break;
		case 'q': quiet = 1; break;
		case 'u': update = 1; break;
		case 'J': json = quiet = 1; break;
		case 'f': force = 1; break;
		case 'h': usage(stdout); return CLI_OK;
		case 'V': printf("wcodec pack (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return CLI_OK;
		default: return cli_usage_error("pack", "bad option");
		}
	}
	if (argc - optind < 1 || argc - optind > 2)
		return cli_usage_error("pack", "expected IN.safetensors [OUT.wcodec], or DIR OUTDIR");
	if ((lossy.ninclude || lossy.nexclude) && !po.lossy_bits)
		return cli_usage_error("pack", "--lossy-include and --lossy-exclude need --lossy");
	if (po.lossy_group && !po.lossy_bits)
		return cli_usage_error("pack", "--group needs --lossy");
	const char *in = argv[optind], *out = optind + 1 < argc ? argv[optind + 1] : NULL;
	if (strcmp(in, "-") == 0) {
		if (!out || cli_is_dir(out))
			return cli_usage_error("pack", "packing standard input needs OUT.wcodec");
		int rc = cli_check_overwrite("pack", out, 0, force);
		return rc >= 0 ? rc : pack_stdin(out, &po, quiet, json);
	}
	if (cli_is_dir(in)) {
		if (!out)
			return cli_usage_error("pack", "packing directory %s needs OUTDIR", in);
		/* Into an OUTDIR that holds files: -u updates them, -f overwrites. */
		int st = cli_check_overwrite("pack", out, 1, force || update);
		if (st >= 0)
			return st;
		cli_pack_tree_opts to = {.pack = po, .quiet = quiet, .update = update, .json = json};
		return cli_pack_tree(in, out, &to);
	}
	if (update)
		return cli_usage_error("pack", "--update needs a directory to pack");
	/* No OUT: beside IN, as gzip and zstd do; OUT a directory: into it. */
	char *derived = NULL;
	if (!out || cli_is_dir(out)) {
		if (!(derived = cli_derive_output(in, ".safetensors", ".wcodec", out)))
			return cli_error(wc_fail(WC_E_NOMEM, "out of memory"), "pack");
		out = derived;
	}
	/* OUT naming IN is its own error, before "OUT exists". */
	wc_err same = wc_check_output_not_input(in, out);
	int rc = same ? cli_error(same, "pack") : cli_check_overwrite("pack", out, 0, force);
	if (rc < 0)
		rc = pack_one(in, in, out, &po, quiet, json);
	free(derived);
	return rc;
}

/* pack - OUT: standard input is copied to a file first (the packer maps its
 * input and reads it more than once), made beside OUT and unlinked at once,
 * so nothing is left behind whatever happens; the packer reads it through
 * /proc/self/fd. */
static int pack_stdin(const char *out, const wc_pack_opts *po, int quiet, int json)
{
	char *tmpl = cli_derive_output(out, "", ".stdin.XXXXXX", NULL);
	if (!tmpl)
		return cli_error(wc_fail(WC_E_NOMEM, "out of memory"), "pack");
	int fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd < 0) {
		wc_err e = wc_fail(WC_E_IO, "a copy of standard input beside %s: %s", out, strerror(errno));
		free(tmpl);
		return cli_error(e, "pack");
	}
	unlink(tmpl);
	free(tmpl);
	wc_err e = WC_OK;
	char buf[1 << 16];
	for (;;) {
		ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			e = wc_fail(WC_E_IO, "reading standard input: %s", strerror(errno));
			break;
		}
		if (n == 0)
			break;
		for (ssize_t w = 0; w < n && !e;) {
			ssize_t k = write(fd, buf + w, (size_t)(n - w));
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				e = wc_fail(WC_E_IO, "copying standard input: %s", strerror(errno));
			else
				w += k;
		}
		if (e)
			break;
	}
	int rc;
	if (e) {
		rc = cli_error(e, "pack");
	} else {
		char path[64];
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		rc = pack_one(path, "-", out, po, quiet, json);
	}
	close(fd);
	return rc;
}

/* pack --json: the packed file's report (cli_json_file's keys) with the
 * input and the coding figures. */
static int pack_report(const char *in, const char *out, const wc_pack_stats *st)
{
	json_t *r = cli_json_file(out, "wcodec", st->input_bytes, st->output_bytes);
	uint64_t coded = st->coded_data_bytes + st->dict_bytes;
	if (r && (json_object_set_new(r, "input", json_string(in)) ||
		  json_object_set_new(r, "data_bytes", json_integer((json_int_t)st->data_bytes)) ||
		  json_object_set_new(r, "coded_data_bytes", json_integer((json_int_t)coded)) ||
		  json_object_set_new(r, "entropy_bound_bytes", json_real(st->entropy_bound_bytes)) ||
		  json_object_set_new(r, "dict_tensors", json_integer(st->dict_tensors)) ||
		  json_object_set_new(r, "lossy_tensors", json_integer(st->lossy_tensors)) ||
		  json_object_set_new(r, "lossy_bytes", json_integer((json_int_t)st->lossy_bytes)))) {
		json_decref(r);
		r = NULL;
	}
	int rc = cli_json_print(r);
	json_decref(r);
	return rc;
}

static int pack_one(const char *in, const char *shown, const char *out, const wc_pack_opts *po, int quiet,
		    int json)
{
	cli_progress_init(&progress, "packing", quiet);
	progress.bytes = 1;
	wc_pack_stats st;
	wc_err e = wc_pack_safetensors(in, out, po, &st);
	cli_progress_done(&progress);
	if (e)
		return cli_error(e, "pack");
	if (json)
		return pack_report(shown, out, &st);
	if (!quiet) {
		char a[32], b[32], d[32], cd[32];
		printf("%s -> %s: %s -> %s (ratio %.3fx, %.2f%%)%s\n", shown, out, cli_human_bytes(st.input_bytes, a),
		       cli_human_bytes(st.output_bytes, b),
		       cli_ratio(st.input_bytes, st.output_bytes), 100.0 * cli_ratio(st.output_bytes, st.input_bytes),
		       po->verify ? ", verified" : "");
		/* With dictionaries the coded data is the payloads plus the
		 * dictionaries, and so is the bound of the planes coded. */
		uint64_t coded = st.coded_data_bytes + st.dict_bytes;
		printf("data section: %s -> %s; order-0 entropy bound of its planes %.0f bytes (coded = %.2f%% of bound)\n",
		       cli_human_bytes(st.data_bytes, d), cli_human_bytes(coded, cd), st.entropy_bound_bytes,
		       st.entropy_bound_bytes > 0 ? 100.0 * (double)coded / st.entropy_bound_bytes : 0.0);
		if (st.lossy_tensors)
			printf("lossy: %u tensors (%s of the input) as int%d codes\n", st.lossy_tensors,
			       cli_human_bytes(st.lossy_bytes, d), po->lossy_bits);
		if (st.dict_tensors)
			printf("dictionaries: %u tensors as index planes + %llu dictionary bytes; bound of the byte "
			       "planes without them %.0f bytes (coded = %.2f%% of it)\n",
			       st.dict_tensors, (unsigned long long)st.dict_bytes, st.plain_entropy_bound_bytes,
			       st.plain_entropy_bound_bytes > 0 ? 100.0 * (double)coded / st.plain_entropy_bound_bytes : 0.0);
	}
	return CLI_OK;
}
