//! The ad remover's callbacks, called directly on a small inline list.

use super::*;
use weir_api::{engine, Reply};

const RULES: &str = r#"rules = [
  "||ads.example^",
  "/banner/*$image",
  "||tracker.example^$third-party",
  "/promo.gif$domain=news.example",
  "@@||ads.example/allowed/",
]"#;

fn build(text: &str) -> Result<Arc<dyn Module>, SettingsError> {
    AdblockFactory.build(&Settings::parse(text).unwrap(), &ModuleContext::detached())
}

fn adblock(extra: &str) -> Adblock {
    let settings = Settings::parse(&format!("{RULES}\n{extra}")).unwrap();
    Adblock::from_settings(&settings, &ModuleContext::detached()).unwrap()
}

fn head(uri: &str, headers: &[(&str, &str)]) -> RequestHead {
    let mut b = weir_api::http::Request::builder().uri(uri);
    for (n, v) in headers {
        b = b.header(*n, *v);
    }
    b.body(()).unwrap().into_parts().0
}

fn blocks(a: &Adblock, uri: &str, headers: &[(&str, &str)]) -> bool {
    a.check(&head(uri, headers)).unwrap().block
}

#[test]
fn settings_are_checked() {
    assert!(build(RULES).is_ok());
    let e = build("action = \"image\"").err().unwrap();
    assert_eq!(e.key.as_deref(), Some("lists"), "{e}");
    let e = build("lists = [\"/no/such/list.txt\"]").err().unwrap();
    assert_eq!(e.key.as_deref(), Some("lists[0]"), "{e}");
    let e = build(&format!("{RULES}\naction = \"301\"")).err().unwrap();
    assert!(e.to_string().contains("301"), "{e}");
    let e = build(&format!("{RULES}\nfallback = \"image\""))
        .err()
        .unwrap();
    assert_eq!(e.key.as_deref(), Some("fallback"), "{e}");
    let e = build(&format!("{RULES}\nimage_ttl = 0")).err().unwrap();
    assert_eq!(e.key.as_deref(), Some("image_ttl"), "{e}");
    let e = build(&format!("{RULES}\nlist = []")).err().unwrap();
    assert_eq!(e.key.as_deref(), Some("list"), "{e}");
}

#[test]
fn rules_and_options() {
    let a = adblock("");
    assert!(blocks(&a, "http://ads.example/x.js", &[]));
    assert!(blocks(&a, "http://cdn.ads.example/x", &[]), "subdomains");
    assert!(!blocks(&a, "http://site.example/x.js", &[]));
    // @@ exception.
    assert!(!blocks(&a, "http://ads.example/allowed/x.js", &[]));
    // $image: by extension, Accept or Sec-Fetch-Dest, and not for other types.
    assert!(blocks(&a, "http://site.example/banner/a.png", &[]));
    assert!(blocks(
        &a,
        "http://site.example/banner/a",
        &[("accept", "image/webp,*/*")]
    ));
    assert!(blocks(
        &a,
        "http://site.example/banner/a",
        &[("sec-fetch-dest", "image")]
    ));
    assert!(!blocks(&a, "http://site.example/banner/a.js", &[]));
    // $third-party: from the Referer's domain, or Sec-Fetch-Site.
    fn on(page: &str) -> [(&str, &str); 1] {
        [("referer", page)]
    }
    assert!(blocks(
        &a,
        "http://tracker.example/t",
        &on("http://news.example/")
    ));
    assert!(!blocks(
        &a,
        "http://tracker.example/t",
        &on("http://www.tracker.example/")
    ));
    assert!(!blocks(&a, "http://tracker.example/t", &[]), "no context");
    assert!(blocks(
        &a,
        "http://tracker.example/t",
        &[("sec-fetch-site", "cross-site")]
    ));
    // $domain=: the page's domain.
    assert!(blocks(
        &a,
        "http://cdn.example/promo.gif",
        &on("http://news.example/a")
    ));
    assert!(blocks(
        &a,
        "http://cdn.example/promo.gif",
        &on("http://www.news.example/")
    ));
    assert!(!blocks(
        &a,
        "http://cdn.example/promo.gif",
        &on("http://blog.example/")
    ));
}

fn request_flow(a: &Adblock, txn: &mut Txn, uri: &str, h: &[(&str, &str)]) -> Option<Reply> {
    match a.on_request_headers(txn, &mut head(uri, h)) {
        Flow::Continue => None,
        Flow::Respond(r) => Some(r),
        Flow::Wait(_) => panic!("no wait at request headers"),
    }
}

#[test]
fn images_go_to_the_cache_others_get_the_fallback() {
    let a = adblock("");
    let mut t = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    assert!(request_flow(&a, &mut t, "http://ads.example/a.gif", &[]).is_none());
    assert_eq!(t.cache_overrides().variant.as_deref(), Some("adblock"));
    assert_eq!(t.log_fields(), [("adblock", "blocked".to_string())]);
    // A hit serves the stored image; a bypass is answered directly.
    assert!(matches!(
        a.on_cache_lookup(&mut t, CacheLookup::Fresh),
        Flow::Continue
    ));
    match a.on_cache_lookup(&mut t, CacheLookup::Bypass) {
        Flow::Respond(r) => assert_eq!(&r.body[..], BLANK_GIF),
        other => panic!("{other:?}"),
    }
    // A script: the fallback, 204.
    let mut t = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    let r = request_flow(&a, &mut t, "http://ads.example/a.js", &[]).unwrap();
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(t.cache_overrides().variant.is_none());
    // Not blocked: no variant, no state, no call at lookup.
    let mut t = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    assert!(request_flow(&a, &mut t, "http://site.example/a.gif", &[]).is_none());
    assert!(t.cache_overrides().variant.is_none());
    assert!(matches!(
        a.on_cache_lookup(&mut t, CacheLookup::Miss),
        Flow::Continue
    ));
    assert_eq!(a.blocked.get(), 2);
}

#[test]
fn actions_403_and_204_answer_everything() {
    let a = adblock("action = \"403\"");
    let mut t = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    let r = request_flow(&a, &mut t, "http://ads.example/a.gif", &[]).unwrap();
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let a = adblock("action = \"image\"\nfallback = \"403\"");
    let r = request_flow(&a, &mut t, "http://ads.example/a.js", &[]).unwrap();
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let a = adblock("action = \"204\"");
    let r = request_flow(&a, &mut t, "http://ads.example/a.gif", &[]).unwrap();
    assert_eq!(r.status, StatusCode::NO_CONTENT);
}

#[test]
fn remembered_verdicts_agree() {
    let a = adblock("");
    let cross = [("referer", "http://news.example/")];
    for _ in 0..2 {
        for (uri, h, block) in [
            ("http://ads.example/x.js", &[][..], true),
            ("http://site.example/x.js", &[][..], false),
            ("http://tracker.example/t", &cross[..], true),
            ("http://tracker.example/t", &[][..], false),
        ] {
            let v = a.check_remembered(&head(uri, h)).unwrap();
            assert_eq!(v.block, block, "{uri} {h:?}");
            if block {
                assert_eq!(v.url, uri);
            }
        }
    }
}
