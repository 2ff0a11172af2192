//! Which module a path names, following re-exports to where the item is defined.

use crate::tree::CrateTree;

/// Re-exports followed before giving up (a guard against `use` loops).
const MAX_HOPS: usize = 16;

/// The module that defines what `segments`, written in `module`, names; `None` when it
/// names something outside the crate (another crate, `std`, a local variable).
pub fn resolve(tree: &CrateTree, module: usize, segments: &[String]) -> Option<usize> {
    resolve_hops(tree, module, segments, 0)
}

fn resolve_hops(
    tree: &CrateTree,
    module: usize,
    segments: &[String],
    hops: usize,
) -> Option<usize> {
    if hops > MAX_HOPS || segments.is_empty() {
        return None;
    }
    let first = segments[0].as_str();
    let (mut current, rest) = match first {
        "crate" => (0, &segments[1..]),
        "self" => (module, &segments[1..]),
        "super" => {
            let mut current = module;
            let mut i = 0;
            while i < segments.len() && segments[i] == "super" {
                current = tree.modules[current].parent?;
                i += 1;
            }
            (current, &segments[i..])
        }
        _ => {
            let m = &tree.modules[module];
            if m.children.contains_key(first) {
                // A module's name alone is no use of it (a variable of the same name
                // is); `use` statements name modules with a path.
                if segments.len() == 1 {
                    return None;
                }
                (module, segments)
            } else if let Some(import) = m.imports.get(first) {
                if import.as_slice() == segments {
                    return None;
                }
                let mut path = import.clone();
                path.extend_from_slice(&segments[1..]);
                return resolve_hops(tree, module, &path, hops + 1);
            } else {
                // A name taken through `use path::*`, or defined here.
                if m.items.contains(first) {
                    return Some(module);
                }
                return through_globs(tree, module, segments, hops);
            }
        }
    };
    for (i, seg) in rest.iter().enumerate() {
        let m = &tree.modules[current];
        if let Some(&child) = m.children.get(seg) {
            current = child;
            continue;
        }
        if m.items.contains(seg) {
            return Some(current);
        }
        if let Some(import) = m.imports.get(seg) {
            let mut path = import.clone();
            path.extend_from_slice(&rest[i + 1..]);
            return resolve_hops(tree, current, &path, hops + 1);
        }
        return through_globs(tree, current, &rest[i..], hops);
    }
    Some(current)
}

/// Resolves `segments` through the glob imports of `module`: the first glob whose
/// module defines, declares or imports the first segment.
fn through_globs(
    tree: &CrateTree,
    module: usize,
    segments: &[String],
    hops: usize,
) -> Option<usize> {
    let first = segments.first()?;
    for glob in &tree.modules[module].globs {
        let Some(target) = resolve_hops(tree, module, glob, hops + 1) else {
            continue;
        };
        let t = &tree.modules[target];
        if t.items.contains(first)
            || t.children.contains_key(first)
            || t.imports.contains_key(first)
        {
            let mut path = glob.clone();
            path.extend_from_slice(segments);
            return resolve_hops(tree, module, &path, hops + 1);
        }
    }
    None
}
