//! The generated projects of the language-server bench: `modules` Python modules beside a
//! `pyproject.toml` (basedpyright, standard checking), or as many TypeScript files under `src/`
//! beside a strict `tsconfig.json`. Module `i` imports from modules `i - 1` and `i / 2` (so the
//! imports form no cycle and reach most of the project), and holds a typed record class, typed
//! functions calling its imports, and a typed constant: about 45 lines each. Every module is
//! clean as generated.

use std::path::{Path, PathBuf};

/// A language of the bench, with its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    /// Python, checked by basedpyright.
    Python,
    /// TypeScript, checked by typescript-language-server (its tsserver).
    TypeScript,
}

impl Lang {
    /// The server's short name, as the daemon's answers give it.
    pub fn server(self) -> &'static str {
        match self {
            Self::Python => "basedpyright",
            Self::TypeScript => "typescript",
        }
    }

    /// The LSP `languageId` of its files.
    pub fn language_id(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::TypeScript => "typescript",
        }
    }

    /// Where module `stem` (`m042`) lies in a project, relative to its root.
    pub fn relative(self, stem: &str) -> String {
        match self {
            Self::Python => format!("{stem}.py"),
            Self::TypeScript => format!("src/{stem}.ts"),
        }
    }

    /// Module `stem`'s path under `project`.
    pub fn path(self, project: &Path, stem: &str) -> PathBuf {
        project.join(self.relative(stem))
    }
}

/// The stem of module `i`.
pub fn stem(i: usize) -> String {
    format!("m{i:03}")
}

/// The modules module `i` imports from (none for the first; one when both are the same).
fn imports(i: usize) -> Vec<usize> {
    match i {
        0 => Vec::new(),
        1 => vec![0],
        _ => vec![i - 1, i / 2],
    }
}

/// Module `i`'s text.
pub fn module(lang: Lang, i: usize) -> String {
    match lang {
        Lang::Python => python(i),
        Lang::TypeScript => typescript(i),
    }
}

fn python(i: usize) -> String {
    let deps = imports(i);
    let mut out =
        format!("\"\"\"Module {i}: records and helpers.\"\"\"\n\nfrom dataclasses import dataclass\n");
    if !deps.is_empty() {
        out.push('\n');
    }
    for (n, d) in deps.iter().enumerate() {
        let names = if n == 0 { format!("Rec{d:03}, f{d:03}") } else { format!("f{d:03}") };
        out.push_str(&format!("from m{d:03} import {names}\n"));
    }
    let call = match deps.as_slice() {
        [] => "rec.total(x)".to_owned(),
        [a] => format!("rec.total(f{a:03}(x, label))"),
        [a, b, ..] => format!("rec.total(f{a:03}(x, label)) + f{b:03}(x + 1, label)"),
    };
    let other = deps.first().map_or(format!("Rec{i:03}"), |a| format!("Rec{a:03}"));
    out.push_str(&format!(
        r#"

@dataclass
class Rec{i:03}:
    name: str
    count: int

    def total(self, extra: int) -> int:
        return self.count + extra

    def label(self) -> str:
        return f"{{self.name}}:{{self.count}}"

    def scaled(self, factor: float) -> float:
        return self.count * factor


def f{i:03}(x: int, label: str) -> int:
    rec = Rec{i:03}(label, x)
    return {call}


def g{i:03}(items: list[int]) -> dict[str, int]:
    out: dict[str, int] = {{}}
    for n, value in enumerate(items):
        out[f"k{{n}}"] = value * {i}
    return out


def h{i:03}(rec: {other}, scale: float) -> float:
    return rec.total(1) * scale


def names{i:03}(recs: list[Rec{i:03}]) -> list[str]:
    return [rec.label() for rec in recs if rec.count > {i}]


LIMIT_{i:03}: int = {i} * 7
"#
    ));
    out
}

fn typescript(i: usize) -> String {
    let deps = imports(i);
    let mut out = format!("// Module {i}: records and helpers.\n");
    for (n, d) in deps.iter().enumerate() {
        let names = if n == 0 { format!("Rec{d:03}, f{d:03}") } else { format!("f{d:03}") };
        out.push_str(&format!("import {{ {names} }} from \"./m{d:03}\";\n"));
    }
    let call = match deps.as_slice() {
        [] => "rec.total(x)".to_owned(),
        [a] => format!("rec.total(f{a:03}(x, label))"),
        [a, b, ..] => format!("rec.total(f{a:03}(x, label)) + f{b:03}(x + 1, label)"),
    };
    let other = deps.first().map_or(format!("Rec{i:03}"), |a| format!("Rec{a:03}"));
    out.push_str(&format!(
        r#"
export class Rec{i:03} {{
  constructor(
    public name: string,
    public count: number,
  ) {{}}

  total(extra: number): number {{
    return this.count + extra;
  }}

  label(): string {{
    return `${{this.name}}:${{this.count}}`;
  }}

  scaled(factor: number): number {{
    return this.count * factor;
  }}
}}

export function f{i:03}(x: number, label: string): number {{
  const rec = new Rec{i:03}(label, x);
  return {call};
}}

export function g{i:03}(items: number[]): Record<string, number> {{
  const out: Record<string, number> = {{}};
  items.forEach((value, n) => {{
    out[`k${{n}}`] = value * {i};
  }});
  return out;
}}

export function h{i:03}(rec: {other}, scale: number): number {{
  return rec.total(1) * scale;
}}

export function names{i:03}(recs: Rec{i:03}[]): string[] {{
  return recs.filter((rec) => rec.count > {i}).map((rec) => rec.label());
}}

export const LIMIT_{i:03}: number = {i} * 7;
"#
    ));
    out
}

/// Writes the project of `lang` with `modules` modules at `dir` (created).
pub fn write(lang: Lang, dir: &Path, modules: usize) {
    match lang {
        Lang::Python => {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(
                dir.join("pyproject.toml"),
                "[project]\nname = \"bench\"\nversion = \"0.1.0\"\n\n[tool.basedpyright]\ntypeCheckingMode = \"standard\"\n",
            )
            .unwrap();
        }
        Lang::TypeScript => {
            std::fs::create_dir_all(dir.join("src")).unwrap();
            std::fs::write(
                dir.join("tsconfig.json"),
                "{\n  \"compilerOptions\": {\"strict\": true, \"noEmit\": true, \"target\": \"es2022\", \"module\": \"es2022\", \"moduleResolution\": \"bundler\"},\n  \"include\": [\"src\"]\n}\n",
            )
            .unwrap();
        }
    }
    for i in 0..modules {
        std::fs::write(lang.path(dir, &stem(i)), module(lang, i)).unwrap();
    }
}
