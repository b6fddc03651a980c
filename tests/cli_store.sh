#!/usr/bin/env bash
# The store through pithctl: import the registry bundle, its published state
# hash, resolve in every form, duplicates, a re-signed copy, export and
# re-import, the audit, and the error contract.
#
# usage: cli_store.sh PITHCTL DATADIR        (needs jq and sha256sum)
set -euo pipefail
P=$1
D=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
AR7B=pith:2024:AR7B3DEVMOTSBRCCVXUCLYSRRE
SHA=3facdc2aeec0c5e2ff45dd750211a965091b49387ad1b15346dff0bb9a58c999
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
fail() { n=$((n + 1)); echo "not ok $n - $*"; exit 1; }
S="$T/a"

"$P" --store "$S" import "$D/bundle-AR7B3DEV.json" >"$T/out" || fail "import of the registry bundle exits 0"
grep -Eq '^stored +2$' "$T/out" && grep -Eq '^rejected +0$' "$T/out" ||
	fail "import reports 2 stored, 0 rejected: $(cat "$T/out")"
ok "imports the registry bundle: 2 events stored"

"$P" --store "$S" state arxiv:2401.14489 >"$T/state"
got=$(sed 's/,"state_sha256":"[0-9a-f]*"//' "$T/state" | sha256sum | cut -c1-64)
[ "$got" = "$SHA" ] || fail "state hashes to the published state_sha256 (got $got)"
grep -q "\"state_sha256\":\"$SHA\"" "$T/state" || fail "state carries state_sha256 $SHA"
jq -c .state "$D/bundle-AR7B3DEV.json" | "$P" canon >"$T/published"
cmp -s "$T/state" "$T/published" || fail "state bytes equal the bundle's published state, canonical"
ok "pithctl state gives the published state byte for byte ($SHA)"

for id in arxiv:2401.14489 2401.14489 arxiv:2401.14489v2 doi:10.48550/arxiv.2401.14489 \
	10.48550/arxiv.2401.14489 pith:AR7B3DEV pith:AR7B3DEVMOTS pith:AR7B3DEVMOTSBRCC AR7B3DEVMO \
	AR7B3DEVMOTSBRCCVXUCLYSRRE "$AR7B"; do
	got=$("$P" --store "$S" resolve "$id") || fail "resolve $id exits 0"
	[ "$got" = "$AR7B" ] || fail "resolve $id prints $AR7B (got $got)"
done
ok "resolve: arxiv, arxiv version, doi, short 8/12/16, prefix, body and full number"

if "$P" --store "$S" resolve arxiv:2401.99999 >"$T/out" 2>"$T/err"; then
	fail "resolve of an unknown arXiv id fails"
