/*
 * cli.h - the `wcodec` command-line tool: command table, file formats, and
 * helpers shared by the commands.
 *
 * Adding a command: write cmd_NAME.c with `int cmd_NAME(int argc, char **argv)`
 * (argv[0] is the command name; parse with getopt_long; --help prints usage
 * and returns 0) and add one row to the table in main.c.
 *
 * Adding a file format to unpack/info/verify (e.g. .qvq): add one row to the
 * table in formats.c with its magic and handlers; the commands pick the row
 * by the file's first bytes.
 */
#ifndef WC_CLI_H
#define WC_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "core/atomic_file.h"
#include "core/size.h"
#include "core/wc_error.h"

/* Exit statuses of every command. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

typedef struct cli_command {
	const char *name;
	const char *summary; /* one line for `wcodec --help` */
	int (*run)(int argc, char **argv);
} cli_command;

/* Options shared by the commands that decode tiles. */
typedef struct cli_decode_opts {
	const char *backend; /* "auto", "cpu", "cuda" */
	unsigned threads;    /* 0 = online CPUs */
	int quiet;
	int force; /* -f (unpack): overwrite an existing output */
	/* --json (verify): each file's report is appended here (a JSON array,
	 * cli_json_file's keys) instead of printed; NULL without --json. */
	struct json_t *json;
	/* (verify) A tile that the index shows to be the same as the one
	 * before it (decode_tiles.c) is checked by its payload and not decoded
	 * again: its sink gets data NULL. */
	int skip_repeats;
} cli_decode_opts;

/* The keys every --json report of a file has, whatever the command (info,
 * verify, pack) and format: "file" (its path), "format" ("wcodec", "qvq"),
 * "decoded_bytes" (what it decodes to: the original .safetensors, an
 * archive's RGB pixels), "file_bytes" (its size), "ratio" (decoded over
 * file bytes). A new object the caller adds command-specific keys to; NULL
 * if out of memory. */
struct json_t *cli_json_file(const char *path, const char *format, uint64_t decoded, uint64_t stored);
/* Make directory `path` (mode 0777 & ~umask, or `mode`) unless it is one
 * already; a symbolic link or anything else there is refused, so a writer
 * never follows a link it did not make out of its output tree. Errors:
 * WC_E_IO naming path ("a symbolic link: ..."). */
wc_err cli_mkdir_here(const char *path, unsigned mode);

/* verify --json: add a file's result (cli_json_file's keys, "tiles", the
 * "decoded_tiles" (fewer where tiles repeat the one before them),
 * "damaged_tiles", "ok") to o->json; nothing without --json. */
void cli_verify_report(const cli_decode_opts *o, const char *path, const char *format, uint64_t decoded,
		       uint64_t stored, uint32_t tiles, uint32_t damaged, uint32_t decoded_tiles);
/* Print a --json document (indented, then a newline); CLI_OK or CLI_FAIL. */
int cli_json_print(struct json_t *doc);

/* getopt_long entries and help text of --backend/-b and --threads/-j. */
#define CLI_DECODE_LONGOPTS {"backend", required_argument, NULL, 'b'}, {"threads", required_argument, NULL, 'j'}
#define CLI_DECODE_HELP \
	"  -b, --backend NAME    decode backend: auto (CUDA if usable, else CPU), cpu, cuda\n" \
	"  -j, --threads N       CPU decode threads (default: all online CPUs)\n"
/* Handle option c ('b' or 'j') for command cmd; returns 0, or CLI_USAGE
 * after printing why. */
int cli_decode_opt(const char *cmd, int c, const char *arg, cli_decode_opts *o);

/* Parse the options of a decoding command (cat, unpack, verify): -b, -j,
 * and as `extra` allows: -q (CLI_OPT_QUIET), --json (CLI_OPT_JSON: o->json
 * becomes an empty array), -f (CLI_OPT_FORCE); -h (prints usage to stdout),
 * -V. Requires min_args
 * to max_args operands (max_args < 0: no upper limit), which start at
 * argv[optind]. Returns -1 to go on, or the exit status to return (after
 * printing help, the version or the error). */
