/*
 * cmd_qvq.h - the `wcodec` CLI's handlers for .qvq image archives: the
 * pack-images command (src/cli/cmd_pack_images.c) and the format row of
 * unpack/info/verify (src/cli/formats.c, cli_format in cli/cli.h). They
 * return CLI_OK, CLI_FAIL or CLI_USAGE and print their own errors.
 */
#ifndef WC_CLI_CMD_QVQ_H
#define WC_CLI_CMD_QVQ_H

#include "cli/cli.h"

/* wcodec pack-images DIR OUT.qvq [--size WxH] [--codebook K] [--seed N]
 *                    [--threads N] [--tile-size BYTES] [--iterations N] */
int cmd_pack_images(int argc, char **argv);

/* unpack: write the files the mount shows (PPMs, images.npy, labels.txt)
 * under the directory `out`, decoded on the CPU. */
int qvq_cli_unpack(const char *in, const char *out, const cli_decode_opts *o);
/* info: header, sizes, codebook, tiles, labels, metadata (JSON with json). */
int qvq_cli_info(const char *path, int json);
/* cli_format's sizes for .qvq: decoded is the images' RGB bytes. */
int qvq_cli_sizes(const char *path, uint64_t *decoded, uint64_t *stored);
/* verify: every table at open, then every tile decoded through the decode
 * backend o->backend with payload and decoded checksums checked. */
int qvq_cli_verify(const char *path, const cli_decode_opts *o);

#endif /* WC_CLI_CMD_QVQ_H */
