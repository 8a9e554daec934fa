/* cmd_info.c - `wcodec info`: what a container holds and how well it is coded. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cli/cli.h"
#include "config.h"
#include "codec/tile_codec.h"
#include "container/container.h"

static void usage(FILE *out)
{
	fprintf(out, "Usage: wcodec info [OPTIONS] FILE\n"
		     "       wcodec info [OPTIONS] FILE|DIR...   (several operands, or a directory)\n\n"
		     "Describe FILE: its tensors with dtype, shape and compression ratio, totals, the\n"
		     "ratio per dtype, and the order-0 entropy bound of the tensor-planes with how close\n"
		     "the coded data section comes to it: the bound of the planes coded (index planes\n"
		     "plus the dictionary for tensors of layout dict) and that of the plain byte planes.\n"
		     "With several operands or a DIR (searched recursively for *.wcodec and *.qvq, in\n"
		     "name order, symlinks not followed): one line per file, its decoded and stored\n"
		     "bytes and ratio, and the totals.\n\n"
		     "  -J, --json            one JSON object on standard output\n"
		     "  -h, --help            this help\n"
		     "  -V, --version         the version\n");
}

/* coded counts a dict tensor's dictionary with its payloads; bound is the
 * order-0 entropy of the planes actually coded (index planes for dict
 * tensors) plus the dictionary bytes; plain_bound is that of the byte planes
 * of section 2 (what the tensor would be bounded by without a dictionary),
 * of lossless tensors only, whose coded bytes are plain_coded. */
typedef struct tensor_sum {
	uint64_t bytes, coded, plain_coded;
	double bound; /* bytes: sum over planes of entropy * elements / 8 (+ dictionary) */
	double plain_bound;
	uint64_t dict_bytes;
	double bits_per_weight; /* lossy tensors: coded bits (scales included) per element */
} tensor_sum;

/* Whole-file facts both reports print. */
typedef struct file_facts {
	uint64_t vsize, fsize; /* the virtual .safetensors, the .wcodec file (bytes) */
	uint32_t ntables;      /* frequency tables */
	size_t plen;           /* safetensors header bytes stored verbatim */
} file_facts;

static file_facts facts_of(const wc_container *c)
{
	file_facts f = { wc_container_virtual_size(c), wc_container_file_size(c), 0, 0 };
	wc_container_tables(c, &f.ntables);
	wc_container_prefix(c, &f.plen);
	return f;
}

typedef struct dtype_sum {
	const char *dtype;
	uint32_t tensors;
	uint64_t bytes, coded;
	double bound, plain_bound;
} dtype_sum;

/* The coded bytes of tile x after decoded offset `at`, rounded down: a
 * tensor holding [lo, hi) of the tile counts tile_share(lo) - tile_share(hi),
 * so the tensors sharing a tile count its payload exactly once between
 * them. The reader bounds dsize by WC_TILE_SIZE_MAX (2^26) and csize by
 * 2 dsize + 64 KiB at open: the product fits in 64 bits. */
static uint64_t tile_share(const wc_tile_info *x, uint64_t at)
{
	return x->csize - x->csize * (at - x->voff) / x->dsize;
}

static tensor_sum sum_tensor(const wc_container *c, const wc_tensor_info *t)
{
	tensor_sum s = {.bytes = t->end - t->begin};
	for (uint32_t k = 0; k < t->ntiles; k++) {
		/* a tile shared with other tensors counts for its share of the bytes */
		const wc_tile_info *x = wc_container_tile(c, t->first_tile + k);
		uint64_t lo = x->voff > t->begin ? x->voff : t->begin;
		uint64_t hi = x->voff + x->dsize < t->end ? x->voff + x->dsize : t->end;
		s.coded += tile_share(x, lo) - tile_share(x, hi);
	}
	/* a lossy tensor codes one int8 code per element, and its scales */
	uint64_t n = t->lossy ? s.bytes / t->plain_layout.elem_size : s.bytes / t->layout.elem_size;
	for (unsigned p = 0; p < t->layout.nplanes; p++)
		s.bound += t->planes[p].entropy_bits * (double)n / 8.0;
	uint64_t pn = s.bytes / t->plain_layout.elem_size;
	for (unsigned p = 0; !t->lossy && p < t->plain_layout.nplanes; p++)
		s.plain_bound += t->plain_entropy[p] * (double)pn / 8.0;
	s.dict_bytes = t->lossy ? 4ull * t->lossy_nscales : (uint64_t)t->dict_entries * t->layout.elem_size;
	s.coded += s.dict_bytes;
	s.bound += (double)s.dict_bytes;
	s.plain_coded = t->lossy ? 0 : s.coded;
	if (t->lossy)
		s.bits_per_weight = 8.0 * (double)s.coded / (double)n;
	return s;
}


