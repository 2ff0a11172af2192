//! The transcoder's codec, job format, settings and callbacks, called directly; the
//! whole-response tests run real helper processes (this test binary, started to run
//! only `helper_entry`).

use super::*;
use image::{DynamicImage, ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};
use weir_api::engine;

/// A photograph-like picture: smooth gradients with fine texture, which JPEG at a
/// high quality keeps and a lower quality makes much smaller.
pub(super) fn picture(width: u32, height: u32) -> RgbImage {
    RgbImage::from_fn(width, height, |x, y| {
        let noise = ((x * 7919 + y * 104_729) % 23) as u8;
        Rgb([
            (x * 255 / width) as u8 / 2 + noise,
            (y * 255 / height) as u8 / 2 + noise,
            ((x + y) % 128) as u8 + noise,
        ])
    })
}

fn encoded(image: DynamicImage, format: ImageFormat) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, format).unwrap();
    out.into_inner()
}

fn jpeg(width: u32, height: u32, quality: u8) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .encode_image(&picture(width, height))
        .unwrap();
    out
}

fn params(webp: bool) -> Params {
    Params {
        quality: 50,
        max_width: 0,
        max_height: 0,
        webp,
        max_pixels: 1_000_000,
    }
}

fn decoded(data: &[u8]) -> (ImageFormat, u32, u32) {
    let format = image::guess_format(data).unwrap();
    let img = image::load_from_memory(data).unwrap();
    (format, img.width(), img.height())
}

#[test]
fn jpeg_quality_is_reduced_and_webp_is_made_on_request() {
    let original = jpeg(320, 240, 95);
    let Outcome::Transcoded { format, data } = transcode(&original, &params(false)) else {
        panic!("not transcoded")
    };
    assert_eq!(format, Format::Jpeg);
    assert!(
        data.len() < original.len() * 3 / 4,
        "{} of {}",
        data.len(),
        original.len()
    );
    assert_eq!(decoded(&data), (ImageFormat::Jpeg, 320, 240));

    let Outcome::Transcoded { format, data } = transcode(&original, &params(true)) else {
        panic!("not transcoded")
    };
    assert_eq!(format, Format::Webp);
    assert!(data.len() < original.len());
    assert_eq!(decoded(&data), (ImageFormat::WebP, 320, 240));
}

#[test]
fn large_images_are_scaled_to_fit_keeping_their_aspect() {
    let original = jpeg(400, 200, 90);
    let p = Params {
        max_width: 100,
        max_height: 100,
        ..params(false)
    };
    let Outcome::Transcoded { data, .. } = transcode(&original, &p) else {
        panic!("not transcoded")
    };
    assert_eq!(decoded(&data), (ImageFormat::Jpeg, 100, 50));
}

#[test]
fn png_gif_and_webp_are_decoded_too() {
    let rgb = DynamicImage::ImageRgb8(picture(200, 150));
    for format in [ImageFormat::Png, ImageFormat::Gif, ImageFormat::WebP] {
        let original = encoded(rgb.clone(), format);
        match transcode(&original, &params(false)) {
            Outcome::Transcoded { format: f, data } => {
                assert_eq!(f, Format::Jpeg, "{format:?}");
                assert_eq!(decoded(&data), (ImageFormat::Jpeg, 200, 150));
            }
            // A lossless source of this picture may already beat the JPEG: then the
            // decision must be the size rule, not a decoding failure.
            Outcome::NotSmaller => {}
            other => panic!("{format:?}: {other:?}"),
        }
    }
}

#[test]
fn what_must_be_kept_is_kept() {
    // Not smaller: a small image already at a low quality.
    let tiny = jpeg(16, 16, 5);
    let p = Params {
        quality: 100,
        ..params(false)
    };
    assert_eq!(transcode(&tiny, &p), Outcome::NotSmaller);

    // Over the pixel limit: never decoded.
    let big = encoded(
        DynamicImage::ImageRgb8(RgbImage::new(1200, 1000)),
        ImageFormat::Png,
    );
    assert_eq!(transcode(&big, &params(true)), Outcome::TooManyPixels);

    // Transparency: only WebP keeps it.
    let clear = RgbaImage::from_fn(64, 64, |x, _| Rgba([200, 100, 50, (x * 4) as u8]));
    let png = encoded(DynamicImage::ImageRgba8(clear), ImageFormat::Png);
    assert_eq!(transcode(&png, &params(false)), Outcome::Unsuitable);
    assert!(matches!(
        transcode(&png, &params(true)),
        Outcome::Transcoded {
            format: Format::Webp,
            ..
        } | Outcome::NotSmaller
    ));

    // Animation: the first frame alone would be wrong.
    let mut gif = Vec::new();
    {
        let mut enc = image::codecs::gif::GifEncoder::new(&mut gif);
        for shade in [10u8, 200] {
            let frame = RgbaImage::from_pixel(32, 32, Rgba([shade, shade, shade, 255]));
            enc.encode_frame(image::Frame::new(frame)).unwrap();
        }
    }
    assert_eq!(transcode(&gif, &params(true)), Outcome::Unsuitable);

    // Not an image, and a truncated one.
    assert!(matches!(
        transcode(b"<html>", &params(false)),
        Outcome::BadImage(_)
    ));
    let cut = jpeg(64, 64, 90)[..200].to_vec();
    assert!(matches!(
        transcode(&cut, &params(false)),
        Outcome::BadImage(_)
    ));
}

