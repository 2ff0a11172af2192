//! The built-in `transcode` module through the `weir` binary: a real origin serves
//! images made at test time, the proxy transcodes them in real helper processes (its
//! own binary, `weir helper transcode`), and the tests read the helpers' priority and
//! kill them through `/proc`.

mod common;

use std::time::Duration;

use common::module_config::reverse_with_modules;
use common::*;
use image::{ImageFormat, Rgb, RgbImage};

/// Helpers at nice 19 but not SCHED_IDLE, with a generous timeout: on a busy test
/// machine an idle-class helper may wait for CPU longer than any test should.
const MODULE: &str = "[[module]]\nname = \"transcode\"\nhelpers = 1\nsched_idle = false\n\
                      job_timeout = \"30s\"\nmax_pixels = 1000000\n";

/// A photograph-like picture (smooth gradients, fine texture) as a JPEG at quality 95.
fn photo() -> Vec<u8> {
    let (w, h) = (320u32, 240u32);
    let img = RgbImage::from_fn(w, h, |x, y| {
        let noise = ((x * 7919 + y * 104_729) % 23) as u8;
        Rgb([
            (x * 255 / w) as u8 / 2 + noise,
            (y * 255 / h) as u8 / 2 + noise,
            ((x + y) % 128) as u8 + noise,
        ])
    });
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 95)
        .encode_image(&img)
        .unwrap();
    out
}

fn encoded(img: RgbImage, format: ImageFormat, quality: u8) -> Vec<u8> {
    let mut out = Vec::new();
    if format == ImageFormat::Jpeg {
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
            .encode_image(&img)
            .unwrap();
    } else {
        let mut c = std::io::Cursor::new(out);
        img.write_to(&mut c, format).unwrap();
        out = c.into_inner();
    }
    out
}

fn origin() -> TestOrigin {
    let origin = TestOrigin::start();
    let image = |body: Vec<u8>, ct: &str| {
        Reply::ok(body)
            .header("content-type", ct)
            .header("etag", "\"v1\"")
            .cc("max-age=60")
    };
    origin.route("/photo*", image(photo(), "image/jpeg"));
    // Already tiny and at a low quality: the result would not be smaller.
    let tiny = encoded(
        RgbImage::from_pixel(16, 16, Rgb([90, 120, 200])),
        ImageFormat::Jpeg,
        5,
    );
    origin.route("/tiny.jpg", image(tiny, "image/jpeg"));
    origin.route(
        "/broken.jpg",
        image(
            b"\xff\xd8\xff\xe0 a JPEG cut after its first bytes".to_vec(),
            "image/jpeg",
        ),
    );
    // 1.2 million pixels: over this configuration's max_pixels.
    let big = encoded(RgbImage::new(1200, 1000), ImageFormat::Png, 0);
    origin.route("/big.png", image(big, "image/png"));
    // A decompression bomb: a GIF header declaring 65535 x 65535 pixels.
    let mut bomb = b"GIF89a\xff\xff\xff\xff\x00\x00\x00".to_vec();
    bomb.extend_from_slice(&[0u8; 64]);
    origin.route("/bomb.gif", image(bomb, "image/gif"));
    origin
}

fn counter(proxy: &Proxy, name: &str) -> f64 {
    metric(
        &proxy.metrics(),
        &format!("weir_module_transcode_{name}_total"),
        &[],
    )
    .unwrap_or(0.0)
}

fn format_of(body: &[u8]) -> ImageFormat {
    image::guess_format(body).expect("an image")
}

/// The helpers of `proxy`: its children, from `/proc/*/stat` (field 4 is the parent).
fn helpers(proxy: &Proxy) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Some(fields) = stat_fields(pid) else {
            continue;
        };
        if fields[4 - 3] == proxy.pid().to_string() && fields[0] != "Z" {
            pids.push(pid);
        }
    }
    pids
}

/// The fields of `/proc/PID/stat` from the third (the state) on.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(") ")?.1;
    Some(rest.split(' ').map(str::to_string).collect())
}

/// The nice level (field 19) and scheduling policy (field 41) of a process.
fn nice_and_policy(pid: u32) -> (i64, u64) {
    let f = stat_fields(pid).expect("the helper's stat");
    (f[19 - 3].parse().unwrap(), f[41 - 3].parse().unwrap())
}

