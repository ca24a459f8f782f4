//! The layout docs/architecture.md promises, checked from the sources' own paths: which module
//! may import which, no import circle between files, and no source file over 900 lines.
//!
//! An arrow is drawn from a file to the file that defines what one of its paths names:
//! `use` trees (braces expanded), and `crate::`/`super::` paths written inline. A path that ends
//! at a module's `mod.rs` follows that file's `pub use` to the file that defines the name, so a
//! re-export draws no arrow of its own (within one top-level module: across modules, a
//! re-export is the re-exporting module's own offering). `#[cfg(test)]` modules at the end of a file are left
//! out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("daemon/ has a parent").to_path_buf()
}

/// The `.rs` files under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A file's code: comments dropped, string literals blanked, the trailing `#[cfg(test)]` module
/// cut off; nothing of a file that is a test module of its own (`#![cfg(test)]`).
fn code_of(text: &str) -> String {
    if text.lines().take_while(|l| l.starts_with("//!") || l.starts_with("#![")).any(|l| l == "#![cfg(test)]")
    {
        return String::new();
    }
    // The test module written in the file (`mod tests {`), not one declared there (`mod tests;`,
    // whose file is read as its own).
    let inline = |marker: &str| {
        text.match_indices(marker)
            .map(|(at, _)| at)
            .find(|&at| text[at + marker.len()..].lines().next().is_some_and(|line| line.contains('{')))
    };
    let text = match inline("#[cfg(test)]\nmod ").or_else(|| inline("#[cfg(test)]\npub mod ")) {
        Some(at) => &text[..at],
        None => text,
    };
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                out.push('"');
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        break;
                    }
                }
                out.push('"');
            }
            // A char literal (`'"'`, `'\\''`), which could hold a quote; a lifetime is no literal.
            '\'' => {
                let rest: Vec<char> = chars.clone().take(4).collect();
                let end = match rest.as_slice() {
                    ['\\', _, '\'', ..] => Some(3),
                    [_, '\'', ..] => Some(2),
                    _ => None,
                };
                match end {
                    Some(end) => {
                        for _ in 0..end {
                            chars.next();
                        }
                        out.push_str("' '");
                    }
                    None => out.push('\''),
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The paths a `use` tree names, braces expanded: `a::{b, c::{d, e as f}, self}` gives `a::b`,
/// `a::c::d`, `a::c::e`, `a`.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    fn split_top(list: &str) -> Vec<&str> {
        let (mut depth, mut from, mut parts) = (0, 0, Vec::new());
        for (at, c) in list.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&list[from..at]);
                    from = at + 1;
                }
                _ => {}
            }
        }
        parts.push(&list[from..]);
        parts
    }
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tree = tree.trim();
    if tree.is_empty() {
        return Vec::new();
    }
    if let Some(open) = tree.find('{') {
        let prefix: Vec<String> = tree[..open]
            .trim_end_matches("::")
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let inner = tree[open + 1..].trim_end().strip_suffix('}').unwrap_or(&tree[open + 1..]);
        let mut out = Vec::new();
        for part in split_top(inner) {
            for rest in expand_use(part) {
                let mut path = prefix.clone();
                if rest != ["self"] {
                    path.extend(rest);
                }
                out.push(path);
            }
        }
        return out;
    }
    let tree = tree.split(" as ").next().unwrap_or(tree);
    vec![tree.split("::").map(|s| s.trim().to_owned()).filter(|s| !s.is_empty() && s != "*").collect()]
}

/// The `use` trees of `code` and the inline `crate::`/`super::`/`self::` paths outside them.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest_of_code = String::new();
    let mut at = 0;
    let bytes = code.as_bytes();
    while at < code.len() {
        let starts_use = code[at..].starts_with("use ")
            && (at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_'));
        if starts_use && let Some(end) = code[at..].find(';') {
            paths.extend(expand_use(&code[at + 4..at + end]));
            at += end + 1;
            continue;
        }
        let c = code[at..].chars().next().unwrap_or(' ');
        rest_of_code.push(c);
        at += c.len_utf8();
    }
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in rest_of_code.match_indices(start) {
            let before = rest_of_code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: Vec<String> = rest_of_code[at..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            paths.push(path);
        }
    }
    paths
}

/// One crate's sources: each file's module path (`["provider", "index"]`), and its code.
struct Crate {
    src: PathBuf,
    files: BTreeMap<PathBuf, String>,
}

