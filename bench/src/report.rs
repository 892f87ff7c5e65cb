//! The table on stdout and BENCHMARKS.md: a header with the machine, the summary table (each
//! figure with its goal and the command that gives it), then one section per measure.
//! Sections of BENCHMARKS.md this tool does not write (e.g. a "Fault suite" section added
//! by another tool) are kept, after ours.

use std::path::Path;

use crate::util::{Ctx, Res};

/// Titles of the sections this tool writes, in order.
pub const OWN_SECTIONS: &[&str] = &[
    "Encode overhead",
    "Encode time and parallel segments",
    "Stream rules in the one pass",
    "Two nodes, one job",
    "Quality targeting: CRF search against ab-av1",
    "Probing",
    "Library health checks",
    "Analysis at scan speed",
    "Library scan",
    "API",
    "WebSocket fan-out",
    "Memory",
    "How the figures are made",
];

pub struct Row {
    pub measure: String,
    pub figure: String,
    pub goal: String,
    pub command: String,
}

pub struct Section {
    pub title: &'static str,
    pub body: String,
}

#[derive(Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub sections: Vec<Section>,
    pub failures: Vec<String>,
}

impl Report {
    /// Adds a row and prints it at once.
    pub fn row(&mut self, measure: impl Into<String>, figure: impl Into<String>, goal: &str, command: &str) {
        let row =
            Row { measure: measure.into(), figure: figure.into(), goal: goal.to_string(), command: command.into() };
        let goal = if row.goal.is_empty() { String::new() } else { format!("goal {}", row.goal) };
        println!("{:<58} {:>30}   {goal}", row.measure, row.figure);
        self.rows.push(row);
    }

    pub fn section(&mut self, title: &'static str, body: String) {
        self.sections.push(Section { title, body });
    }

    pub fn failed(&mut self, measure: &str, error: &str) {
        println!("{measure:<58} {:>30}   {error}", "FAILED");
        self.failures.push(format!("{measure}: {error}"));
    }

    /// The whole BENCHMARKS.md, keeping foreign sections of `previous`.
    pub fn markdown(&self, header: &str, previous: &str) -> String {
        let mut out = String::new();
        out.push_str("# Benchmarks\n\n");
        out.push_str(header);
        out.push_str("\n\n| measure | figure | goal | command |\n|---|---|---|---|\n");
        for r in &self.rows {
            let cell = |s: &str| s.replace('|', "\\|");
            out.push_str(&format!(
                "| {} | {} | {} | `{}` |\n",
                cell(&r.measure),
                cell(&r.figure),
                cell(&r.goal),
                cell(&r.command)
            ));
        }
        if !self.failures.is_empty() {
            out.push_str("\nFailed in this run:\n\n");
            for f in &self.failures {
                out.push_str(&format!("- {f}\n"));
            }
        }
        for s in &self.sections {
            out.push_str(&format!("\n## {}\n\n{}\n", s.title, s.body.trim_end()));
        }
        for foreign in foreign_sections(previous) {
            out.push('\n');
            out.push_str(foreign.trim_end());
            out.push('\n');
        }
        out
    }

    pub fn write(&self, path: &Path, header: &str) -> Res<()> {
        let previous = std::fs::read_to_string(path).unwrap_or_default();
        std::fs::write(path, self.markdown(header, &previous)).ctx(&format!("writing {}", path.display()))
    }
}

/// `## ` sections of an earlier BENCHMARKS.md whose titles are not ours.
fn foreign_sections(previous: &str) -> Vec<String> {
    let mut sections: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in previous.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            if let Some(done) = current.take() {
                sections.push(done);
            }
            if !OWN_SECTIONS.contains(&title.trim()) {
                current = Some(String::new());
            }
        }
        if let Some(text) = current.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    sections.extend(current);
    sections
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_of_other_tools_are_kept_and_ours_replaced() {
        let previous = "# Benchmarks\n\nold header\n\n## Probing\n\nold probing\n\n## Fault suite\n\nkill -9 …\n\n| a |\n\n## API\n\nold api\n";
        let mut report = Report::default();
        report.rows.push(Row { measure: "m".into(), figure: "1 | 2".into(), goal: "< 3".into(), command: "c".into() });
        report.section("Probing", "new probing".into());
        let text = report.markdown("header", previous);
        assert!(text.starts_with("# Benchmarks\n\nheader\n\n| measure |"), "{text}");
        assert!(text.contains("| m | 1 \\| 2 | < 3 | `c` |"), "{text}");
        assert!(text.contains("## Probing\n\nnew probing\n"), "{text}");
        assert!(!text.contains("old probing") && !text.contains("old api"), "{text}");
        assert!(text.ends_with("\n## Fault suite\n\nkill -9 …\n\n| a |\n"), "{text}");
    }
}
