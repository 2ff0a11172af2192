//! The admin status page in a real browser: headless Chromium (Debian's `chromium`,
//! installed by ./test.sh) loads it while traffic flows through the proxy, runs its
//! script, and the figures it shows move; with the `clients` module, the busiest
//! clients are listed, and the modules table shows its calls, which move.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::browser::{attribute, chromium, dump_dom};
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_live_figures_in_a_browser() {
    let Some(browser) = chromium() else {
        eprintln!("SKIPPED: the status page browser test: no chromium (./test.sh installs it)");
        return;
    };
    let origin = TestOrigin::start();
    origin.route("/*", Reply::ok("x".repeat(2000)).cc("max-age=600"));
    let proxy = common::module_config::reverse_with_modules(
        &origin.base(),
        "[[module]]\nname = \"clients\"\n",
    );
    let client = direct_client();
    // Traffic for as long as the browser looks: hits, and a new miss now and then.
    let running = Arc::new(AtomicBool::new(true));
    let traffic = tokio::spawn({
        let (running, origin_url) = (running.clone(), proxy.reverse_url("/"));
        async move {
            let mut i = 0u32;
            while running.load(Ordering::Relaxed) && i < 20_000 {
                get(&client, &format!("{origin_url}{}", i % 50), &[]).await;
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    let url = format!("http://{}/", proxy.admin_addr());
    // Virtual time runs the page's one-second poll quickly, and waits for each real
    // fetch of the figures.
    let dom = tokio::task::spawn_blocking(move || dump_dom(&browser, &url, 6000))
        .await
        .unwrap();
    running.store(false, Ordering::Relaxed);
    traffic.await.unwrap();
    let page = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    assert_eq!(attribute(&page, "live", "class"), Some("ok"), "{page}");
    let totals: Vec<u64> = attribute(&page, "trace", "data-totals")
        .unwrap_or_else(|| panic!("no trace in {page}"))
        .split(',')
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(totals.len() >= 3, "samples {totals:?}");
    assert!(
        totals.windows(2).all(|w| w[0] <= w[1]) && totals[0] < totals[totals.len() - 1],
        "the request count did not move: {totals:?}"
    );
    // The clients module's report: this test's client is the busiest.
    let top = &page[page.find("id=\"top\"").expect("the busiest section")..];
    assert!(!top[..top.find('>').unwrap()].contains("hidden"), "{page}");
    let clients = &page[page.find("id=\"top-clients\"").unwrap()..];
    assert!(
        clients[..clients.find("</table>").unwrap()].contains("<td>127.0.0.1</td>"),
        "{page}"
    );
    // The modules table: the clients module, its calls at each event, moving.
    let modules = &page[page
        .find("id=\"modules-row\"")
        .expect("the modules section")..];
    assert!(
        !modules[..modules.find('>').unwrap()].contains("hidden"),
        "{page}"
    );
    let table = &page[page.find("id=\"modules\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("<td>clients</td><td>log</td>"), "{table}");
    let calls: Vec<u64> = attribute(&page, "trace", "data-module-calls")
        .unwrap_or_else(|| panic!("no module calls in {page}"))
        .split(',')
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(calls.len() >= 3, "samples {calls:?}");
    assert!(
        calls.windows(2).all(|w| w[0] <= w[1]) && calls[0] < calls[calls.len() - 1],
        "the modules' calls did not move: {calls:?}"
    );
    // The figures the script wrote, not the placeholders.
    for id in ["rps", "hit-count", "bandwidth", "resident"] {
        let at = page.find(&format!("id=\"{id}\">")).expect(id) + id.len() + 6;
        assert!(!page[at..].starts_with('–'), "{id} is still empty: {page}");
    }
}