impl Crate {
    /// The library's modules under `src` (binaries' roots, `main.rs` and `bin/`, are left out
    /// when there is a `lib.rs`; their modules are read like the library's).
    fn read(src: &str) -> Crate {
        let src = workspace().join(src);
        let has_lib = src.join("lib.rs").is_file();
        let mut files = BTreeMap::new();
        for file in rust_files(&src) {
            let rel = file.strip_prefix(&src).expect("under src").to_path_buf();
            if has_lib && (rel == Path::new("main.rs") || rel.starts_with("bin")) {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("readable source");
            files.insert(rel, code_of(&text));
        }
        Crate { src, files }
    }

    /// The module path of a file relative to src.
    fn module(file: &Path) -> Vec<String> {
        let mut parts: Vec<String> = file.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        let last = parts.pop().unwrap_or_default();
        if last != "mod.rs" && last != "lib.rs" && last != "main.rs" {
            parts.push(last.trim_end_matches(".rs").to_owned());
        }
        parts
    }

    /// The file that holds module `module`, if any.
    fn file_of(&self, module: &[String]) -> Option<PathBuf> {
        if module.is_empty() {
            return ["lib.rs", "main.rs"].iter().map(PathBuf::from).find(|f| self.files.contains_key(f));
        }
        let base: PathBuf = module.iter().collect();
        let flat = base.with_extension("rs");
        let folder = base.join("mod.rs");
        [flat, folder].into_iter().find(|f| self.files.contains_key(f))
    }

    /// The file that defines what `path` (absolute, from the crate root) names: the deepest
    /// module on it, following that module's `pub use` of the next name.
    fn target(&self, path: &[String], depth: usize) -> Option<PathBuf> {
        let mut module: Vec<String> = Vec::new();
        let mut file = self.file_of(&module)?;
        for (i, segment) in path.iter().enumerate() {
            module.push(segment.clone());
            if let Some(deeper) = self.file_of(&module) {
                file = deeper;
                continue;
            }
            module.pop();
            // A re-export is followed inside its module only: what a module hands on from
            // another is its own offering (the context's `Version` is the context's).
            if depth < 8
                && let Some(reexport) = self.reexport(&file, &module, segment)
                && reexport.first() == module.first()
                && let Some(found) = self.target(&[reexport, path[i + 1..].to_vec()].concat(), depth + 1)
            {
                return Some(found);
            }
            break;
        }
        Some(file)
    }

    /// Where `file` (module `module`) re-exports `name` from, as an absolute path.
    fn reexport(&self, file: &Path, module: &[String], name: &str) -> Option<Vec<String>> {
        let code = self.files.get(file)?;
        for line in code.split(';') {
            let Some(at) = line.find("pub use ").or_else(|| line.find("pub(crate) use ")) else { continue };
            let tree = &line[line[at..].find("use ").map_or(at, |u| at + u) + 4..];
            let renamed = tree.contains(&format!(" as {name}"));
            for used in expand_use(tree) {
                if (used.last().is_some_and(|last| last == name) || renamed)
                    && let Some(path) = self.absolute(module, &used)
                {
                    return Some(path);
                }
            }
        }
        None
    }

    /// `path` as written in module `module`, made absolute (None for other crates' paths).
    fn absolute(&self, module: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut out: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => {
                let mut base = module.to_vec();
                let mut rest = path;
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            // A child module named without `self::`.
            name if self.file_of(&[module, &[name.to_owned()]].concat()).is_some() => module.to_vec(),
            _ => return None,
        };
        let skip = usize::from(first == "crate" || first == "self");
        out.extend(path[skip..].iter().cloned());
        Some(out)
    }

    /// Every arrow file -> file of this crate (no arrow from a file to itself or from a module
    /// folder's `mod.rs` to its own children: declaring and re-exporting them is what it is for).
    fn arrows(&self) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
        let mut arrows: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
        for (file, code) in &self.files {
            let module = Crate::module(file);
            let out = arrows.entry(file.clone()).or_default();
            for path in paths_in(code) {
                let Some(absolute) = self.absolute(&module, &path) else { continue };
                let Some(target) = self.target(&absolute, 0) else { continue };
                // A module's root declares and re-exports its children: no arrow.
                let is_root = file.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs");
                let own_child = is_root && target.starts_with(file.parent().unwrap_or(Path::new("")));
                if target != *file && !own_child {
                    out.insert(target);
                }
            }
        }
        arrows
    }

