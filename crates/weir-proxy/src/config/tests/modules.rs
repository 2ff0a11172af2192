//! `[[module]]` sections and listeners' `modules`.

use super::support::*;
use crate::config::*;

const MODULES: &str = r#"[[listen]]
addr = "127.0.0.1:3128"
mode = "forward"

[[module]]
name = "add-headers"
value = "x"

[[module]]
name = "rewriter"
enabled = false
optional = true
level = 3
rules = ["a",
  "b"]
  [module.headers]
  x-a = "1"
"#;

#[test]
fn settings_are_the_modules_own_keys() {
    let c = parse(MODULES);
    assert_eq!(c.module.len(), 2);

    let m = &c.module[0];
    assert_eq!(m.name, "add-headers");
    assert!(m.enabled, "enabled by default");
    assert!(!m.optional, "not optional by default");
    let expected: toml::Table = toml::from_str("value = \"x\"").unwrap();
    assert_eq!(m.settings, expected);

    let m = &c.module[1];
    assert_eq!(m.name, "rewriter");
    assert!(!m.enabled && m.optional);
    let expected: toml::Table =
        toml::from_str("level = 3\nrules = [\"a\", \"b\"]\nheaders = { x-a = \"1\" }").unwrap();
    assert_eq!(m.settings, expected);
}

#[test]
fn no_modules_by_default() {
    let c = parse("");
    assert!(c.module.is_empty());
    assert_eq!(c.listen[0].modules, None);
}

#[test]
fn any_value_is_a_setting() {
    let c = parse(
        "[[module]]\nname = \"m\"\nwhen = 1979-05-27T07:32:00Z\nratio = 0.5\n\
         line = 7\nsettings = { a = [1, { b = true }] }\n",
    );
    let expected: toml::Table = toml::from_str(
        "when = 1979-05-27T07:32:00Z\nratio = 0.5\nline = 7\nsettings = { a = [1, { b = true }] }",
    )
    .unwrap();
    assert_eq!(c.module[0].settings, expected);
    assert!(c.module[0].settings["when"].is_datetime());
    assert_eq!(c.module[0].line, Some(1));
}

#[test]
fn lines_of_sections_and_keys() {
    let c = parse(MODULES);
    assert_eq!(c.module[0].line, Some(5));
    assert_eq!(c.module[1].line, Some(9));
    let lines: Vec<(&str, usize)> = c.module[1]
        .key_lines
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        lines,
        [
            ("enabled", 11),
            ("headers", 16),
            ("headers.x-a", 17),
            ("level", 13),
            ("name", 10),
            ("optional", 12),
            ("rules", 14),
            ("rules[0]", 14),
            ("rules[1]", 15),
        ]
    );
    // An inline array of tables.
    let c = parse("module = [\n  { name = \"a\" },\n  { name = \"b\", value = 1 },\n]\n");
    assert_eq!(c.module[1].line, Some(3));
    assert_eq!(c.module[1].key_lines.get("value"), Some(&3));
}

#[test]
fn module_errors_point_at_the_key() {
    let c = parse(MODULES);
    let e = c.module_error(0, Some("value"), "`x` is not a number");
    assert_eq!(
        e.to_string(),
        "weir.toml:7: key `module[0].value`: `x` is not a number"
    );
    // Nested keys and array elements, written or not.
    let e = c.module_error(1, Some("headers.x-a"), "bad header");
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(17), Some("module[1].headers.x-a"))
    );
    let e = c.module_error(1, Some("rules[1]"), "bad rule");
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(15), Some("module[1].rules[1]"))
    );
    let e = c.module_error(1, Some("headers.x-b"), "missing");
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(16), Some("module[1].headers.x-b"))
    );
    // A key not written (a missing setting) is blamed on the section.
    let e = c.module_error(1, Some("colour"), "missing field `colour`");
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(9), Some("module[1].colour"))
    );
    // No key: the section.
    let e = c.module_error(0, None, "no such module");
    assert_eq!(
        e.to_string(),
        "weir.toml:5: key `module[0]`: no such module"
    );
    let e = c.module_error(0, Some("name"), "unknown module `add-headers`");
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(6), Some("module[0].name"))
    );
}

#[test]
fn module_errors_without_a_file() {
    let mut c = Config::default();
    c.module.push(ModuleConfig {
        name: "m".into(),
        enabled: true,
        optional: false,
        settings: toml::Table::new(),
        line: None,
        key_lines: Default::default(),
    });
    let e = c.module_error(0, Some("value"), "bad");
    assert_eq!(e.to_string(), "<defaults>: key `module[0].value`: bad");
    let e = c.module_error(5, None, "bad");
    assert_eq!((e.line, e.key.as_deref()), (None, Some("module[5]")));
}

#[test]
fn wrong_types_and_missing_name() {
    fails(
        "[[module]]\nname = \"m\"\nenabled = \"yes\"\n",
        3,
        "module[0].enabled",
        "invalid type",
    );
    fails(
        "[[module]]\nname = \"m\"\n\n[[module]]\noptional = 1\nname = \"n\"\n",
        5,
        "module[1].optional",
        "invalid type",
    );
    fails(
        "[[module]]\nname = 5\n",
        2,
        "module[0].name",
        "invalid type",
    );
    fails(
        "[[module]]\nvalue = 1\n",
        1,
        "module[0].name",
        "missing field `name`",
    );
    fails("module = 1\n", 1, "module", "invalid type");
    // `source` is not a key of the file.
    fails("source = \"x\"\n", 1, "source", "unknown field");
}

#[test]
fn names_are_not_empty() {
    fails(
        "[[module]]\nname = \"a\"\n[[module]]\nname = \" \"\n",
        4,
        "module[1].name",
        "must not be empty",
    );
}

#[test]
fn enabled_names_are_unique() {
    let text = "[[module]]\nname = \"x\"\n[[module]]\nname = \"y\"\n\
                [[module]]\nname = \"z\"\n[[module]]\nname = \"x\"\n";
    fails(text, 8, "module[3].name", "module `x` is configured twice");
    // A disabled section may share its name with an enabled one.
    let text = "[[module]]\nname = \"x\"\n[[module]]\nname = \"x\"\nenabled = false\n\
                [[module]]\nname = \"x\"\nenabled = false\n";
    let c = parse(text);
    assert_eq!(c.module.len(), 3);
}

#[test]
fn listener_modules() {
    let with = |modules: &str| {
        format!(
            "[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\nmodules = {modules}\n\
             [[module]]\nname = \"a\"\n[[module]]\nname = \"b\"\nenabled = false\n"
        )
    };
    let c = parse(&with("[\"b\", \"a\"]"));
    assert_eq!(c.listen[0].modules, Some(vec!["b".into(), "a".into()]));
    // A disabled module may be named; [] names none.
    assert_eq!(parse(&with("[]")).listen[0].modules, Some(vec![]));
    fails(
        &with("[\"a\",\n  \"c\"]"),
        5,
        "listen[0].modules[1]",
        "no [[module]] named `c`",
    );
    fails(&with("\"a\""), 4, "listen[0].modules", "invalid type");
    // With no [[module]] at all.
    fails(
        "[[listen]]\naddr = \"127.0.0.1:3128\"\nmode = \"forward\"\nmodules = [\"a\"]\n",
        4,
        "listen[0].modules[0]",
        "no [[module]] named `a`",
    );
}
