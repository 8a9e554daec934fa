/* formats.c - the container formats the CLI unpacks, describes and verifies,
 * chosen by the file's magic. One row per format. */
#include "cli/cli.h"

#include <errno.h>
#include <string.h>

#include "container/container.h"
#include "qvq/qvq_cli.h"
#include "qvq/qvq_format.h"

static const cli_format formats[] = {
	{"wcodec", WC_MAGIC, 8, wcodec_unpack, wcodec_info, wcodec_verify, wcodec_sizes},
	{"qvq", WC_QVQ_MAGIC, 8, qvq_cli_unpack, qvq_cli_info, qvq_cli_verify, qvq_cli_sizes},
};

const cli_format *cli_format_of(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "wcodec: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	unsigned char head[16] = {0};
	size_t n = fread(head, 1, sizeof head, f);
	fclose(f);
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if (n >= formats[i].magic_len && memcmp(head, formats[i].magic, formats[i].magic_len) == 0)
			return &formats[i];
	fprintf(stderr, "wcodec: %s: not a file this tool reads (unknown magic)\n", path);
	return NULL;
}