#[test]
fn jobs_and_outcomes_round_trip() {
    let original = jpeg(64, 48, 95);
    let answer = job::handle(&job::encode(&params(true), &original)).unwrap();
    assert_eq!(
        job::decode_outcome(answer).unwrap(),
        transcode(&original, &params(true))
    );
    for outcome in [
        Outcome::NotSmaller,
        Outcome::TooManyPixels,
        Outcome::Unsuitable,
        Outcome::BadImage("why".into()),
    ] {
        assert_eq!(
            job::decode_outcome(job::encode_outcome(&outcome)).unwrap(),
            outcome
        );
    }
    assert!(job::handle(b"short").is_err());
    assert!(job::decode_outcome(vec![99]).is_err());
}

#[test]
fn settings_are_checked_and_errors_name_the_key() {
    let bad = |t: &str| TranscodeSettings::read(&Settings::parse(t).unwrap()).unwrap_err();
    assert_eq!(bad("quality = 0").key.as_deref(), Some("quality"));
    assert_eq!(bad("quality = 101").key.as_deref(), Some("quality"));
    assert_eq!(bad("nice = 20").key.as_deref(), Some("nice"));
    assert_eq!(bad("helpers = 0").key.as_deref(), Some("helpers"));
    assert_eq!(bad("queue = 0").key.as_deref(), Some("queue"));
    assert_eq!(bad("max_pixels = 0").key.as_deref(), Some("max_pixels"));
    assert_eq!(
        bad("job_timeout = \"soon\"").key.as_deref(),
        Some("job_timeout")
    );
    assert_eq!(
        bad("types = [\"image/jpeg\", \"text/html\"]")
            .key
            .as_deref(),
        Some("types[1]")
    );
    assert_eq!(bad("qualty = 5").key.as_deref(), Some("qualty"));
    let s = TranscodeSettings::read(
        &Settings::parse("quality = 40\nmax_width = 800\nwebp = false\nhelpers = 3\nnice = 10\njob_timeout = \"250ms\"\ntypes = [\"Image/JPEG\"]").unwrap(),
    )
    .unwrap();
    assert_eq!(
        (s.params.quality, s.params.max_width, s.webp, s.helpers),
        (40, 800, false, 3)
    );
    assert_eq!(s.priority.nice, 10);
    assert_eq!(s.job_timeout, std::time::Duration::from_millis(250));
    assert_eq!(s.types, ["image/jpeg"]);
}

#[test]
#[ignore = "the helper's entry point, run by the transcoder's pool in a child process"]
fn helper_entry() {
    if std::env::var_os(weir_helper::OPTIONS_ENV).is_some() {
        weir_helper::serve_stdin(helper_handler).expect("serve jobs");
    }
}

/// A transcoder whose helpers are this test binary (at nice 19, not SCHED_IDLE, so a
/// busy machine slows them down but cannot starve them).
fn module(settings: &str) -> Transcode {
    let mut s = TranscodeSettings::read(&Settings::parse(settings).unwrap()).unwrap();
    s.priority.sched_idle = false;
    let command = HelperCommand::current_exe([
        "--ignored",
        "--exact",
        "transcode::tests::helper_entry",
        "--nocapture",
        "--test-threads=1",
    ])
    .unwrap();
    Transcode::new(s, command, &ModuleContext::detached())
}

fn request(accept: &str) -> RequestHead {
    weir_api::http::Request::get("http://site.example/photo.jpg")
        .header("accept", accept)
        .body(())
        .unwrap()
        .into_parts()
        .0
}

