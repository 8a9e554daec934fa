/* formats.c - the container formats the CLI unpacks, describes and verifies,
 * chosen by the file's magic. One row per format. */
#include "cli/cli.h"
#include "source/source.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "container/container.h"
#include "core/fileio.h"
#include "cli/cmd_qvq.h"
#include "qvq/qvq_format.h"

static const cli_format formats[] = {
	{"wcodec", WC_MAGIC, 8, ".wcodec", ".safetensors", 0, wcodec_unpack, wcodec_info, wcodec_verify, wcodec_sizes},
	{"qvq", WC_QVQ_MAGIC, 8, ".qvq", "", 1, qvq_cli_unpack, qvq_cli_info, qvq_cli_verify, qvq_cli_sizes},
};

const cli_format *cli_formats(size_t *n)
{
	*n = sizeof formats / sizeof formats[0];
	return formats;
}

const cli_format *cli_format_named(const char *name)
{
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if (cli_ends_with(name, formats[i].suffix))
			return &formats[i];
	return NULL;
}

const cli_format *cli_format_of(const char *path)
{
	wc_source *src; /* a local file, or an object store's s3://BUCKET/KEY */
	if (wc_source_open(path, &src) != WC_OK) {
		fprintf(stderr, "wcodec: %s\n", wc_last_detail());
		return NULL;
	}
	unsigned char head[16] = {0};
	size_t n = wc_source_size(src) < sizeof head ? (size_t)wc_source_size(src) : sizeof head;
	if (wc_source_read(src, head, n, 0, "the magic") != WC_OK)
		n = 0;
	wc_source_close(src);
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if (n >= formats[i].magic_len && memcmp(head, formats[i].magic, formats[i].magic_len) == 0)
			return &formats[i];
	/* safetensors: a u64 header length, then the JSON header's '{'. */
	if (n >= 9 && head[8] == '{' && head[6] == 0 && head[7] == 0)
		fprintf(stderr, "wcodec: %s: a safetensors file, not a packed one (wcodec pack %s)\n",
			path, path);
	else
		fprintf(stderr, "wcodec: %s: not a file this tool reads (unknown magic)\n", path);
	return NULL;
}
