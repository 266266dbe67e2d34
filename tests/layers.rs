//! The layers point one way: no import circle between files of src/ spans two top-level modules,
//! and none has more than six files. The imports are read from the code itself (every `crate::`,
//! `super::`, `self::` and child-module path, in `use` statements and inline, `use` trees expanded,
//! re-exports followed to the file that defines the name; a `pub(in …)` visibility is no import),
//! so that a knot like the 42-file one cannot grow back unnoticed.
//! Test modules inside a file (`#[cfg(test)]`) are left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Most files one import circle may have.
const MOST_FILES: usize = 6;

#[test]
fn no_import_circle_crosses_two_modules_or_exceeds_six_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let house = House::read(&root);
    let circles = house.circles();
    let bad: Vec<String> = circles
        .iter()
        .filter(|c| c.len() > MOST_FILES || tops(c).len() > 1)
        .map(|c| c.join(", "))
        .collect();
    for circle in &circles {
        println!("circle of {}: {}", circle.len(), circle.join(", "));
        // Its imports, for whoever unties it.
        for file in circle {
            let within: Vec<String> = house
                .imports(file)
                .into_iter()
                .filter(|target| circle.contains(target))
                .collect();
            println!("  {file} -> {}", within.join(", "));
        }
    }
    assert!(
        bad.is_empty(),
        "import circles that span two top-level modules of src/ or have more than {MOST_FILES} files:\n{}",
        bad.join("\n")
    );
    // The reader sees the imports at all: reconciliation reads the gates, the facts, retrieval (a
    // re-export of memory/retrieval.rs, followed) and the store.
    let read = house.imports("postprocess/reconcile.rs");
    for wanted in [
        "postprocess/gates.rs",
        "postprocess/fact.rs",
        "memory/retrieval.rs",
        "store/mod.rs",
    ] {
        assert!(read.contains(wanted), "{wanted} not in {read:?}");
    }
}

#[test]
fn the_check_finds_a_circle_through_a_re_export_and_a_use_tree() {
    let (dir, write) = scratch("memproxy-layers");
    write("lib.rs", "pub mod a;\npub mod b;\n");
    write("a/mod.rs", "mod inner;\npub use inner::Thing;\n");
    write(
        "a/inner.rs",
        "use crate::b::{self, other::Helper};\npub struct Thing;\n",
    );
    write("b/mod.rs", "pub mod other;\n");
    write(
        "b/other.rs",
        "pub struct Helper;\nfn f() -> crate::a::Thing { crate::a::Thing }\n#[cfg(test)]\nmod tests { use crate::a::nothing; }\n",
    );
    let house = House::read(&dir);
    assert_eq!(house.circles(), [vec!["a/inner.rs", "b/other.rs"]]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An empty scratch src/ directory, and a writer of files into it.
fn scratch(name: &str) -> (PathBuf, impl Fn(&str, &str)) {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let root = dir.clone();
    let write = move |path: &str, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap_or(&root)).expect("dir");
        std::fs::write(path, text).expect("write");
    };
    (dir, write)
}

/// The top-level modules a circle's files belong to.
fn tops(circle: &[String]) -> BTreeSet<String> {
    circle
        .iter()
        .map(|f| {
            let first = f.split('/').next().unwrap_or_default();
            first.trim_end_matches(".rs").to_owned()
        })
        .collect()
}

/// The files of src/ (paths relative to it), each with its module path and code.
struct House {
    /// Module path ("postprocess::gates") → file ("postprocess/gates.rs").
    modules: HashMap<String, String>,
    /// File → its code without its test modules.
    code: BTreeMap<String, String>,
    /// File → module path.
    module_of: HashMap<String, String>,
}

impl House {
    fn read(root: &Path) -> House {
        let mut files = Vec::new();
        walk(root, &mut files);
        let mut house = House {
            modules: HashMap::new(),
            code: BTreeMap::new(),
            module_of: HashMap::new(),
        };
        for path in files {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            if rel == "main.rs" || rel.starts_with("bin/") {
                continue;
            }
            let module = rel
                .trim_end_matches(".rs")
                .trim_end_matches("/mod")
                .trim_end_matches("lib")
                .replace('/', "::");
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            house.modules.insert(module.clone(), rel.clone());
            house.module_of.insert(rel.clone(), module);
            house.code.insert(rel, without_tests(&text));
        }
        house
    }

