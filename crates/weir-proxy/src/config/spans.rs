//! Maps between byte offsets in the configuration text and dotted key paths.
//!
//! serde errors from `toml` carry a byte span but no key, and semantic checks know the
//! key but not where it was written; keeping the parsed document around lets every
//! error name both.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// One step of a [`KeyPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// A dotted key path such as `listen[1].route[0].origin`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyPath(Vec<Segment>);

impl KeyPath {
    /// The path `name`, a key of the top-level table.
    pub(crate) fn top(name: &str) -> KeyPath {
        KeyPath::default().key(name)
    }

    /// This path followed by the table key `name`.
    pub(crate) fn key(mut self, name: &str) -> KeyPath {
        self.0.push(Segment::Key(name.to_string()));
        self
    }

    /// This path followed by the array index `index`.
    pub(crate) fn index(mut self, index: usize) -> KeyPath {
        self.0.push(Segment::Index(index));
        self
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Index(n) => write!(f, "[{n}]")?,
                Segment::Key(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    let bare = !key.is_empty()
                        && key
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if bare {
                        f.write_str(key)?;
                    } else {
                        write!(f, "{key:?}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// A parsed configuration document, kept to locate keys after deserialization.
pub(crate) struct Document<'i> {
    text: &'i str,
    root: Spanned<DeValue<'i>>,
}

impl<'i> Document<'i> {
    /// Parses `text`, recovering past syntax errors so that even the first syntax
    /// error can be given a key path; returns that error, if any.
    pub(crate) fn parse(text: &'i str) -> (Document<'i>, Option<toml::de::Error>) {
        let (table, errors) = DeTable::parse_recoverable(text);
        let root = Spanned::new(table.span(), DeValue::Table(table.into_inner()));
        (Document { text, root }, errors.into_iter().next())
    }

    /// A deserializer over (a copy of) the parsed document.
    pub(crate) fn deserializer(&self) -> toml::de::Deserializer<'i> {
        let table = match self.root.get_ref() {
            DeValue::Table(table) => table.clone(),
            _ => DeTable::new(),
        };
        Spanned::new(self.root.span(), table).into()
    }

    /// The 1-based line holding byte `offset`.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        let end = floor_char_boundary(self.text, offset);
        self.text[..end].matches('\n').count() + 1
    }

    /// The most specific key or array element written at byte `offset`, if any.
    pub(crate) fn path_at(&self, offset: usize) -> Option<KeyPath> {
        let mut segments = find(&self.root, offset)?;
        segments.reverse();
        Some(KeyPath(segments))
    }

    /// The innermost table whose header (or inline text) starts at or before byte
    /// `offset`: for a syntax error the tree may lack the offending key, but the table
    /// it was written in is usually there.
    pub(crate) fn table_before(&self, offset: usize) -> Option<KeyPath> {
        let mut best: Option<(usize, Vec<Segment>)> = None;
        let mut stack = vec![(&self.root, Vec::new())];
        while let Some((value, path)) = stack.pop() {
            let children: Vec<(Segment, &Spanned<DeValue<'_>>)> = match value.get_ref() {
                DeValue::Table(table) => table
                    .iter()
                    .map(|(key, child)| (Segment::Key(key.get_ref().to_string()), child))
                    .collect(),
                DeValue::Array(array) => array
                    .iter()
                    .enumerate()
                    .map(|(i, child)| (Segment::Index(i), child))
                    .collect(),
                _ => Vec::new(),
            };
            for (segment, child) in children {
                let mut child_path = path.clone();
                child_path.push(segment);
                let start = child.span().start;
                // `>=` lets an array-of-tables element beat its parent key, which
                // shares its span.
                let later = best.as_ref().is_none_or(|(best, _)| start >= *best);
                if child.get_ref().is_table() && start <= offset && later {
                    best = Some((start, child_path.clone()));
                }
                stack.push((child, child_path));
            }
        }
        best.map(|(_, path)| KeyPath(path))
    }

    /// The source text of `span`.
    pub(crate) fn text(&self, span: Range<usize>) -> &'i str {
        self.text.get(span).unwrap_or("")
    }

    /// Where `path` was written: the span of its last key (or array element) when
    /// present, else of its nearest written ancestor. The flag tells whether the whole
    /// path was found. `None` when not even the first key is in the file.
    pub(crate) fn locate(&self, path: &KeyPath) -> Option<(Range<usize>, bool)> {
        let mut current = &self.root;
        let mut found = None;
        for segment in &path.0 {
            match child(current, segment) {
                Some((span, value)) => {
                    found = Some((span, true));
                    current = value;
                }
                None => return found.map(|(span, _)| (span, false)),
            }
        }
        found
    }

    /// Every key and array element written inside the table at `path`, at any depth,
    /// with its 1-based line, keyed by its path relative to that table as displayed
    /// (`value`, `headers.x-a`, `list[2]`). Empty when `path` is not written.
    pub(crate) fn key_lines_under(&self, path: &KeyPath) -> BTreeMap<String, usize> {
        let mut lines = BTreeMap::new();
        let value = path.0.iter().try_fold(&self.root, |current, segment| {
            child(current, segment).map(|(_, value)| value)
        });
        if let Some(value) = value {
            self.collect_lines(value, &KeyPath::default(), &mut lines);
        }
        lines
    }

    fn collect_lines(
        &self,
        value: &Spanned<DeValue<'_>>,
        prefix: &KeyPath,
        lines: &mut BTreeMap<String, usize>,
    ) {
        let children: Vec<(KeyPath, Range<usize>, &Spanned<DeValue<'_>>)> = match value.get_ref() {
            DeValue::Table(table) => table
                .iter()
                .map(|(key, child)| (prefix.clone().key(key.get_ref()), key.span(), child))
                .collect(),
            DeValue::Array(array) => array
                .iter()
                .enumerate()
                .map(|(i, child)| (prefix.clone().index(i), child.span(), child))
                .collect(),
            _ => Vec::new(),
        };
        for (path, span, child) in children {
            lines.insert(path.to_string(), self.line_of(span.start));
            self.collect_lines(child, &path, lines);
        }
    }

    /// The line where `path` (or its nearest written ancestor) appears.
    pub(crate) fn line_of_path(&self, path: &KeyPath) -> Option<usize> {
        if path.is_empty() {
            return None;
        }
        self.locate(path).map(|(span, _)| self.line_of(span.start))
    }

    /// Whether every key of `path` is written in the file.
    pub(crate) fn contains(&self, path: &KeyPath) -> bool {
        matches!(self.locate(path), Some((_, true)))
    }
}

/// The child of `value` named by `segment`, with the span of its key (or, for an array
/// element, of the element itself).
fn child<'v, 'i>(
    value: &'v Spanned<DeValue<'i>>,
    segment: &Segment,
) -> Option<(Range<usize>, &'v Spanned<DeValue<'i>>)> {
    match (segment, value.get_ref()) {
        (Segment::Key(name), DeValue::Table(table)) => table
            .iter()
            .find(|(key, _)| key.get_ref() == name)
            .map(|(key, value)| (key.span(), value)),
        (Segment::Index(n), DeValue::Array(array)) => {
            array.get(*n).map(|value| (value.span(), value))
        }
        _ => None,
    }
}

/// Depth-first so that the innermost match wins: array-of-tables elements and their
/// parent key share the `[[header]]` span, and inline tables span all their entries.
/// Segments come back innermost first.
fn find(value: &Spanned<DeValue<'_>>, offset: usize) -> Option<Vec<Segment>> {
    match value.get_ref() {
        DeValue::Table(table) => table.iter().find_map(|(key, child)| {
            descend(
                child,
                offset,
                Segment::Key(key.get_ref().to_string()),
                key.span(),
            )
        }),
        DeValue::Array(array) => array
            .iter()
            .enumerate()
            .find_map(|(i, child)| descend(child, offset, Segment::Index(i), child.span())),
        _ => None,
    }
}

fn descend(
    child: &Spanned<DeValue<'_>>,
    offset: usize,
    segment: Segment,
    key_span: Range<usize>,
) -> Option<Vec<Segment>> {
    if let Some(mut inner) = find(child, offset) {
        inner.push(segment);
        return Some(inner);
    }
    (hits(&key_span, offset) || hits(&child.span(), offset)).then(|| vec![segment])
}

fn hits(span: &Range<usize>, offset: usize) -> bool {
    span.contains(&offset) || (span.is_empty() && span.start == offset)
}

fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}