fn response(content_type: &str) -> ResponseHead {
    weir_api::http::Response::builder()
        .header("content-type", content_type)
        .header("etag", "\"p1\"")
        .header("content-length", "1")
        .body(())
        .unwrap()
        .into_parts()
        .0
}

/// Runs every callback of one miss: the response head and body as they would be stored.
async fn miss(
    m: &Transcode,
    accept: &str,
    mut head: ResponseHead,
    body: &[u8],
) -> (ResponseHead, WholeBody) {
    let mut txn = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    assert!(matches!(
        m.on_request_headers(&mut txn, &mut request(accept)),
        Flow::Continue
    ));
    let mut whole = WholeBody {
        data: Bytes::copy_from_slice(body),
        truncated: false,
    };
    // The engine calls the whole-response callback only when the module wants it.
    if !m.wants_whole_response(&mut txn, &head) {
        return (head, whole);
    }
    match m.on_whole_response(&mut txn, &mut head, &mut whole) {
        Flow::Wait(future) => assert!(matches!(future.await, Decision::Continue)),
        Flow::Continue => {}
        Flow::Respond(r) => panic!("answered {r:?}"),
    }
    (head, whole)
}

#[tokio::test]
async fn a_miss_is_transcoded_in_a_helper_by_what_the_client_accepts() {
    let m = module("helpers = 1\njob_timeout = \"20s\"");
    let original = jpeg(320, 240, 95);

    let (head, body) = miss(&m, "image/webp,*/*", response("image/jpeg"), &original).await;
    assert_eq!(head.headers["content-type"], "image/webp");
    assert_eq!(head.headers["etag"], "W/\"p1-tcwebp\"");
    assert!(
        head.headers.get("content-length").is_none(),
        "the engine sets it"
    );
    assert_eq!(decoded(&body.data), (ImageFormat::WebP, 320, 240));

    let (head, body) = miss(&m, "*/*", response("image/jpeg"), &original).await;
    assert_eq!(head.headers["content-type"], "image/jpeg");
    assert_eq!(head.headers["etag"], "W/\"p1-tc\"");
    assert!(body.data.len() < original.len());
    assert_eq!(m.metrics.done.get(), 2);

    // Not an image type it transcodes, and a body cut at the module limit: untouched.
    let (head, body) = miss(&m, "*/*", response("text/html"), b"<p>hi</p>").await;
    assert_eq!(
        (
            head.headers["content-type"].to_str().unwrap(),
            &body.data[..]
        ),
        ("text/html", &b"<p>hi</p>"[..])
    );
    let mut txn = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    let mut head = response("image/jpeg");
    assert!(m.wants_whole_response(&mut txn, &head));
    assert!(!m.wants_whole_response(&mut txn, &response("text/html")));
    let mut cut = WholeBody {
        data: Bytes::from(original.clone()),
        truncated: true,
    };
    assert!(matches!(
        m.on_whole_response(&mut txn, &mut head, &mut cut),
        Flow::Continue
    ));

    // A bad image passes unchanged and is counted.
    let (head, body) = miss(&m, "*/*", response("image/png"), b"not a png").await;
    assert_eq!(
        (head.headers["etag"].to_str().unwrap(), &body.data[..]),
        ("\"p1\"", &b"not a png"[..])
    );
    assert_eq!(m.metrics.bad_image.get(), 1);
    assert_eq!(m.helper_pids().len(), 1);
}

#[test]
fn variants_vary_and_revalidation() {
    let m = module("");
    let mut txn = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    let _ = m.on_request_headers(&mut txn, &mut request("image/avif,image/webp"));
    assert_eq!(txn.cache_overrides().variant.as_deref(), Some(WEBP_VARIANT));
    let mut plain = engine::new_txn("127.0.0.1:1".parse().unwrap(), 1);
    let _ = m.on_request_headers(&mut plain, &mut request("image/*"));
    assert!(plain.cache_overrides().variant.is_none());

    let mut head = response("image/webp");
    let _ = m.on_deliver_headers(&mut txn, &mut head);
    assert_eq!(head.headers["vary"], "Accept");
    let mut html = response("text/html");
    let _ = m.on_deliver_headers(&mut txn, &mut html);
    assert!(html.headers.get("vary").is_none());

    let mut upstream = request("*/*");
    upstream
        .headers
        .insert("if-none-match", HeaderValue::from_static("W/\"p1-tc\""));
    let _ = m.on_upstream_request(&mut txn, &mut upstream);
    assert_eq!(upstream.headers["if-none-match"], "\"p1\"");
    assert!(m.pool.get().is_none(), "no job, no helpers");
}