    /// The files `file` imports (itself left out).
    fn imports(&self, file: &str) -> BTreeSet<String> {
        let (Some(code), Some(module)) = (self.code.get(file), self.module_of.get(file)) else {
            return BTreeSet::new();
        };
        let children: BTreeSet<String> = child_modules(code);
        let mut out = BTreeSet::new();
        let own: Vec<String> = module
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        for (path, public) in paths(code) {
            let Some(absolute) = absolute(&path, module, &children) else {
                continue;
            };
            // A module handing on a name of its own child is its face, not a dependency.
            if public && absolute.len() > own.len() && absolute.starts_with(&own) {
                continue;
            }
            if let Some(target) = self.resolve(&absolute, 0) {
                if target != file {
                    out.insert(target);
                }
            }
        }
        out
    }

    /// The file that defines what an absolute path names (following `pub use` re-exports).
    fn resolve(&self, path: &[String], depth: usize) -> Option<String> {
        // The longest prefix that is a module with a file.
        let (at, file) = (0..=path.len()).rev().find_map(|n| {
            self.modules
                .get(&path[..n].join("::"))
                .map(|file| (n, file.clone()))
        })?;
        let Some(name) = path.get(at) else {
            return Some(file);
        };
        let code = self.code.get(&file)?;
        if depth > 8 || defines(code, name) {
            return Some(file);
        }
        let module = self.module_of.get(&file)?;
        let children = child_modules(code);
        for (export, _) in paths(code) {
            if export.last() != Some(name) && export.last().map(String::as_str) != Some("*") {
                continue;
            }
            let Some(mut target) = absolute(&export, module, &children) else {
                continue;
            };
            if target.last().map(String::as_str) == Some("*") {
                target.pop();
                target.push(name.clone());
            }
            if target != path {
                if let Some(found) = self.resolve(&target, depth + 1) {
                    return Some(found);
                }
            }
        }
        Some(file)
    }

