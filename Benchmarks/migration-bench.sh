#!/bin/sh
# migration-bench.sh: time and peak memory (VmHWM, via /usr/bin/time -v) of
# `kura migrate` on a store of N objects (issue 13's closing note):
#   added:   one optional attribute added (no row rewritten)
#   retyped: one attribute renamed (elementID) and retyped int32 -> string
#            (every row rewritten, its index rebuilt)
#   parent:  Item gains a parent entity Thing (empty): every object moves
#            from table Item into table Thing (row IDs kept), `_entity` set,
#            Item's indexes rebuilt on Thing, table Item dropped
#
#   swift build -c release --product kura
#   Benchmarks/migration-bench.sh [N]        (default 1000000; KURA=path/to/kura)
#
# Each migration runs in a fresh `kura` process on a fresh copy of the store,
# so the peak is that migration's. The store is built with `kura migrate`
# (creates the object layer's tables) and `kura import` (JSON lines).
set -eu
N=${1:-1000000}
KURA=${KURA:-.build/release/kura}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/kura-migration-bench.XXXXXX")
trap 'rm -rf "$DIR"' EXIT

model() {
cat > "$DIR/$1.contents" <<XML
<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<model type="com.apple.IDECoreDataModeler.DataModel" documentVersion="1.0">
    <entity name="Thing" representedClassName="Thing" syncable="YES">
        <attribute name="label" optional="YES" attributeType="String"/>
    </entity>
    <entity name="Item" representedClassName="Item" syncable="YES" $4>
        <attribute name="n" attributeType="Integer 64" usesScalarValueType="YES"/>
        <attribute name="name" optional="YES" attributeType="String"/>
        $2
        <fetchIndex name="byCode"><fetchIndexElement property="$3" type="Binary" order="ascending"/></fetchIndex>
    </entity>
</model>
XML
}
model v1 '<attribute name="code" optional="YES" attributeType="Integer 32" usesScalarValueType="YES"/>' code ''
model added '<attribute name="code" optional="YES" attributeType="Integer 32" usesScalarValueType="YES"/>
        <attribute name="extra" optional="YES" attributeType="String"/>' code ''
model retyped '<attribute name="label" optional="YES" attributeType="String" elementID="code"/>' label ''
model parent '<attribute name="code" optional="YES" attributeType="Integer 32" usesScalarValueType="YES"/>' code 'parentEntity="Thing"'

"$KURA" migrate "$DIR/base.kura" --model "$DIR/v1.contents" > /dev/null
awk -v n="$N" 'BEGIN { for (i = 1; i <= n; i++) printf "{\"n\":%d,\"name\":\"item %d\",\"code\":%d}\n", i, i, i % 100000 }' > "$DIR/items.jsonl"
"$KURA" import "$DIR/base.kura" Item "$DIR/items.jsonl" > /dev/null
"$KURA" checkpoint "$DIR/base.kura" > /dev/null
echo "store: $N objects, $(du -h "$DIR/base.kura" | cut -f1)"
for case in ${CASES:-added retyped parent}; do
    cp "$DIR/base.kura" "$DIR/$case.kura"
    /usr/bin/time -v "$KURA" migrate "$DIR/$case.kura" --model "$DIR/$case.contents" > "$DIR/$case.out" 2> "$DIR/$case.time"
    secs=$(grep 'Elapsed (wall clock)' "$DIR/$case.time" | sed 's/.*: //')
    kib=$(grep 'Maximum resident set size' "$DIR/$case.time" | sed 's/.*: //')
    echo "$case: wall $secs, peak RSS $((kib / 1024)) MiB"
    grep -E '^  (added|renamed|converted|indexed|rewritten)' "$DIR/$case.out" | sed 's/^/    /'
done
