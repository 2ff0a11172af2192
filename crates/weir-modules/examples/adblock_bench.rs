//! Matching cost of the `adblock` module: builds it from the filter lists given on
//! the command line and times `Adblock::check` (the module's own per-request work:
//! request type inference, the crate's request parsing, the match) on real-looking
//! requests of a news page, in nanoseconds per request.
//!
//! ```sh
//! cargo run --release -p weir-modules --example adblock_bench -- easylist.txt easyprivacy.txt
//! ```
//! See docs/benchmarks.md for the lists and the results.

use std::time::Instant;

use weir_api::http::Request;
use weir_api::{ModuleContext, RequestHead, Settings};
use weir_modules::adblock::Adblock;

/// (URL, Accept) of what a news page loads; the page is `http://news.example/`.
const REQUESTS: &[(&str, &str)] = &[
    ("http://news.example/", "text/html,application/xhtml+xml"),
    (
        "http://news.example/static/css/main.4f2a9c.css",
        "text/css,*/*;q=0.1",
    ),
    ("http://news.example/static/js/app.93be1d.js", "*/*"),
    ("http://news.example/static/js/vendor.1c2d3e.js", "*/*"),
    (
        "http://cdn.news.example/img/2024/05/lead-photo-1200x630.jpg",
        "image/avif,image/webp,*/*",
    ),
    (
        "http://cdn.news.example/img/2024/05/thumb-320x180.jpg",
        "image/avif,image/webp,*/*",
    ),
    (
        "http://cdn.news.example/img/logo.svg",
        "image/avif,image/webp,*/*",
    ),
    (
        "http://fonts.gstatic.com/s/roboto/v30/KFOmCnqEu92Fr1Mu4mxK.woff2",
        "*/*",
    ),
    (
        "http://fonts.googleapis.com/css2?family=Roboto:wght@400;700&display=swap",
        "text/css,*/*;q=0.1",
    ),
    ("http://code.jquery.com/jquery-3.7.1.min.js", "*/*"),
    (
        "http://cdnjs.cloudflare.com/ajax/libs/lodash.js/4.17.21/lodash.min.js",
        "*/*",
    ),
    (
        "http://news.example/api/comments?article=123456&page=2",
        "application/json",
    ),
    (
        "http://news.example/api/related?id=123456",
        "application/json",
    ),
    (
        "http://pagead2.googlesyndication.com/pagead/js/adsbygoogle.js",
        "*/*",
    ),
    ("http://securepubads.g.doubleclick.net/tag/js/gpt.js", "*/*"),
    (
        "http://ad.doubleclick.net/ddm/trackimp/N1234.5678/B2345;dc_trk_aid=1",
        "image/avif,image/webp,*/*",
    ),
    ("http://www.google-analytics.com/analytics.js", "*/*"),
    (
        "http://www.googletagmanager.com/gtag/js?id=G-ABCDEF1234",
        "*/*",
    ),
    ("http://connect.facebook.net/en_US/fbevents.js", "*/*"),
    ("http://static.chartbeat.com/js/chartbeat.js", "*/*"),
    ("http://sb.scorecardresearch.com/beacon.js", "*/*"),
    ("http://c.amazon-adsystem.com/aax2/apstag.js", "*/*"),
    (
        "http://cdn.taboola.com/libtrc/news-example/loader.js",
        "*/*",
    ),
    ("http://widgets.outbrain.com/outbrain.js", "*/*"),
    ("http://ib.adnxs.com/ut/v3/prebid", "*/*"),
    (
        "http://news.example/ads/banner-728x90.gif",
        "image/avif,image/webp,*/*",
    ),
    (
        "http://news.example/static/img/icons/share-twitter.png",
        "image/avif,image/webp,*/*",
    ),
    ("http://platform.twitter.com/widgets.js", "*/*"),
    (
        "http://www.youtube.com/embed/dQw4w9WgXcQ",
        "text/html,application/xhtml+xml",
    ),
    (
        "http://i.ytimg.com/vi/dQw4w9WgXcQ/hqdefault.jpg",
        "image/avif,image/webp,*/*",
    ),
    ("http://news.example/video/stream/seg-00042.m4s", "*/*"),
    (
        "http://news.example/favicon.ico",
        "image/avif,image/webp,*/*",
    ),
];

fn request(url: &str, accept: &str) -> RequestHead {
    let mut b = Request::get(url).header("accept", accept);
    if url != "http://news.example/" {
        b = b.header("referer", "http://news.example/");
    }
    b.body(()).unwrap().into_parts().0
}

fn main() {
    let lists: Vec<String> = std::env::args().skip(1).collect();
    if lists.is_empty() {
        eprintln!("usage: adblock_bench LIST.txt [LIST.txt ...]");
        std::process::exit(2);
    }
    let settings = format!("lists = {lists:?}");
    let started = Instant::now();
    let module = Adblock::from_settings(
        &Settings::parse(&settings).unwrap(),
        &ModuleContext::detached(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "build: {:.0} ms for {} list(s)",
        started.elapsed().as_secs_f64() * 1e3,
        lists.len()
    );

    let requests: Vec<RequestHead> = REQUESTS.iter().map(|(u, a)| request(u, a)).collect();
    let mut blocked = 0;
    for (r, (url, _)) in requests.iter().zip(REQUESTS) {
        let v = module.check(r).unwrap();
        blocked += usize::from(v.block);
        println!(
            "{:5} {:14} {url}",
            if v.block { "BLOCK" } else { "pass" },
            v.kind
        );
    }
    println!("{blocked} of {} requests blocked", requests.len());

    // Warm up, then time whole passes over the set.
    let passes = 20_000;
    for r in &requests {
        std::hint::black_box(module.check(r));
    }
    let started = Instant::now();
    for _ in 0..passes {
        for r in &requests {
            std::hint::black_box(module.check(std::hint::black_box(r)));
        }
    }
    let ns = started.elapsed().as_nanos() as f64 / (passes * requests.len()) as f64;
    println!(
        "check: {ns:.0} ns per request (mean over {} requests)",
        passes * requests.len()
    );
    parse_only(&requests);
    // What the module does per request: the same requests again hit the memo.
    let started = Instant::now();
    for _ in 0..passes {
        for r in &requests {
            std::hint::black_box(module.check_remembered(std::hint::black_box(r)));
        }
    }
    let ns = started.elapsed().as_nanos() as f64 / (passes * requests.len()) as f64;
    println!("check, remembered: {ns:.0} ns per request");
}

/// The request parsing part alone: our inference and the crate's `Request::new`.
fn parse_only(requests: &[RequestHead]) {
    let passes = 20_000;
    let started = Instant::now();
    for _ in 0..passes {
        for r in requests {
            let d = weir_modules::adblock::describe(r).unwrap();
            let parsed = adblock::request::Request::new(&d.url, &d.source, d.kind, "GET");
            std::hint::black_box(parsed.ok());
        }
    }
    let ns = started.elapsed().as_nanos() as f64 / (passes * requests.len()) as f64;
    println!("parse only: {ns:.0} ns per request");
}