    /// The import circles among this crate's files: each strongly connected set of two or more.
    fn circles(&self) -> Vec<Vec<PathBuf>> {
        let arrows = self.arrows();
        strongly_connected(&arrows).into_iter().filter(|set| set.len() > 1).collect()
    }

    fn shown(&self, file: &Path) -> String {
        self.src.join(file).strip_prefix(workspace()).unwrap_or(file).display().to_string()
    }
}

/// Tarjan's strongly connected components of `arrows`.
fn strongly_connected(arrows: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'a> {
        arrows: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        next: usize,
        sets: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.arrows.get(v).into_iter().flatten() {
            if !s.arrows.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                set.push(w.clone());
                if w == v {
                    break;
                }
            }
            set.sort();
            s.sets.push(set);
        }
    }
    let mut s = State {
        arrows,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        sets: Vec::new(),
    };
    for v in arrows.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.sets
}

/// The daemon's crates as the checks read them.
fn daemon() -> Crate {
    Crate::read("daemon/src")
}

fn assert_no_circles(krate: &Crate) {
    let circles: Vec<String> = krate
        .circles()
        .iter()
        .map(|set| set.iter().map(|f| krate.shown(f)).collect::<Vec<_>>().join(" <-> "))
        .collect();
    assert!(
        circles.is_empty(),
        "import circles (break each by moving the shared piece down):\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_layout_checks_see_what_they_look_for() {
    assert_eq!(
        expand_use("crate::provider::{self, cache::Entry, read::{a, b as c}}"),
        [
            vec!["crate", "provider"],
            vec!["crate", "provider", "cache", "Entry"],
            vec!["crate", "provider", "read", "a"],
            vec!["crate", "provider", "read", "b"],
        ]
    );
    let code = code_of(
        "use a::b; // use c::d;\nlet s = \"crate::x\"; crate::y::z();\n#[cfg(test)]\nmod tests { use crate::w; }",
    );
    assert_eq!(paths_in(&code), [vec!["a", "b"], vec!["crate", "y", "z"]]);
    // A test module declared in the file (its own file read apart) cuts nothing off.
    let code =
        code_of("#[cfg(test)]\nmod tests;\nuse crate::v;\n#[cfg(test)]\nmod more {\n use crate::w;\n}");
    assert_eq!(paths_in(&code), [vec!["crate", "v"]]);
    let mut arrows = BTreeMap::new();
    let [a, b, c] = ["a", "b", "c"].map(PathBuf::from);
    arrows.insert(a.clone(), BTreeSet::from([b.clone()]));
    arrows.insert(b.clone(), BTreeSet::from([a.clone(), c.clone()]));
    arrows.insert(c.clone(), BTreeSet::new());
    let sets = strongly_connected(&arrows);
    assert!(sets.contains(&vec![a, b]) && sets.contains(&vec![c]), "{sets:?}");
    // The daemon's own tree: a known arrow is seen through a re-export.
    let krate = daemon();
    let arrows = krate.arrows();
    assert!(
        arrows.values().flatten().any(|t| t.starts_with("provider")),
        "no arrow into provider/ was found: the path reader is broken"
    );
}

#[test]
fn no_import_circles_in_the_daemon() {
    assert_no_circles(&daemon());
}

#[test]
fn no_import_circles_in_the_client() {
    assert_no_circles(&Crate::read("client/rust/src"));
}

#[test]
fn no_import_circles_in_the_protocol() {
    assert_no_circles(&Crate::read("protocol/src"));
}

#[test]
fn no_source_file_is_over_900_lines() {
    let mut long = Vec::new();
    for src in ["daemon/src", "protocol/src", "client/rust/src"] {
        for file in rust_files(&workspace().join(src)) {
            let name = file.file_name().unwrap_or_default().to_string_lossy();
            if name.ends_with("tests.rs") || file.components().any(|c| c.as_os_str() == "tests") {
                continue;
            }
            let lines = std::fs::read_to_string(&file).expect("readable source").lines().count();
            if lines > 900 {
                long.push(format!(
                    "{}: {lines} lines",
                    file.strip_prefix(workspace()).unwrap_or(&file).display()
                ));
            }
        }
    }
    assert!(long.is_empty(), "split these by job (at most 900 lines a file):\n{}", long.join("\n"));
}

/// The types a crate's code declares beyond its file (`pub`, `pub(crate)`, `pub(super)`, …):
/// name to the files declaring one so named.
fn public_types(krate: &Crate) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (file, code) in &krate.files {
        for line in code.lines() {
            let Some(rest) = line.trim_start().strip_prefix("pub") else { continue };
            let rest = match rest.strip_prefix('(') {
                Some(inner) => match inner.split_once(')') {
                    Some((_, after)) => after,
                    None => continue,
                },
                None => rest,
            };
            let mut words = rest.split_whitespace();
            if !matches!(words.next(), Some("struct" | "enum" | "type" | "trait")) {
                continue;
            }
            let Some(name) = words.next() else { continue };
            let name: String = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.entry(name).or_default().push(krate.shown(file));
            }
        }
    }
    out
}

