/* cli_util.c - errors, sizes, the progress bar and temporary outputs of the CLI. */
#include "cli/cli.h"
#include "loader/loader.h"

#include "config.h"

#include <errno.h>
#include <dirent.h>
#include <getopt.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "core/clock.h"

int cli_error(wc_err e, const char *context)
{
	const char *why = wc_last_detail();
	if (why[0])
		fprintf(stderr, "wcodec: %s: %s: %s\n", context, wc_strerror(e), why);
	else
		fprintf(stderr, "wcodec: %s: %s\n", context, wc_strerror(e));
	return CLI_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "wcodec %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'wcodec %s --help'.\n", cmd);
	return CLI_USAGE;
}

const char *cli_human_bytes(uint64_t n, char buf[32])
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, 32, "%llu B", (unsigned long long)n);
	else
		snprintf(buf, 32, "%.1f %s", v, units[u]);
	return buf;
}

void cli_progress_init(cli_progress *p, const char *label, int quiet)
{
	snprintf(p->label, sizeof p->label, "%s", label);
	p->bytes = 0;
	p->enabled = !quiet && isatty(STDERR_FILENO);
	p->start = wc_mono_s();
	p->last = 0;
}

void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total)
{
	if (!p->enabled)
		return;
	double t = wc_mono_s();
	if (t - p->last < 0.1 && done < total)
		return;
	p->last = t;
	const int width = 30;
	double frac = total ? (double)done / (double)total : 1.0;
	int fill = (int)(frac * width);
	char bar[64];
	for (int i = 0; i < width; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[width] = 0;
	double elapsed = t - p->start, eta = frac > 0.01 ? elapsed * (1 - frac) / frac : 0;
	char rate[32] = "";
	if (p->bytes && elapsed > 0)
		snprintf(rate, sizeof rate, "%.1f MB/s, ", (double)done / elapsed / 1e6);
	fprintf(stderr, "\r%s %3d%% [%s] %s%.0fs elapsed, ~%.0fs left ", p->label, (int)(frac * 100), bar, rate,
		elapsed, eta);
	fflush(stderr);
}

void cli_progress_done(cli_progress *p)
{
	if (p->enabled)
		fprintf(stderr, "\r\033[K");
}

/* ---- temporary outputs, removed on SIGINT/SIGTERM/SIGHUP/SIGBUS ------ */

static char watched[4096];
static volatile sig_atomic_t have_watched;

/* Only async-signal-safe calls here (signal-safety(7)): write, unlink,
 * signal, raise. */
static void on_signal(int sig)
{
	if (sig == SIGBUS) {
		/* The packer maps its input: a bus error there means the file
		 * shrank while being read. Say so, since the default action
		 * prints nothing useful. */
		static const char msg[] = "wcodec: bus error reading a mapped file (did the input "
					  "shrink while being packed?)\n";
		ssize_t k = write(STDERR_FILENO, msg, sizeof msg - 1);
		(void)k;
	}
	if (have_watched)
		unlink(watched);
	signal(sig, SIG_DFL);
	raise(sig);
}

void cli_tmp_watch_path(const char *path)
{
	static int installed;
	if (!installed) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		sigaction(SIGBUS, &sa, NULL);
		installed = 1;
	}
	have_watched = 0;
	if (path && strlen(path) < sizeof watched) {
		memcpy(watched, path, strlen(path) + 1);
		have_watched = 1;
	}
}

wc_err cli_tmp_create(cli_tmpfile *t, const char *out)
{
	wc_err e = wc_atomic_create(t, out);
	if (!e)
		cli_tmp_watch_path(t->tmp);
	return e;
}

void cli_tmp_abort(cli_tmpfile *t)
{
	if (t->tmp)
		cli_tmp_watch_path(NULL);
	wc_atomic_abort(t);
}

wc_err cli_tmp_commit(cli_tmpfile *t)
{
	cli_tmp_watch_path(NULL);
	return wc_atomic_commit(t);
}

int cli_decode_opt(const char *cmd, int c, const char *arg, cli_decode_opts *o)
{
	uint64_t v;
	if (c == 'b') {
		if (strcmp(arg, "auto") && strcmp(arg, "cpu") && strcmp(arg, "cuda"))
			return cli_usage_error(cmd, "--backend '%s': want auto, cpu or cuda", arg);
		o->backend = arg;
		return 0;
	}
	if (wc_parse_size(arg, 1024, &v) || v == 0)
		return cli_usage_error(cmd, "--threads '%s': want 1 to 1024", arg);
	o->threads = (unsigned)v;
	return 0;
}

