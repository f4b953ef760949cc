"""Reading the benchmarks' JSON rows, shared by bench/report.py and its table modules."""

import json


def json_rows(lines):
    """(line, row) for each non-empty line of lines, stripped: row is the
    line's JSON object when it is one with a "row" field, else None."""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        obj = None
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
        yield line, obj if isinstance(obj, dict) and "row" in obj else None
