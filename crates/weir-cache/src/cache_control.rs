//! `Cache-Control` read to the letter of RFC 9111 §5.2 and RFC 9110 §5.6: directive
//! names in any case, arguments as tokens or quoted strings (commas inside quotes do not
//! split), field lists of the qualified `no-cache` and `private`, and delta-seconds that
//! saturate at 2^31 instead of failing (§1.2.2).
//!
//! It sits at the bottom of the cache's vocabulary: it knows header values and nothing
//! of stored objects or policies.

use std::borrow::Cow;

use http::{header, HeaderMap, HeaderValue};

/// The largest delta-seconds a cache must represent; larger values mean this (RFC
/// 9111 §1.2.2).
pub const DELTA_SECONDS_MAX: u64 = 1 << 31;

/// One directive of a `Cache-Control` field: its name as written (compare it with
/// [`Directive::is`], which ignores case) and its argument, unquoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive<'a> {
    name: Cow<'a, str>,
    argument: Option<Cow<'a, str>>,
}

impl<'a> Directive<'a> {
    /// Whether this is the directive `name` (given in lower case), in any case.
    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
    }

    /// A directive made from parts read elsewhere (a targeted field, RFC 9213).
    pub fn new(name: impl Into<Cow<'a, str>>, argument: Option<Cow<'a, str>>) -> Directive<'a> {
        Directive {
            name: name.into(),
            argument,
        }
    }

    /// The directive's name as written.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its argument, without quotes and escapes; `None` when it has none.
    pub fn argument(&self) -> Option<&str> {
        self.argument.as_deref()
    }
}

/// Every directive of every `Cache-Control` line of `headers`, in order.
pub fn directives(headers: &HeaderMap) -> impl Iterator<Item = Directive<'_>> {
    headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .flat_map(Directives::of)
}

/// The first directive `name` (lower case) in `headers`' `Cache-Control`, with its
/// argument (`Some("")` when it has none), in any case.
pub fn directive<'a>(headers: &'a HeaderMap, name: &str) -> Option<Cow<'a, str>> {
    directives(headers)
        .find(|d| d.is(name))
        .map(|d| d.argument.unwrap_or(Cow::Borrowed("")))
}

/// The directives of one field line.
pub struct Directives<'a> {
    /// Text, so that names and arguments are slices of it with no check of their UTF-8
    /// (they are cut after ASCII bytes only).
    rest: &'a str,
}

impl<'a> Directives<'a> {
    /// The directives of one `Cache-Control` line (a value that is not visible ASCII
    /// has none).
    pub fn of(value: &'a HeaderValue) -> Directives<'a> {
        let rest = value.to_str().unwrap_or("");
        Directives { rest }
    }

    /// The directives of a field value given as text.
    pub fn of_str(value: &'a str) -> Directives<'a> {
        Directives { rest: value }
    }

    /// Skips to just after the next comma outside a quoted string.
    fn skip_element(&mut self) {
        let mut quoted = false;
        let mut escaped = false;
        for (i, &b) in self.rest.as_bytes().iter().enumerate() {
            if escaped {
                escaped = false;
            } else if quoted && b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                quoted = !quoted;
            } else if b == b',' && !quoted {
                self.rest = &self.rest[i + 1..];
                return;
            }
        }
        self.rest = "";
    }
}

impl<'a> Iterator for Directives<'a> {
    type Item = Directive<'a>;

    fn next(&mut self) -> Option<Directive<'a>> {
        loop {
            self.rest = trim_start(self.rest);
            if self.rest.is_empty() {
                return None;
            }
            if self.rest.as_bytes()[0] == b',' {
                self.rest = &self.rest[1..];
                continue;
            }
            let name_len = token_len(self.rest);
            if name_len == 0 {
                self.skip_element();
                continue;
            }
            let name = Cow::Borrowed(&self.rest[..name_len]);
            self.rest = trim_start(&self.rest[name_len..]);
            let argument = if self.rest.as_bytes().first() == Some(&b'=') {
                self.rest = trim_start(&self.rest[1..]);
                match self.argument() {
                    Some(a) => Some(a),
                    None => {
                        self.skip_element();
                        continue;
                    }
                }
            } else {
                None
            };
            // What follows must end the element; anything else makes it unreadable.
            self.rest = trim_start(self.rest);
            match self.rest.as_bytes().first() {
                None => {}
                Some(b',') => self.rest = &self.rest[1..],
                Some(_) => {
                    self.skip_element();
                    continue;
                }
            }
            return Some(Directive { name, argument });
        }
    }
}

impl<'a> Directives<'a> {
    /// A token or a quoted string at the start of `rest`, consumed.
    fn argument(&mut self) -> Option<Cow<'a, str>> {
        if self.rest.as_bytes().first() == Some(&b'"') {
            let body = &self.rest[1..];
            let mut unescaped: Option<Vec<u8>> = None;
            let mut i = 0;
            let bytes = body.as_bytes();
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        self.rest = &body[i + 1..];
                        return Some(match unescaped {
                            Some(v) => Cow::Owned(String::from_utf8(v).ok()?),
                            None => Cow::Borrowed(&body[..i]),
                        });
                    }
                    b'\\' if i + 1 < bytes.len() => {
                        let v = unescaped.get_or_insert_with(|| bytes[..i].to_vec());
                        v.push(bytes[i + 1]);
                        i += 2;
                    }
                    b => {
                        if let Some(v) = unescaped.as_mut() {
                            v.push(b);
                        }
                        i += 1;
                    }
                }
            }
            None
        } else {
            let len = token_len(self.rest);
            if len == 0 {
                return None;
            }
            let token = &self.rest[..len];
            self.rest = &self.rest[len..];
            Some(Cow::Borrowed(token))
        }
    }
}

/// A delta-seconds argument (RFC 9111 §1.2.2): digits only, saturating at
/// [`DELTA_SECONDS_MAX`]; `None` when it is not one.
pub fn delta_seconds(argument: &str) -> Option<u64> {
    if argument.is_empty() || !argument.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(
        argument
            .parse::<u64>()
            .map_or(DELTA_SECONDS_MAX, |s| s.min(DELTA_SECONDS_MAX)),
    )
}

/// The field names a qualified `no-cache="a, b"` or `private="a"` lists, lower case.
pub fn field_names(argument: &str) -> Vec<String> {
    argument
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty() && n.bytes().all(is_tchar))
        .map(str::to_ascii_lowercase)
        .collect()
}

fn trim_start(s: &str) -> &str {
    let blanks = s
        .as_bytes()
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    &s[blanks..]
}

/// Length of the token `s` starts with (ASCII bytes: the rest of `s` begins on a
/// character boundary).
fn token_len(s: &str) -> usize {
    s.as_bytes().iter().take_while(|&&b| is_tchar(b)).count()
}

/// RFC 9110 §5.6.2 token characters.
fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

/// [`is_tchar`] as a table: the directives of every response are read on a miss.
const TCHAR: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        table[i] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        i += 1;
    }
    table
};

#[cfg(test)]
#[path = "cache_control_tests.rs"]
mod tests;