/* "int8" for a lossy tensor, else its plane layout's name. */
static const char *layout_name(const wc_tensor_info *t)
{
	return t->lossy == 8 ? "int8" : t->lossy == 4 ? "int4" : wc_layout_name(t->layout);
}

static void shape_str(const wc_tensor_info *t, char *buf, size_t cap)
{
	size_t pos = (size_t)snprintf(buf, cap, "[");
	for (uint32_t d = 0; d < t->ndim && pos < cap; d++)
		pos += (size_t)snprintf(buf + pos, cap - pos, "%s%llu", d ? ", " : "", (unsigned long long)t->shape[d]);
	if (pos < cap)
		snprintf(buf + pos, cap - pos, "]");
}

/* Totals over all tensors and per dtype (dts has room for ntensors entries). */
static void summarise(const wc_container *c, dtype_sum *dts, uint32_t *ndts, tensor_sum *total)
{
	memset(total, 0, sizeof *total);
	*ndts = 0;
	for (uint32_t i = 0; i < wc_container_ntensors(c); i++) {
		const wc_tensor_info *t = wc_container_tensor(c, i);
		tensor_sum s = sum_tensor(c, t);
		total->bytes += s.bytes;
		total->coded += s.coded;
		total->bound += s.bound;
		total->plain_bound += s.plain_bound;
		total->plain_coded += s.plain_coded;
		total->dict_bytes += s.dict_bytes;
		uint32_t k = 0;
		while (k < *ndts && strcmp(dts[k].dtype, t->dtype))
			k++;
		if (k == *ndts)
			dts[(*ndts)++] = (dtype_sum){.dtype = t->dtype};
		dts[k].tensors++;
		dts[k].bytes += s.bytes;
		dts[k].coded += s.coded;
		dts[k].bound += s.bound;
		dts[k].plain_bound += s.plain_bound;
	}
	/* The file's coded bytes exactly (pack --json's coded_data_bytes): the
	 * tensors' shares of tiles they share are rounded. */
	uint64_t payloads = 0;
	for (uint32_t k = 0; k < wc_container_ntiles(c); k++)
		payloads += wc_container_tile(c, k)->csize;
	total->coded = payloads + total->dict_bytes;
}

