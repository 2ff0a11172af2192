//! Transcodes per second on one thread, of about 8 KB JPEG photographs, with the
//! transcoder's own codec (what one helper process does per job, less the socket).
//!
//! ```sh
//! cargo run --release -p weir-modules --example transcode_bench -- PHOTO...
//! ```
//! Each photograph (any format the transcoder reads) is scaled down until it is a
//! JPEG of about 8 KB at quality 85, then transcoded over and over, in turn, for
//! `SECONDS_PER_MODE` (default 5) per mode: to JPEG and to WebP at the module's default
//! quality. Prints a Markdown table. Writes the 8 KB JPEGs to `OUT` when set (for
//! the proxy benchmark `bench/transcode.sh`).

use std::time::{Duration, Instant};

use image::codecs::jpeg::JpegEncoder;
use image::imageops::FilterType;
use weir_modules::transcode::{transcode, Outcome, Params};

/// The size the paper's photographs had.
const TARGET: usize = 8 * 1024;

/// A JPEG of `photo` at quality 85 whose size is closest to 8 KB.
fn eight_kb(photo: &image::DynamicImage) -> Vec<u8> {
    let encode = |width: u32| {
        let small = photo
            .resize(width, u32::MAX, FilterType::Triangle)
            .to_rgb8();
        let mut out = Vec::new();
        JpegEncoder::new_with_quality(&mut out, 85)
            .encode_image(&small)
            .expect("encode");
        out
    };
    let (mut lo, mut hi) = (16u32, photo.width());
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if encode(mid).len() <= TARGET {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    encode(lo)
}

/// CPU time this thread has used: the machine may be shared, so rates are per
/// CPU-second, which is what "per core" means.
fn thread_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let ns = text.split_whitespace().next().and_then(|v| v.parse().ok());
    Duration::from_nanos(ns.expect("run time in ns"))
}

fn main() {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() {
        eprintln!("usage: transcode_bench PHOTO...");
        std::process::exit(2);
    }
    let seconds: u64 = std::env::var("SECONDS_PER_MODE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let photos: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| eight_kb(&image::open(p).unwrap_or_else(|e| panic!("{p}: {e}"))))
        .collect();
    if let Ok(dir) = std::env::var("OUT") {
        std::fs::create_dir_all(&dir).expect("create OUT");
        for (i, p) in photos.iter().enumerate() {
            std::fs::write(format!("{dir}/photo{i}.jpg"), p).expect("write a photo");
        }
    }
    let mean_in = photos.iter().map(Vec::len).sum::<usize>() / photos.len();
    println!(
        "{} photographs, {} bytes on average; one thread, {seconds} s per mode\n",
        photos.len(),
        mean_in
    );
    println!("| Output | Quality | Transcodes per CPU-second | Transcodes/s (wall) | Mean output bytes | Kept (not smaller) |");
    println!("|---|---|---:|---:|---:|---:|");
    for (name, webp) in [("JPEG", false), ("WebP", true)] {
        let params = Params {
            quality: 60,
            max_width: 0,
            max_height: 0,
            webp,
            max_pixels: 16_000_000,
        };
        let (mut n, mut out_bytes, mut kept) = (0u64, 0u64, 0u64);
        let start = Instant::now();
        let cpu = thread_cpu();
        while start.elapsed() < Duration::from_secs(seconds) {
            for photo in &photos {
                match transcode(photo, &params) {
                    Outcome::Transcoded { data, .. } => out_bytes += data.len() as u64,
                    Outcome::NotSmaller => kept += 1,
                    other => panic!("{other:?}"),
                }
                n += 1;
            }
        }
        let rate = n as f64 / start.elapsed().as_secs_f64();
        let per_cpu = n as f64 / (thread_cpu() - cpu).as_secs_f64();
        println!(
            "| {name} | 60 | {per_cpu:.0} | {rate:.0} | {} | {kept} of {n} |",
            out_bytes / (n - kept).max(1)
        );
    }
}
