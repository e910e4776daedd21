#!/bin/sh
# Builds the libFuzzer binary (all targets; KURA_FUZZ_TARGET picks one) and the
# seed-corpus generator, by compiling Sources/KuraEngine together with Fuzz/Sources
# into one module (so the targets reach the engine's internal API), then writes
# the seed corpora into Fuzz/corpus if they are missing.
#
# Usage: Fuzz/build.sh [--corpus]   (--corpus: regenerate the seed corpora)
set -eu
cd "$(dirname "$0")"
ENGINE=$(find ../Sources/KuraEngine -name '*.swift' | sort)
FLAGS="-package-name Kura -swift-version 6 -O -g"
mkdir -p .build
rm -f .build/kura-fuzz
echo "building .build/kura-fuzz (-sanitize=fuzzer,address)"
# shellcheck disable=SC2086
swiftc $FLAGS -module-name KuraFuzz -parse-as-library -sanitize=fuzzer,address \
    $ENGINE Sources/FuzzSupport.swift Sources/FuzzTargets.swift -o .build/kura-fuzz 2>&1 \
    | grep -v "ld.gold: warning: Cannot export local symbol" || true
test -x .build/kura-fuzz
echo "building .build/kura-fuzz-corpus"
# shellcheck disable=SC2086
swiftc $FLAGS -module-name KuraFuzzCorpus $ENGINE Sources/FuzzSupport.swift Generator/main.swift -o .build/kura-fuzz-corpus
if [ ! -d corpus/store ] || [ "${1:-}" = "--corpus" ]; then
    rm -rf corpus
    .build/kura-fuzz-corpus corpus ../../shared/corpus
fi