#[test]
fn no_two_daemon_types_share_a_name() {
    let twice: Vec<String> = public_types(&daemon())
        .into_iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(name, files)| format!("{name}: {}", files.join(", ")))
        .collect();
    assert!(
        twice.is_empty(),
        "each type the daemon's modules share has one meaning, so one name; these name several:\n{}",
        twice.join("\n")
    );
}

/// The fields of `struct name` as `file`'s code declares it: (name, type) pairs.
fn fields_of(krate: &Crate, file: &str, name: &str) -> Vec<(String, String)> {
    let code = &krate.files[Path::new(file)];
    let start =
        code.find(&format!("pub struct {name}")).unwrap_or_else(|| panic!("no struct {name} in {file}"));
    let body = &code[start..];
    let open = body.find('{').expect("a struct with fields");
    let close = body.find("\n}").expect("the struct ends");
    body[open + 1..close]
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub ").or(Some(line.trim())))
        .filter(|line| !line.starts_with("//") && !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .map(|(field, ty)| (field.trim().to_owned(), ty.trim().trim_end_matches(',').to_owned()))
        .collect()
}

/// How a call runs (at once, or on the pool through the gates) is the runner's choice, handed to
/// each call: the file context holds none. Its one flag is the session's read-only permission.
#[test]
fn the_file_context_holds_no_mode() {
    let fields = fields_of(&daemon(), "context/mod.rs", "FileContext");
    assert!(fields.iter().any(|(name, _)| name == "provider"), "the field reader is broken: {fields:?}");
    let modes: Vec<String> = fields
        .iter()
        .filter(|(name, ty)| {
            (ty == "bool" && name != "read_only")
                || ["Gatekeeper", "How", "Keeper"].iter().any(|t| ty.contains(t))
        })
        .map(|(name, ty)| format!("{name}: {ty}"))
        .collect();
    assert!(
        modes.is_empty(),
        "FileContext fields that select a mode (pass it to the call instead): {modes:?}"
    );
}

/// The provider offers one entry per operation; its fast paths (a warm read, a read or edit at
/// once, the warm read of what resolution opened) are private strategies that entry picks
/// from, at the pace its caller gives, and a gated change's first step is one `prepare` of
/// either change.
#[test]
fn the_provider_has_one_entry_per_operation() {
    let krate = daemon();
    let mut strategies = Vec::new();
    for (file, code) in krate.files.iter().filter(|(file, _)| file.starts_with("provider")) {
        for line in code.lines() {
            let Some(name) = line.trim().strip_prefix("pub fn ") else { continue };
            let name: String = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let strategy = ["read_opened", "read_cached", "prepare_edit", "prepare_write"];
            if name.ends_with("_at_once") || strategy.contains(&name.as_str()) {
                strategies.push(format!("{}: {name}", krate.shown(file)));
            }
        }
    }
    assert!(
        strategies.is_empty(),
        "fast paths offered beside their operation's entry (make them its private strategies): {strategies:?}"
    );
}

/// A search tells a binary file one way (`provider::searched::is_binary` and its `BINARY_BYTE`):
/// the searches' code (tools/, listing/) looks for no NUL byte of its own.
#[test]
fn a_search_tells_a_binary_file_one_way() {
    let krate = daemon();
    let own: Vec<String> = krate
        .files
        .iter()
        .filter(|(file, _)| ["tools", "listing", "search"].iter().any(|m| file.starts_with(m)))
        .filter(|(_, code)| code.contains("memchr(0") || code.contains(r"b'\x00'") || code.contains("quit(0"))
        .map(|(file, _)| krate.shown(file))
        .collect();
    assert!(own.is_empty(), "binary files found by a NUL byte of their own (use is_binary): {own:?}");
    let defined = krate.files.values().filter(|code| code.contains("pub fn is_binary(")).count();
    assert_eq!(defined, 1, "one is_binary");
}

/// The search tools turn arguments into a query and finds into text, nothing more: the engine
/// that probes files on threads a batch at a time, reads them in pieces and runs the regex and
/// the globs lives beneath the file context, in `search/`.
#[test]
fn the_search_tools_run_no_search_engine() {
    let krate = daemon();
    let machinery = [
        "std::thread",
        "thread::scope",
        "AtomicUsize",
        "Mutex",
        "batches(",
        "probe_all",
        "pieces::",
        "grep_searcher",
        "grep_regex",
        "globset",
        "ignore::",
    ];
    let found: Vec<String> = krate
        .files
        .iter()
        .filter(|(file, _)| file.starts_with("tools"))
        .flat_map(|(file, code)| {
            machinery.iter().filter(|m| code.contains(*m)).map(|m| format!("{}: {m}", krate.shown(file)))
        })
        .collect();
    assert!(found.is_empty(), "tools/ runs search machinery (it belongs in search/):\n{}", found.join("\n"));
}

/// Only the runner (`rpc/run.rs`) holds the gates for a call, with the one `Gates::hold`, which
/// also says whether a call may run at once and hands it `How` as a value (the gates run no
/// closure of the call's): no second entry beside it.
#[test]
fn only_the_runner_runs_the_gates() {
    let krate = daemon();
    let callers: Vec<String> = krate
        .files
        .iter()
        .filter(|(_, code)| code.contains("gates.hold(") || code.contains("gates.run("))
        .map(|(file, _)| krate.shown(file))
        .collect();
    assert_eq!(callers, ["daemon/src/rpc/run.rs"], "Gates::hold is the runner's");
    let gates = &krate.files[Path::new("gate/mod.rs")];
    let entries: Vec<&str> = gates
        .lines()
        .map(str::trim)
        .filter(|line| {
            ["pub fn run", "pub(crate) fn run", "pub fn hold", "pub(crate) fn hold"]
                .iter()
                .any(|p| line.starts_with(p))
        })
        .collect();
    assert_eq!(
        entries,
        ["pub fn hold(&self, at_once: bool) -> Option<HeldGates<'_>> {"],
        "one way to hold the gates for a call"
    );
}

/// Every handler names the operation its request starts, and the runner alone decides where it
/// runs (one `match` with a case per operation, none by default) and takes its slot.
#[test]
fn a_request_starts_an_operation_the_runner_places() {
    let krate = daemon();
    let runner = Path::new("rpc/run.rs");
    let mut wrong = Vec::new();
    for (file, code) in &krate.files {
        // debug/hold (test hooks) holds a slot on purpose, to see who waits for one.
        if file != runner && file != Path::new("rpc/test_hooks.rs") && code.contains("_work.acquire(") {
            wrong.push(format!("{}: takes a slot itself", krate.shown(file)));
        }
        for (at, _) in code.match_indices("run(&ctx, &ext, ") {
            let rest = &code[at + "run(&ctx, &ext, ".len()..];
            if file.starts_with("rpc") && !rest.starts_with("Op::") && !rest.starts_with("super::run::Op::") {
                wrong.push(format!("{}: runs work without naming its Op", krate.shown(file)));
            }
        }
    }
    let code = &krate.files[runner];
    let plan = code
        .split_once("fn of(op: Op, edits_at_once: bool) -> Self {")
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let plan = plan.split_once("\n    }\n").map(|(body, _)| body).unwrap_or_default();
    assert!(plan.contains("match op {"), "Plan::of is not found in rpc/run.rs");
    if plan.contains("_ =>") {
        wrong.push("rpc/run.rs: Plan::of places some operations by default".to_owned());
    }
    assert!(wrong.is_empty(), "operations placed outside the runner:\n{}", wrong.join("\n"));
}

/// The top-level module a file of `src` belongs to (`provider` for `provider/index.rs`, `json`
/// for `json.rs`).
fn top_module(file: &Path) -> String {
    let first = file.iter().next().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    first.trim_end_matches(".rs").to_owned()
}

/// Which top-level module imports which (arrows inside a module left out).
fn module_arrows(krate: &Crate) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, targets) in krate.arrows() {
        let from = top_module(&file);
        let entry = out.entry(from.clone()).or_default();
        for target in targets {
            let to = top_module(&target);
            if to != from {
                entry.insert(to);
            }
        }
    }
    out
}