#[tokio::test]
async fn jpeg_and_webp_are_transcoded_once_each_and_then_hit() {
    let origin = origin();
    let proxy = reverse_with_modules(&origin.base(), MODULE);
    let client = direct_client();
    let url = proxy.reverse_url("/photo.jpg");
    let original = photo();
    for (n, (accept, format, ct)) in [
        ("image/avif,image/webp,*/*", ImageFormat::WebP, "image/webp"),
        ("image/*,*/*;q=0.8", ImageFormat::Jpeg, "image/jpeg"),
    ]
    .into_iter()
    .enumerate()
    {
        for round in ["miss", "hit"] {
            let r = get(&client, &url, &[("accept", accept)]).await;
            assert_eq!(r.status, 200);
            assert_eq!(
                r.header("content-type").as_deref(),
                Some(ct),
                "{accept} {round}"
            );
            assert_eq!(format_of(&r.body), format, "{accept} {round}");
            assert!(
                r.body.len() < original.len() / 2,
                "{} of {}",
                r.body.len(),
                original.len()
            );
            assert_eq!(r.header("content-length"), Some(r.body.len().to_string()));
            assert!(r
                .header_all("vary")
                .iter()
                .any(|v| v.eq_ignore_ascii_case("accept")));
            assert!(r.header("etag").unwrap().starts_with("W/\"v1-tc"));
            assert_eq!(
                is_hit(&r.cache_status()),
                round == "hit",
                "{accept} {round}: {}",
                r.cache_status()
            );
        }
        assert_eq!(
            counter(&proxy, "done"),
            (n + 1) as f64,
            "transcoded once per variant"
        );
    }
    assert_eq!(
        origin.count("/photo.jpg"),
        2,
        "one origin fetch per variant"
    );
    assert_eq!(helpers(&proxy).len(), 1);
}

#[tokio::test]
async fn originals_pass_when_not_smaller_broken_or_too_big() {
    let origin = origin();
    // At quality 100, the tiny low-quality JPEG can only grow.
    let proxy = reverse_with_modules(&origin.base(), &format!("{MODULE}quality = 100\n"));
    let client = direct_client();
    for (path, reason) in [
        ("/tiny.jpg", "kept_not_smaller"),
        ("/broken.jpg", "kept_bad_image"),
        ("/big.png", "kept_too_many_pixels"),
        ("/bomb.gif", "kept_too_many_pixels"),
    ] {
        let before = counter(&proxy, reason);
        let r = get(
            &client,
            &proxy.reverse_url(path),
            &[("accept", "image/jpeg")],
        )
        .await;
        assert_eq!(r.status, 200, "{path}");
        let sent = get(&client, &origin.url(path), &[]).await.body;
        assert_eq!(r.body, sent, "{path}: the original bytes");
        assert_eq!(r.header("etag").as_deref(), Some("\"v1\""), "{path}");
        assert_eq!(counter(&proxy, reason), before + 1.0, "{path}");
    }
    assert_eq!(counter(&proxy, "done"), 0.0);
}

#[tokio::test]
async fn a_killed_helper_means_originals_pass_until_it_is_restarted() {
    let origin = origin();
    // A long first back-off, so that the requests below find no helper running.
    let module = format!("{MODULE}restart_backoff = \"3s\"\n");
    let proxy = reverse_with_modules(&origin.base(), &module);
    let client = direct_client();
    let first = get(&client, &proxy.reverse_url("/photo-1.jpg"), &[]).await;
    assert!(first.body.len() < photo().len(), "transcoded");
    let pids = helpers(&proxy);
    assert_eq!(pids.len(), 1);
    send_signal(pids[0], "KILL");

    let r = get(&client, &proxy.reverse_url("/photo-2.jpg"), &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, photo(), "the original passes while no helper runs");
    assert_eq!(counter(&proxy, "kept_helper_died"), 1.0);

    assert!(
        wait_until(Duration::from_secs(15), || {
            let now = helpers(&proxy);
            now.len() == 1 && now != pids
        }),
        "the helper was not restarted"
    );
    assert_eq!(counter(&proxy, "helper_restarts"), 1.0);
    let r = get(&client, &proxy.reverse_url("/photo-3.jpg"), &[]).await;
    assert!(r.body.len() < photo().len(), "transcoded again");
    assert_eq!(counter(&proxy, "done"), 2.0);
    // The original passed while no helper ran was not stored: asked again, the image
    // comes transcoded.
    let r = get(&client, &proxy.reverse_url("/photo-2.jpg"), &[]).await;
    assert!(
        r.body.len() < photo().len(),
        "transcoded on the second request"
    );
    assert_eq!(counter(&proxy, "done"), 3.0);
}

#[tokio::test]
async fn helpers_run_at_nice_19_and_sched_idle_by_default() {
    let origin = origin();
    let module = "[[module]]\nname = \"transcode\"\nhelpers = 2\njob_timeout = \"60s\"\n";
    let proxy = reverse_with_modules(&origin.base(), module);
    let client = direct_client();
    // Helpers start with the first job.
    assert!(helpers(&proxy).is_empty());
    let r = get(&client, &proxy.reverse_url("/photo.jpg"), &[]).await;
    assert_eq!(r.status, 200);
    let pids = helpers(&proxy);
    assert_eq!(pids.len(), 2);
    for pid in pids {
        // SCHED_IDLE is policy 5.
        assert_eq!(nice_and_policy(pid), (19, 5), "helper {pid}");
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        assert!(cmdline.ends_with(b"helper\0transcode\0"), "{cmdline:?}");
    }
    // The proxy itself keeps the priority it was started with (this test's own).
    assert_eq!(
        nice_and_policy(proxy.pid()),
        nice_and_policy(std::process::id())
    );
}

