#!/usr/bin/env bash
# Checks that no Rust source outside cuda-sys/ calls the CUDA driver around
# cuda-sys's checked-call layer (cuda_sys::result):
#   - no raw call through the entry-point table, `(d.cuMemAlloc)(...)`;
#   - no entry point taken out of the table to be called later
#     (`d.cuLaunchKernelEx.ok_or(..)`, `let Some(f) = d.cuX else`,
#     `match d.cuX`, `.unwrap()`...): the only uses allowed are asking
#     whether the driver has it (`d.cuX.is_some()` / `.is_none()`), which
#     ABI it has (`matches!(d.cuX, ...)`) and its address (`d.cuX as
#     *const c_void`);
#   - no ABI adapter of cuda_sys::adapt called directly
#     (`d.graph_add_kernel_node(..)`): the result layer wraps them.
# Every tracked *.rs file outside cuda-sys/ is read (every one outside
# target/ without git); comment lines are
# skipped. First the patterns are tried on a sample that holds one of each
# kind, so a pattern that matches nothing cannot pass silently.
# Prints PASS/FAIL lines (FAIL: one per finding, with file:line); exit
# status 1 when anything was found.
set -euo pipefail
# ROOT
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

# The finder: reads files named on its command line, prints
# "file:line: what: code" per finding.
find_raw() {
    perl -e '
        my $adapters = qr/graph_exec_update|graph_edges|graph_add_kernel_node|graph_exec_kernel_node_set_params|graph_kernel_node_set_params|graph_add_node|graph_add_dependencies/;
        while (<>) {
            next if /^\s*(\/\/|\*|\/\*)/;          # comment lines
            my $code = $_;
            $code =~ s{\s//.*$}{};                   # trailing comments
            chomp(my $shown = $_);
            $shown =~ s/^\s+//;
            my $where = "$ARGV:$.";
            if ($code =~ /\(\s*[A-Za-z_][\w.]*\.cu[A-Z]\w*\s*\)\s*\(/) {
                print "$where: raw driver call: $shown\n";
            } else {
                my $rest = $code;
                $rest =~ s/\.cu[A-Z]\w*\s*\.\s*is_(some|none)\s*\(\s*\)//g;
                $rest =~ s/matches!\(\s*[\w.()?]*\.cu[A-Z]\w*//g;
                $rest =~ s/\.cu[A-Z]\w*\s+as\s+\*const//g;
                if ($rest =~ /[\w)\]?]\s*\.cu[A-Z]\w*/) {
                    print "$where: driver entry point taken from the table: $shown\n";
                }
            }
            if ($code =~ /\.\s*(?:$adapters)\s*\(/) {
                print "$where: ABI adapter called around the result layer: $shown\n";
            }
        } continue {
            close ARGV if eof;   # line numbers per file
        }' "$@"
}

fails=0

sample=$(mktemp "${TMPDIR:-/tmp}/check-raw-calls.XXXXXX.rs")
trap 'rm -f "$sample"' EXIT
cat >"$sample" <<'EOF'
let res = unsafe { (d.cuMemAlloc)(&mut p, n) };
unsafe { (self.d.cuStreamSynchronize)(s) };
let f = d.cuLaunchKernelEx.ok_or_else(|| missing())?;
let Some(print) = d.cuGraphDebugDotPrint else { return };
let g = fc_graph::driver()?.cuGraphCreate;
let e = unsafe { d.graph_edges(graph) };
// (d.cuMemFree)(p) in a comment is fine
let ok = d.cuLaunchKernelEx.is_some() && !d.cuGraphAddNode.is_none();
let v12 = matches!(d.cuGraphAddNode, Some(_));
let addr = d.cuInit as *const c_void;
let fine = cuda_sys::result::graph::get_edges(d, graph);
EOF
found=$(find_raw "$sample" | wc -l)
if [[ $found -eq 6 ]]; then
    echo "PASS  the raw-call patterns find each of the 6 kinds in a sample, and none of its 5 allowed uses"
else
    echo "FAIL  the raw-call patterns found $found findings in the sample, want 6:"
    find_raw "$sample" | sed 's/^/        /'
    fails=$((fails + 1))
fi

# Tracked files in a git checkout; every *.rs file but target/'s elsewhere.
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    # (files deleted but not yet committed are left out)
    mapfile -t files < <(git ls-files '*.rs' | grep -v '^cuda-sys/' | while read -r f; do [[ -f $f ]] && echo "$f"; done)
else
    mapfile -t files < <(find . -name '*.rs' -not -path './target/*' -not -path './cuda-sys/*' | sed 's|^\./||' | sort)
fi
if [[ ${#files[@]} -eq 0 ]]; then
    echo "FAIL  no Rust sources found outside cuda-sys/ (git ls-files)"
    exit 1
fi
findings=$(find_raw "${files[@]}")
if [[ -z $findings ]]; then
    echo "PASS  no raw driver call outside cuda-sys (${#files[@]} files)"
else
    while IFS= read -r f; do
        echo "FAIL  $f"
        fails=$((fails + 1))
    done <<<"$findings"
fi
[[ $fails -eq 0 ]]
