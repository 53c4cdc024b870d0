//! A table as data, written as aligned text (stdout), Markdown or HTML: every lab report's
//! tables go through it, so the three renderings never disagree.

use std::fmt::Write as _;

/// A table as data: one header, rows of cells; the first `left` columns are left-aligned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub left: usize,
}

impl Table {
    pub fn new(header: &[&str], left: usize) -> Table {
        Table {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
            left,
        }
    }

    pub fn text(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .chain([self.header[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, cell) in cells.iter().enumerate() {
                let pad = " ".repeat(widths[i].saturating_sub(cell.chars().count()));
                if i < self.left {
                    let _ = write!(s, "{cell}{pad}  ");
                } else {
                    let _ = write!(s, "{pad}{cell}  ");
                }
            }
            s.trim_end().to_owned() + "\n"
        };
        let mut out = line(&self.header);
        for row in &self.rows {
            out += &line(row);
        }
        out
    }

    pub fn markdown(&self) -> String {
        let mut md = format!("| {} |\n|", self.header.join(" | "));
        for i in 0..self.header.len() {
            md += if i < self.left { "---|" } else { "---:|" };
        }
        md.push('\n');
        for row in &self.rows {
            let _ = writeln!(md, "| {} |", row.join(" | "));
        }
        md
    }

    pub fn html(&self) -> String {
        let mut h = String::from("<table><tr>");
        for c in &self.header {
            let _ = write!(h, "<th>{}</th>", esc(c));
        }
        h += "</tr>\n";
        for row in &self.rows {
            h += "<tr>";
            for (i, c) in row.iter().enumerate() {
                let align = if i < self.left { " class=\"l\"" } else { "" };
                let _ = write!(h, "<td{align}>{}</td>", esc(c));
            }
            h += "</tr>\n";
        }
        h + "</table>\n"
    }
}

/// Text made safe inside HTML elements and attributes.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
