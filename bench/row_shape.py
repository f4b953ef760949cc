#!/usr/bin/env python3
"""The shape of an fc-bench output (stdout or stderr), without its
measurements: one line per input line, in order. A JSON row becomes its
row name, its fields in order and every value that is not a number
(numbers become "#", or "#.#" when written with a point, except "kernels"
and "n"); any other line (the --table report, the human lines) has its
numbers replaced by "#" and runs of spaces and of dashes shortened to one.
Two runs of the same fc-bench options have the same shape, but for the
verdicts that a run's numbers decide ("goal": "met" / "missed",
"goal_met", notes); two builds whose outputs have the same shape print
the same format.

  python3 bench/row_shape.py FILE            # the shape, on stdout
  diff <(python3 bench/row_shape.py old.jsonl) <(python3 bench/row_shape.py new.jsonl)
"""

import json
import re
import sys

# Numbers kept as they are: what a row measured, not what it found.
KEPT = ("kernels", "n")


def shape_value(key, v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        # An integer stays "#", a float (written with a point) "#.#".
        return v if key in KEPT else "#" if isinstance(v, int) else "#.#"
    if isinstance(v, list):
        return [shape_value(None, x) for x in v]
    if isinstance(v, dict):
        return {k: shape_value(k, x) for k, x in v.items()}
    return v


def shape_line(line):
    line = line.rstrip("\n")
    if line.startswith("{"):
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return json.dumps(shape_value(None, obj), ensure_ascii=False)
    line = re.sub(r"[+-]?\d+(\.\d+)?", "#", line)
    line = re.sub(r"-{2,}", "-", line)
    return re.sub(r" +", " ", line)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8", errors="replace") as f:
        for line in f:
            print(shape_line(line))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
