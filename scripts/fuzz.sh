#!/bin/sh
# Runs one of Kura's libFuzzer targets for a given time.
#
# Usage: scripts/fuzz.sh TARGET SECONDS [extra libFuzzer flags]
#   TARGET   store | log | predicate   (see Fuzz/Sources/FuzzTargets.swift)
#
# Builds Fuzz/.build/kura-fuzz first if it is missing (Fuzz/build.sh). New
# inputs go to Fuzz/.work/TARGET (the seeds in Fuzz/corpus/TARGET stay as they
# are); crashes, leaks and timeouts to Fuzz/artifacts/TARGET/. Reproduce one with
#   KURA_FUZZ_TARGET=TARGET Fuzz/.build/kura-fuzz Fuzz/artifacts/TARGET/crash-...
# Exit status: 0 if the time ran out without a finding, libFuzzer's otherwise.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${1:?usage: scripts/fuzz.sh store|log|predicate SECONDS}
SECONDS_TO_RUN=${2:?usage: scripts/fuzz.sh store|log|predicate SECONDS}
shift 2
case "$TARGET" in store|log|predicate) ;; *) echo "unknown target $TARGET" >&2; exit 2 ;; esac
[ -x "$ROOT/Fuzz/.build/kura-fuzz" ] || "$ROOT/Fuzz/build.sh"
WORK="$ROOT/Fuzz/.work/$TARGET"
ART="$ROOT/Fuzz/artifacts/$TARGET"
mkdir -p "$WORK" "$ART"
case "$TARGET" in predicate) MAXLEN=512 ;; *) MAXLEN=262144 ;; esac
export KURA_FUZZ_TARGET="$TARGET"
# Leaks: the engine's caches live as long as a store is open; detect_leaks=0
# keeps libFuzzer from reporting them at exit. Memory: 2 GiB per input.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}"
exec "$ROOT/Fuzz/.build/kura-fuzz" "$WORK" "$ROOT/Fuzz/corpus/$TARGET" \
    -max_total_time="$SECONDS_TO_RUN" -max_len="$MAXLEN" -rss_limit_mb=2048 -timeout=20 \
    -artifact_prefix="$ART/" -print_final_stats=1 "$@"