/// The daemon's modules from the ground up: a module imports only modules on floors below its
/// own (docs/architecture.md, "Codemap", tells what each is for).
const FLOORS: &[&[&str]] = &[
    &["json", "lru", "random", "memory", "stats", "descriptors", "listen", "xdg"],
    &["provider"],
    &["listing", "journal", "lsp", "search"],
    &["context"],
    &["watch"],
    &["session"],
    &["gate", "tools"],
    &["config"],
    &["rpc", "cli"],
    &["transport"],
    &["server"],
    &["fuzzing", "lib"],
];

#[test]
fn daemon_modules_import_only_the_floors_below_them() {
    let floor_of = |module: &str| FLOORS.iter().position(|floor| floor.contains(&module));
    let mut wrong = Vec::new();
    for (from, targets) in module_arrows(&daemon()) {
        let Some(at) = floor_of(&from) else {
            wrong.push(format!("{from}: a module on no floor (add it to FLOORS and the codemap)"));
            continue;
        };
        for to in targets {
            match floor_of(&to) {
                Some(below) if below < at => {}
                _ => wrong.push(format!("{from} -> {to}")),
            }
        }
    }
    assert!(wrong.is_empty(), "arrows that do not run down the floors:\n{}", wrong.join("\n"));
}

#[test]
fn a_daemon_setting_is_one_row_of_the_settings_table() {
    let home = Path::new("cli/args.rs");
    let krate = daemon();
    let mut found = Vec::new();
    for (file, code) in &krate.files {
        let defines_flags =
            code.contains("#[arg(") || code.contains("derive(Parser") || code.contains("clap::Parser");
        // The config file is read into `Args`, and `--print-config` prints `Settings`: both made
        // from the table, so no other settings file names serde.
        let defines_keys =
            file.starts_with("cli") && (code.contains("Serialize") || code.contains("Deserialize"));
        let merges =
            code.contains("struct Settings") || (file.starts_with("cli") && code.contains("fn over("));
        if file != home && (defines_flags || defines_keys || merges) {
            found.push(krate.shown(file));
        }
    }
    let table = &krate.files[home];
    assert!(table.contains("settings_table! {"), "daemon/src/cli/args.rs holds no settings table");
    assert!(
        found.is_empty(),
        "a setting (its name, type, default, check, help, flag, env and config key) is one row of \
         the settings table in daemon/src/cli/args.rs, which makes the flags, the config file's \
         keys, `--print-config` and their merge; these define settings too:\n{}",
        found.join("\n")
    );
}