fi
[ ! -s "$T/out" ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "2401.99999" "$T/err" ||
	fail "an unknown id: nothing on stdout, one line on stderr naming it"
if "$P" --store "$S" state not-an-id 2>"$T/err"; then fail "state of a malformed id fails"; fi
[ "$(wc -l <"$T/err")" -eq 1 ] || fail "a malformed id: one line on stderr"
if "$P" state "$AR7B" 2>"$T/err"; then fail "state without --store fails"; fi
grep -q -- "--store" "$T/err" || fail "without --store the error says so"
if "$P" --store "$T/none" state "$AR7B" 2>"$T/err"; then fail "a missing store fails"; fi
ok "errors: exit status 1, one line on stderr saying what"

"$P" --store "$S" import "$D/bundle-AR7B3DEV.json" >"$T/out"
grep -Eq '^stored +0$' "$T/out" && grep -Eq '^duplicate +2$' "$T/out" ||
	fail "a second import reports 0 stored, 2 duplicate: $(cat "$T/out")"
"$P" --store "$S" state "$AR7B" | cmp -s - "$T/state" || fail "the state is unchanged"
ok "importing the bundle again is a no-op"

"$P" --store "$T/new/parents/store" import "$D/bundle-AR7B3DEV.json" >"$T/out" ||
	fail "import into a store whose parent directories do not exist yet exits 0"
"$P" --store "$T/absent" records >"$T/out" 2>"$T/err" && fail "records on a missing store fails"
[ -e "$T/absent" ] && fail "a read-only command does not create the store directory"
ok "import creates missing parent directories; read-only commands create nothing"

out=$("$P" --store "$S" records)
line=$(printf '%s\n' "$out" | tail -n 1)
[ "$(printf '%s\n' "$out" | head -n 1)" = "# pith_number events state_sha256" ] || fail "records starts with its header line"
[ "$line" = "$AR7B 2 $SHA" ] || fail "records prints '$AR7B 2 $SHA' (got '$line')"
"$P" --store "$S" records --json | jq -e "length == 1 and (.[0] | .pith_number == \"$AR7B\" and .event_count == 2 and .has_bundle)" >/dev/null ||
	fail "records --json"
ok "records lists the record with its event count and state hash"

# a re-signed copy: the same event with another signed_at (outside the hash)
jq -c '.events[1]' "$D/bundle-AR7B3DEV.json" | "$P" canon >"$T/orig"
jq -c '.events[1] | .signature.signed_at = "2026-09-01T00:00:00.000001Z"' "$D/bundle-AR7B3DEV.json" |
	"$P" canon >"$T/copy"
echo >>"$T/copy"
id=$(jq -r .event_id "$T/orig")
"$P" --store "$S" event "$id" | cmp -s - "$T/orig" || fail "event $id gives the stored canonical event"
"$P" --store "$S" import "$T/copy" >"$T/out" || fail "import of a re-signed copy exits 0"
S2="$T/b"
"$P" --store "$S2" import "$T/copy" "$D/bundle-AR7B3DEV.json" >/dev/null
"$P" --store "$S" event "$id" >"$T/kept1"
"$P" --store "$S2" event "$id" >"$T/kept2"
cmp -s "$T/kept1" "$T/kept2" || fail "both stores keep the same signature block whatever the order"
(cmp -s "$T/kept1" "$T/orig" || cmp -s "$T/kept1" <(head -c -1 "$T/copy")) ||
	fail "the kept block is one of the two copies"
"$P" --store "$S" state "$AR7B" | cmp -s - "$T/state" || fail "a re-signed copy leaves the state alone"
"$P" --store "$S2" state "$AR7B" | cmp -s - "$T/state" || fail "the other order gives the same state"
ok "a re-signed copy keeps one deterministic signature block, state unchanged"

"$P" --store "$S" export >"$T/export.jsonl"
[ "$(wc -l <"$T/export.jsonl")" -eq 2 ] || fail "export writes 2 lines"
"$P" --store "$S" export --subject arxiv:2401.14489 | cmp -s - "$T/export.jsonl" || fail "export --subject"
S3="$T/c"
"$P" --store "$S3" import - <"$T/export.jsonl" >/dev/null || fail "import from stdin"
[ "$("$P" --store "$S3" export)" = "$(cat "$T/export.jsonl")" ] || fail "export of the re-import is identical"
ok "export, import from stdin, export again: identical"

"$P" --store "$S" export --bundles "$T/bundles" 2>/dev/null || fail "export --bundles exits 0"
"$P" verify "$T/bundles/AR7B3DEVMOTSBRCCVXUCLYSRRE.json" >/dev/null || fail "an exported bundle verifies"
[ "$(ls "$T/bundles" | wc -l)" -eq 1 ] || fail "one bundle file per record with a bundle"
ok "export --bundles writes each record's verified bundle, which verifies"

"$P" --store "$S" check >"$T/out" || fail "check passes: $(cat "$T/out")"
"$P" --store "$S2" check >/dev/null || fail "check passes on the second store"
ok "check finds no problem"
echo "1..$n"