#[test]
fn the_helper_subcommand_refuses_what_the_proxy_would_not_give_it() {
    let unknown = run_weir(&["helper", "nonsense"], Duration::from_secs(10));
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no helper of kind `nonsense`"));
    // Standard input is not a socket (here /dev/null): an error, not a hang.
    let no_socket = run_weir(&["helper", "transcode"], Duration::from_secs(10));
    assert!(!no_socket.status.success());
    // Hidden from the help.
    let help = run_weir(&["--help"], Duration::from_secs(10));
    assert!(!String::from_utf8_lossy(&help.stdout).contains("helper"));
}

#[tokio::test]
async fn a_reload_replaces_the_helpers_and_leaves_none_behind() {
    let origin = origin();
    let proxy = reverse_with_modules(&origin.base(), MODULE);
    let client = direct_client();
    let r = get(&client, &proxy.reverse_url("/photo-a.jpg"), &[]).await;
    assert!(r.body.len() < photo().len());
    let before = helpers(&proxy);
    assert_eq!(before.len(), 1);

    let text = std::fs::read_to_string(proxy.config_path()).unwrap();
    std::fs::write(proxy.config_path(), format!("{text}quality = 40\n")).unwrap();
    proxy.signal("HUP");
    assert!(
        wait_until(Duration::from_secs(15), || helpers(&proxy).is_empty()),
        "the replaced module's helper still runs: {:?}",
        helpers(&proxy)
    );
    // The new module starts its own helper with its first job.
    let r = get(&client, &proxy.reverse_url("/photo-b.jpg"), &[]).await;
    assert!(r.body.len() < photo().len());
    let after = helpers(&proxy);
    assert_eq!(after.len(), 1);
    assert_ne!(after, before);
}

/// A stored WebP result goes stale; the origin answers its revalidation with 304, its
/// own tag and its own `Content-Type`. The result is refreshed without another
/// transcode, and stays `image/webp` with its own tag.
#[tokio::test]
async fn a_stale_transcoded_image_is_refreshed_by_a_304_and_keeps_its_type() {
    let origin = TestOrigin::start();
    let jpeg = photo();
    origin.route_fn("/fresh-for-a-second.jpg", move |req| {
        if req
            .header("if-none-match")
            .is_some_and(|v| v.contains("\"p7\""))
        {
            Reply::status(304)
                .header("etag", "\"p7\"")
                .header("content-type", "image/jpeg")
                .cc("max-age=60")
        } else {
            Reply::ok(jpeg.clone())
                .header("content-type", "image/jpeg")
                .header("etag", "\"p7\"")
                .cc("max-age=1")
        }
    });
    let proxy = reverse_with_modules(&origin.base(), MODULE);
    let client = direct_client();
    let url = proxy.reverse_url("/fresh-for-a-second.jpg");
    let webp = [("accept", "image/webp,*/*")];
    let first = get(&client, &url, &webp).await;
    assert_eq!(first.header("content-type").as_deref(), Some("image/webp"));
    assert_eq!(format_of(&first.body), ImageFormat::WebP);
    assert_eq!(counter(&proxy, "done"), 1.0);

    tokio::time::sleep(Duration::from_millis(1300)).await;
    let second = get(&client, &url, &webp).await;
    assert_eq!(second.status, 200, "{}", second.text());
    let cs = second.cache_status();
    assert!(
        cs_has(&cs, "fwd", Some("stale")) && cs_has(&cs, "fwd-status", Some("304")),
        "expected a refresh by 304, got {cs:?}"
    );
    assert_eq!(second.header("content-type").as_deref(), Some("image/webp"));
    assert_eq!(format_of(&second.body), ImageFormat::WebP);
    assert_eq!(second.body, first.body);
    assert_eq!(second.header("etag"), first.header("etag"));
    assert_eq!(
        counter(&proxy, "done"),
        1.0,
        "refreshed, not transcoded again"
    );
    let third = get(&client, &url, &webp).await;
    assert!(is_hit(&third.cache_status()), "{}", third.cache_status());
    assert_eq!(third.header("content-type").as_deref(), Some("image/webp"));
}

/// A client that asks for no transformation (request `Cache-Control: no-transform`)
/// gets the original image, stored apart from the transcoded results, which other
/// clients still get.
#[tokio::test]
async fn a_request_that_says_no_transform_gets_the_original() {
    let origin = origin();
    let proxy = reverse_with_modules(&origin.base(), MODULE);
    let client = direct_client();
    let url = proxy.reverse_url("/photo-original.jpg");
    let asks = [
        ("accept", "image/webp,*/*"),
        ("cache-control", "no-transform"),
    ];
    for round in ["miss", "hit"] {
        let r = get(&client, &url, &asks).await;
        assert_eq!(r.body, photo(), "{round}");
        assert_eq!(r.header("content-type").as_deref(), Some("image/jpeg"));
        assert_eq!(is_hit(&r.cache_status()), round == "hit", "{round}");
    }
    assert_eq!(counter(&proxy, "done"), 0.0);
    let r = get(&client, &url, &[("accept", "image/webp,*/*")]).await;
    assert_eq!(format_of(&r.body), ImageFormat::WebP);
    assert_eq!(counter(&proxy, "done"), 1.0);
}
