#!/usr/bin/env python3
"""Tests of bench/row_shape.py: the shape of an fc-bench output keeps
row names, field order and non-numeric values and drops measurements.
Run by scripts/test.sh:
  python3 -m unittest discover -s bench -p 'test_*.py'
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from row_shape import shape_line  # noqa: E402


class RowShape(unittest.TestCase):
    def test_json_rows_keep_names_order_and_words(self):
        a = shape_line('{"impl":"fc","row":"step_x_fc","kernels":26,"median_us":1.5,"n":40,"build":"release","pdl":true}')
        b = shape_line('{"impl":"fc","row":"step_x_fc","kernels":26,"median_us":2.25,"n":40,"build":"release","pdl":true}')
        self.assertEqual(a, b)
        self.assertEqual(
            a, '{"impl": "fc", "row": "step_x_fc", "kernels": 26, "median_us": "#.#", "n": 40, "build": "release", "pdl": true}'
        )
        # Another field order, K or sample count is another shape.
        self.assertNotEqual(a, shape_line('{"impl":"fc","kernels":26,"row":"step_x_fc","median_us":1.5,"n":40}'))
        self.assertNotEqual(a, shape_line('{"impl":"fc","row":"step_x_fc","kernels":260,"median_us":1.5,"n":40}'))
        self.assertEqual(
            shape_line('{"row":"r","per_device":[1.5,2],"bytes":7,"p":null}'),
            '{"row": "r", "per_device": ["#.#", "#"], "bytes": "#", "p": null}',
        )
        # A float written as an integer is another format.
        self.assertNotEqual(shape_line('{"row":"r","mib":1.0}'), shape_line('{"row":"r","mib":1}'))

    def test_text_lines_lose_numbers_and_padding(self):
        a = shape_line("[fc] step_capture_begin_fc     K=26    median      1.234 us  (p10      1.100, p90     12.000, n=40)\n")
        b = shape_line("[fc] step_capture_begin_fc     K=26    median     11.234 us  (p10     -0.100, p90      2.000, n=40)\n")
        self.assertEqual(a, b)
        self.assertEqual(shape_line("|------|---|"), shape_line("|--|-----|"))
        self.assertNotEqual(shape_line("| capture begin | 26 |"), shape_line("| capture end | 26 |"))


if __name__ == "__main__":
    unittest.main()