/// The `#[test]` functions of a test file's text.
fn test_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut after_attribute = false;
    for line in text.lines().map(str::trim) {
        if line == "#[test]" {
            after_attribute = true;
        } else if after_attribute && let Some(rest) = line.strip_prefix("fn ") {
            names.insert(rest.split('(').next().unwrap_or_default().to_owned());
            after_attribute = false;
        }
    }
    names
}

#[test]
fn the_architecture_lists_every_tidy_check() {
    let doc =
        std::fs::read_to_string(workspace().join("docs/architecture.md")).expect("docs/architecture.md");
    let start = doc
        .find("### The layout, as the tidy tests check it")
        .expect("the layout's invariants in docs/architecture.md");
    let end = doc[start..].find("\n### ").map_or(doc.len(), |end| start + end);
    let listed: BTreeSet<String> = doc[start..end]
        .split("(`")
        .skip(1)
        .filter_map(|rest| rest.split("`)").next())
        .filter(|name| name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
        .map(str::to_owned)
        .collect();
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut tests = BTreeSet::new();
    for file in ["tidy.rs", "layout.rs"] {
        tests.extend(test_names(&std::fs::read_to_string(here.join(file)).expect("a tidy test file")));
    }
    // The checks of the checks themselves are no invariants.
    for meta in [
        "the_checks_see_what_they_look_for",
        "the_layout_checks_see_what_they_look_for",
        "the_architecture_lists_every_tidy_check",
    ] {
        tests.remove(meta);
    }
    let missing: Vec<_> = tests.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&tests).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/architecture.md's layout invariants and the tidy tests differ: tests not listed {missing:?}, listed but no test {stale:?}"
    );
}