static int info_text(const char *path, const wc_container *c, const dtype_sum *dts, uint32_t ndts,
		     const tensor_sum *total)
{
	const file_facts f = facts_of(c);
	char a[32], b[32];
	printf("file:           %s\n", path);
	printf("format:         wcodec %u, tiles of %s, rANS chunks of %u symbols\n", wc_container_version(c),
	       cli_human_bytes(wc_container_tile_size(c), a), wc_container_chunk_symbols(c));
	printf("contents:       %u tensors, %u tiles, %u frequency tables\n", wc_container_ntensors(c),
	       wc_container_ntiles(c), f.ntables);
	printf("original size:  %llu bytes (%s), safetensors header %zu bytes\n", (unsigned long long)f.vsize,
	       cli_human_bytes(f.vsize, a), f.plen);
	printf("file size:      %llu bytes (%s): ratio %.3fx, %.2f%% of the original\n", (unsigned long long)f.fsize,
	       cli_human_bytes(f.fsize, b), cli_ratio(f.vsize, f.fsize), 100.0 * cli_ratio(f.fsize, f.vsize));
	printf("data section:   %llu -> %llu bytes, ratio %.3fx\n", (unsigned long long)total->bytes,
	       (unsigned long long)total->coded, cli_ratio(total->bytes, total->coded));
	printf("entropy bound:  %.0f bytes (order-0 entropy of every tensor-plane coded, index planes and "
	       "dictionaries of dict tensors included); coded data is %.2f%% of it\n",
	       total->bound, total->bound > 0 ? 100.0 * (double)total->coded / total->bound : 0.0);
	printf("byte planes:    %.0f bytes (order-0 entropy of the section 2 byte planes, no dictionaries; lossless "
	       "tensors); coded data is %.2f%% of it\n",
	       total->plain_bound, total->plain_bound > 0 ? 100.0 * (double)total->plain_coded / total->plain_bound : 0.0);
	if (total->dict_bytes)
		printf("dictionaries:   %llu bytes (dictionaries and lossy tensors' scales; part of the coded data)\n",
		       (unsigned long long)total->dict_bytes);
	uint32_t nlossy = 0;
	for (uint32_t i = 0; i < wc_container_ntensors(c); i++)
		nlossy += wc_container_tensor(c, i)->lossy != 0;
	if (nlossy)
		printf("lossy:          %u tensors as int8 or int4 codes with scales: their bytes are not the "
		       "original's (each one's error below)\n", nlossy);
	printf("overhead:       %llu bytes (fixed header, frequency tables, tile index, metadata)\n",
	       (unsigned long long)(f.fsize - total->coded - f.plen));
	printf("\n%-10s %8s %16s %16s %9s %9s\n", "dtype", "tensors", "bytes", "coded", "ratio", "vs bound");
	for (uint32_t k = 0; k < ndts; k++)
		printf("%-10s %8u %16llu %16llu %8.3fx %8.2f%%\n", dts[k].dtype, dts[k].tensors,
		       (unsigned long long)dts[k].bytes, (unsigned long long)dts[k].coded,
		       cli_ratio(dts[k].bytes, dts[k].coded), dts[k].bound > 0 ? 100.0 * (double)dts[k].coded / dts[k].bound : 0.0);
	printf("\n%-40s %-8s %-18s %-9s %12s %12s %8s  %s\n", "tensor", "dtype", "shape", "layout", "bytes", "coded",
	       "ratio", "plane entropy (bits)");
	for (uint32_t i = 0; i < wc_container_ntensors(c); i++) {
		const wc_tensor_info *t = wc_container_tensor(c, i);
		tensor_sum s = sum_tensor(c, t);
		char shape[64];
		shape_str(t, shape, sizeof shape);
		printf("%-40s %-8s %-18s %-9s %12llu %12llu %7.3fx ", t->name, t->dtype, shape, layout_name(t),
		       (unsigned long long)s.bytes, (unsigned long long)s.coded, cli_ratio(s.bytes, s.coded));
		for (unsigned p = 0; p < t->layout.nplanes; p++)
			printf(" %.2f", t->planes[p].entropy_bits);
		if (t->dict)
			printf(" (%u-entry dictionary)", t->dict_entries);
		if (t->lossy)
			printf(" (%u channels on the %s axis, scales per %u; %.2f bits/weight, SNR %.1f dB, max error %.3g, "
			       "mean %.3g, relative Frobenius %.3g)", t->lossy_channels, t->lossy_axis ? "last" : "first",
			       t->lossy_group ? t->lossy_group : (unsigned)((t->end - t->begin) / t->plain_layout.elem_size /
									     t->lossy_channels),
			       s.bits_per_weight, t->lossy_snr_db,
			       t->lossy_max_abs_err, t->lossy_mean_abs_err, t->lossy_rel_frobenius);
		printf("\n");
	}
	return CLI_OK;
}

