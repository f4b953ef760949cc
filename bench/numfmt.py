"""Number formatting shared by bench/report.py and its table modules."""


def fmt_num(v):
    """A number with about four significant digits ("—" for none)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "—"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 10:
        return f"{v:.2f}"
    return f"{v:.3f}"