int cli_parse_decode_cmd(const char *cmd, int argc, char **argv, int min_args, int max_args,
			 unsigned extra, void (*usage)(FILE *), cli_decode_opts *o)
{
	static const struct option opts[] = {
		CLI_DECODE_LONGOPTS,
		{"quiet", no_argument, NULL, 'q'},
		{"json", no_argument, NULL, 'J'},
		{"force", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	int c;
	char shorts[16] = "b:j:hV";
	if (extra & CLI_OPT_QUIET)
		strcat(shorts, "q");
	if (extra & CLI_OPT_JSON)
		strcat(shorts, "J");
	if (extra & CLI_OPT_FORCE)
		strcat(shorts, "f");
	while ((c = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
		switch (c) {
		case 'b':
		case 'j':
			if (cli_decode_opt(cmd, c, optarg, o))
				return CLI_USAGE;
			break;
		case 'q':
			if (!(extra & CLI_OPT_QUIET))
				return cli_usage_error(cmd, "bad option");
			o->quiet = 1;
			break;
		case 'f':
			if (!(extra & CLI_OPT_FORCE))
				return cli_usage_error(cmd, "bad option");
			o->force = 1;
			break;
		case 'J':
			if (!(extra & CLI_OPT_JSON))
				return cli_usage_error(cmd, "bad option");
			if (!o->json && !(o->json = json_array()))
				return cli_error(wc_fail(WC_E_NOMEM, "out of memory"), cmd);
			o->quiet = 1; /* the report is the output */
			break;
		case 'h': usage(stdout); return CLI_OK;
		case 'V': printf("wcodec %s (%s) %s\n", cmd, PACKAGE_NAME, PACKAGE_VERSION); return CLI_OK;
		default: return cli_usage_error(cmd, "bad option");
		}
	}
	int n = argc - optind;
	if (n < min_args || (max_args >= 0 && n > max_args))
		return cli_usage_error(cmd, max_args < 0 ? "expected FILE or DIR operands"
					    : max_args == 1 ? "expected one FILE"
					    : min_args == 1 ? "expected IN [OUT]" : "expected IN OUT");
	return -1;
}

int cli_check_overwrite(const char *cmd, const char *out, int dir, int force)
{
	struct stat st;
	if (force || lstat(out, &st) != 0)
		return -1;
	if (dir && S_ISDIR(st.st_mode)) {
		DIR *d = opendir(out);
		struct dirent *de;
		int empty = 1;
		while (d && empty && (de = readdir(d)))
			empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
		if (d)
			closedir(d);
		if (empty)
			return -1;
		fprintf(stderr, "wcodec %s: %s is not empty (-f writes into it anyway)\n", cmd, out);
		return CLI_FAIL;
	}
	fprintf(stderr, "wcodec %s: %s exists (-f overwrites it)\n", cmd, out);
	return CLI_FAIL;
}

wc_err cli_mkdir_here(const char *path, unsigned mode)
{
	if (mkdir(path, (mode_t)mode) == 0)
		return WC_OK;
	int err = errno;
	struct stat st;
	if (err == EEXIST && lstat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return WC_OK;
		if (S_ISLNK(st.st_mode))
			return wc_fail(WC_E_IO, "%s: a symbolic link in the output tree: not followed (remove it to write "
				       "here)", path);
		return wc_fail(WC_E_IO, "%s: not a directory", path);
	}
	return wc_fail(WC_E_IO, "%s: %s", path, strerror(err));
}

json_t *cli_json_file(const char *path, const char *format, uint64_t decoded, uint64_t stored)
{
	return json_pack("{s:s, s:s, s:I, s:I, s:f}", "file", path, "format", format, "decoded_bytes",
			 (json_int_t)decoded, "file_bytes", (json_int_t)stored, "ratio", cli_ratio(decoded, stored));
}

int cli_json_print(json_t *doc)
{
	int rc = doc && json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) == 0 ? CLI_OK : CLI_FAIL;
	printf("\n");
	if (!doc)
		fprintf(stderr, "wcodec: out of memory for the JSON report\n");
	return rc;
}

char *cli_derive_output(const char *in, const char *from, const char *to, const char *dir)
{
	size_t l = strlen(in);
	while (l > 1 && in[l - 1] == '/')
		l--; /* "a/b/" names b */
	size_t b = l; /* IN's last component is [b, l) */
	while (b > 0 && in[b - 1] != '/')
		b--;
	size_t bl = l - b, fl = strlen(from);
	if (bl == 0 || (bl == 1 && in[b] == '.') || (bl == 2 && in[b] == '.' && in[b + 1] == '.'))
		return NULL; /* "/", ".", "..": no name to give */
	size_t stem = bl > fl && memcmp(in + l - fl, from, fl) == 0 ? l - fl : l;
	if (stem == l && !*to)
		return NULL;
	char *out = NULL;
	int rc;
	if (dir) {
		size_t dl = strlen(dir);
		rc = asprintf(&out, "%s%s%.*s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/",
			      (int)(stem - b), in + b, to);
	} else {
		rc = asprintf(&out, "%.*s%s", (int)stem, in, to);
	}
	return rc < 0 ? NULL : out;
}

int cli_is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int not_dot(const struct dirent *d)
{
	return strcmp(d->d_name, ".") && strcmp(d->d_name, "..");
}

int cli_scandir(const char *dir, struct dirent ***ents)
{
	return scandir(dir, ents, not_dot, by_name);
}

char *cli_path_join(const char *dir, const char *name)
{
	size_t n = strlen(dir) + strlen(name) + 2;
	char *p = malloc(n);
	if (p)
		snprintf(p, n, "%s/%s", dir, name);
	return p;
}

int cli_ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

double cli_ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

/* Walk directory dir for cli_for_each_container; *found counts the calls
 * of fn. Returns the failures. */
static unsigned walk_containers(const char *cmd, const char *dir,
				void (*fn)(void *ctx, const char *path), void *ctx, unsigned *found)
{
	struct dirent **ents;
	int n = cli_scandir(dir, &ents);
	if (n < 0) {
		fprintf(stderr, "wcodec: %s: %s: %s\n", cmd, dir, strerror(errno));
		return 1;
	}
	unsigned failures = 0;
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		char *path = cli_path_join(dir, name);
		struct stat st;
		if (!path) {
			fprintf(stderr, "wcodec: %s: out of memory\n", cmd);
			failures++;
		} else if (lstat(path, &st) != 0) {
			fprintf(stderr, "wcodec: %s: %s: %s\n", cmd, path, strerror(errno));
			failures++;
		} else if (S_ISDIR(st.st_mode)) {
			failures += walk_containers(cmd, path, fn, ctx, found);
		} else if (S_ISREG(st.st_mode) && (cli_ends_with(name, ".wcodec") || cli_ends_with(name, ".qvq"))) {
			(*found)++;
			fn(ctx, path);
		}
		free(path);
		free(ents[i]);
	}
	free(ents);
	return failures;
}

int cli_is_prefix(const char *op)
{
	size_t n = strlen(op);
	return strncmp(op, "s3://", 5) == 0 && n > 5 && op[n - 1] == '/';
}

/* The .wcodec objects under an s3:// prefix, collected from its listing. */
typedef struct prefix_walk {
	const char *bucket_uri; /* "s3://BUCKET/" */
	size_t bucket_len;
	char **keys;
	size_t n, cap;
	int nomem;
} prefix_walk;

static int on_object(void *ctx, const char *key, uint64_t size)
{
	(void)size;
	prefix_walk *w = ctx;
	if (!cli_ends_with(key, ".wcodec"))
		return 0;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		char **k = realloc(w->keys, cap * sizeof *k);
		if (!k) {
			w->nomem = 1;
			return 1;
		}
		w->keys = k;
		w->cap = cap;
	}
	char *uri = malloc(w->bucket_len + strlen(key) + 1);
	if (!uri) {
		w->nomem = 1;
		return 1;
	}
	memcpy(uri, w->bucket_uri, w->bucket_len);
	strcpy(uri + w->bucket_len, key);
	w->keys[w->n++] = uri;
	return 0;
}