    /// Import circles (strongly connected sets of more than one file), each sorted.
    fn circles(&self) -> Vec<Vec<String>> {
        let files: Vec<String> = self.code.keys().cloned().collect();
        let index: HashMap<&str, usize> = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.as_str(), i))
            .collect();
        let edges: Vec<Vec<usize>> = files
            .iter()
            .map(|f| {
                self.imports(f)
                    .iter()
                    .filter_map(|t| index.get(t.as_str()).copied())
                    .collect()
            })
            .collect();
        let mut circles: Vec<Vec<String>> = strongly_connected(&edges)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| {
                let mut names: Vec<String> = c.into_iter().map(|i| files[i].clone()).collect();
                names.sort();
                names
            })
            .collect();
        circles.sort();
        circles
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Code without `#[cfg(test)]` items (a test module's braces matched; string literals holding
/// braces are rare in such a header and ignored).
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let end = match (after.find('{'), after.find(';')) {
            (Some(open), semi) if semi.is_none_or(|s| open < s) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (i, c) in after[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(semi)) => semi + 1,
            _ => after.len(),
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    // Comments name paths they do not import.
    out.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Child modules a file declares (`mod name;`, `pub mod name;`, `pub(crate) mod name;`).
fn child_modules(code: &str) -> BTreeSet<String> {
    code.lines()
        .filter_map(|line| {
            let line = line.trim();
            let at = line.find("mod ")?;
            let head = &line[..at];
            if !(head.is_empty() || head.starts_with("pub")) || !line.ends_with(';') {
                return None;
            }
            Some(line[at + 4..].trim_end_matches(';').trim().to_owned())
        })
        .collect()
}

/// Whether a file defines `name` itself (an item, or a module it declares).
fn defines(code: &str, name: &str) -> bool {
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
        .filter(|w| !w.is_empty())
        .collect();
    const ITEMS: [&str; 10] = [
        "fn",
        "struct",
        "enum",
        "trait",
        "type",
        "const",
        "static",
        "union",
        "mod",
        "macro_rules!",
    ];
    words
        .windows(2)
        .any(|w| ITEMS.contains(&w[0]) && w[1] == name)
}

/// Every path the code names: `use` trees expanded, and paths written inline, as segments, each
/// with whether a `pub use` names it (a re-export).
fn paths(code: &str) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    let mut rest = code;
    // `use` statements (with `pub`, `pub(crate)` and the like before them).
    let mut inline = String::new();
    while let Some(at) = find_use(rest) {
        inline.push_str(&rest[..at]);
        let after = &rest[at + 4..];
        let end = after.find(';').unwrap_or(after.len());
        let line_start = rest[..at].rfind('\n').map_or(0, |n| n + 1);
        let public = rest[line_start..at].trim().starts_with("pub");
        let mut expanded = Vec::new();
        expand(&after[..end], &mut Vec::new(), &mut expanded);
        out.extend(expanded.into_iter().map(|p| (p, public)));
        rest = after.get(end + 1..).unwrap_or_default();
    }
    inline.push_str(rest);
    // Inline paths anywhere in the code: `crate::a::b`, `super::x`, `self::y`, and a child
    // module's `child::z` (which [`absolute`] keeps; other paths, `std::…` or `Type::Variant`,
    // name nothing of src/ and are dropped there).
    let chars: Vec<char> = inline.chars().collect();
    let mut at = 0;
    while at < chars.len() {
        let starts = chars[at].is_alphabetic()
            && (at == 0 || {
                let before = chars[at - 1];
                !(before.is_alphanumeric() || before == '_' || before == ':')
            });
        if !starts {
            at += 1;
            continue;
        }
        let path: String = chars[at..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_' || **c == ':')
            .collect();
        let visibility = chars[..at].iter().rev().take(7).rev().collect::<String>() == "pub(in ";
        at += path.chars().count();
        // `pub(in crate::server)` names who may see an item, not what it uses.
        if path.contains("::") && !visibility {
            let segments: Vec<String> = path
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            out.push((segments, false));
        }
    }
    out
}

/// Where the next `use` statement's `use` keyword begins.
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = code[from..].find("use ") {
        let at = from + found;
        from = at + 4;
        let line_start = code[..at].rfind('\n').map_or(0, |n| n + 1);
        let head = code[line_start..at].trim();
        if head.is_empty() || head.starts_with("pub") {
            return Some(at);
        }
    }
    None
}

/// Expands a `use` tree (`a::{b, c::{d, self}}`) into paths after `prefix`.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head = &tree[..open];
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let before = prefix.len();
        prefix.extend(
            head.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], prefix, out);
        prefix.truncate(before);
        return;
    }
    let plain = tree.split(" as ").next().unwrap_or(tree);
    let mut path = prefix.clone();
    for segment in plain.split("::").map(str::trim).filter(|s| !s.is_empty()) {
        if segment != "self" || path.is_empty() {
            path.push(segment.to_owned());
        }
    }
    out.push(path);
}

/// A path as written in the module `module` made absolute (segments from the crate root), or
/// `None` for a path outside the crate (std, a dependency).
fn absolute(path: &[String], module: &str, children: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut here: Vec<String> = module
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            here.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                here.pop();
                rest = &rest[1..];
            }
        }
        Some(first) if children.contains(first) => {}
        _ => return None,
    }
    here.extend(rest.iter().cloned());
    Some(here)
}

/// Tarjan's strongly connected components.
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &s.edges[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let n = edges.len();
    let mut state = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if state.index[v].is_none() {
            visit(&mut state, v);
        }
    }
    state.out
}

#[test]
fn a_parent_calling_its_child_by_path_is_an_import_and_a_visibility_is_not() {
    let (dir, write) = scratch("memproxy-layers-child");
    write("lib.rs", "pub mod a;\npub mod c;\n");
    // a/mod.rs calls its child inline (no `use`), and the child uses the parent's state.
    write(
        "a/mod.rs",
        "mod child;\npub struct State;\npub fn run() { child::work(State) }\n",
    );
    write(
        "a/child.rs",
        "pub(in crate::a) fn work(_: super::State) {}\n",
    );
    // c/part.rs only names who may see its item: that is no import of c/mod.rs.
    write("c/mod.rs", "mod part;\npub fn g() { part::f() }\n");
    write("c/part.rs", "pub(in crate::c) fn f() {}\n");
    let house = House::read(&dir);
    assert_eq!(house.circles(), [vec!["a/child.rs", "a/mod.rs"]]);
    let _ = std::fs::remove_dir_all(&dir);
}
