//! Module variants shared by several modules: each adds its own part to the
//! transaction's [`CacheOverrides::variant`](weir_api::CacheOverrides::variant), so an
//! ad remover's blank image and a compressor's encoding can both be in one key.

use weir_api::Txn;

/// Parts of a variant are separated by this.
const SEPARATOR: char = ';';

/// Adds `part` to the transaction's module variant, keeping other modules' parts.
/// The first part costs no allocation.
pub fn add(txn: &mut Txn, part: &'static str) {
    let variant = &mut txn.cache().variant;
    match variant {
        Some(v) => {
            let v = v.to_mut();
            v.push(SEPARATOR);
            v.push_str(part);
        }
        None => *variant = Some(part.into()),
    }
}

/// Whether `variant` has the part `part`.
pub fn has(variant: &str, part: &str) -> bool {
    variant.split(SEPARATOR).any(|p| p == part)
}

/// The rest of the first part of `variant` that starts with `prefix`.
pub fn find<'a>(variant: &'a str, prefix: &str) -> Option<&'a str> {
    variant
        .split(SEPARATOR)
        .find_map(|p| p.strip_prefix(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_api::engine;

    #[test]
    fn parts_add_up() {
        let mut t = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
        add(&mut t, "adblock");
        add(&mut t, "ae=gzip");
        let v = t.cache_overrides().variant.clone().unwrap();
        assert_eq!(v, "adblock;ae=gzip");
        assert!(has(&v, "adblock") && !has(&v, "adb"));
        assert_eq!(find(&v, "ae="), Some("gzip"));
        assert_eq!(find("adblock", "ae="), None);
    }
}
