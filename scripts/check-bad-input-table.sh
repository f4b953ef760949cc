#!/usr/bin/env bash
# Checks that docs/bad-input.md stays true: every test its tables name
# exists and is run.
#   - Each table row names its tests as `file::case`. A C case
#     (ctest/<prog>.c) is a matrix row `X(case, ...)`, a `CT_CASE(case)` /
#     `CT_CASE_NEEDS(case, ...)` or a scenario table's `{"case", ...}` when
#     it is a bare name; a quoted name ("...") must be a whole string
#     literal of the file (an EXPECT's name); anything else (IN_BREAK("x"))
#     must occur verbatim. The program must be in ctest/run.sh's TESTS. A
#     Rust case is `tests/<suite>.rs::name` (`fn name(` registered by its
#     name in the suite's main, or a #[test]) or `<path>.rs::tests::name`
#     (a #[test] fn name).
#   - A row without a test must say why in its last cell ("—": the input
#     cannot be expressed there).
#   - README.md and the header's top comment link the page.
# First the checks run on a sample holding one good reference and one of
# each kind of broken one, so a check that finds nothing cannot pass
# silently. Prints a PASS/FAIL line per table row (FAIL: which reference,
# why); exit status 1 when anything failed.
#
#   scripts/check-bad-input-table.sh [DOC]     default: docs/bad-input.md
set -euo pipefail
# ROOT
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
command -v python3 >/dev/null || die "python3 not found"

exec python3 - "${1:-docs/bad-input.md}" <<'PY'
import os
import re
import sys
import tempfile

REF = re.compile(r"`([A-Za-z0-9_./-]+\.(?:c|rs))::([^`]+)`")
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_texts = {}


def text(path):
    if path not in _texts:
        with open(path, encoding="utf-8", errors="replace") as f:
            _texts[path] = f.read()
    return _texts[path]


def c_programs():
    m = re.search(r"^TESTS=\(([^)]*)\)", text("ctest/run.sh"), re.M)
    return set(m.group(1).split()) if m else set()


def is_test_fn(src, name):
    """A #[test] fn `name` (attributes and blank lines may sit between)."""
    lines = src.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"\s*(pub\s+)?fn\s+%s\s*\(" % re.escape(name), line):
            j = i - 1
            while j >= 0 and (not lines[j].strip() or lines[j].strip().startswith("#[")):
                if lines[j].strip() == "#[test]":
                    return True
                j -= 1
    return False


def check_ref(path, case):
    """None when `path::case` names a test that exists and is run, else why not."""
    if not os.path.isfile(path):
        return "no such file"
    src = text(path)
    if path.endswith(".c"):
        prog = os.path.splitext(os.path.basename(path))[0]
        if not path.startswith("ctest/") or prog not in c_programs():
            return "%s is not in ctest/run.sh's TESTS" % prog
        if IDENT.match(case):
            pat = r"(X\(|CT_CASE\(|CT_CASE_NEEDS\(|\{\")%s(?![A-Za-z0-9_])" % re.escape(case)
            return None if re.search(pat, src) else "no matrix row, CT_CASE or scenario named %s" % case
        if len(case) >= 2 and case[0] == '"' and case[-1] == '"':
            return None if case in src else "no string literal %s" % case
        return None if case in src else "%s does not occur" % case
    name = case.split("::")[-1]
    if not IDENT.match(name):
        return "not a Rust test name: %s" % case
    if not re.search(r"\bfn\s+%s\s*\(" % re.escape(name), src):
        return "no fn %s" % name
    if path.startswith("tests/") and '"%s"' % name in src:
        return None  # registered in the GPU suite's main
    return None if is_test_fn(src, name) else "fn %s is neither registered nor a #[test]" % name


