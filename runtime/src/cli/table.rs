//! Plain tables for the terminal.

use comfy_table::{ContentArrangement, Table, presets};
use serde_json::Value;

/// Prints `rows` (a JSON array) under `header`, one row per element via `cells`; an empty list
/// says so.
pub fn print(header: &[&str], rows: &Value, cells: impl Fn(&Value) -> Vec<String>) {
    let rows = rows.as_array().map(Vec::as_slice).unwrap_or_default();
    if rows.is_empty() {
        println!("(none)");
        return;
    }
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.to_vec());
    for r in rows {
        t.add_row(cells(r));
    }
    println!("{t}");
}