enum { CLI_OPT_QUIET = 1, CLI_OPT_JSON = 2, CLI_OPT_FORCE = 4 };
int cli_parse_decode_cmd(const char *cmd, int argc, char **argv, int min_args, int max_args,
			 unsigned extra, void (*usage)(FILE *), cli_decode_opts *o);

/* An output may be written: it does not exist, or force (-f) was given, or
 * (dir) it is an empty directory. Otherwise prints "wcodec CMD: OUT exists
 * (-f overwrites it)" and returns CLI_FAIL; -1 to go on. As zstd(1) does,
 * nothing is overwritten unasked. */
int cli_check_overwrite(const char *cmd, const char *out, int dir, int force);

/* The output name of `pack IN`, `unpack IN` or `pack-images DIR` without
 * OUT, or with OUT an existing directory: IN (trailing slashes dropped)
 * with its suffix `from` (".safetensors") replaced by `to` (".wcodec"), or
 * `to` appended when IN does not end in `from`; in directory dir when dir
 * is not NULL (IN's last component only), else beside IN. A malloc()ed
 * string, or NULL when there is none: IN's last component is empty, "."
 * or "..", or `to` is empty and IN does not end in `from` (nothing would
 * tell the two apart), or out of memory. */
char *cli_derive_output(const char *in, const char *from, const char *to, const char *dir);

/* Whether path names an existing directory (following symlinks). */
int cli_is_dir(const char *path);
/* An object store's prefix: "s3://BUCKET/PREFIX/" (a trailing '/'), which
 * cli_for_each_container walks like a directory. */
int cli_is_prefix(const char *op);

/* The entries of directory dir but "." and "..", sorted by name (strcmp,
 * not the locale, so runs are reproducible), as scandir(3): returns their
 * number and a malloc()ed array of malloc()ed entries in *ents, or -1 with
 * errno set. */
struct dirent;
int cli_scandir(const char *dir, struct dirent ***ents);

/* Call fn(ctx, path) for every container the operands ops[0..nops) name:
 * an operand that is a directory stands for every regular file named
 * *.wcodec or *.qvq under it, depth first in name order (symbolic links
 * are not followed: a link to a directory could loop); an s3:// prefix
 * (cli_is_prefix) for every *.wcodec object under it, in key order; any
 * other operand is passed as it is (fn reports a missing one). An unreadable directory
 * or entry, and a directory holding no container, is reported on stderr
 * as "wcodec: CMD: PATH: reason" and counted. Returns that count (fn's own
 * failures are fn's to count). */
unsigned cli_for_each_container(const char *cmd, char *const ops[], int nops,
				void (*fn)(void *ctx, const char *path), void *ctx);

/* "dir/name", malloc()ed; NULL if out of memory. */
char *cli_path_join(const char *dir, const char *name);

/* Whether s ends with suffix. */
int cli_ends_with(const char *s, const char *suffix);

/* a / b, or 0 when b is 0: a compression ratio (original over stored). */
double cli_ratio(uint64_t a, uint64_t b);

/* A container format the CLI can unpack, describe and verify. Handlers
 * return an exit status and print their own errors. */
typedef struct cli_format {
	const char *name;        /* "wcodec" */
	const char *magic;       /* the file's first magic_len bytes */
	size_t magic_len;
	/* Default names: `unpack X.wcodec` writes X.safetensors (suffix
	 * ".wcodec", unpacked_suffix ".safetensors"); `unpack Y.qvq` writes
	 * directory Y (unpacked_suffix "", unpacks_to_dir). */
	const char *suffix;
	const char *unpacked_suffix;
	int unpacks_to_dir;
	int (*unpack)(const char *in, const char *out, const cli_decode_opts *o);
	int (*info)(const char *path, int json);
	int (*verify)(const char *path, const cli_decode_opts *o);
	/* *decoded: the bytes it decodes to (the original .safetensors file;
	 * a .qvq archive's RGB pixels), *stored: the file's bytes. Opens the
	 * file (its header and index are validated), decodes nothing. */
	int (*sizes)(const char *path, uint64_t *decoded, uint64_t *stored);
} cli_format;

