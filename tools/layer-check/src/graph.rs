//! The file graph of one crate and its cycles.

use std::collections::BTreeMap;

use crate::resolve::resolve;
use crate::tree::CrateTree;

/// Edges between files: `edges[from][to]` is one path that makes `from` use `to`.
pub struct FileGraph {
    edges: Vec<BTreeMap<usize, String>>,
}

impl FileGraph {
    /// Every file-to-file use in `tree`, one example path per pair.
    pub fn build(tree: &CrateTree) -> FileGraph {
        let mut edges = vec![BTreeMap::new(); tree.files.len()];
        for r in &tree.references {
            let Some(target) = resolve(tree, r.module, &r.segments) else {
                continue;
            };
            let from = tree.modules[r.module].file;
            let to = tree.modules[target].file;
            if from != to {
                edges[from]
                    .entry(to)
                    .or_insert_with(|| r.segments.join("::"));
            }
        }
        FileGraph { edges }
    }

    /// The path that makes `from` use `to`, if it does.
    pub fn edge(&self, from: usize, to: usize) -> Option<&str> {
        self.edges[from].get(&to).map(String::as_str)
    }

    /// Each file's level: 0 for a file that uses no other, else one more than the
    /// highest level among those it uses. Only meaningful without cycles.
    pub fn levels(&self) -> Vec<usize> {
        fn level(g: &FileGraph, v: usize, memo: &mut Vec<Option<usize>>, depth: usize) -> usize {
            if let Some(l) = memo[v] {
                return l;
            }
            if depth > g.edges.len() {
                return 0;
            }
            let l = g.edges[v]
                .keys()
                .map(|&w| level(g, w, memo, depth + 1) + 1)
                .max()
                .unwrap_or(0);
            memo[v] = Some(l);
            l
        }
        let mut memo = vec![None; self.edges.len()];
        (0..self.edges.len())
            .map(|v| level(self, v, &mut memo, 0))
            .collect()
    }

    /// Groups of files that reach each other (strongly connected components of more
    /// than one file), each sorted.
    pub fn cycles(&self) -> Vec<Vec<usize>> {
        let mut state = Tarjan {
            graph: self,
            index: vec![None; self.edges.len()],
            low: vec![0; self.edges.len()],
            on_stack: vec![false; self.edges.len()],
            stack: Vec::new(),
            next: 0,
            found: Vec::new(),
        };
        for v in 0..self.edges.len() {
            if state.index[v].is_none() {
                state.visit(v);
            }
        }
        state.found
    }
}

/// Tarjan's strongly connected components; crates are small enough to recurse.
struct Tarjan<'a> {
    graph: &'a FileGraph,
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    next: usize,
    found: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.next);
        self.low[v] = self.next;
        self.next += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
        let graph = self.graph;
        for &w in graph.edges[v].keys() {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut group = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack[w] = false;
                group.push(w);
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort_unstable();
                self.found.push(group);
            }
        }
    }
}