/* Every .wcodec object under prefix (s3://BUCKET/PREFIX/), in key order. */
static unsigned walk_prefix(const char *cmd, const char *prefix, void (*fn)(void *ctx, const char *path), void *ctx)
{
	prefix_walk w = { .bucket_uri = prefix };
	const char *slash = strchr(prefix + 5, '/');
	w.bucket_len = (size_t)(slash - prefix) + 1;
	wc_err e = wc_object_list(prefix, on_object, &w);
	if (e || w.nomem)
		fprintf(stderr, "wcodec: %s: %s\n", cmd, w.nomem ? "out of memory" : wc_last_detail());
	else if (!w.n)
		fprintf(stderr, "wcodec: %s: %s: no .wcodec objects\n", cmd, prefix);
	for (size_t i = 0; !e && !w.nomem && i < w.n; i++)
		fn(ctx, w.keys[i]);
	for (size_t i = 0; i < w.n; i++)
		free(w.keys[i]);
	free(w.keys);
	return e || w.nomem || !w.n;
}

unsigned cli_for_each_container(const char *cmd, char *const ops[], int nops,
				void (*fn)(void *ctx, const char *path), void *ctx)
{
	unsigned failures = 0;
	for (int i = 0; i < nops; i++) {
		struct stat sb;
		if (cli_is_prefix(ops[i])) {
			failures += walk_prefix(cmd, ops[i], fn, ctx);
			continue;
		}
		if (stat(ops[i], &sb) != 0 || !S_ISDIR(sb.st_mode)) {
			fn(ctx, ops[i]);
			continue;
		}
		unsigned found = 0;
		failures += walk_containers(cmd, ops[i], fn, ctx, &found);
		if (!found) {
			fprintf(stderr, "wcodec: %s: %s: no .wcodec or .qvq files\n", cmd, ops[i]);
			failures++;
		}
	}
	return failures;
}
