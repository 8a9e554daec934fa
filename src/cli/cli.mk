# src/cli: the `wcodec` tool (one file per command; main.c holds the table).
bin_PROGRAMS += wcodec
wcodec_SOURCES = src/cli/main.c src/cli/cli.h src/cli/cli_util.c src/cli/formats.c \
	src/cli/decode_tiles.c src/cli/cmd_pack.c src/cli/lossy_select.c src/cli/lossy_select.h \
	src/cli/cmd_unpack.c src/cli/cmd_info.c \
	src/cli/cmd_verify.c src/cli/cmd_cat.c src/cli/pack_tree.c src/cli/pack_tree.h src/cli/tree_util.c src/cli/tree_util.h src/cli/unpack_tree.c \
	src/cli/cmd_pack_images.c src/cli/cmd_qvq.c src/cli/cmd_qvq.h
wcodec_CFLAGS = $(AM_CFLAGS) $(JANSSON_CFLAGS)
wcodec_LDADD = $(WCODEC_INTERNAL)
dist_man_MANS += docs/wcodec.1

TESTS += tests/cli_roundtrip.sh tests/cli_malformed.sh tests/cli_verify.sh tests/cli_help.sh \
	tests/cli_docreader.sh tests/cli_dict.sh tests/cli_lossy.sh tests/cli_pack_tree.sh tests/man_pages.sh tests/cli_many_tensors.sh tests/cli_json.sh tests/cli_demo.sh tests/cli_output_links.sh tests/cli_progress.sh tests/cli_completion.sh
EXTRA_DIST += tests/cli_roundtrip.sh tests/cli_malformed.sh tests/cli_verify.sh tests/cli_help.sh \
	tests/cli_lib.sh tests/cli_docreader.sh tests/doc_reader.py tests/cli_dict.sh tests/cli_lossy.sh tests/cli_pack_tree.sh tests/man_pages.sh \
	tests/cli_many_tensors.sh tests/cli_json.sh tests/cli_demo.sh tests/cli_output_links.sh tests/cli_progress.sh \
	tests/cli_completion.sh

# bash completion of wcodec and wcodecfs (bash-completion loads a command's
# file by the command's name: wcodecfs's is a link to the same file).
bashcompletiondir = $(datadir)/bash-completion/completions
dist_bashcompletion_DATA = contrib/completion/wcodec
install-data-hook:
	cd $(DESTDIR)$(bashcompletiondir) && rm -f wcodecfs && ln -s wcodec wcodecfs
uninstall-hook:
	rm -f $(DESTDIR)$(bashcompletiondir)/wcodecfs
