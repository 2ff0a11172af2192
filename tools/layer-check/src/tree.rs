//! The module tree of one crate, read from its source files: which modules exist, in
//! which file each lives, what each defines and imports, and every path it names.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// One module: a file or a `mod name { … }` block inside one.
#[derive(Debug, Default)]
pub struct Module {
    /// The enclosing module; `None` for the crate root.
    pub parent: Option<usize>,
    /// The file this module's text is in.
    pub file: usize,
    /// Child modules by name.
    pub children: BTreeMap<String, usize>,
    /// Names of the items defined here (functions, types, traits, constants, macros).
    pub items: BTreeSet<String>,
    /// `use` imports: the local name and the path as written.
    pub imports: BTreeMap<String, Vec<String>>,
    /// `use path::*` imports, as written.
    pub globs: Vec<Vec<String>>,
}

/// A path named somewhere in a module, as written.
#[derive(Debug)]
pub struct Reference {
    /// The module whose text names it.
    pub module: usize,
    /// Its segments (`crate`, `super` and `self` included).
    pub segments: Vec<String>,
}

/// Every module and reference of one crate.
#[derive(Debug, Default)]
pub struct CrateTree {
    /// Source files; `files[module.file]`.
    pub files: Vec<PathBuf>,
    /// Modules; the crate root is `modules[0]`.
    pub modules: Vec<Module>,
    /// Paths named in the crate's code.
    pub references: Vec<Reference>,
}

impl CrateTree {
    /// Reads the crate whose root file is `root` (a `lib.rs`, `main.rs` or test file).
    pub fn read(root: &Path) -> Result<CrateTree, String> {
        let mut tree = CrateTree::default();
        tree.read_file(root, None, true)?;
        Ok(tree)
    }

    fn read_file(
        &mut self,
        path: &Path,
        parent: Option<usize>,
        owns_dir: bool,
    ) -> Result<usize, String> {
        let text = fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let parsed =
            syn::parse_file(&text).map_err(|e| format!("{}: cannot parse: {e}", path.display()))?;
        let file = self.files.len();
        self.files.push(path.to_path_buf());
        let module = self.new_module(parent, file);
        // Where this file's `mod name;` children live: beside it for `lib.rs`, `main.rs`
        // and `mod.rs`, in a directory named after it otherwise.
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        let child_dir = if owns_dir {
            dir.clone()
        } else {
            dir.join(path.file_stem().unwrap_or_default())
        };
        self.read_items(&parsed.items, module, &dir, &child_dir)?;
        Ok(module)
    }

    fn new_module(&mut self, parent: Option<usize>, file: usize) -> usize {
        self.modules.push(Module {
            parent,
            file,
            ..Module::default()
        });
        self.modules.len() - 1
    }

    fn read_items(
        &mut self,
        items: &[syn::Item],
        module: usize,
        file_dir: &Path,
        child_dir: &Path,
    ) -> Result<(), String> {
        for item in items {
            match item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    let child = match &m.content {
                        Some((_, inner)) => {
                            let file = self.modules[module].file;
                            let child = self.new_module(Some(module), file);
                            let inner_dir = child_dir.join(&name);
                            self.read_items(inner, child, file_dir, &inner_dir)?;
                            child
                        }
                        None => {
                            let (path, owns_dir) = match path_attribute(&m.attrs) {
                                Some(p) => (file_dir.join(p), true),
                                None => child_file(child_dir, &name)?,
                            };
                            self.read_file(&path, Some(module), owns_dir)?
                        }
                    };
                    self.modules[module].children.insert(name, child);
                }
                syn::Item::Use(u) => {
                    let mut found = Vec::new();
                    expand_use(&u.tree, Vec::new(), &mut found);
                    for (name, path) in found {
                        // A glob by itself uses nothing: the names taken through it do.
                        match name {
                            Some(name) => {
                                self.references.push(Reference {
                                    module,
                                    segments: path.clone(),
                                });
                                self.modules[module].imports.insert(name, path);
                            }
                            None => self.modules[module].globs.push(path),
                        }
                    }
                }
                other => {
                    if let Some(name) = item_name(other) {
                        self.modules[module].items.insert(name);
                    }
                    let mut collector = Collector {
                        module,
                        found: &mut self.references,
                    };
                    collector.visit_item(other);
                }
            }
        }
        Ok(())
    }
}

/// The file of `mod name;`: `dir/name.rs`, or `dir/name/mod.rs` (which owns its directory).
fn child_file(dir: &Path, name: &str) -> Result<(PathBuf, bool), String> {
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() {
        return Ok((flat, false));
    }
    let nested = dir.join(name).join("mod.rs");
    if nested.exists() {
        return Ok((nested, true));
    }
    Err(format!(
        "module `{name}`: neither {} nor {} exists",
        flat.display(),
        nested.display()
    ))
}

fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| {
        if !a.path().is_ident("path") {
            return None;
        }
        match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        }
    })
}

fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Flattens a use tree into (local name, path) pairs; a glob has no local name.
fn expand_use(
    tree: &syn::UseTree,
    prefix: Vec<String>,
    out: &mut Vec<(Option<String>, Vec<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            expand_use(&p.tree, next, out);
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                let local = prefix.last().cloned();
                out.push((local, prefix));
            } else {
                let mut path = prefix;
                path.push(name.clone());
                out.push((Some(name), path));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((Some(r.rename.to_string()), path));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix)),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                expand_use(t, prefix.clone(), out);
            }
        }
    }
}

/// Collects the paths an item names, in code and in macro invocations.
struct Collector<'a> {
    module: usize,
    found: &'a mut Vec<Reference>,
}

impl Collector<'_> {
    fn push(&mut self, segments: Vec<String>) {
        if !segments.is_empty() {
            self.found.push(Reference {
                module: self.module,
                segments,
            });
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.push(segments);
        syn::visit::visit_path(self, path);
    }

    // `pub(crate)` and `pub(super)` say who may look, not what is used.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut found = Vec::new();
        expand_use(&u.tree, Vec::new(), &mut found);
        for (name, path) in found {
            if name.is_some() {
                self.push(path);
            }
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        let mut paths = Vec::new();
        scan_tokens(mac.tokens.clone(), &mut paths);
        for p in paths {
            self.push(p);
        }
    }
}

/// Finds names and `a::b::c` sequences (and `$crate::…`) in a macro's tokens.
fn scan_tokens(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let mut current: Vec<String> = Vec::new();
    let mut colons = 0;
    let mut dollar = false;
    let flush = |current: &mut Vec<String>, out: &mut Vec<Vec<String>>| {
        if !current.is_empty() {
            out.push(std::mem::take(current));
        }
    };
    for tt in tokens {
        match tt {
            TokenTree::Ident(i) => {
                let name = i.to_string();
                if colons == 2 && !current.is_empty() {
                    current.push(name);
                } else {
                    flush(&mut current, out);
                    current.push(if dollar && name == "crate" {
                        "crate".to_string()
                    } else {
                        name
                    });
                }
                colons = 0;
                dollar = false;
            }
            TokenTree::Punct(p) if p.as_char() == ':' => colons += 1,
            TokenTree::Punct(p) if p.as_char() == '$' => {
                flush(&mut current, out);
                dollar = true;
                colons = 0;
            }
            TokenTree::Group(g) => {
                flush(&mut current, out);
                scan_tokens(g.stream(), out);
                colons = 0;
                dollar = false;
            }
            _ => {
                flush(&mut current, out);
                colons = 0;
                dollar = false;
            }
        }
    }
    flush(&mut current, out);
}
