/*
 * qvq_cli.h - the `wcodec` subcommands for .qvq image archives. Each takes
 * the arguments after the command name (argv[0] is the command name, as
 * getopt_long expects) and returns a process exit status: 0 success,
 * 1 failure (the reason printed on stderr), 2 usage error.
 */
#ifndef WC_QVQ_CLI_H
#define WC_QVQ_CLI_H

/* wcodec pack-images DIR OUT.qvq [--size WxH] [--codebook K] [--seed N]
 *                    [--threads N] [--tile-size BYTES] [--iterations N] */
int wc_qvq_cmd_pack_images(int argc, char **argv);

/* wcodec unpack Y.qvq DIR: writes the files the mount shows under DIR. */
int wc_qvq_cmd_unpack(const char *archive, const char *dir);

/* wcodec info Y.qvq: header, sizes, codebook, tiles, metadata. */
int wc_qvq_cmd_info(const char *archive);

/* wcodec verify Y.qvq: open (checks every table) and decode every tile on
 * the CPU (checks every payload and decoded hash). */
int wc_qvq_cmd_verify(const char *archive);

/* Whether path names a .qvq archive: by its first 8 bytes if readable,
 * else by its ".qvq" suffix. */
int wc_qvq_is_archive(const char *path);

#endif /* WC_QVQ_CLI_H */