static int info_json(const char *path, const wc_container *c, const dtype_sum *dts, uint32_t ndts,
		     const tensor_sum *total)
{
	const file_facts f = facts_of(c);
	json_t *dtypes = json_object(), *tensors = json_array();
	for (uint32_t k = 0; k < ndts; k++)
		json_object_set_new(dtypes, dts[k].dtype,
				    json_pack("{s:i, s:I, s:I, s:f, s:f, s:f}", "tensors", (int)dts[k].tensors, "bytes",
					      (json_int_t)dts[k].bytes, "coded_bytes", (json_int_t)dts[k].coded,
					      "ratio", cli_ratio(dts[k].bytes, dts[k].coded), "entropy_bound_bytes",
					      dts[k].bound, "plain_entropy_bound_bytes", dts[k].plain_bound));
	for (uint32_t i = 0; i < wc_container_ntensors(c); i++) {
		const wc_tensor_info *t = wc_container_tensor(c, i);
		tensor_sum s = sum_tensor(c, t);
		json_t *shape = json_array(), *planes = json_array();
		for (uint32_t d = 0; d < t->ndim; d++)
			json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
		for (unsigned p = 0; p < t->layout.nplanes; p++)
			json_array_append_new(planes, json_pack("{s:f, s:I, s:o}", "entropy_bits", t->planes[p].entropy_bits,
								"coded_bytes", (json_int_t)t->planes[p].coded_bytes, "table",
								t->planes[p].table == WC_NO_TABLE
									? json_null()
									: json_integer(t->planes[p].table)));
		json_t *to = json_pack("{s:s, s:s, s:o, s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:i, s:i, s:o}", "name",
				       t->name, "dtype", t->dtype, "shape", shape, "layout", layout_name(t),
				       "begin", (json_int_t)t->begin, "end", (json_int_t)t->end, "bytes",
				       (json_int_t)s.bytes, "coded_bytes", (json_int_t)s.coded, "ratio",
				       cli_ratio(s.bytes, s.coded), "entropy_bound_bytes", s.bound,
				       "plain_entropy_bound_bytes", s.plain_bound, "first_tile", (int)t->first_tile,
				       "tiles", (int)t->ntiles, "planes", planes);
		if (to && t->dict)
			json_object_set_new(to, "dict_entries", json_integer(t->dict_entries));
		if (to && t->lossy)
			json_object_set_new(to, "lossy",
					    json_pack("{s:s, s:i, s:i, s:s, s:f, s:f, s:f, s:f, s:f}", "codes",
						      layout_name(t), "channels", (int)t->lossy_channels, "group",
						      (int)t->lossy_group, "axis",
						      t->lossy_axis ? "last" : "first", "bits_per_weight",
						      s.bits_per_weight,
						      "snr_db", t->lossy_snr_db, "max_abs_err", t->lossy_max_abs_err,
						      "mean_abs_err", t->lossy_mean_abs_err, "rel_frobenius",
						      t->lossy_rel_frobenius));
		if (to && t->shared)
			json_object_set_new(to, "shared", json_true());
		json_array_append_new(tensors, to);
	}
	json_t *root = json_pack(
		"{s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:f, s:I, s:I, s:f, s:f, s:o, s:o}", "file", path,
		"format", "wcodec", "version", (int)wc_container_version(c), "tile_size", (int)wc_container_tile_size(c),
		"chunk_symbols", (int)wc_container_chunk_symbols(c), "ntensors", (int)wc_container_ntensors(c), "ntiles",
		(int)wc_container_ntiles(c), "ntables", (int)f.ntables, "decoded_bytes", (json_int_t)f.vsize, "file_bytes",
		(json_int_t)f.fsize, "prefix_bytes", (json_int_t)f.plen, "ratio", cli_ratio(f.vsize, f.fsize), "data_bytes",
		(json_int_t)total->bytes, "coded_data_bytes", (json_int_t)total->coded, "entropy_bound_bytes",
		total->bound, "coded_over_bound", total->bound > 0 ? (double)total->coded / total->bound : 0.0,
		"dtypes", dtypes, "tensors", tensors);
	if (root && (json_object_set_new(root, "plain_entropy_bound_bytes", json_real(total->plain_bound)) ||
		     json_object_set_new(root, "dict_bytes", json_integer((json_int_t)total->dict_bytes)) ||
		     json_object_set_new(root, "coded_over_plain_bound",
					 json_real(total->plain_bound > 0 ? (double)total->coded / total->plain_bound
									  : 0.0)))) {
		json_decref(root);
		root = NULL;
	}
	if (!root) {
		fprintf(stderr, "wcodec: info: cannot build the JSON report\n");
		return CLI_FAIL;
	}
	int rc = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) == 0 ? CLI_OK : CLI_FAIL;
	printf("\n");
	json_decref(root);
	return rc;
}

