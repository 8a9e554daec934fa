/* main.c - `wcodec`: the command table and dispatch. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "source/source.h"
#include "cli/cmd_qvq.h"
#include "config.h"
#include "core/version.h"
#include "engine/backend.h"
#include "images/image_io.h"

static const cli_command commands[] = {
	{"pack", "compress a .safetensors file (or a model directory) into .wcodec", cmd_pack},
	{"unpack", "restore the original file, byte-identical", cmd_unpack},
	{"info", "describe a container: tensors, ratios, entropy bound", cmd_info},
	{"verify", "decode every tile and check every checksum (files, or trees of them)", cmd_verify},
	{"cat", "write the original file's bytes to standard output", cmd_cat},
	{"pack-images", "vector-quantize a directory of images into a .qvq archive", cmd_pack_images},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
	fprintf(out, "Usage: wcodec [-v] COMMAND [OPTIONS] ARGS...\n"
		     "       wcodec --help | --version\n\n"
		     "  -v, --verbose  log what the library does (backend choice, fallbacks)\n\n"
		     "Lossless compression of tensor files; see wcodec(1).\n\nCommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "  %-12s %s\n", "help", "this list, or 'help COMMAND': that command's options");
	fprintf(out, "\nRun 'wcodec COMMAND --help' for a command's options.\n");
}

/* --version: this build and what it runs with, as a bug report wants. */
static void print_version(void)
{
	char plugin[4096];
	wc_clear_detail();
	wc_err e = wc_backend_plugin_probe(plugin, sizeof plugin);
	printf("wcodec (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
	printf("libraries:   %s\n", wc_library_versions());
	printf("images:      %s\n", wc_image_formats());
	printf("CPU:         %s\n", wc_cpu_level());
	printf("s3://:       %s\n", wc_source_s3_support());
	if (e == WC_OK)
		printf("CUDA plugin: %s (loads; the GPU is opened when a command decodes)\n", plugin);
	else
		printf("CUDA plugin: none (%s)\n", wc_last_detail());
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{"verbose", no_argument, NULL, 'v'},
		{NULL, 0, NULL, 0},
	};
	/* Library messages (the backend chosen, fallbacks) only with -v;
	 * warnings and errors always. */
	wc_log_set_level(WC_LOG_WARN);
	/* Options before the command only; the command parses its own. */
	int c;
	opterr = 1;
	while ((c = getopt_long(argc, argv, "+hVv", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			wc_log_set_level(WC_LOG_DEBUG);
			break;
		case 'h':
			usage(stdout);
			return CLI_OK;
		case 'V':
			print_version();
			return CLI_OK;
		default:
			usage(stderr);
			return CLI_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return CLI_USAGE;
	}
	const char *name = argv[optind];
	/* `wcodec help [COMMAND]`, as git and cargo have it */
	char *help_argv[3];
	if (strcmp(name, "help") == 0) {
		if (optind + 1 >= argc) {
			usage(stdout);
			return CLI_OK;
		}
		help_argv[0] = argv[optind + 1];
		help_argv[1] = (char *)"--help";
		help_argv[2] = NULL;
		name = help_argv[0];
		argv = help_argv;
		argc = 2;
		optind = 0;
	}
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if (strcmp(name, commands[i].name) == 0) {
			int at = optind;
			optind = 0; /* glibc: 0 fully reinitialises getopt for the command */
			return commands[i].run(argc - at, argv + at);
		}
	}
	fprintf(stderr, "wcodec: unknown command '%s'\n", name);
	usage(stderr);
	return CLI_USAGE;
}
