//! Plain-text tables (Markdown layout, so a log pastes into docs as is),
//! drawn by comfy-table.

use comfy_table::{presets, CellAlignment, Table as Inner};

/// How a column's cells are aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A table with a header row.
pub struct Table {
    inner: Inner,
    columns: usize,
}

impl Table {
    /// A table with these column headers and alignments (`align` may be
    /// shorter than `headers`: the rest are left-aligned).
    pub fn new(headers: &[&str], align: &[Align]) -> Table {
        let mut inner = Inner::new();
        inner.load_preset(presets::ASCII_MARKDOWN).set_header(headers.iter().copied());
        for (i, a) in align.iter().enumerate() {
            if let Some(col) = inner.column_mut(i) {
                col.set_cell_alignment(match a {
                    Align::Left => CellAlignment::Left,
                    Align::Right => CellAlignment::Right,
                });
            }
        }
        Table { inner, columns: headers.len() }
    }

    /// Appends a row; missing cells are left empty, extra ones dropped.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Table {
        let mut cells: Vec<String> = cells.into_iter().map(|c| one_line(&c.into())).collect();
        cells.resize(self.columns, String::new());
        self.inner.add_row(cells);
        self
    }

    /// The rendered table, one line per row, no trailing newline.
    pub fn render(&self) -> String {
        self.inner.to_string()
    }
}

/// `text` on one line: line breaks become spaces (a driver message with a
/// newline must not break the table).
pub fn one_line(text: &str) -> String {
    if text.contains(['\n', '\r']) {
        text.split(['\n', '\r']).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_markdown_table_with_aligned_columns() {
        let mut t = Table::new(&["name", "µs"], &[Align::Left, Align::Right]);
        t.row(["eager launch", "3.52"]).row(["graph launch", "31.30"]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("| name ") && lines[0].ends_with('|'), "{text}");
        assert!(lines[1].starts_with("|-") && !lines[1].contains(' '), "separator line: {text}");
        assert!(lines[2].contains("| eager launch |") && lines[2].contains("|  3.52 |"), "right-aligned: {text}");
        assert!(lines[3].contains("| 31.30 |"), "{text}");
        let widths: Vec<usize> = lines.iter().map(|l| l.chars().count()).collect();
        assert!(widths.iter().all(|&w| w == widths[0]), "every line equally wide: {text}");
    }

    #[test]
    fn rows_are_padded_or_cut_to_the_header() {
        let mut t = Table::new(&["a", "b", "c"], &[]);
        t.row(["1"]).row(["1", "2", "3", "4"]);
        let text = t.render();
        assert!(!text.contains('4'), "extra cell dropped: {text}");
        assert_eq!(text.lines().count(), 4);
    }

    #[test]
    fn cells_stay_on_one_line() {
        assert_eq!(one_line("a\nb\r\nc"), "a b c");
        assert_eq!(one_line("plain"), "plain");
        let mut t = Table::new(&["x"], &[]);
        t.row(["first\nsecond"]);
        assert_eq!(t.render().lines().count(), 3);
    }
}