def rows(doc):
    """(section, label, cells, refs) of every data row of every table."""
    lines = text(doc).splitlines()
    section = "(top)"
    for i, line in enumerate(lines):
        if line.startswith("## ") or line.startswith("### "):
            section = line.lstrip("#").strip()
            continue
        if not line.startswith("|"):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if re.match(r"^\|[\s|:-]+\|?$", line) or re.match(r"^\|[\s|:-]+\|?$", nxt):
            continue  # a separator, or the header above one
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        label = cells[0]
        if len(label) > 70:
            label = label[:67] + "..."
        yield section, label, cells, REF.findall(line)


def check_doc(doc, emit):
    """Emits one (ok, line) per row; returns the number of failures."""
    failed = 0
    seen = 0
    for section, label, cells, refs in rows(doc):
        seen += 1
        where = "%s / %s" % (section.split(".")[0] if section[:1].isdigit() else section, label)
        if not refs:
            if cells and cells[-1] in ("—", "-"):
                emit(True, "%s: no test (not expressible there)" % where)
            else:
                emit(False, "%s: names no test" % where)
                failed += 1
            continue
        bad = [(p, c, why) for p, c in refs for why in [check_ref(p, c)] if why]
        if bad:
            for p, c, why in bad:
                emit(False, "%s: `%s::%s`: %s" % (where, p, c, why))
            failed += 1
        else:
            emit(True, "%s: %d test%s" % (where, len(refs), "" if len(refs) == 1 else "s"))
    if seen == 0:
        emit(False, "%s: no table rows found" % doc)
        failed += 1
    return failed


def main():
    doc = sys.argv[1]
    fails = 0
    # The checks on a sample: one good row, then one row of each broken kind.
    sample = (
        "## 1. Sample\n\n| Bad input | Tests |\n| --- | --- |\n"
        "| good | `ctest/test_hostile.c::lane_64`, `ctest/test_hostile.c::\"buffer: use the stale handle\"`, "
        "`tests/gpu_core.rs::second_begin_is_refused`, `fc-graph/src/module.rs::tests::launch_dimensions_must_be_non_zero` |\n"
        "| no such row | `ctest/test_hostile.c::no_such_row_anywhere` |\n"
        "| no such file | `ctest/test_nowhere.c::lane_64` |\n"
        "| no such string | `ctest/test_hostile.c::\"no check is named like this\"` |\n"
        "| not run | `ctest/test_hostile.c::set_usable` |\n"
        "| no Rust test | `tests/gpu_core.rs::chain` |\n"
        "| no test at all | nothing |\n"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
        f.write(sample)
        sample_path = f.name
    got = []
    try:
        n = check_doc(sample_path, lambda ok, line: got.append((ok, line)))
    finally:
        os.unlink(sample_path)
        _texts.pop(sample_path, None)
    if n == 6 and got[0][0] and sum(1 for ok, _ in got if not ok) == 6:
        print("PASS  the checks find each of the 6 kinds of broken row in a sample, and pass its good one")
    else:
        print("FAIL  the checks on the sample found %d broken rows, want 6 (and its good row passing):" % n)
        for ok, line in got:
            print("        %s %s" % ("ok  " if ok else "FAIL", line))
        fails += 1

    def emit(ok, line):
        print("%s  %s" % ("PASS" if ok else "FAIL", line))

    if not os.path.isfile(doc):
        emit(False, "%s does not exist" % doc)
        return 1
    fails += check_doc(doc, emit)
    link = os.path.relpath(doc, ".")
    if link in text("README.md"):
        emit(True, "README.md links %s" % link)
    else:
        emit(False, "README.md does not link %s" % link)
        fails += 1
    header = text("include/cuda/fc_cuda.h")
    top = header.split("#ifndef FC_CUDA_H", 1)[0]
    if link in top:
        emit(True, "the header's top comment names %s" % link)
    else:
        emit(False, "include/cuda/fc_cuda.h's top comment does not name %s" % link)
        fails += 1
    return 1 if fails else 0


sys.exit(main())
PY