int wcodec_info(const char *path, int json)
{
	wc_container *c;
	wc_err e = wc_container_open(path, &c);
	if (e)
		return cli_error(e, "info");
	uint32_t n = wc_container_ntensors(c), ndts;
	dtype_sum *dts = calloc(n ? n : 1, sizeof *dts);
	if (!dts) {
		wc_container_release(c);
		return cli_error(wc_fail(WC_E_NOMEM, "out of memory"), "info");
	}
	tensor_sum total;
	summarise(c, dts, &ndts, &total);
	int rc = json ? info_json(path, c, dts, ndts, &total) : info_text(path, c, dts, ndts, &total);
	free(dts);
	wc_container_release(c);
	return rc;
}

int wcodec_sizes(const char *path, uint64_t *decoded, uint64_t *stored)
{
	wc_container *c;
	wc_err e = wc_container_open(path, &c);
	if (e)
		return cli_error(e, path);
	*decoded = wc_container_virtual_size(c);
	*stored = wc_container_file_size(c);
	wc_container_release(c);
	return CLI_OK;
}

/* The summary of several files: a line (or a JSON object) per file, then
 * the totals. */
typedef struct info_run {
	int json;
	json_t *files;            /* JSON: the per-file objects */
	unsigned n, bad;          /* files summed; files that could not be read */
	uint64_t decoded, stored; /* totals over the files summed */
} info_run;

static void info_file(void *ctx, const char *path)
{
	info_run *r = ctx;
	const cli_format *f = cli_format_of(path);
	uint64_t d = 0, st = 0;
	if (!f || f->sizes(path, &d, &st) != CLI_OK) {
		r->bad++;
		return;
	}
	r->n++;
	r->decoded += d;
	r->stored += st;
	if (r->json) {
		json_array_append_new(r->files, json_pack("{s:s, s:s, s:I, s:I, s:f}", "file", path,
							  "format", f->name, "decoded_bytes", (json_int_t)d,
							  "file_bytes", (json_int_t)st, "ratio", cli_ratio(d, st)));
		return;
	}
	char hd[32], hs[32];
	printf("%s: %s, %s -> %s (%.3fx)\n", path, f->name, cli_human_bytes(d, hd), cli_human_bytes(st, hs),
	       cli_ratio(d, st));
}

static int info_summary(int json, char **ops, int nops)
{
	info_run r = {.json = json, .files = json ? json_array() : NULL};
	const unsigned other = cli_for_each_container("info", ops, nops, info_file, &r);
	if (json) {
		json_t *o = json_pack("{s:o, s:I, s:I, s:f}", "files", r.files, "decoded_bytes",
				      (json_int_t)r.decoded, "file_bytes", (json_int_t)r.stored, "ratio",
				      cli_ratio(r.decoded, r.stored));
		char *txt = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
		if (txt)
			printf("%s\n", txt);
		free(txt);
		json_decref(o);
		if (!txt)
			return cli_error(wc_fail(WC_E_NOMEM, "no memory"), "info");
	} else {
		char hd[32], hs[32];
		printf("total: %u file%s, %s -> %s (%.3fx)\n", r.n, r.n == 1 ? "" : "s",
		       cli_human_bytes(r.decoded, hd), cli_human_bytes(r.stored, hs),
		       cli_ratio(r.decoded, r.stored));
	}
	return r.bad || other ? CLI_FAIL : CLI_OK;
}

int cmd_info(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'J'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int json = 0, c;
	while ((c = getopt_long(argc, argv, "JhV", opts, NULL)) != -1) {
		switch (c) {
		case 'J': json = 1; break;
		case 'h': usage(stdout); return CLI_OK;
		case 'V': printf("wcodec info (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return CLI_OK;
		default: return cli_usage_error("info", "bad option");
		}
	}
	struct stat sb;
	if (argc - optind < 1)
		return cli_usage_error("info", "expected FILE or DIR operands");
	if (argc - optind > 1 || cli_is_prefix(argv[optind]) || (stat(argv[optind], &sb) == 0 && S_ISDIR(sb.st_mode)))
		return info_summary(json, argv + optind, argc - optind);
	const cli_format *f = cli_format_of(argv[optind]);
	if (!f)
		return CLI_FAIL;
	return f->info(argv[optind], json);
}