/* The format of the file at path by its magic; NULL (with a message
 * printed) if unreadable or unknown. */
const cli_format *cli_format_of(const char *path);
/* The table of formats, *n rows. */
const cli_format *cli_formats(size_t *n);
/* The format whose suffix (".wcodec", ".qvq") name ends in; NULL if none. */
const cli_format *cli_format_named(const char *name);

/* Handlers of the .wcodec format (cmd_unpack.c, cmd_info.c, cmd_verify.c). */
int wcodec_unpack(const char *in, const char *out, const cli_decode_opts *o);
/* `unpack DIR OUTDIR` (unpack_tree.c): mirror DIR into OUTDIR as wcodecfs
 * shows it. Returns CLI_OK, or CLI_FAIL / CLI_USAGE after printing why. */
int cli_unpack_tree(const char *in, const char *out, const cli_decode_opts *o);
int wcodec_info(const char *path, int json);
int wcodec_verify(const char *path, const cli_decode_opts *o);
int wcodec_sizes(const char *path, uint64_t *decoded, uint64_t *stored);

/* Commands (one file each). */
int cmd_pack(int argc, char **argv);
int cmd_unpack(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_cat(int argc, char **argv);
/* The original bytes of the .wcodec file `in` on standard output (cat, and
 * unpack to "-"). */
int cli_cat(const char *in, const cli_decode_opts *o);

/* A progress bar on stderr, drawn only if stderr is a terminal and not quiet;
 * redrawn at most 10 times a second. With bytes set (after init), done and
 * total are bytes and the bar shows the rate in MB/s. The label is copied. */
typedef struct cli_progress {
	char label[160];
	int enabled, bytes;
	double start, last;
} cli_progress;
void cli_progress_init(cli_progress *p, const char *label, int quiet);
void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total);
void cli_progress_done(cli_progress *p);

/* Called for each tile in tile order: data/size are its decoded bytes when
 * status is WC_OK, else why says what is wrong with it. Return nonzero to stop. */
struct wc_container;
typedef int (*cli_tile_sink)(void *ctx, uint32_t tile, const uint8_t *data, uint32_t size, wc_err status,
			     const char *why);

/* Decode every tile of c through the decode backend o->backend (engine/
 * backend.h) in batches of its preferred size, calling sink in tile order,
 * with progress over decoded bytes; *decoded (if not NULL) gets the number
 * of tiles decoded (fewer than c's with o->skip_repeats). Errors: the
 * backend's creation error (with a reason), WC_E_NOMEM. Damaged tiles are
 * reported to the sink, not as errors. */
wc_err cli_decode_tiles(struct wc_container *c, const cli_decode_opts *o, cli_tile_sink sink, void *ctx,
			cli_progress *progress, uint32_t *decoded);

/* "wcodec: CONTEXT: <wc_strerror(e)>: <wc_last_detail()>" on stderr; returns CLI_FAIL. */
int cli_error(wc_err e, const char *context);
/* Print "wcodec CMD: MESSAGE" and a hint to run --help; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));


/* "12.3 MiB" into buf. */
const char *cli_human_bytes(uint64_t n, char buf[32]);


/* An output written whole or not at all (core/atomic_file.h: "OUT.tmp.XXXXXX"
 * next to OUT, renamed over it after fsync by cli_tmp_commit, removed by
 * cli_tmp_abort). A SIGINT, SIGTERM or SIGHUP while one is open removes it
 * before the process dies, and so does a SIGBUS (an input mapped by the
 * packer shrank), with a message. */
typedef wc_atomic_file cli_tmpfile;
wc_err cli_tmp_create(cli_tmpfile *t, const char *out);
wc_err cli_tmp_commit(cli_tmpfile *t);
void cli_tmp_abort(cli_tmpfile *t);
/* Let the signal cleanup know about a temporary path created elsewhere (the
 * library's packer); NULL forgets it. */
void cli_tmp_watch_path(const char *path);

#endif /* WC_CLI_H */
