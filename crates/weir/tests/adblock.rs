//! The built-in `adblock` module through the `weir` binary, with a real origin and
//! reqwest through the forward listener: rules and options from a small list of our
//! own (always), EasyList and EasyPrivacy from Debian's `webext-ublock-origin-firefox`
//! package (when installed; `./test.sh` installs it), and a list reload under load.
//!
//! Blocked requests name hosts such as `ads.example` that do not resolve: a request
//! that got past the module would fail, and the origin counts the others.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::reload_config::Reloadable;
use common::*;

/// The 1x1 transparent GIF the module answers blocked images with.
const GIF_MAGIC: &[u8] = b"GIF89a";

const LIST: &str = "\
[Adblock Plus 2.0]
! A small list for the tests.
||ads.example^
/banner/*$image
/track/*$third-party
/promo/*$domain=news.example
@@/banner/ok.png
";

fn module(list: &Path, extra: &str) -> String {
    format!(
        "[[module]]\nname = \"adblock\"\nlists = [{:?}]\n{extra}\n",
        list.display().to_string()
    )
}

fn write_list(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("list.txt");
    std::fs::write(&path, text).unwrap();
    path
}

fn origin() -> TestOrigin {
    let origin = TestOrigin::start();
    for path in ["/banner/*", "/track/*", "/promo/*", "/page/*"] {
        origin.route(path, Reply::ok("from the origin").cc("max-age=60"));
    }
    origin
}

fn blocked_counter(proxy: &Proxy) -> f64 {
    metric(&proxy.metrics(), "weir_module_adblock_blocked_total", &[]).unwrap_or(0.0)
}

#[tokio::test]
async fn rules_options_exceptions_and_the_cached_image() {
    let origin = origin();
    let dir = temp_dir("adblock-list");
    let list = write_list(&dir, LIST);
    let w = Reloadable::start(&origin.base(), "off", &module(&list, ""));
    let client = proxied_client(w.proxy.forward_addr());
    let at = |path: &str| origin.url(path);

    // An image on a blocked host: the blank GIF, stored, then a hit.
    let first = get(&client, "http://ads.example/img/1.gif", &[]).await;
    assert_eq!(first.status, 200);
    assert!(first.body.starts_with(GIF_MAGIC), "{:?}", first.body);
    assert_eq!(first.header("content-type").as_deref(), Some("image/gif"));
    assert!(
        cs_has(&first.cache_status(), "detail", Some("module")),
        "{}",
        first.cache_status()
    );
    let second = get(&client, "http://ads.example/img/1.gif", &[]).await;
    assert!(is_hit(&second.cache_status()), "{}", second.cache_status());
    assert_eq!(second.body, first.body);
    // The same by Accept alone.
    let by_accept = get(
        &client,
        "http://ads.example/pixel",
        &[("accept", "image/webp,*/*")],
    )
    .await;
    assert!(by_accept.body.starts_with(GIF_MAGIC));
    // Not an image: the fallback, 204.
    let script = get(&client, "http://ads.example/ad.js", &[]).await;
    assert_eq!(script.status, 204);
    assert!(script.body.is_empty());

    // $image: images under /banner/ are blocked, other types pass; @@ excepts one.
    let img = get(&client, &at("/banner/a.png"), &[]).await;
    assert!(img.body.starts_with(GIF_MAGIC));
    assert_eq!(
        get(&client, &at("/banner/a.js"), &[]).await.text(),
        "from the origin"
    );
    assert_eq!(
        get(&client, &at("/banner/ok.png"), &[]).await.text(),
        "from the origin"
    );
    assert_eq!(origin.count("/banner/a.png"), 0);

    // $third-party: from the Referer's domain; a request with no page is first-party.
    let cross = [("referer", "http://news.example/story")];
    assert_eq!(get(&client, &at("/track/p"), &cross).await.status, 204);
    let own = origin.url("/page/1");
    let same = [("referer", own.as_str())];
    assert_eq!(
        get(&client, &at("/track/q"), &same).await.text(),
        "from the origin"
    );
    assert_eq!(
        get(&client, &at("/track/r"), &[]).await.text(),
        "from the origin"
    );
    let fetch_cross = [("sec-fetch-site", "cross-site")];
    assert_eq!(
        get(&client, &at("/track/s"), &fetch_cross).await.status,
        204
    );

    // $domain=: only on pages of news.example (and its subdomains).
    assert_eq!(get(&client, &at("/promo/x"), &cross).await.status, 204);
    let www = [("referer", "http://www.news.example/")];
    assert_eq!(get(&client, &at("/promo/y"), &www).await.status, 204);
    let blog = [("referer", "http://blog.example/")];
    assert_eq!(
        get(&client, &at("/promo/z"), &blog).await.text(),
        "from the origin"
    );
    assert_eq!(origin.count("/promo/x") + origin.count("/track/p"), 0);

    let metrics = w.proxy.metrics();
    assert_eq!(
        metric(&metrics, "weir_module_adblock_blocked_total", &[]),
        Some(9.0)
    );
    assert_eq!(
        metric(&metrics, "weir_module_adblock_images_stored_total", &[]),
        Some(3.0)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn actions_403_and_204() {
    let origin = origin();
    let dir = temp_dir("adblock-403");
    let list = write_list(&dir, LIST);
    let w = Reloadable::start(&origin.base(), "off", &module(&list, "action = \"403\""));
    let client = proxied_client(w.proxy.forward_addr());
    let r = get(&client, "http://ads.example/img/1.gif", &[]).await;
    assert_eq!(r.status, 403);
    assert!(r.text().contains("blocked"), "{}", r.text());
    // Never stored: the next one is answered by the module again.
    let r = get(&client, "http://ads.example/img/1.gif", &[]).await;
    assert_eq!(r.status, 403);
    assert!(!is_hit(&r.cache_status()));

    w.rewrite(&module(&list, "action = \"image\"\nfallback = \"403\""));
    let (status, body) = admin_reload(&w.proxy).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        get(&client, "http://ads.example/a.js", &[]).await.status,
        403
    );
    assert!(get(&client, "http://ads.example/a.gif", &[])
        .await
        .body
        .starts_with(GIF_MAGIC));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `POST /admin/reload`: the status and the body.
async fn admin_reload(proxy: &Proxy) -> (u16, String) {
    let url = format!("http://{}/admin/reload", proxy.admin_addr());
    let r = send(&direct_client(), "POST", &url, &[], None).await;
    (r.status.as_u16(), r.text())
}

#[tokio::test]
async fn lists_reload_without_dropping_traffic() {
    let origin = origin();
    origin.route("/steady", Reply::ok("steady").cc("max-age=60"));
    let dir = temp_dir("adblock-reload");
    let list = write_list(&dir, "/page/a.js\n");
    let w = Reloadable::start(&origin.base(), "off", &module(&list, ""));
    let client = proxied_client(w.proxy.forward_addr());
    assert_eq!(
        get(&client, &origin.url("/page/a.js"), &[]).await.status,
        204
    );
    assert_eq!(
        get(&client, &origin.url("/page/b.js"), &[]).await.status,
        200
    );

    // Clients keep fetching while the list changes and the module is rebuilt.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut load = Vec::new();
    for _ in 0..4 {
        let (client, url) = (client.clone(), origin.url("/steady"));
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        load.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match try_send(&client, "GET", &url, &[], None).await {
                    Ok(r) if r.status == 200 && r.text() == "steady" => {
                        ok.fetch_add(1, Ordering::Relaxed)
                    }
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    // Ends on the second list: /page/b.js blocked, /page/a.js let through.
    for round in 0..4 {
        let rule = if round % 2 == 0 {
            "/page/a.js\n"
        } else {
            "/page/b.js\n"
        };
        std::fs::write(&list, rule).unwrap();
        let (status, body) = admin_reload(&w.proxy).await;
        assert_eq!(status, 200, "{body}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "requests failed during reloads"
    );
    assert!(ok.load(Ordering::Relaxed) > 0);

    assert_eq!(
        get(&client, &origin.url("/page/b.js"), &[]).await.status,
        204
    );
    let freed = get(&client, &origin.url("/page/a.js"), &[]).await;
    assert_eq!(freed.text(), "from the origin");
    assert_eq!(
        origin.count("/page/b.js"),
        1,
        "only the request before the reloads"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// EasyList and EasyPrivacy as Debian ships them, if installed.
fn easylists() -> Option<(PathBuf, PathBuf)> {
    let out = std::process::Command::new("dpkg")
        .args(["-L", "webext-ublock-origin-firefox"])
        .output()
        .ok()?;
    let files = String::from_utf8_lossy(&out.stdout).to_string();
    let find = |name: &str| {
        files
            .lines()
            .find(|l| l.ends_with(name))
            .map(PathBuf::from)
            .filter(|p| p.is_file())
    };
    Some((find("/easylist.txt")?, find("/easyprivacy.txt")?))
}

#[tokio::test]
async fn easylist_and_easyprivacy() {
    let Some((easylist, easyprivacy)) = easylists() else {
        eprintln!(
            "SKIPPED: EasyList not found (install webext-ublock-origin-firefox; ./test.sh does)"
        );
        return;
    };
    let origin = origin();
    origin.route(
        "/index.html",
        Reply::ok("<html>news</html>").cc("max-age=60"),
    );
    let tail = format!(
        "[[module]]\nname = \"adblock\"\nlists = [{:?}, {:?}]\n",
        easylist.display().to_string(),
        easyprivacy.display().to_string()
    );
    let w = Reloadable::start(&origin.base(), "off", &tail);
    let client = proxied_client(w.proxy.forward_addr());
    let page = [("referer", "http://news.example/article")];

    // Ad servers and trackers of the lists, as a news page would load them.
    for (url, status) in [
        (
            "http://pagead2.googlesyndication.com/pagead/js/adsbygoogle.js",
            204,
        ),
        ("http://securepubads.g.doubleclick.net/tag/js/gpt.js", 204),
        ("http://www.google-analytics.com/analytics.js", 204),
        ("http://ad.doubleclick.net/ddm/ad/pixel.gif", 200),
    ] {
        let r = get(&client, url, &page).await;
        assert_eq!(r.status, status, "{url}");
        if status == 200 {
            assert!(r.body.starts_with(GIF_MAGIC), "{url}");
        }
    }
    // The page itself, from the origin.
    let r = get(&client, &origin.url("/index.html"), &[]).await;
    assert_eq!(r.text(), "<html>news</html>");
    assert_eq!(blocked_counter(&w.proxy), 4.0);
}
