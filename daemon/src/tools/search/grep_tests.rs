//! Tests of grep's answer building: offsets, heads, budgets, footers.
#![cfg(test)]

use super::*;

#[test]
fn lines_are_cut_and_cleaned() {
    assert_eq!(line_text(b"\xEF\xBB\xBFfn main() {\r\n", true), "fn main() {");
    let long = "x".repeat(2500);
    let cut = line_text(long.as_bytes(), false);
    assert_eq!(cut, format!("{}{CUT_SUFFIX}", "x".repeat(2000)));
}

#[test]
fn a_search_out_of_time_says_how_much_it_searched() {
    let spec = GrepSpec {
        pattern: "x",
        glob: None,
        file_type: None,
        mode: GrepMode::Count,
        case_insensitive: false,
        context: 0,
        multiline: true,
    };
    let req = GrepRequest { spec, path: None, head_limit: None, offset: 0, budget: 1024, escaped: false };
    let mut out = Out { room: 1000, ..Out::default() };
    out.entry("a.txt:3");
    let end = GrepEnd { too_big: 2, timed_out: Some((7, 9)), ..GrepEnd::default() };
    expect_test::expect![[r#"
        a.txt:3

        (The search stopped at its time limit of 0.5 s with 7 of 9 files searched: more matches may exist. Narrow the path, glob or type, or simplify the pattern.)

        (2 files over 16 MiB were not searched: a multiline search reads each file whole. Search them without multiline.)"#]]
    .assert_eq(&finish(out, &req, &end, "0.5 s"));
}

#[test]
fn entries_respect_offset_head_and_budget() {
    let mut out = Out { room: 10, offset: 1, head: Some(2), ..Out::default() };
    assert!(out.entry("skip"));
    assert!(out.entry("abc"));
    assert!(out.entry("this is too long"));
    assert!(out.capped && out.hidden == 1 && out.shown == 1);
    let mut out = Out { room: 100, head: Some(1), ..Out::default() };
    assert!(out.entry("a"));
    assert!(!out.entry("b"));
    assert!(out.head_reached);
}

/// A first entry longer than the budget is cut to fit (the next page starts past it);
/// under a JSON budget its escapes count.
#[test]
fn a_first_entry_over_the_budget_is_cut_to_fit() {
    for escaped in [false, true] {
        let mut out = Out { room: 100, escaped, ..Out::default() };
        let line = format!("7\t{}", "\u{1}x".repeat(200));
        assert!(out.entry(&line));
        assert_eq!((out.shown, out.hidden), (1, 0), "escaped: {escaped}");
        assert!(out.used <= 100 && out.text.contains("... (line truncated to "), "{:?}", out.text);
        let shown_len = if escaped { crate::json::escaped_len(&out.text) } else { out.text.len() };
        assert!(shown_len <= 100, "{shown_len}");
        assert!(out.entry("next") && out.capped, "later entries are hidden as before");
    }
}
