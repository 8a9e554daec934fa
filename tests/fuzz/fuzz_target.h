/* fuzz_target.h - the one entry point every fuzz target defines, in
 * libFuzzer's convention (https://llvm.org/docs/LibFuzzer.html): called once
 * per input, returns 0, and abort()s when the code under test breaks one of
 * the target's stated properties. Built two ways: with clang's
 * -fsanitize=fuzzer by contrib/fuzz.sh, and with fuzz_main.c (any compiler)
 * as the programs tests/fuzz_corpus.sh runs in make check. */
#ifndef WC_FUZZ_TARGET_H
#define WC_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* WC_FUZZ_TARGET_H */
